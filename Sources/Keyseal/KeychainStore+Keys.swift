import FoundationEssentials
import KeysealCore

// Keys in the store: generation and the private-key operations, done by the engine (the caller gets results,
// never a private key's material unless it is a software key marked extractable). Embedded stores; through
// keyseald these answer errSecUnimplemented until the daemon carries them.
extension KeychainStore {
    /// Generates a key pair (`SecKeyCreateRandomKey`): in the device key's hardware when `request.inHardware`
    /// (errSecUnimplemented on the host-key backend, never a software key instead), else in software, stored as a
    /// private key item.
    public func generateKey(_ request: KeyGenerationRequest) throws -> KeyDescription {
        try generateKey(request, caller: .application)
    }

    package func generateKey(_ request: KeyGenerationRequest, caller: Caller) throws -> KeyDescription {
        try withEngine { try $0.generateKey(request, caller: caller) }
    }

    /// A signature with `algorithm` (Apple's `SecKeyAlgorithm` name) over `data`.
    public func sign(_ key: KeyReference, algorithm: String, data: Data) throws -> Data {
        try withEngine { engine in
            try engine.withPrivateKey(key, caller: .owner) { try KeyAlgorithms.sign($0, algorithm: algorithm, data: data) }
        }
    }

    /// Decrypts `data` (ECIES, RSA OAEP) with the private key.
    public func decrypt(_ key: KeyReference, algorithm: String, data: Data) throws -> Data {
        try withEngine { engine in
            try engine.withPrivateKey(key, caller: .owner) { try KeyAlgorithms.decrypt($0, algorithm: algorithm, data: data) }
        }
    }

    /// ECDH with `peer` (X9.63): the shared secret, raw or through the algorithm's X9.63 KDF.
    public func keyExchange(
        _ key: KeyReference, algorithm: String, peer: Data, requestedSize: Int? = nil, sharedInfo: Data? = nil
    ) throws -> SecretBytes {
        try withEngine { engine in
            try engine.withPrivateKey(key, caller: .owner) { handle in
                SecretBytes(
                    copying: try KeyAlgorithms.keyExchange(
                        handle, algorithm: algorithm, peer: peer, requestedSize: requestedSize, sharedInfo: sharedInfo))
            }
        }
    }

    /// The key's public key and attributes.
    public func describeKey(_ key: KeyReference) throws -> KeyDescription {
        try withEngine { try $0.describeKey(key, caller: .owner) }
    }

    /// A software private key's external representation, where it is extractable; a hardware key's never.
    public func exportPrivateKey(_ key: KeyReference) throws -> SecretBytes {
        try withEngine { SecretBytes(copying: try $0.exportPrivateKey(key, caller: .owner)) }
    }

    /// Stores a transient hardware key as an item; returns the stored key's description.
    public func storeTransientKey(
        _ key: KeyReference, attributes: [String: AttributeValue], accessGroup: String? = nil,
        accessibility: Accessibility? = nil, synchronizable: Bool = false
    ) throws -> KeyDescription {
        guard case .transient(let id) = key else { throw KeychainError.duplicateItem }
        return try withEngine {
            try $0.persistTransientKey(
                id, attributes: attributes, accessGroup: accessGroup, accessibility: accessibility,
                synchronizable: synchronizable, caller: .owner)
        }
    }

    /// Forgets a transient hardware key (one generated with `isPermanent` false).
    public func releaseKey(_ key: KeyReference) {
        guard case .transient(let id) = key else { return }
        _ = try? withEngine { $0.releaseTransientKey(id) }
    }
}
