import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A man in the middle on the wire between a TPM client (tpm2-tss's swtpm TCTI) and a swtpm: what a bus interposer
/// on a real machine does (docs/TPM.md "Anti-rollback counter"). It passes every command to the swtpm unchanged and
/// hands each response to the rewrite set for its command code, if any, before passing it back; it keeps the last
/// response of each command code. Its control socket (`<path>.ctrl`) is the swtpm's own, linked.
///
/// One client at a time, one thread; ``stop()`` closes it.
public final class TPMBusInterposer: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public var socketPath: String { directory.appending("interposer.sock").path }
    /// The TCTI configuration that reaches the swtpm through the interposer.
    public var tcti: String { "swtpm:path=\(socketPath)" }

    private let upstream: String
    private let lock = NSLock()
    private var rewrites: [UInt32: @Sendable ([UInt8]) -> [UInt8]] = [:]
    private var responses: [UInt32: [UInt8]] = [:]
    private var listener: Int32 = -1
    private var thread: Thread?

    public init(upstream swtpm: SwtpmFixture) throws {
        directory = try TemporaryDirectory(prefix: "keyseal-interposer")
        upstream = swtpm.socketPath
        try FileManager.default.createSymbolicLink(
            atPath: socketPath + ".ctrl",
            withDestinationPath: upstream + ".ctrl"
        )
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw FixtureError("socket: \(String(cString: strerror(errno)))") }
        var address = Self.address(socketPath)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(listener, 4) == 0 else {
            close(listener)
            throw FixtureError("cannot listen on \(socketPath): \(String(cString: strerror(errno)))")
        }
        let thread = Thread { [self] in serve() }
        self.thread = thread
        thread.start()
    }

    deinit { stop() }

    /// From now on, every response to `commandCode` passes through `rewrite` (nil: passed unchanged again).
    public func rewriteResponses(of commandCode: UInt32, _ rewrite: (@Sendable ([UInt8]) -> [UInt8])?) {
        lock.withLock { rewrites[commandCode] = rewrite }
    }

    /// The last response to `commandCode` as the swtpm sent it (before any rewrite).
    public func lastResponse(of commandCode: UInt32) -> [UInt8]? {
        lock.withLock { responses[commandCode] }
    }

    public func stop() {
        let fd = lock.withLock { () -> Int32 in
            defer { listener = -1 }
            return listener
        }
        guard fd >= 0 else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        directory.remove()
    }

    private func serve() {
        while true {
            let fd = lock.withLock { listener }
            guard fd >= 0 else { return }
            let client = accept(fd, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            relay(client)
            close(client)
        }
    }

    /// Passes each command of `client` to a connection of its own to the swtpm, and each response back.
    private func relay(_ client: Int32) {
        let server = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard server >= 0 else { return }
        defer { close(server) }
        var address = Self.address(upstream)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(server, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { return }
        while let command = Self.readMessage(client) {
            let code = command[6..<10].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            guard Self.writeAll(server, command), let response = Self.readMessage(server) else { return }
            let rewrite = lock.withLock { () -> (@Sendable ([UInt8]) -> [UInt8])? in
                responses[code] = response
                return rewrites[code]
            }
            guard Self.writeAll(client, rewrite?(response) ?? response) else { return }
        }
    }

    /// One TPM command or response: the 10-byte header (tag, size, code), then the rest of `size`.
    private static func readMessage(_ fd: Int32) -> [UInt8]? {
        guard let header = readExactly(fd, 10) else { return nil }
        let size = Int(header[2..<6].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        guard size >= 10, size <= 1 << 16 else { return nil }
        guard let rest = readExactly(fd, size - 10) else { return nil }
        return header + rest
    }

    private static func readExactly(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, count - done) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { return nil }
            done += got
        }
        return bytes
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var done = 0
        while done < bytes.count {
            let wrote = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, bytes.count - done) }
            if wrote < 0, errno == EINTR { continue }
            guard wrote > 0 else { return false }
            done += wrote
        }
        return true
    }

    private static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        precondition(bytes.count < MemoryLayout.size(ofValue: address.sun_path), "the socket path fits sun_path")
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }
}
