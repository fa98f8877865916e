import CKeysealSys
import KeysealClient
import KeysealModel
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// One key the agent offers: the Keyseal key item and its ssh form.
struct SSHAgentKey: Sendable {
    var reference: Data
    var form: SSHKeyForm
    /// The key's label, else its tag, else its application label in hex: named in prompts, logs and `ssh-add -L`.
    var name: String
}

/// The agent's settings (`keyseal ssh-agent` flags).
struct SSHAgentOptions: Sendable {
    var keysealSocket: String
    /// Ask before every signature through `askpass`.
    var confirm: Bool
    var askpass: String
    /// `ssh-add KEYFILE` imports the key into Keyseal (`--allow-add`); otherwise an add is refused.
    var allowAdd: Bool
}

/// The ssh-agent protocol (draft-miller-ssh-agent) over keyseald: a thin client as the calling user, so keyseald's
/// roles, groups and lock state decide every listing and signature; private material never reaches this process
/// (an `ssh-add` import passes through it once, into keyseald, and is zeroized).
final class SSHAgent: Sendable {
    let options: SSHAgentOptions
    /// The keys of the last listing, by blob (a sign request names its key by blob).
    private let keys = Mutex<[[UInt8]: SSHAgentKey]>([:])
    /// The clients being served, each on a thread of its own, at most ``maxConnections``.
    private let clients = Mutex(Clients())
    static let maxConnections = 64
    /// The connections to keyseald that every client's requests share, taken in turn. Each serializes its requests;
    /// keyseald closes an idle one and the next request opens it again. However many clients the agent serves, it
    /// holds at most this many of the user's connections to keyseald (`--max-connections`, 64 by default), so that
    /// clients of the agent (the far end of `ssh -A` can open them) never use up the user's own.
    private let keyseald: [KeysealConnection]
    private let nextKeyseald = Atomic<UInt>(0)
    static let keysealdConnections = 4
    /// A client that sends nothing for this long is closed (ssh opens the agent again when it needs it). Debug builds
    /// (the tests') take it from `KEYSEAL_TESTING_AGENT_IDLE_SECONDS`; release builds ignore that variable.
    static let idleTimeoutSeconds: Int = {
        #if DEBUG
        if let text = getenv("KEYSEAL_TESTING_AGENT_IDLE_SECONDS"), let seconds = Int(String(cString: text)),
            seconds > 0
        {
            return seconds
        }
        #endif
        return 600
    }()
    /// A reply that the client does not take within this long closes its connection.
    static let sendTimeoutSeconds = 10

    /// The clients being served: each one's socket, whether it is between a message and its reply, and when it last
    /// sent or was answered.
    private struct Clients {
        struct Client {
            var fd: Int32
            var busy = false
            var lastActive: ContinuousClock.Instant
        }
        var entries: [Int: Client] = [:]
        var nextID = 0
    }

    init(options: SSHAgentOptions) {
        self.options = options
        keyseald = (0..<Self.keysealdConnections).map { _ in KeysealConnection(socketPath: options.keysealSocket) }
    }

    /// The next of the shared connections to keyseald.
    private func nextConnection() -> KeysealConnection {
        keyseald[Int(nextKeyseald.wrappingAdd(1, ordering: .relaxed).oldValue % UInt(keyseald.count))]
    }

    static func log(_ line: String) { Console.err("keyseal ssh-agent: \(line)") }

    // MARK: Serving

