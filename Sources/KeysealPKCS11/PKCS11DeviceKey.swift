internal import CP11Kit
internal import Crypto
import FoundationEssentials
import Glibc
import KeysealCore
import Synchronization

/// The device key on a PKCS#11 token: a non-extractable, sensitive AES-256 token key, found by label, that
/// seals the store's secrets with AES-GCM inside the token.
///
/// The module is loaded alone through p11-kit (by path, or by the name of a p11-kit module config such as
/// `softhsm2`); the slot is found by token label; the user PIN comes from a file only this user can read.
///
/// Blob format (version 1): `0x01 ‖ IV (12 bytes) ‖ ciphertext ‖ tag (16 bytes)`, AES-256-GCM with the
/// domain string ``sealDomain`` (or ``passcodeDomain`` followed by a digest of the authorization) as AAD.
public final class PKCS11DeviceKey: DeviceKeyProvider, @unchecked Sendable {
    public let backendName = "pkcs11"
    /// The module path or p11-kit module name given at creation.
    public let module: String
    public let tokenLabel: String
    public let pinFile: URL?
    public let keyLabel: String

    static let blobVersion: UInt8 = 1
    static let ivLength = 12
    static let tagLength = 16
    static let sealDomain = Array("keyseal/pkcs11/seal/v1".utf8)
    static let passcodeDomain = Array("keyseal/pkcs11/passcode/v1".utf8)

    private enum State {
        case notOpened
        case open(Connection)
        case closed
    }

    private let state = Mutex<State>(.notOpened)

    public init(module: String, tokenLabel: String, pinFile: URL?, keyLabel: String = "keyseal-device-key") {
        self.module = module
        self.tokenLabel = tokenLabel
        self.pinFile = pinFile
        self.keyLabel = keyLabel
    }

    deinit {
        state.withLock { state in
            if case .open = state { assertionFailure("PKCS11DeviceKey released without close()") }
        }
    }

    // MARK: DeviceKeyProvider

    public func open(provisioning: Bool) throws {
        try state.withLock { (state: inout State) throws(KeychainError) in
            switch state {
            case .open: return
            case .closed: throw Self.closedError
            case .notOpened:
                state = .open(
                    try Connection(
                        module: module, tokenLabel: tokenLabel, pinFile: pinFile, keyLabel: keyLabel,
                        provisioning: provisioning))
            }
        }
    }

    public func deviceIdentity() throws -> Data {
        try withConnection { connection throws(KeychainError) in connection.identity }
    }

    public func seal(_ secret: SecretBytes) throws -> Data {
        let aad = SecretBytes(copying: Self.sealDomain)
        return try withConnection { connection throws(KeychainError) in try connection.seal(secret, aad: aad) }
    }

    public func unseal(_ blob: Data) throws -> SecretBytes {
        let aad = SecretBytes(copying: Self.sealDomain)
        return try withConnection { connection throws(KeychainError) in
            try connection.unseal(blob, aad: aad, badTag: KeychainStatus.decode)
        }
    }

    /// Seals `secret` bound to `authorization`: the AAD is the passcode domain followed by
    /// SHA-256(`keyseal/pkcs11/passcode-binding` ‖ authorization), so the token releases the secret only for the
    /// right authorization. The token neither sees the authorization itself nor counts failures; a wrong one
    /// fails the GCM tag check and comes back as `errSecAuthFailed`.
    public func sealWithPasscode(_ secret: SecretBytes, authorization: SecretBytes) throws -> Data {
        let aad = Self.passcodeAAD(authorization)
        return try withConnection { connection throws(KeychainError) in try connection.seal(secret, aad: aad) }
    }

    /// Recovers a secret sealed by ``sealWithPasscode(_:authorization:)``. A wrong authorization (or a blob from
    /// another token, which the engine rules out first by comparing ``deviceIdentity()``) gives
    /// `errSecAuthFailed`; a malformed blob gives `errSecDecode`.
    public func unsealWithPasscode(_ blob: Data, authorization: SecretBytes) throws -> SecretBytes {
        let aad = Self.passcodeAAD(authorization)
        return try withConnection { connection throws(KeychainError) in
            try connection.unseal(blob, aad: aad, badTag: KeychainStatus.authFailed)
        }
    }

    public func status() throws -> DeviceKeyStatus {
        DeviceKeyStatus(
            backend: backendName, hardwareBacked: true, guessingHardwareLimited: false,
            detail: "passcode guessing is limited by Argon2id and the store's escalating delays, not by the token")
    }

