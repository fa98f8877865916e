import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

// Keys in the store: generation and the private-key operations, done by the engine — in this process, or in
// keyseald for a daemon store (the caller gets results, never a private key's material unless it is a software key
// marked extractable, and then only from an embedded store).
extension KeychainStore {
    /// Generates a key pair (`SecKeyCreateRandomKey`): in the device key's hardware when `request.inHardware`
    /// (errSecUnimplemented on the host-key backend, never a software key instead), else in software, stored as a
    /// private key item.
    public func generateKey(_ request: KeyGenerationRequest) throws -> KeyDescription {
        try generateKey(request, caller: .application)
    }

    /// The hardware keys in `caller`'s access groups, rows that cannot be told apart counted as hardware keys
    /// (``KeychainEngine/hardwareKeyCount(caller:)``). Embedded stores only (keyseald's quota).
    package func hardwareKeyCount(caller: Caller) throws -> Int {
        try withEngine { try $0.hardwareKeyCount(caller: caller) }
    }

    /// `admit` (embedded stores: keyseald's quotas): ``GroupAdmission``, with the key item's exact size.
    package func generateKey(
        _ request: KeyGenerationRequest, caller: Caller, admit: GroupAdmission? = nil
    ) throws -> KeyDescription {
        try route({ try $0.generateKey(request, caller: caller, admit: admit) }) { connection throws(KeychainError) in
            guard request.isPermanent else {
                throw KeychainError(
                    KeychainStatus.unimplemented, "through keyseald every generated key is stored (kSecAttrIsPermanent)"
                )
            }
            return try Self.key(try Self.request(connection, .generateKey(request)))
        }
    }

    /// A signature with `algorithm` (Apple's `SecKeyAlgorithm` name) over `data`.
    public func sign(_ key: KeyReference, algorithm: String, data: Data) throws -> Data {
        try sign(key, algorithm: algorithm, data: data, caller: .owner)
    }

    package func sign(_ key: KeyReference, algorithm: String, data: Data, caller: Caller) throws -> Data {
        try keyOperation(key, .sign, algorithm: algorithm, data: data, caller: caller) { handle in
            try KeyAlgorithms.sign(handle, algorithm: algorithm, data: data)
        }
    }

    /// Decrypts `data` (ECIES, RSA OAEP) with the private key.
    public func decrypt(_ key: KeyReference, algorithm: String, data: Data) throws -> Data {
        try decrypt(key, algorithm: algorithm, data: data, caller: .owner)
    }

    package func decrypt(_ key: KeyReference, algorithm: String, data: Data, caller: Caller) throws -> Data {
        try keyOperation(key, .decrypt, algorithm: algorithm, data: data, caller: caller) { handle in
            try KeyAlgorithms.decrypt(handle, algorithm: algorithm, data: data)
        }
    }

    /// ECDH with `peer` (X9.63): the shared secret, raw or through the algorithm's X9.63 KDF.
    public func keyExchange(
        _ key: KeyReference, algorithm: String, peer: Data, requestedSize: Int? = nil, sharedInfo: Data? = nil
    ) throws -> SecretBytes {
        var result = try keyExchange(
            key, algorithm: algorithm, peer: peer, requestedSize: requestedSize, sharedInfo: sharedInfo, caller: .owner)
        defer { result.resetBytes(in: 0..<result.count) }
        return SecretBytes(copying: result)
    }

    package func keyExchange(
        _ key: KeyReference, algorithm: String, peer: Data, requestedSize: Int?, sharedInfo: Data?, caller: Caller
    ) throws -> Data {
        try keyOperation(
            key, .keyExchange, algorithm: algorithm, data: peer, requestedSize: requestedSize, sharedInfo: sharedInfo,
            caller: caller
        ) { handle in
            try KeyAlgorithms.keyExchange(
                handle, algorithm: algorithm, peer: peer, requestedSize: requestedSize, sharedInfo: sharedInfo)
        }
    }

    /// The key's public key and attributes.
    public func describeKey(_ key: KeyReference) throws -> KeyDescription { try describeKey(key, caller: .owner) }

    package func describeKey(_ key: KeyReference, caller: Caller) throws -> KeyDescription {
        try route({ try $0.describeKey(key, caller: caller) }) { connection throws(KeychainError) in
            let operation = WireKeyOperation(reference: try Self.itemReference(key), kind: .describe)
            return try Self.key(try Self.request(connection, .keyOperation(operation)))
        }
    }

    /// A software private key's external representation, where it is extractable; a hardware key's never. Embedded
    /// stores only: keyseald never sends private material.
    public func exportPrivateKey(_ key: KeyReference) throws -> SecretBytes {
        try withEngine { SecretBytes(copying: try $0.exportPrivateKey(key, caller: .owner)) }
    }

    /// Stores a transient hardware key as an item; returns the stored key's description. Embedded stores only.
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

    // MARK: Routing

    private func keyOperation(
        _ key: KeyReference, _ kind: WireKeyOperation.Kind, algorithm: String, data: Data, requestedSize: Int? = nil,
        sharedInfo: Data? = nil, caller: Caller, _ body: (PrivateKeyHandle) throws -> Data
    ) throws -> Data {
        try route({ engine in
            try engine.withPrivateKey(key, caller: caller) { handle in
                SlowDeviceHook.wait()
                return try body(handle)
            }
        }) {
            connection throws(KeychainError) -> Data in
            let operation = WireKeyOperation(
                reference: try Self.itemReference(key), kind: kind, algorithm: algorithm, data: data,
                requestedSize: requestedSize, sharedInfo: sharedInfo)
            let response = try Self.request(connection, .keyOperation(operation))
            guard case .keyResult(let result) = response else { throw Self.unexpected(response) }
            return result
        }
    }

    private static func itemReference(_ key: KeyReference) throws(KeychainError) -> Data {
        guard case .item(let reference) = key else {
            throw KeychainError(KeychainStatus.param, "a transient key lives in the process that made it")
        }
        return reference
    }

    private static func key(_ response: WireResponse) throws(KeychainError) -> KeyDescription {
        guard case .key(let key) = response else { throw unexpected(response) }
        return try WireMapping.key(key)
    }
}

/// A test hook: a debug build run with `KEYSEAL_TESTING_KEY_DELAY_FILE=<file>` waits, before each private-key
/// operation (sign, decrypt, key exchange, once the key is usable), the milliseconds the file holds, as a slow device
/// would (none while the file is missing or holds no number). Compiled out of release builds.
enum SlowDeviceHook {
    static func wait() {
        #if DEBUG
        guard let path = getenv("KEYSEAL_TESTING_KEY_DELAY_FILE"),
            let contents = try? Data(contentsOf: URL(fileURLWithPath: String(cString: path))),
            let milliseconds = Int(String(decoding: contents.filter { (0x30...0x39).contains($0) }, as: UTF8.self)),
            milliseconds > 0
        else { return }
        usleep(UInt32(min(milliseconds, 60_000)) * 1000)
        #endif
    }
}
