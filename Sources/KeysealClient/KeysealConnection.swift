import FoundationEssentials
import Glibc
import Synchronization

/// A blocking connection to keyseald: one request, one response, serialized across threads.
///
/// The connection is opened on first use and reopened once when the daemon closed it between requests (a
/// daemon restart); a request that may have reached the daemon is never sent twice. An unreachable socket is
/// `errSecNoSuchKeychain` naming the path.
///
/// Before anything is sent, the server's peer credentials are checked: it must run as root, as this process's
/// own uid, or as the system account `keyseal` (the system daemon's). Whoever owns a socket path is not trusted
/// by that alone: `su` without `-` keeps the first user's `$XDG_RUNTIME_DIR`, so a passcode would go to that
/// user's process. A server running as anyone else is `errSecNoSuchKeychain` naming its uid.
public final class KeysealConnection: Sendable {
    public let socketPath: String
    let descriptor = Mutex<Int32>(-1)
    /// Used only while `descriptor` is held.
    let receiveBuffer = ReceiveBuffer()

    public init(socketPath: String) {
        self.socketPath = socketPath
    }

    deinit {
        descriptor.withLock { fd in
            if fd >= 0 { _ = close(fd) }
        }
    }

    /// Opens the connection now (otherwise the first request does), so that an unreachable daemon shows early.
    public func connect() throws(KeychainError) {
        try descriptor.withLock { fd throws(KeychainError) in
            if fd < 0 {
                receiveBuffer.dropPending()
                fd = try Self.open(socketPath)
            }
        }
    }

    /// Closes the connection; the next request opens a new one.
    public func disconnect() {
        descriptor.withLock { fd in
            if fd >= 0 { _ = close(fd) }
            fd = -1
            receiveBuffer.release()
        }
    }

    /// Sends `request` and returns the response; a `.failure` response is thrown as its `KeychainError`.
    public func send(_ request: WireRequest) throws(KeychainError) -> WireResponse {
        var frame = try request.encodedFrame()
        defer {
            if request.isManagement { for index in frame.indices { frame[index] = 0 } }
        }
        let response = try descriptor.withLock { fd throws(KeychainError) -> WireResponse in
            // A connection the daemon closed meanwhile (idle timeout, restart) is not polled for before each request:
            // sending on it fails (EPIPE), nothing reached the daemon, and the request goes on a new connection.
            let reused = fd >= 0
            if fd < 0 {
                receiveBuffer.dropPending()
                fd = try Self.open(socketPath)
            }
            do throws(KeychainError) {
                try Self.writeAll(fd, frame)
            } catch {
                // Nothing reached the daemon: a stale connection is reopened and the request sent once more. A new
                // connection the daemon refused (too many of this user's) carries the reason in a failure frame.
                if !reused, Self.peerClosed(fd), let refusal = try? Self.readResponse(fd, path: socketPath),
                    case .failure(let reason) = refusal
                {
                    _ = close(fd)
                    fd = -1
                    throw reason
                }
                _ = close(fd)
                fd = -1
                guard reused else { throw error }
                receiveBuffer.dropPending()
                fd = try Self.open(socketPath)
                do throws(KeychainError) {
                    try Self.writeAll(fd, frame)
                } catch {
                    _ = close(fd)
                    fd = -1
                    throw error
                }
            }
            do throws(KeychainError) {
                return try receiveBuffer.readResponse(fd, path: socketPath)
            } catch {
                _ = close(fd)
                fd = -1
                throw error
            }
        }
        if case .failure(let error) = response { throw error }
        return response
    }

    /// Subscribes to lock-state changes on a connection of its own and calls `handler` with the current state and
    /// then every change, until `handler` returns false or the daemon goes away (then it throws).
    public static func watchLockState(
        socketPath: String,
        _ handler: (LockState) -> Bool
    ) throws(KeychainError) {
        let fd = try open(socketPath)
        defer { _ = close(fd) }
        try writeAll(fd, try WireRequest.subscribeLockState.encodedFrame())
        while true {
            switch try readResponse(fd, path: socketPath) {
            case .lockStateChanged(let state), .lockState(let state):
                if !handler(state) { return }
            case .failure(let error): throw error
            default:
                throw KeychainError(status: KeychainStatus.decode, message: "unexpected response to a subscription")
            }
        }
    }

    // MARK: - Socket calls