    /// Accepts connections on `listener` forever, each served on a thread of its own.
    func serve(listener: Int32) -> Never {
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    usleep(100_000)
                    continue
                }
                Self.log("accept failed: \(String(cString: strerror(errno)))")
                exit(1)
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            guard Self.admits(peerUID: Self.peerUID(fd)) else {
                close(fd)
                continue
            }
            Self.setTimeout(fd, SO_RCVTIMEO, seconds: Self.idleTimeoutSeconds)
            Self.setTimeout(fd, SO_SNDTIMEO, seconds: Self.sendTimeoutSeconds)
            guard let id = admit(fd) else {
                close(fd)
                continue
            }
            let started = Self.detachThread {
                self.serveConnection(fd, id: id)
                self.remove(id, fd)
            }
            if !started {
                Self.log("cannot start a thread for a client: \(String(cString: strerror(errno)))")
                remove(id, fd)
            }
        }
    }

    /// Counts a new client; with ``maxConnections`` already served, the one idle the longest (waiting for its next
    /// message) is closed to make room, so that idle clients never keep a new one out. nil when every client is
    /// between a message and its reply: the new one is closed.
    private func admit(_ fd: Int32) -> Int? {
        clients.withLock { clients -> Int? in
            if clients.entries.count >= Self.maxConnections {
                let idle = clients.entries.filter { !$0.value.busy }
                guard let oldest = idle.min(by: { $0.value.lastActive < $1.value.lastActive }) else { return nil }
                // Its thread sees the end of its connection and closes it; it is no longer counted.
                shutdown(oldest.value.fd, Int32(SHUT_RDWR))
                clients.entries[oldest.key] = nil
            }
            let id = clients.nextID
            clients.nextID += 1
            clients.entries[id] = Clients.Client(fd: fd, lastActive: .now)
            return id
        }
    }

    /// Marks client `id` between a message and its reply (not to be closed for a newcomer), or done with it.
    private func mark(_ id: Int, busy: Bool) {
        clients.withLock { clients in
            clients.entries[id]?.busy = busy
            clients.entries[id]?.lastActive = .now
        }
    }

    /// Ends client `id`: no longer counted, and its socket closed (under the lock, so that no newcomer shuts down a
    /// descriptor number already reused).
    private func remove(_ id: Int, _ fd: Int32) {
        clients.withLock { clients in
            clients.entries[id] = nil
            close(fd)
        }
    }

    static func setTimeout(_ fd: Int32, _ option: Int32, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Runs `body` on a detached thread of its own. Not Dispatch's pool: its width follows the cores, and a client
    /// that stays connected (ssh keeps the agent open for the session) would hold one of its few threads, so that
    /// others wait for a new one.
    static func detachThread(_ body: @escaping @Sendable () -> Void) -> Bool {
        final class Work {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let work = Unmanaged.passRetained(Work(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { argument in
                Unmanaged<Work>.fromOpaque(argument!).takeRetainedValue().body()
                return nil
            },
            work
        )
        guard result == 0 else {
            Unmanaged<Work>.fromOpaque(work).release()
            errno = result
            return false
        }
        pthread_detach(thread)
        return true
    }

    /// Answers the messages of one client until it closes the connection, sends an over-long frame, stays idle for
    /// ``idleTimeoutSeconds`` or leaves a reply unread for ``sendTimeoutSeconds``.
    func serveConnection(_ fd: Int32, id: Int) {
        let caller = Self.peer(fd)
        while true {
            guard let header = Self.readExactly(fd, 4) else { return }
            let length = header.reduce(0) { $0 << 8 | Int($1) }
            guard length > 0, length <= SSHAgentMessage.maxLength else {
                Self.log("a message of \(length) bytes refused; connection closed")
                _ = Self.writeAll(fd, Self.failureFrame)
                return
            }
            guard var message = Self.readExactly(fd, length) else { return }
            mark(id, busy: true)
            let reply = handle(message, keyseald: nextConnection(), caller: caller)
            zeroize(&message)
            guard Self.writeAll(fd, reply) else { return }
            mark(id, busy: false)
        }
    }

    static let failureFrame: [UInt8] = [0, 0, 0, 1, SSHAgentMessage.failure]

    /// The framed reply to one message.
    func handle(_ message: [UInt8], keyseald: KeysealConnection, caller: (pid: pid_t, uid: uid_t)?) -> [UInt8] {
        var reader = SSHReader(message)
        switch reader.byte() {
        case SSHAgentMessage.requestIdentities:
            guard reader.isAtEnd, let listed = listKeys(keyseald) else { return Self.failureFrame }
            var writer = SSHWriter()
            writer.byte(SSHAgentMessage.identitiesAnswer)
            writer.uint32(UInt32(listed.count))
            for key in listed {
                writer.string(key.form.blob)
                writer.string(key.name)
            }
            return writer.framed
        case SSHAgentMessage.signRequest:
            guard let (blob, data, flags) = reader.signRequest() else {
                Self.log("a malformed sign request refused")
                return Self.failureFrame
            }
            return sign(blob: blob, data: data, flags: flags, keyseald: keyseald, caller: caller) ?? Self.failureFrame
        case SSHAgentMessage.addIdentity:
            return add(&reader, keyseald: keyseald) ? [0, 0, 0, 1, SSHAgentMessage.success] : Self.failureFrame
        case SSHAgentMessage.addIDConstrained:
            Self.log("ssh-add with constraints (-c, -t) refused: use keyseal ssh-agent --confirm")
            return Self.failureFrame
        case SSHAgentMessage.removeIdentity, SSHAgentMessage.removeAllIdentities:
            Self.log("removing keys through the agent refused: delete them with keyseal delete-key")
            return Self.failureFrame
        default:
            // Unknown messages, extensions, agent lock/unlock: failure, as draft-miller-ssh-agent asks.
            return Self.failureFrame
        }
    }

    // MARK: Keys

    /// The keys marked for ssh that the caller may use; nil (and one log line) when keyseald refuses the listing.
    func listKeys(_ keyseald: KeysealConnection) -> [SSHAgentKey]? {
        let query = ItemQuery(
            itemClass: .key,
            attributes: [AttributeKey.keyClass: .string("1"), AttributeKey.sshAgent: .bool(true)],
            synchronizable: .any,
            limit: .all,
            limitGiven: true,
            returns: [.attributes, .persistentRef]
        )
        var listed: [SSHAgentKey] = []
        do throws(KeychainError) {
            var records: [ItemRecord] = []
            do throws(KeychainError) {
                if case .records(let found) = try keyseald.send(.copyMatching(query)) { records = found }
            } catch  where error.status == -25300 {
                // errSecItemNotFound: no key is marked.
            }
            for record in records {
                guard let reference = record.persistentRef else { continue }
                let response = try keyseald.send(.keyOperation(WireKeyOperation(reference: reference, kind: .describe)))
                guard case .key(let key) = response,
                    let form = SSHKeyForm(typeCode: key.keyType, bits: key.bits, publicKey: Array(key.publicKey))
                else { continue }
                listed.append(SSHAgentKey(reference: reference, form: form, name: Self.name(record)))
            }
        } catch {
            Self.log("listing keys refused: \(Self.reason(error))")
            return nil
        }
        keys.withLock { $0 = Dictionary(listed.map { ($0.form.blob, $0) }) { first, _ in first } }
        return listed
    }

    static func name(_ record: ItemRecord) -> String {
        if let label = record.string(AttributeKey.label), !label.isEmpty { return label }
        if let tag = record.string(AttributeKey.applicationTag), !tag.isEmpty { return tag }
        if case .data(let klbl)? = record.attributes[AttributeKey.applicationLabel] {
            return Hex.encode(klbl)
        }
        return "keyseal key"
    }

    /// Why keyseald refused, for the log: the status's meaning, never a secret.
    static func reason(_ error: KeychainError) -> String {
        switch error.status {
        case -25308: "the key's accessibility class is locked (run keyseal unlock) (-25308)"
        case -25294: "keyseald is not reachable: \(error.message) (-25294)"
        default: "\(error.message) (\(error.status))"
        }
    }

    /// The framed sign response, or nil (after one log line) for a failure.
    func sign(
        blob: [UInt8],
        data: [UInt8],
        flags: UInt32,
        keyseald: KeysealConnection,
        caller: (pid: pid_t, uid: uid_t)?
    ) -> [UInt8]? {
        var key = keys.withLock { $0[blob] }
        if key == nil {
            _ = listKeys(keyseald)
            key = keys.withLock { $0[blob] }
        }
        guard let key else {
            Self.log("a sign request for a key this agent does not offer refused")
            return nil
        }
        guard let algorithm = key.form.algorithm(flags: flags) else {
            Self.log("sign with \"\(key.name)\" refused: ssh-rsa (SHA-1) signatures are not made; use rsa-sha2-256/512")
            return nil
        }
        if options.confirm {
            let chain = Self.processChain(caller)
            let prompt = "Allow use of the key \"\(key.name)\" (\(key.form.typeName)) by \(chain)?"
            guard Self.confirm(askpass: options.askpass, prompt: prompt) else {
                Self.log("sign with \"\(key.name)\" refused: not confirmed (caller \(chain))")
                return nil
            }
        }
        let operation = WireKeyOperation(
            reference: key.reference,
            kind: .sign,
            algorithm: algorithm.keyseal,
            data: Data(data)
        )
        let signature: Data
        do throws(KeychainError) {
            guard case .keyResult(let result) = try keyseald.send(.keyOperation(operation)) else {
                Self.log("sign with \"\(key.name)\" failed: unexpected response from keyseald")
                return nil
            }
            signature = result
        } catch {
            Self.log("sign with \"\(key.name)\" refused: \(Self.reason(error))")
            return nil
        }
        guard let blob = key.form.signatureBlob(format: algorithm.format, signature: Array(signature)) else {
            Self.log("sign with \"\(key.name)\" failed: keyseald's signature is not DER")
            return nil
        }
        var writer = SSHWriter()
        writer.byte(SSHAgentMessage.signResponse)
        writer.string(blob)
        return writer.framed
    }

    /// `SSH_AGENTC_ADD_IDENTITY` of an ECDSA key: imported as a Keyseal software key, not extractable, marked for
    /// ssh. Only with `--allow-add`; RSA and other types are refused (create RSA keys with `keyseal create-key`).
    func add(_ reader: inout SSHReader, keyseald: KeysealConnection) -> Bool {
        guard options.allowAdd else {
            Self.log("ssh-add refused: start the agent with --allow-add to import keys into Keyseal")
            return false
        }
        guard let type = reader.string(), let typeName = String(bytes: type, encoding: .utf8) else {
            Self.log("a malformed add request refused")
            return false
        }
        let sizes = ["ecdsa-sha2-nistp256": 256, "ecdsa-sha2-nistp384": 384, "ecdsa-sha2-nistp521": 521]
        guard let bits = sizes[typeName] else {
            Self.log("ssh-add of a \(typeName) key refused: only ECDSA keys are imported")
            return false
        }
        let size = (bits + 7) / 8
        guard let curve = reader.string(), curve == Array("nistp\(bits)".utf8), let point = reader.string(),
            point.count == 1 + 2 * size, point.first == 4, var scalar = reader.positiveMPInt(), scalar.count <= size,
            let commentBytes = reader.string(), reader.isAtEnd
        else {
            Self.log("a malformed add request refused")
            return false
        }
        defer { zeroize(&scalar) }
        // Apple's external representation of an EC private key: 04 ‖ X ‖ Y ‖ K, K padded to the curve's size.
        let material = SecretBytes(count: 1 + 3 * size) { buffer in
            buffer.copyBytes(from: point)
            for index in 0..<size - scalar.count { buffer[point.count + index] = 0 }
            UnsafeMutableRawBufferPointer(rebasing: buffer[(buffer.count - scalar.count)...]).copyBytes(from: scalar)
        }
        let comment = String(decoding: commentBytes, as: UTF8.self)
        var attributes: [String: AttributeValue] = [
            AttributeKey.keyClass: .string("1"), AttributeKey.type: .string("73"),
            AttributeKey.isExtractable: .bool(false), AttributeKey.isSensitive: .bool(true),
            AttributeKey.canSign: .bool(true), AttributeKey.sshAgent: .bool(true),
        ]
        if !comment.isEmpty { attributes[AttributeKey.label] = .string(comment) }
        let item = NewItem(itemClass: .key, attributes: attributes, data: material.withUnsafeBytes { Data($0) })
        do throws(KeychainError) {
            _ = try keyseald.send(.add(item))
            Self.log("imported \(typeName) key \"\(comment)\" into Keyseal (not extractable)")
            return true
        } catch {
            Self.log("ssh-add refused: \(Self.reason(error))")
            return false
        }
    }

    // MARK: Callers and confirmation

    /// Whether a client may use the agent: root or the agent's own uid, as OpenSSH's agent decides (`getpeereid`).
    /// The socket's mode is not relied on: a socket made reachable (0666, a shared directory, one passed into a
    /// container) must not hand another user this user's keys. A peer whose credentials cannot be read is refused.
    static func admits(peerUID: uid_t?) -> Bool {
        guard let peerUID else {
            log("a client whose credentials cannot be read refused")
            return false
        }
        guard peerUID == 0 || peerUID == getuid() else {
            log("uid mismatch: a client of uid \(peerUID) refused (the agent serves uid \(getuid()) and root)")
            return false
        }
        return true
    }

    /// The connecting process's uid (`SO_PEERCRED`), whatever its pid namespace (where the pid reads 0).
    static func peerUID(_ fd: Int32) -> uid_t? {
        var credentials = keyseal_peer_credentials()
        var size = socklen_t(MemoryLayout<keyseal_peer_credentials>.size)
        guard getsockopt(fd, SOL_SOCKET, keyseal_so_peercred, &credentials, &size) == 0 else { return nil }
        return credentials.uid
    }

    /// The connecting process and its uid (`SO_PEERCRED`).
    static func peer(_ fd: Int32) -> (pid: pid_t, uid: uid_t)? {
        var credentials = keyseal_peer_credentials()
        var size = socklen_t(MemoryLayout<keyseal_peer_credentials>.size)
        guard getsockopt(fd, SOL_SOCKET, keyseal_so_peercred, &credentials, &size) == 0, credentials.pid > 0 else {
            return nil
        }
        return (credentials.pid, credentials.uid)
    }

    /// `comm[pid] ← parent[pid] ← …` up the parents of the connecting process (from `SO_PEERCRED`), at most eight,
    /// and only those of the caller's uid: the chain stops at the first process whose real or effective uid is another
    /// account's, which the prompt never names.
    static func processChain(_ caller: (pid: pid_t, uid: uid_t)?) -> String {
        guard let caller else { return "an unknown process" }
        var pid = caller.pid
        var links: [String] = []
        while pid > 1 && links.count < 8 && processUIDs(pid) == [caller.uid, caller.uid] {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
            else { break }
            let comm = stat[stat.index(after: open)..<close].filter { !$0.isNewline && $0 != "\"" }
            links.append("\(comm)[\(pid)]")
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 1, let parent = pid_t(fields[1]) else { break }
            pid = parent
        }
        return links.isEmpty ? "process \(caller.pid)" : links.joined(separator: " ← ")
    }

    /// The real and effective uids of process `pid` (`/proc/PID/status`); nil when it cannot be read.
    static func processUIDs(_ pid: pid_t) -> [uid_t]? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") })
        else { return nil }
        let ids = line.dropFirst(4).split(whereSeparator: { $0 == " " || $0 == "\t" }).prefix(2).compactMap {
            uid_t($0)
        }
        return ids.count == 2 ? ids : nil
    }

    /// Runs the askpass program with the prompt (`SSH_ASKPASS_PROMPT=confirm`, as `ssh-add -c` does); yes when it
    /// exits 0 within 60 seconds. Its output is read (at most 64 KiB: more ends it) and discarded.
    static func confirm(askpass: String, prompt: String) -> Bool {
        let child: PromptProgram
        do {
            child = try PromptProgram.spawn([askpass, prompt], environment: ["SSH_ASKPASS_PROMPT": "confirm"])
        } catch {
            log("cannot run the askpass program: \(error)")
            return false
        }
        guard case .exited(0, _) = child.finish(timeoutSeconds: 60, outputLimit: 65536) else { return false }
        return true
    }

    // MARK: Socket I/O

    static func readExactly(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, count - filled) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else {
                zeroize(&buffer)
                return nil
            }
            filled += got
        }
        return buffer
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes {
                send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
