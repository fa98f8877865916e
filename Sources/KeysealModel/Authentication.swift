import FoundationEssentials

/// What `kSecUseAuthenticationUI` asks when an item or key needs a fresh authentication that the request does not
/// carry: run it (allow), fail with errSecInteractionNotAllowed (fail), or leave such items out of a search (skip).
public enum AuthenticationUI: UInt8, Sendable, Hashable {
    case allow = 0
    case fail = 1
    case skip = 2
}

/// The authentication a request carries for items and keys whose access control asks for user presence, the
/// device passcode or biometry: an authentication token the store issued to this caller (an evaluated `LAContext`),
/// how long after its issue it may be used (the context's reuse duration; 0: for one request only), and what to do
/// without a usable one.
public struct ItemAuthentication: Sendable, Hashable {
    /// The longest reuse duration, seconds (`LATouchIDAuthenticationMaximumAllowableReuseDuration`).
    public static let maximumReuseSeconds = 300
    /// The token's size, bytes.
    public static let tokenSize = 32

    public var token: SecretBytes?
    public var reuseSeconds: Int
    public var ui: AuthenticationUI

    public init(token: SecretBytes? = nil, reuseSeconds: Int = 0, ui: AuthenticationUI = .fail) {
        self.token = token
        self.reuseSeconds = min(max(reuseSeconds, 0), Self.maximumReuseSeconds)
        self.ui = ui
    }

    /// The authentication of the SecItem or SecKey call running on this task (set around the call by
    /// `KeysealSecurity`); an embedded store's engine reads it, a daemon client sends it with the request.
    @TaskLocal public static var current: ItemAuthentication?

    /// The message of the errSecInteractionNotAllowed that asks for an authentication (a locked class answers the
    /// same status with another message).
    public static let requiredMessage = "authentication required: the item's access control asks for user presence"
}

extension AccessControlFlag {
    /// Access-control constraints (`SecAccessControlCreateFlags`) that ask for an authentication at each use.
    public static let authenticationConstraints: UInt =
        AccessControlFlag.userPresence | AccessControlFlag.devicePasscode | AccessControlFlag.biometryAny
        | AccessControlFlag.biometryCurrentSet
}