    static func unreachable(_ path: String, _ reason: String) -> KeychainError {
        KeychainError(status: KeychainStatus.noSuchKeychain, message: "cannot reach keyseald at \(path): \(reason)")
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }

    package static func open(_ path: String) throws(KeychainError) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        let utf8 = Array(path.utf8)
        guard !utf8.isEmpty, utf8.count < capacity else { throw unreachable(path, "socket path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: utf8)
            raw[utf8.count] = 0
        }
        #if canImport(Darwin)
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #else
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #endif
        guard fd >= 0 else { throw unreachable(path, errnoText()) }
        #if canImport(Darwin)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Posix.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let reason = errnoText()
            _ = close(fd)
            throw unreachable(path, reason)
        }
        do throws(KeychainError) {
            try checkServer(fd, path: path)
        } catch {
            _ = close(fd)
            throw error
        }
        return fd
    }

    /// Whether a client talks to a server running as `uid`: root, its own uid, or the system daemon's account
    /// `keyseal` when it exists. The account is looked up only for another uid, so that the usual connection asks
    /// no name service (NSS: /etc/nsswitch.conf, nscd, libnss_systemd loaded into the process).
    static func isTrustedServer(_ uid: uid_t) -> Bool {
        if uid == 0 || uid == geteuid() { return true }
        guard let account = getpwnam("keyseal") else { return false }
        return account.pointee.pw_uid == uid
    }

    /// Refuses a server whose peer credentials are not trusted (``isTrustedServer(_:)``).
    static func checkServer(_ fd: Int32, path: String) throws(KeychainError) {
        #if canImport(Darwin)
        var uid: uid_t = 0
        var gid: gid_t = 0
        guard getpeereid(fd, &uid, &gid) == 0 else {
            throw unreachable(path, "cannot read the server's credentials: \(errnoText())")
        }
        #else
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; } (glibc hides the type without _GNU_SOURCE).
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, length == 12 else {
            throw unreachable(path, "cannot read the server's credentials: \(errnoText())")
        }
        let uid = uid_t(credentials.1)
        #endif
        guard isTrustedServer(uid) else {
            throw unreachable(
                path,
                "the server runs as uid \(uid), not as root, keyseal or you (uid \(geteuid())); nothing was sent to it "
                    + "(check KEYSEAL_SOCKET and XDG_RUNTIME_DIR, e.g. after su without -)"
            )
        }
    }

    /// Whether the daemon closed an idle connection (readable with nothing expected means EOF or garbage).
    static func peerClosed(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&entry, 1, 0)
        return ready != 0
    }

    package static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(KeychainError) {
        var sent = 0
        while sent < bytes.count {
            let result = bytes.withUnsafeBytes { raw in Posix.send(fd, raw.baseAddress! + sent, raw.count - sent) }
            if result < 0 {
                throw KeychainError(
                    status: KeychainStatus.io,
                    message: "keyseald connection lost: \(KeysealConnection.errnoText())"
                )
            }
            sent += result
        }
    }

    static func readExactly(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String) throws(KeychainError)
    {
        var done = 0
        while done < buffer.count {
            done += try receive(fd, into: buffer.baseAddress! + done, count: buffer.count - done, path: path)
        }
    }

    /// One `recv` of at most `count` bytes (retried when interrupted): how many arrived, at least one. A closed
    /// connection or a failure is errSecIO.
    static func receive(
        _ fd: Int32,
        into pointer: UnsafeMutableRawPointer,
        count: Int,
        path: String
    )
        throws(KeychainError) -> Int
    {
        while true {
            let result = Posix.recv(fd, pointer, count)
            if result > 0 { return result }
            if result == 0 {
                throw KeychainError(status: KeychainStatus.io, message: "keyseald at \(path) closed the connection")
            }
            throw KeychainError(status: KeychainStatus.io, message: "keyseald connection lost: \(errnoText())")
        }
    }

    static func readExactly(_ fd: Int32, into bytes: inout [UInt8], path: String) throws(KeychainError) {
        let result = bytes.withUnsafeMutableBytes { raw in
            Result { () throws(KeychainError) in try readExactly(fd, into: raw, path: path) }
        }
        try result.get()
    }

    package static func readResponse(_ fd: Int32, path: String) throws(KeychainError) -> WireResponse {
        try WireResponse.readResponse { () throws(KeychainError) -> [UInt8] in
            var header = [UInt8](repeating: 0, count: 4)
            try readExactly(fd, into: &header, path: path)
            let length = try wireFrameLength(header)
            var payload = [UInt8](repeating: 0, count: length)
            try readExactly(fd, into: &payload, path: path)
            return payload
        }
    }
}