    public func close() {
        state.withLock { state in
            if case .open(let connection) = state { connection.close() }
            state = .closed
        }
    }

    // MARK: Inspection (tests, diagnostics)

    /// The token's view of the device key's protection attributes.
    struct KeyAttributes: Sendable, Equatable {
        var token: Bool?
        var isPrivate: Bool?
        var sensitive: Bool?
        var extractable: Bool?
        var alwaysSensitive: Bool?
        var neverExtractable: Bool?
        var encrypt: Bool?
        var decrypt: Bool?
        var valueLength: Int?
    }

    /// Reads the device key's protection attributes back from the token.
    func keyAttributes() throws -> KeyAttributes {
        try withConnection { connection throws(KeychainError) in try connection.keyAttributes() }
    }

    /// Destroys the device key on the token (C_DestroyObject). Every store sealed by it becomes unreadable.
    func destroyDeviceKey() throws {
        try withConnection { connection throws(KeychainError) in try connection.destroyKey() }
    }

    // MARK: Private

    static let closedError = KeychainError(KeychainStatus.notAvailable, "the PKCS#11 device key is closed")

    private func withConnection<Result: Sendable>(
        _ body: (Connection) throws(KeychainError) -> Result
    ) throws(KeychainError) -> Result {
        try state.withLock { (state: inout State) throws(KeychainError) -> Result in
            switch state {
            case .open(let connection): return try body(connection)
            case .notOpened:
                throw KeychainError(KeychainStatus.notAvailable, "the PKCS#11 device key is not open")
            case .closed: throw Self.closedError
            }
        }
    }

    private static func passcodeAAD(_ authorization: SecretBytes) -> SecretBytes {
        var hash = SHA256()
        hash.update(data: Array("keyseal/pkcs11/passcode-binding".utf8))
        authorization.withUnsafeBytes { hash.update(bufferPointer: $0) }
        let digest = hash.finalize()
        let bound = digest.withUnsafeBytes { SecretBytes(copying: $0) }
        return SecretBytes.concatenating([SecretBytes(copying: passcodeDomain), bound])
    }
}

/// Per-process login bookkeeping. PKCS#11 login state belongs to the application and the token, not to a
/// session: every session of this process on a token shares it, and one C_Logout logs all of them out. Each
/// open connection counts itself here; the last one to close logs out.
private let loginCounts = Mutex<[String: Int]>([:])

/// One open token session with the device key found: the only owner of the module and session handles.
private final class Connection {
    let module: PKCS11Module
    let tokenLabel: String
    let keyLabel: String
    let slot: CK_SLOT_ID
    let tokenSerial: String
    let loginKey: String
    var session: CK_SESSION_HANDLE = CK_SESSION_HANDLE(CK_INVALID_HANDLE)
    var loggedIn = false
    var key: CK_OBJECT_HANDLE = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
    var keyID: [UInt8] = []
    var closed = false

    var functions: CK_FUNCTION_LIST { module.functions.pointee }

    /// `serial length ‖ serial ‖ id length ‖ CKA_ID`: neither is secret.
    var identity: Data {
        let serial = Array(tokenSerial.utf8)
        return Data([UInt8(serial.count)] + serial + [UInt8(keyID.count)] + keyID)
    }

    init(module path: String, tokenLabel: String, pinFile: URL?, keyLabel: String, provisioning: Bool)
        throws(KeychainError)
    {
        self.tokenLabel = tokenLabel
        self.keyLabel = keyLabel
        let pin = try pinFile.map { url throws(KeychainError) in try PINFile.read(url) }
        let resolved = try ModuleLocator.resolve(path)
        let module = try PKCS11Module(path: resolved)
        self.module = module
        do {
            (slot, tokenSerial) = try Self.findSlot(module, label: tokenLabel)
        } catch {
            module.finalize()
            throw error
        }
        loginKey = "\(URL(fileURLWithPath: resolved).resolvingSymlinksInPath().path)\u{0}\(tokenSerial)"
        do {
            try checkMechanism(CKM_AES_GCM, name: "CKM_AES_GCM")
            try openSession(pin: pin, pinFile: pinFile)
            try findOrCreateKey(provisioning: provisioning)
        } catch {
            close()
            throw error
        }
    }

    deinit { assert(closed, "Connection released without close()") }

    // MARK: Opening

