import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

extension SecretServiceBridge {
    // MARK: Sessions

    func openSession(_ message: MessageReader) throws -> ReplyBuilder {
        let algorithm = try message.string()
        let input = try BusConnection.variantBytesOrString(message)
        let sender = Self.sender(message)
        let process = processKey(sender: sender)
        // A client (or a process) at its own limit makes room by closing its own oldest session; the total limit is
        // never met by closing another client's.
        if sessionOrder[sender, default: []].count < Self.sessionsPerClient,
            processSessions[process, default: []].count < Self.sessionsPerProcess, sessions.count >= Self.sessionLimit
        {
            throw BusError(
                BusError.limitsExceeded,
                "the Secret Service has \(sessions.count) open sessions (the limit); close sessions you no longer use"
            )
        }
        counter += 1
        let path = Self.sessionPrefix + "/s\(counter)"
        let output = try startSession(algorithm: algorithm, input: input, path: path, sender: sender, process: process)
        sessionOrder[sender, default: []].append(path)
        processSessions[process, default: []].append(path)
        while let owned = sessionOrder[sender], owned.count > Self.sessionsPerClient { dropSession(owned[0]) }
        while let owned = processSessions[process], owned.count > Self.sessionsPerProcess { dropSession(owned[0]) }
        return { writer in
            if let output {
                try writer.open("v", "ay")
                try writer.bytes(output)
            } else {
                try writer.open("v", "s")
                try writer.string("")
            }
            try writer.close()
            try writer.objectPath(path)
        }
    }

    /// Whom the sessions of `sender` are counted against beside itself: its process, by the pid the bus daemon
    /// read from its socket when it connected (a pid is reused only once every connection of the process that had
    /// it is gone or handed down, and a process that shares a pid with such a leftover shares its count); the
    /// unique name alone when the bus does not say.
    func processKey(sender: String) -> String {
        bus.currentSenderPid().map { "pid:\($0)" } ?? "name:" + sender
    }

    /// Opens the session at `path`; returns the service's public value for DH (nil for plain).
    func startSession(
        algorithm: String,
        input: VariantInput,
        path: String,
        sender: String,
        process: String
    ) throws -> [UInt8]? {
        switch algorithm {
        case "plain":
            sessions[path] = OpenSession(sender: sender, process: process, kind: .plain)
            return nil
        case Self.dhAlgorithm:
            guard case .bytes(let peer) = input else {
                throw BusError(BusError.invalidArgs, "\(Self.dhAlgorithm) takes the client's public value as ay")
            }
            let dh = try SecretServiceDH()
            let key = try dh.sharedKey(peer: peer)
            sessions[path] = OpenSession(sender: sender, process: process, kind: .aes(key))
            return dh.publicKey
        default:
            throw BusError(BusError.notSupported, "session algorithm \(algorithm) is not supported")
        }
    }

    /// Closes the session at `path` for its owner; its AES key is zeroized as it is let go (``SecretBytes``).
    func closeSession(_ path: String, sender: String) throws {
        guard sessions[path]?.sender == sender else {
            throw BusError(BusError.noSession, "no open session \(path) for this caller")
        }
        dropSession(path)
    }

    /// Forgets the session at `path`: from the sessions, its client's and its process's.
    func dropSession(_ path: String) {
        guard let session = sessions.removeValue(forKey: path) else { return }
        sessionOrder[session.sender]?.removeAll { $0 == path }
        if sessionOrder[session.sender]?.isEmpty == true { sessionOrder[session.sender] = nil }
        processSessions[session.process]?.removeAll { $0 == path }
        if processSessions[session.process]?.isEmpty == true { processSessions[session.process] = nil }
    }

    /// A client left the bus: its prompts not yet run complete dismissed, and its sessions are closed (a session is
    /// usable only by the name that opened it, and a unique name is never reused, so they could never be used again).
    func clientGone(_ name: String) {
        promptsOfClientGone(name)
        for path in sessionOrder[name] ?? [] { dropSession(path) }
    }

    func session(_ path: String, sender: String) throws -> Session {
        guard let session = sessions[path], session.sender == sender else {
            throw BusError(BusError.noSession, "no open session \(path) for this caller")
        }
        return session.kind
    }

    func encodeSecret(
        _ value: SecretBytes,
        contentType: String,
        session path: String,
        sender: String
    ) throws
        -> WireSecretStruct
    {
        switch try session(path, sender: sender) {
        case .plain:
            return WireSecretStruct(
                session: path,
                parameters: [],
                value: value.withUnsafeBytes { Array($0) },
                contentType: contentType
            )
        case .aes(let key):
            let (iv, ciphertext) = try SecretServiceDH.encrypt(value, key: key)
            return WireSecretStruct(session: path, parameters: iv, value: ciphertext, contentType: contentType)
        }
    }

    func decodeSecret(_ secret: WireSecretStruct, sender: String) throws -> (SecretBytes, String) {
        let contentType = secret.contentType.isEmpty ? "text/plain" : secret.contentType
        switch try session(secret.session, sender: sender) {
        case .plain: return (SecretBytes(copying: secret.value), contentType)
        case .aes(let key):
            do {
                return (try SecretServiceDH.decrypt(secret.value, iv: secret.parameters, key: key), contentType)
            } catch {
                throw BusError(BusError.invalidArgs, "the secret does not decrypt under this session's key")
            }
        }
    }
}
