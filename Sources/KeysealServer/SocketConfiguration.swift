/// The socket keyseald listens on and who may reach it.
public struct SocketConfiguration: Sendable {
    public var path: String
    /// Group of the socket and its directory (socket 0660, directory 0750); nil: 0600 and 0700.
    public var group: String?

    public init(path: String, group: String? = nil) {
        self.path = path
        self.group = group
    }
}