    private static func findSlot(_ module: PKCS11Module, label wanted: String) throws(KeychainError) -> (
        CK_SLOT_ID, String
    ) {
        let functions = module.functions.pointee
        var slots: [CK_SLOT_ID] = []
        do {
            while true {
                var count: CK_ULONG = 0
                try ck("C_GetSlotList", functions.C_GetSlotList!(CK_BBOOL(CK_TRUE), nil, &count))
                slots = [CK_SLOT_ID](repeating: 0, count: Int(count))
                let rv = functions.C_GetSlotList!(CK_BBOOL(CK_TRUE), &slots, &count)
                if rv == CK_RV(CKR_BUFFER_TOO_SMALL) { continue }
                try ck("C_GetSlotList", rv)
                slots = Array(slots.prefix(Int(count)))
                break
            }
        } catch {
            throw KeychainError(
                KeychainStatus.notAvailable, "PKCS#11 module \(module.path) cannot list its slots: \(error)")
        }
        let wantedLabel = wanted.trimmed()
        var labels: [String] = []
        var matches: [(slot: CK_SLOT_ID, serial: String)] = []
        for slot in slots {
            var info = CK_TOKEN_INFO()
            guard functions.C_GetTokenInfo!(slot, &info) == CK_RV(CKR_OK) else { continue }
            guard info.flags & CK_FLAGS(CKF_TOKEN_INITIALIZED) != 0 else { continue }
            let label = paddedString(info.label)
            if label == wantedLabel { matches.append((slot, paddedString(info.serialNumber))) }
            labels.append(label)
        }
        if matches.count == 1 { return (matches[0].slot, matches[0].serial) }
        if matches.count > 1 {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "\(matches.count) tokens carry the label \"\(wantedLabel)\" in PKCS#11 module \(module.path) "
                    + "(serial numbers \(matches.map(\.serial).joined(separator: ", "))); labels must be unique")
        }
        let found = labels.isEmpty ? "none" : labels.map { "\"\($0)\"" }.joined(separator: ", ")
        throw KeychainError(
            KeychainStatus.notAvailable,
            "no token with label \"\(wantedLabel)\" in PKCS#11 module \(module.path); tokens found: \(found)")
    }

    private func checkMechanism(_ mechanism: UInt, name: String) throws(KeychainError) {
        var info = CK_MECHANISM_INFO()
        do {
            try ck("C_GetMechanismInfo", functions.C_GetMechanismInfo!(slot, CK_MECHANISM_TYPE(mechanism), &info))
        } catch where error.result == .mechanismInvalid {
            throw KeychainError(
                KeychainStatus.notAvailable, "mechanism \(name) is not supported by the token \"\(tokenLabel)\"")
        } catch {
            throw KeychainError(
                KeychainStatus.notAvailable, "cannot query mechanism \(name) on token \"\(tokenLabel)\": \(error)")
        }
        let needed: CK_FLAGS
        switch mechanism {
        case CKM_AES_KEY_GEN: needed = CK_FLAGS(CKF_GENERATE)
        default: needed = CK_FLAGS(CKF_ENCRYPT) | CK_FLAGS(CKF_DECRYPT)
        }
        guard info.flags & needed == needed else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "mechanism \(name) is not supported by the token \"\(tokenLabel)\" for "
                    + (mechanism == CKM_AES_KEY_GEN ? "key generation" : "encryption and decryption"))
        }
    }

    private func openSession(pin: SecretBytes?, pinFile: URL?) throws(KeychainError) {
        do {
            try ck(
                "C_OpenSession",
                functions.C_OpenSession!(
                    slot, CK_FLAGS(CKF_SERIAL_SESSION) | CK_FLAGS(CKF_RW_SESSION), nil, nil, &session))
        } catch {
            throw KeychainError(
                KeychainStatus.notAvailable, "cannot open a session on token \"\(tokenLabel)\": \(error)")
        }
        var info = CK_TOKEN_INFO()
        let tokenFlags = functions.C_GetTokenInfo!(slot, &info) == CK_RV(CKR_OK) ? info.flags : 0
        let protectedPath = tokenFlags & CK_FLAGS(CKF_PROTECTED_AUTHENTICATION_PATH) != 0
        guard pin != nil || protectedPath else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "token \"\(tokenLabel)\" needs a user PIN and no PIN file was given")
        }
        let session = self.session
        let functions = self.functions
        let result: CKResult = loginCounts.withLock { counts in
            let rv: CK_RV
            if let pin {
                rv = pin.withUnsafeBytes { bytes in
                    functions.C_Login!(
                        session, CK_USER_TYPE(CKU_USER),
                        UnsafeMutablePointer(mutating: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)),
                        CK_ULONG(bytes.count))
                }
            } else {
                rv = functions.C_Login!(session, CK_USER_TYPE(CKU_USER), nil, 0)
            }
            let result = CKResult(rawValue: UInt(rv))
            // Another connection of this process is logged in to this token: the login is shared.
            if result == .ok || result == .userAlreadyLoggedIn { counts[loginKey, default: 0] += 1 }
            return result
        }
        switch result {
        case .ok, .userAlreadyLoggedIn:
            loggedIn = true
        case .pinIncorrect:
            throw KeychainError(
                KeychainStatus.notAvailable,
                "wrong PIN for token \"\(tokenLabel)\" (C_Login: CKR_PIN_INCORRECT); check the PIN file "
                    + (pinFile?.path ?? "(none)"))
        case .pinLocked:
            throw KeychainError(
                KeychainStatus.notAvailable,
                "the user PIN of token \"\(tokenLabel)\" is locked (C_Login: CKR_PIN_LOCKED); the security officer "
                    + "must reset it")
        case .userPINNotInitialized:
            throw KeychainError(
                KeychainStatus.notAvailable,
                "token \"\(tokenLabel)\" has no user PIN set (CKR_USER_PIN_NOT_INITIALIZED)")
        default:
            throw KeychainError(
                KeychainStatus.notAvailable,
                "cannot log in to token \"\(tokenLabel)\": \(PKCS11CallError(function: "C_Login", result: result))")
        }
    }

    private func findOrCreateKey(provisioning: Bool) throws(KeychainError) {
        let handles: [CK_OBJECT_HANDLE]
        do {
            handles = try findKeys()
        } catch {
            throw KeychainError(
                KeychainStatus.notAvailable, "cannot search token \"\(tokenLabel)\" for its device key: \(error)")
        }
        switch handles.count {
        case 0:
            guard provisioning else {
                throw KeychainError(
                    KeychainStatus.notAvailable,
                    "device key \"\(keyLabel)\" not found on token \"\(tokenLabel)\" (removed?)")
            }
            try checkMechanism(CKM_AES_KEY_GEN, name: "CKM_AES_KEY_GEN")
            try generateKey()
        case 1:
            key = handles[0]
        default:
            throw KeychainError(
                KeychainStatus.notAvailable,
                "token \"\(tokenLabel)\" holds \(handles.count) secret keys labelled \"\(keyLabel)\"; "
                    + "which one is the device key is ambiguous")
        }
        let attributes = try keyAttributes()
        guard attributes.sensitive == true, attributes.extractable == false, attributes.token == true else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "device key \"\(keyLabel)\" on token \"\(tokenLabel)\" is not a sensitive, non-extractable token "
                    + "key; refusing to use it")
        }
        if let length = attributes.valueLength, length != 32 {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "device key \"\(keyLabel)\" on token \"\(tokenLabel)\" is \(length * 8)-bit; AES-256 is required")
        }
        do {
            keyID = try attribute(CK_ATTRIBUTE_TYPE(CKA_ID)) ?? []
        } catch {
            throw KeychainError(
                KeychainStatus.notAvailable, "cannot read the id of device key \"\(keyLabel)\": \(error)")
        }
        guard keyID.count <= 255 else {
            throw KeychainError(KeychainStatus.notAvailable, "device key \"\(keyLabel)\" has an over-long CKA_ID")
        }
    }

    private func findKeys() throws(PKCS11CallError) -> [CK_OBJECT_HANDLE] {
        let template: [Attribute] = [
            .ulong(CKA_CLASS, CKO_SECRET_KEY),
            .bytes(CKA_LABEL, Array(keyLabel.utf8)),
        ]
        let session = self.session
        let functions = self.functions
        try withTemplate(template) { (pointer, count) throws(PKCS11CallError) in
            try ck("C_FindObjectsInit", functions.C_FindObjectsInit!(session, pointer, count))
        }
        defer { _ = functions.C_FindObjectsFinal!(session) }
        var handles = [CK_OBJECT_HANDLE](repeating: 0, count: 4)
        var found: CK_ULONG = 0
        try ck("C_FindObjects", functions.C_FindObjects!(session, &handles, CK_ULONG(handles.count), &found))
        return Array(handles.prefix(Int(found)))
    }

    private func generateKey() throws(KeychainError) {
        let template: [Attribute] = [
            .ulong(CKA_CLASS, CKO_SECRET_KEY),
            .ulong(CKA_KEY_TYPE, CKK_AES),
            .ulong(CKA_VALUE_LEN, 32),
            .bool(CKA_TOKEN, true),
            .bool(CKA_PRIVATE, true),
            .bool(CKA_SENSITIVE, true),
            .bool(CKA_EXTRACTABLE, false),
            .bool(CKA_ENCRYPT, true),
            .bool(CKA_DECRYPT, true),
            .bytes(CKA_LABEL, Array(keyLabel.utf8)),
            .bytes(CKA_ID, randomBytes(16)),
        ]
        let session = self.session
        let functions = self.functions
        var handle = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
        do {
            try withTemplate(template) { (pointer, count) throws(PKCS11CallError) in
                var mechanism = CK_MECHANISM(
                    mechanism: CK_MECHANISM_TYPE(CKM_AES_KEY_GEN), pParameter: nil, ulParameterLen: 0)
                try withUnsafeMutablePointer(to: &mechanism) { (mechanism) throws(PKCS11CallError) in
                    try ck("C_GenerateKey", functions.C_GenerateKey!(session, mechanism, pointer, count, &handle))
                }
            }
        } catch {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "cannot generate device key \"\(keyLabel)\" on token \"\(tokenLabel)\": \(error)")
        }
        key = handle
    }

    // MARK: Sealing

    func seal(_ secret: SecretBytes, aad: SecretBytes) throws(KeychainError) -> Data {
        let iv = randomBytes(PKCS11DeviceKey.ivLength)
        var output = [UInt8](repeating: 0, count: secret.count + PKCS11DeviceKey.tagLength)
        var outputLength = CK_ULONG(output.count)
        let session = self.session
        let functions = self.functions
        let key = self.key
        do {
            try withGCM(iv: iv, aad: aad) { (mechanism) throws(PKCS11CallError) in
                try ck("C_EncryptInit", functions.C_EncryptInit!(session, mechanism, key))
                let rv = secret.withUnsafeBytes { plaintext in
                    output.withUnsafeMutableBufferPointer { buffer in
                        functions.C_Encrypt!(
                            session, UnsafeMutablePointer(mutating: plaintext.bindMemory(to: UInt8.self).baseAddress),
                            CK_ULONG(plaintext.count), buffer.baseAddress, &outputLength)
                    }
                }
                try ck("C_Encrypt", rv)
            }
        } catch {
            throw failure(error, sealing: true)
        }
        return Data([PKCS11DeviceKey.blobVersion] + iv + output.prefix(Int(outputLength)))
    }

    func unseal(_ blob: Data, aad: SecretBytes, badTag: OSStatus) throws(KeychainError) -> SecretBytes {
        let bytes = [UInt8](blob)
        let header = 1 + PKCS11DeviceKey.ivLength
        guard bytes.count >= header + PKCS11DeviceKey.tagLength else {
            throw KeychainError(KeychainStatus.decode, "the sealed blob is too short to come from a PKCS#11 token")
        }
        guard bytes[0] == PKCS11DeviceKey.blobVersion else {
            throw KeychainError(KeychainStatus.decode, "the sealed blob has an unknown version \(bytes[0])")
        }
        let iv = Array(bytes[1..<header])
        var ciphertext = Array(bytes[header...])
        var outputLength = CK_ULONG(ciphertext.count)
        let session = self.session
        let functions = self.functions
        let key = self.key
        var failure: PKCS11CallError?
        let padded = SecretBytes(count: ciphertext.count) { output in
            do throws(PKCS11CallError) {
                try withGCM(iv: iv, aad: aad) { (mechanism) throws(PKCS11CallError) in
                    try ck("C_DecryptInit", functions.C_DecryptInit!(session, mechanism, key))
                    try ck(
                        "C_Decrypt",
                        functions.C_Decrypt!(
                            session, &ciphertext, CK_ULONG(ciphertext.count),
                            output.baseAddress!.assumingMemoryBound(to: UInt8.self), &outputLength))
                }
            } catch {
                failure = error
            }
        }
        if let failure {
            if failure.function == "C_Decrypt" && failure.result.meansBadCiphertext {
                throw KeychainError(
                    badTag,
                    badTag == KeychainStatus.authFailed
                        ? "the passcode authorization does not open this sealed blob"
                        : "the sealed blob does not authenticate under device key \"\(keyLabel)\" of token "
                            + "\"\(tokenLabel)\" (edited, or sealed by another token or key)")
            }
            throw self.failure(failure, sealing: false)
        }
        let length = min(Int(outputLength), padded.count)
        return padded.withUnsafeBytes { SecretBytes(copying: $0.prefix(length)) }
    }

    private func failure(_ error: PKCS11CallError, sealing: Bool) -> KeychainError {
        if error.result.meansKeyGone {
            return KeychainError(
                KeychainStatus.notAvailable,
                "the device key was removed from the token \"\(tokenLabel)\" (\(error))")
        }
        if error.result.meansTokenGone {
            return KeychainError(
                KeychainStatus.notAvailable,
                "the token \"\(tokenLabel)\" is no longer available (removed, or logged out): \(error)")
        }
        return KeychainError(
            KeychainStatus.notAvailable,
            "\(sealing ? "sealing" : "unsealing") with token \"\(tokenLabel)\" failed: \(error)")
    }

    // MARK: Inspection

    func keyAttributes() throws(KeychainError) -> PKCS11DeviceKey.KeyAttributes {
        func flag(_ type: UInt) throws(PKCS11CallError) -> Bool? {
            try attribute(CK_ATTRIBUTE_TYPE(type)).map { $0.first.map { $0 != 0 } ?? false }
        }
        do {
            var length: Int?
            if let bytes = try attribute(CK_ATTRIBUTE_TYPE(CKA_VALUE_LEN)), bytes.count == MemoryLayout<CK_ULONG>.size {
                length = Int(bytes.withUnsafeBytes { $0.loadUnaligned(as: CK_ULONG.self) })
            }
            return PKCS11DeviceKey.KeyAttributes(
                token: try flag(CKA_TOKEN), isPrivate: try flag(CKA_PRIVATE), sensitive: try flag(CKA_SENSITIVE),
                extractable: try flag(CKA_EXTRACTABLE), alwaysSensitive: try flag(CKA_ALWAYS_SENSITIVE),
                neverExtractable: try flag(CKA_NEVER_EXTRACTABLE), encrypt: try flag(CKA_ENCRYPT),
                decrypt: try flag(CKA_DECRYPT), valueLength: length)
        } catch {
            throw failure(error, sealing: false)
        }
    }

    func destroyKey() throws(KeychainError) {
        do {
            try ck("C_DestroyObject", functions.C_DestroyObject!(session, key))
        } catch {
            throw failure(error, sealing: false)
        }
        key = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
    }

    /// The value of one attribute of the key, or nil where the token has none or keeps it secret.
    private func attribute(_ type: CK_ATTRIBUTE_TYPE) throws(PKCS11CallError) -> [UInt8]? {
        var probe = CK_ATTRIBUTE(type: type, pValue: nil, ulValueLen: 0)
        let rv = functions.C_GetAttributeValue!(session, key, &probe, 1)
        let result = CKResult(rawValue: UInt(rv))
        if result == .attributeTypeInvalid || result == .attributeSensitive { return nil }
        try ck("C_GetAttributeValue", rv)
        guard probe.ulValueLen != CK_ULONG.max else { return nil }
        var value = [UInt8](repeating: 0, count: Int(probe.ulValueLen))
        let session = self.session
        let functions = self.functions
        let key = self.key
        let valueRV = value.withUnsafeMutableBytes { buffer in
            var attribute = CK_ATTRIBUTE(type: type, pValue: buffer.baseAddress, ulValueLen: CK_ULONG(buffer.count))
            return functions.C_GetAttributeValue!(session, key, &attribute, 1)
        }
        try ck("C_GetAttributeValue", valueRV)
        return value
    }

    // MARK: Closing

    /// Logs out (when this is the process's last connection to the token), closes the session, finalizes and
    /// releases the module. Idempotent.
    func close() {
        guard !closed else { return }
        closed = true
        let session = self.session
        let functions = self.functions
        if loggedIn {
            loggedIn = false
            loginCounts.withLock { counts in
                let remaining = (counts[loginKey] ?? 1) - 1
                if remaining <= 0 {
                    counts[loginKey] = nil
                    _ = functions.C_Logout!(session)
                } else {
                    counts[loginKey] = remaining
                }
            }
        }
        if session != CK_SESSION_HANDLE(CK_INVALID_HANDLE) {
            _ = functions.C_CloseSession!(session)
            self.session = CK_SESSION_HANDLE(CK_INVALID_HANDLE)
        }
        module.finalize()
    }
}