/// A connection's receive buffer, kept from one response to the next so that a response is read without allocating
/// (a large value's pages stay resident instead of being mapped and zero-filled anew each time). It grows to the
/// largest frame received, at most ``Wire/maxFrame``; the bytes of each frame are zeroed once it is decoded, and the
/// memory is zeroed before it is freed. Each `recv` takes as much as the buffer holds, so that a response usually
/// arrives with one system call, header and payload together; bytes received beyond the frame (none in this
/// protocol, where the daemon answers each request with one response) wait for the next frame on the same
/// connection and are dropped with it (``dropPending()``). Used only under its connection's lock.
final class ReceiveBuffer: @unchecked Sendable {
    private(set) var storage = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    /// The received bytes not handed out yet: `storage[start..<end]`.
    private var start = 0
    private var end = 0

    deinit { release() }

    /// Zeroes and frees the memory.
    func release() {
        guard let base = storage.baseAddress else { return }
        zeroize(base, storage.count)
        base.deallocate()
        storage = UnsafeMutableRawBufferPointer(start: nil, count: 0)
        start = 0
        end = 0
    }

    /// Forgets (and zeroes) what was received and not handed out: the connection it came from is gone.
    func dropPending() {
        if let base = storage.baseAddress, end > start { zeroize(base + start, end - start) }
        start = 0
        end = 0
    }

    /// Reads one response from `fd`: a frame's payload into this buffer, decoded in place and then zeroed. A
    /// response sent in parts is joined by ``WireResponse/readResponse(limit:_:)``.
    func readResponse(_ fd: Int32, path: String) throws(KeychainError) -> WireResponse {
        let payload = try nextFrame(fd, path: path)
        if WireResponse.isPiece(UnsafeRawBufferPointer(payload)) {
            // Each piece is copied out and let go before the next is read (reading may move the buffer).
            var first: [UInt8]? = Array(payload)
            consume(payload)
            return try WireResponse.readResponse { () throws(KeychainError) -> [UInt8] in
                if let bytes = first {
                    first = nil
                    return bytes
                }
                let next = try nextFrame(fd, path: path)
                defer { consume(next) }
                return Array(next)
            }
        }
        defer { consume(payload) }
        return try WireResponse.decode(payload: UnsafeRawBufferPointer(payload))
    }

    /// The payload of the next frame, in this buffer until ``consume(_:)``.
    private func nextFrame(_ fd: Int32, path: String) throws(KeychainError) -> UnsafeMutableRawBufferPointer {
        try fill(fd, count: 4, path: path)
        let length = try wireFrameLength(UnsafeRawBufferPointer(rebasing: storage[start..<start + 4]))
        try fill(fd, count: 4 + length, path: path)
        return UnsafeMutableRawBufferPointer(rebasing: storage[start + 4..<start + 4 + length])
    }

    /// Zeroes the frame whose payload is `payload` (and its header) and moves past it.
    private func consume(_ payload: UnsafeMutableRawBufferPointer) {
        guard let base = storage.baseAddress else { return }
        zeroize(base + start, 4 + payload.count)
        start += 4 + payload.count
        if start == end {
            start = 0
            end = 0
        }
    }

    /// Receives until at least `count` bytes are pending, moving or growing the buffer first if they would not fit.
    private func fill(_ fd: Int32, count: Int, path: String) throws(KeychainError) {
        guard end - start < count else { return }
        if storage.count - start < count {
            let pending = end - start
            if storage.count >= count, let base = storage.baseAddress {
                if start > 0 {
                    base.copyMemory(from: base + start, byteCount: pending)
                    zeroize(base + pending, end - pending)
                }
            } else {
                let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 4096), alignment: 16)
                if let base = storage.baseAddress, pending > 0 {
                    grown.baseAddress!.copyMemory(from: base + start, byteCount: pending)
                }
                release()
                storage = grown
            }
            start = 0
            end = pending
        }
        let base = storage.baseAddress!
        while end - start < count {
            end += try KeysealConnection.receive(fd, into: base + end, count: storage.count - end, path: path)
        }
    }
}
