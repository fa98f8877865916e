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
        // A client at its own limit makes room by closing its own oldest session; the total limit is never met by
        // closing another client's.
        var owned = sessionOrder[sender, default: []]
        if owned.count < Self.sessionsPerClient, sessions.count >= Self.sessionLimit {
            throw BusError(
                BusError.limitsExceeded,
                "the Secret Service has \(sessions.count) open sessions (the limit); close sessions you no longer use"
            )
        }
        counter += 1
        let path = Self.sessionPrefix + "/s\(counter)"
        let output = try startSession(algorithm: algorithm, input: input, path: path, sender: sender)
        owned.append(path)
        while owned.count > Self.sessionsPerClient { sessions[owned.removeFirst()] = nil }
        sessionOrder[sender] = owned
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

    /// Opens the session at `path`; returns the service's public value for DH (nil for plain).
    func startSession(algorithm: String, input: VariantInput, path: String, sender: String) throws -> [UInt8]? {
        switch algorithm {
        case "plain":
            sessions[path] = OpenSession(sender: sender, kind: .plain)
            return nil
        case Self.dhAlgorithm:
            guard case .bytes(let peer) = input else {
                throw BusError(BusError.invalidArgs, "\(Self.dhAlgorithm) takes the client's public value as ay")
            }
            let dh = try SecretServiceDH()
            let key = try dh.sharedKey(peer: peer)
            sessions[path] = OpenSession(sender: sender, kind: .aes(key))
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
        sessions[path] = nil
        sessionOrder[sender]?.removeAll { $0 == path }
        if sessionOrder[sender]?.isEmpty == true { sessionOrder[sender] = nil }
    }

    /// A client left the bus: its prompts not yet run complete dismissed, and its sessions are closed (a session is
    /// usable only by the name that opened it, and a unique name is never reused, so they could never be used again).
    func clientGone(_ name: String) {
        promptsOfClientGone(name)
        guard let owned = sessionOrder.removeValue(forKey: name) else { return }
        for path in owned { sessions[path] = nil }
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