// MARK: C helpers

/// One attribute of a template; the bytes are copied into C memory by ``withTemplate(_:_:)``.
private struct Attribute {
    var type: CK_ATTRIBUTE_TYPE
    var value: [UInt8]

    static func bool(_ type: UInt, _ value: Bool) -> Attribute {
        Attribute(type: CK_ATTRIBUTE_TYPE(type), value: [value ? CK_BBOOL(CK_TRUE) : CK_BBOOL(CK_FALSE)])
    }
    static func ulong(_ type: UInt, _ value: UInt) -> Attribute {
        Attribute(type: CK_ATTRIBUTE_TYPE(type), value: withUnsafeBytes(of: CK_ULONG(value)) { Array($0) })
    }
    static func bytes(_ type: UInt, _ value: [UInt8]) -> Attribute {
        Attribute(type: CK_ATTRIBUTE_TYPE(type), value: value)
    }
}

/// Calls `body` with a C template of `attributes`; every pointer in it is valid only inside `body`.
private func withTemplate<Result, Failure: Error>(
    _ attributes: [Attribute],
    _ body: (UnsafeMutablePointer<CK_ATTRIBUTE>, CK_ULONG) throws(Failure) -> Result
) throws(Failure) -> Result {
    let total = attributes.reduce(0) { $0 + $1.value.count }
    let storage = UnsafeMutableRawPointer.allocate(byteCount: max(total, 1), alignment: 16)
    defer { storage.deallocate() }
    var template: [CK_ATTRIBUTE] = []
    var offset = 0
    for attribute in attributes {
        let start = storage + offset
        attribute.value.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress { start.copyMemory(from: base, byteCount: bytes.count) }
        }
        template.append(CK_ATTRIBUTE(type: attribute.type, pValue: start, ulValueLen: CK_ULONG(attribute.value.count)))
        offset += attribute.value.count
    }
    return try template.withUnsafeMutableBufferPointer { (buffer) throws(Failure) -> Result in
        try body(buffer.baseAddress!, CK_ULONG(buffer.count))
    }
}

/// Calls `body` with a CKM_AES_GCM mechanism (128-bit tag); the mechanism, its parameters, IV and AAD are valid
/// only inside `body`.
private func withGCM<Result>(
    iv: [UInt8], aad: SecretBytes, _ body: (UnsafeMutablePointer<CK_MECHANISM>) throws(PKCS11CallError) -> Result
) throws(PKCS11CallError) -> Result {
    let outcome = iv.withUnsafeBufferPointer { ivBuffer in
        aad.withUnsafeBytes { aadBytes in
            Swift.Result { () throws(PKCS11CallError) -> Result in
                var parameters = CK_GCM_PARAMS(
                    pIv: UnsafeMutablePointer(mutating: ivBuffer.baseAddress), ulIvLen: CK_ULONG(ivBuffer.count),
                    ulIvBits: CK_ULONG(ivBuffer.count * 8),
                    pAAD: UnsafeMutablePointer(mutating: aadBytes.bindMemory(to: UInt8.self).baseAddress),
                    ulAADLen: CK_ULONG(aadBytes.count), ulTagBits: CK_ULONG(PKCS11DeviceKey.tagLength * 8))
                return try withUnsafeMutablePointer(to: &parameters) { (parameters) throws(PKCS11CallError) -> Result in
                    var mechanism = CK_MECHANISM(
                        mechanism: CK_MECHANISM_TYPE(CKM_AES_GCM), pParameter: UnsafeMutableRawPointer(parameters),
                        ulParameterLen: CK_ULONG(MemoryLayout<CK_GCM_PARAMS>.size))
                    return try withUnsafeMutablePointer(to: &mechanism) {
                        (mechanism) throws(PKCS11CallError) -> Result in try body(mechanism)
                    }
                }
            }
        }
    }
    return try outcome.get()
}

/// A fixed-width, space-padded PKCS#11 text field (label, serial number) without its padding.
private func paddedString<Field>(_ field: Field) -> String {
    withUnsafeBytes(of: field) { bytes in
        String(decoding: bytes, as: UTF8.self).trimmed { $0 == " " || $0 == "\0" }
    }
}
