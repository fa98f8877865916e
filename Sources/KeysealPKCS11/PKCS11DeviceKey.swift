internal import CP11Kit
internal import Crypto
import FoundationEssentials
import Glibc
import KeysealCore
import Synchronization

/// The device key on a PKCS#11 token: two non-extractable, sensitive generic-secret keys, found by label, whose only
/// use is HMAC-SHA256 inside the token (`CKA_SIGN` alone, `CKA_ALLOWED_MECHANISMS` = `CKM_SHA256_HMAC`).
///
/// Every sealed secret is wrapped in software under a key that only the token can compute:
/// `W = HMAC-SHA256_token(K, domain ‖ salt [‖ authorization])`, a fresh 32-byte salt per blob. The device key
/// `K_dev` (label ``deviceSecretKeyLabel``) seals DS and the backups' device secret; the passcode key `K_pass`
/// (``passcodeSecretKeyLabel``) seals PS bound to the passcode authorization (Argon2id of the passcode), so every
/// passcode guess needs one HMAC inside the token: the blob, the token's keys and the PIN give nothing offline.
///
/// Blob format 2: `0x02 ‖ salt (32) ‖ nonce (12) ‖ ciphertext ‖ tag (16)`, AES-256-GCM in software under W with
/// AAD `0x02 ‖ domain ‖ salt`. Format 1 (an AES-256 token key sealing with CKM_AES_GCM, label ``keyLabel``) is
/// still opened so that stores provisioned before format 2 migrate (docs/PKCS11.md); it is never written again.
///
/// The module is loaded alone through p11-kit (by path, or by the name of a p11-kit module config such as
/// `softhsm2`); the slot is found by token label; the user PIN comes from a file only this user can read.
public final class PKCS11DeviceKey: DeviceKeyProvider, @unchecked Sendable {
    public let backendName = "pkcs11"
    /// The module path or p11-kit module name given at creation.
    public let module: String
    public let tokenLabel: String
    public let pinFile: URL?
    /// The label of the format-1 AES key, and the stem of the format-2 keys' labels.
    public let keyLabel: String

    /// The label of the HMAC key that seals the device secret: `<keyLabel>.device`.
    public var deviceSecretKeyLabel: String { "\(keyLabel).device" }
    /// The label of the HMAC key that binds the passcode secret to the passcode: `<keyLabel>.passcode`.
    public var passcodeSecretKeyLabel: String { "\(keyLabel).passcode" }

    static let blobVersion: UInt8 = 2
    static let legacyBlobVersion: UInt8 = 1
    static let saltLength = 32
    static let nonceLength = 12
    static let ivLength = 12
    static let tagLength = 16
    static let deviceDomain = Array("keyseal/pkcs11/device-secret/v2".utf8)
    static let passcodeDomain = Array("keyseal/pkcs11/passcode-secret/v2".utf8)
    static let legacySealDomain = Array("keyseal/pkcs11/seal/v1".utf8)
    static let legacyPasscodeDomain = Array("keyseal/pkcs11/passcode/v1".utf8)

    /// Seals in format 1 with an AES token key: only for tests that build a store as older releases did.
    let sealsLegacyFormat: Bool

    private enum State {
        case notOpened
        case open(Connection)
        case closed
    }

    private let state = Mutex<State>(.notOpened)

    public convenience init(module: String, tokenLabel: String, pinFile: URL?, keyLabel: String = "keyseal-device-key")
    {
        self.init(
            module: module,
            tokenLabel: tokenLabel,
            pinFile: pinFile,
            keyLabel: keyLabel,
            sealsLegacyFormat: false
        )
    }

    package init(module: String, tokenLabel: String, pinFile: URL?, keyLabel: String, sealsLegacyFormat: Bool) {
        self.module = module
        self.tokenLabel = tokenLabel
        self.pinFile = pinFile
        self.keyLabel = keyLabel
        self.sealsLegacyFormat = sealsLegacyFormat
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
                        module: module,
                        tokenLabel: tokenLabel,
                        pinFile: pinFile,
                        labels: KeyLabels(
                            legacy: keyLabel,
                            device: deviceSecretKeyLabel,
                            passcode: passcodeSecretKeyLabel
                        ),
                        provisioning: provisioning,
                        legacy: sealsLegacyFormat
                    )
                )
            }
        }
    }

    /// `serial length ‖ token serial ‖ id length ‖ CKA_ID` of the device-secret key (of the format-1 AES key while
    /// only that one exists). Keys created to migrate a format-1 store take its AES key's `CKA_ID`, so the identity
    /// a store and its backups recorded stays the same.
    public func deviceIdentity() throws -> Data {
        try withConnection { connection throws(KeychainError) in try connection.identity() }
    }

    /// A recorded identity is this token's when it names the token and either its format-2 keys or its format-1 key.
    public func acceptsIdentity(_ recorded: Data) throws -> Bool {
        try withConnection { connection throws(KeychainError) in connection.identities().contains(recorded) }
    }

    public func seal(_ secret: SecretBytes) throws -> Data {
        try withConnection { connection throws(KeychainError) in
            if sealsLegacyFormat {
                return try connection.legacySeal(secret, aad: SecretBytes(copying: Self.legacySealDomain))
            }
            return try connection.seal(secret, role: .device, authorization: nil)
        }
    }

    public func unseal(_ blob: Data) throws -> SecretBytes {
        try withConnection { connection throws(KeychainError) in
            if blob.first == Self.legacyBlobVersion {
                return try connection.legacyUnseal(
                    blob,
                    aad: SecretBytes(copying: Self.legacySealDomain),
                    badTag: KeychainStatus.decode
                )
            }
            return try connection.unseal(blob, role: .device, authorization: nil, badTag: KeychainStatus.decode)
        }
    }

    /// Seals `secret` under `W = HMAC_token(K_pass, domain ‖ salt ‖ authorization)`: only the token computes W, and
    /// only for the right authorization, so each passcode guess costs a call into the token. The token does not
    /// count failures.
    public func sealWithPasscode(_ secret: SecretBytes, authorization: SecretBytes) throws -> Data {
        try withConnection { connection throws(KeychainError) in
            if sealsLegacyFormat {
                return try connection.legacySeal(secret, aad: Self.legacyPasscodeAAD(authorization))
            }
            return try connection.seal(secret, role: .passcode, authorization: authorization)
        }
    }

    /// Recovers a secret sealed by ``sealWithPasscode(_:authorization:)``. A wrong authorization gives
    /// `errSecAuthFailed` (the engine compares ``deviceIdentity()`` and authenticates the keybag first, so a foreign
    /// or edited blob never reaches this call); a malformed blob gives `errSecDecode`.
    public func unsealWithPasscode(_ blob: Data, authorization: SecretBytes) throws -> SecretBytes {
        try withConnection { connection throws(KeychainError) in
            if blob.first == Self.legacyBlobVersion {
                return try connection.legacyUnseal(
                    blob,
                    aad: Self.legacyPasscodeAAD(authorization),
                    badTag: KeychainStatus.authFailed
                )
            }
            return try connection.unseal(
                blob,
                role: .passcode,
                authorization: authorization,
                badTag: KeychainStatus.authFailed
            )
        }
    }

    /// Format-1 blobs (an AES token key in CKM_AES_GCM) are sealed again in format 2.
    public func needsReseal(_ blob: Data) -> Bool { blob.first == Self.legacyBlobVersion }

    public func status() throws -> DeviceKeyStatus {
        let legacy = (try? withConnection { connection throws(KeychainError) in connection.legacyKey != nil }) ?? false
        var detail =
            "passcode guessing is limited by Argon2id and the store's escalating delays, not by the token; "
            + "every guess needs the token"
        if legacy {
            detail +=
                "; the format-1 AES key \"\(keyLabel)\" is still on the token: delete it once every store "
                + "that used it has been unlocked with this release (docs/PKCS11.md)"
        }
        return DeviceKeyStatus(
            backend: backendName,
            hardwareBacked: true,
            guessingHardwareLimited: false,
            detail: detail
        )
    }

    public func close() {
        state.withLock { state in
            if case .open(let connection) = state { connection.close() }
            state = .closed
        }
    }

    // MARK: Inspection (tests, diagnostics)

    /// Which of the token's keys an inspection is about.
    enum Role: Sendable {
        /// The HMAC key that seals DS (`<keyLabel>.device`).
        case device
        /// The HMAC key bound to the passcode (`<keyLabel>.passcode`).
        case passcode
        /// The format-1 AES key (`<keyLabel>`).
        case legacy
    }

    /// A key's protection attributes as the token reports them.
    struct KeyAttributes: Sendable, Equatable {
        var keyType: UInt?
        var token: Bool?
        var isPrivate: Bool?
        var sensitive: Bool?
        var extractable: Bool?
        var alwaysSensitive: Bool?
        var neverExtractable: Bool?
        var encrypt: Bool?
        var decrypt: Bool?
        var sign: Bool?
        var verify: Bool?
        var wrap: Bool?
        var unwrap: Bool?
        var derive: Bool?
        var valueLength: Int?
        /// nil when the token does not support `CKA_ALLOWED_MECHANISMS`; empty when it allows every mechanism.
        var allowedMechanisms: [UInt]?
    }

    /// Reads a key's protection attributes back from the token.
    func keyAttributes(_ role: Role = .device) throws -> KeyAttributes {
        try withConnection { connection throws(KeychainError) in try connection.keyAttributes(role) }
    }

    /// Destroys one of the token's keys (C_DestroyObject). Every blob it sealed becomes unreadable.
    func destroyKey(_ role: Role = .device) throws {
        try withConnection { connection throws(KeychainError) in try connection.destroyKey(role) }
    }

    /// Runs `body` with the raw session and a key's handle: for tests that attack the token as its PIN holder would.
    func withRawSession<Result>(
        _ role: Role,
        _ body: (CK_FUNCTION_LIST, CK_SESSION_HANDLE, CK_OBJECT_HANDLE) throws -> Result
    ) throws -> Result {
        try state.withLock { state in
            guard case .open(let connection) = state else { throw Self.closedError }
            return try body(connection.functions, connection.session, try connection.handle(role))
        }
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

    private static func legacyPasscodeAAD(_ authorization: SecretBytes) -> SecretBytes {
        var hash = SHA256()
        hash.update(data: Array("keyseal/pkcs11/passcode-binding".utf8))
        authorization.withUnsafeBytes { hash.update(bufferPointer: $0) }
        let digest = hash.finalize()
        let bound = digest.withUnsafeBytes { SecretBytes(copying: $0) }
        return SecretBytes.concatenating([SecretBytes(copying: legacyPasscodeDomain), bound])
    }
}

/// The labels of a device key's token objects.
private struct KeyLabels {
    var legacy: String
    var device: String
    var passcode: String
}

/// Per-process login bookkeeping. PKCS#11 login state belongs to the application and the token, not to a
/// session: every session of this process on a token shares it, and one C_Logout logs all of them out. Each
/// open connection counts itself here; the last one to close logs out.
///
/// While the process is logged in, the token answers every further C_Login with CKR_USER_ALREADY_LOGGED_IN
/// without looking at the PIN. So the login also records a keyed hash of the PIN it was made with (HMAC-SHA256
/// under a key drawn once per process, never stored), and a connection that finds the token already logged in
/// is accepted only when its PIN hashes the same; a login through the token's protected authentication path
/// (no PIN) matches only another such login.
private let logins = Mutex<[String: TokenLogin]>([:])

private struct TokenLogin {
    /// Open connections of this process logged in to the token.
    var connections: Int
    /// HMAC-SHA256(``pinHashKey``, PIN) of the login; nil for a login through the protected authentication path.
    var credential: SecretBytes?

    func accepts(_ other: SecretBytes?) -> Bool {
        switch (credential, other) {
        case (nil, nil): return true
        case (.some(let recorded), .some(let presented)): return recorded.constantTimeEquals(presented)
        default: return false
        }
    }
}

/// The key of the login records' PIN hashes: random, this process's alone.
private let pinHashKey = SymmetricKey(size: .bits256)

private func pinCredential(_ pin: SecretBytes?) -> SecretBytes? {
    guard let pin else { return nil }
    let mac = pin.withUnsafeBytes { HMAC<SHA256>.authenticationCode(for: $0, using: pinHashKey) }
    return mac.withUnsafeBytes { SecretBytes(copying: $0) }
}

/// How a C_Login that found the token already logged in by this process was judged.
private enum SharedLogin {
    case accepted
    /// Another connection is logged in with a different PIN (or another way of logging in).
    case differentPIN
    /// Logged in by another user of the module in this process, not by a device key: the PIN cannot be checked.
    case unknown
}

/// One open token session with the device keys found: the only owner of the module and session handles.
private final class Connection {
    /// A key on the token: its handle in this session and its `CKA_ID`.
    struct TokenKey {
        var handle: CK_OBJECT_HANDLE
        var id: [UInt8]
    }

    let module: PKCS11Module
    let tokenLabel: String
    let labels: KeyLabels
    let slot: CK_SLOT_ID
    let tokenSerial: String
    let loginKey: String
    var session: CK_SESSION_HANDLE = CK_SESSION_HANDLE(CK_INVALID_HANDLE)
    var loggedIn = false
    /// Format 2: the HMAC keys (both or neither).
    var deviceKey: TokenKey?
    var passcodeKey: TokenKey?
    /// Format 1: the AES key of stores provisioned before format 2.
    var legacyKey: TokenKey?
    var closed = false
    /// Private keys of hardware key pairs found in this session, by `CKA_ID` (object handles are stable while the
    /// session is open; a handle the token no longer knows is looked up again).
    var hardwareKeyHandles: [[UInt8]: CK_OBJECT_HANDLE] = [:]

    var functions: CK_FUNCTION_LIST { module.functions.pointee }

    init(
        module path: String,
        tokenLabel: String,
        pinFile: URL?,
        labels: KeyLabels,
        provisioning: Bool,
        legacy: Bool
    ) throws(KeychainError) {
        self.tokenLabel = tokenLabel
        self.labels = labels
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
            try openSession(pin: pin, pinFile: pinFile)
            try findKeys(provisioning: provisioning, legacy: legacy)
        } catch {
            close()
            throw error
        }
    }

    deinit { assert(closed, "Connection released without close()") }

    /// `serial length ‖ serial ‖ id length ‖ CKA_ID` of the device-secret key (or of the format-1 key while it is the
    /// only one): neither is secret.
    func identity() throws(KeychainError) -> Data {
        guard let key = deviceKey ?? legacyKey else { throw keysMissing() }
        return identity(of: key)
    }

    /// Every identity a store on this token may have recorded.
    func identities() -> [Data] { [deviceKey, legacyKey].compactMap { $0.map(identity(of:)) } }

    private func identity(of key: TokenKey) -> Data {
        let serial = Array(tokenSerial.utf8)
        return Data([UInt8(serial.count)] + serial + [UInt8(key.id.count)] + key.id)
    }

    func handle(_ role: PKCS11DeviceKey.Role) throws(KeychainError) -> CK_OBJECT_HANDLE {
        let key: TokenKey?
        switch role {
        case .device: key = deviceKey
        case .passcode: key = passcodeKey
        case .legacy: key = legacyKey
        }
        guard let key else { throw keysMissing() }
        return key.handle
    }

    private func keysMissing() -> KeychainError {
        KeychainError(
            KeychainStatus.notAvailable,
            "device keys \"\(labels.device)\" and \"\(labels.passcode)\" not found on token \"\(tokenLabel)\" "
                + "(removed?); nor the format-1 device key \"\(labels.legacy)\""
        )
    }

    // MARK: Opening

    private static func findSlot(
        _ module: PKCS11Module,
        label wanted: String
    ) throws(KeychainError) -> (
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
                KeychainStatus.notAvailable,
                "PKCS#11 module \(module.path) cannot list its slots: \(error)"
            )
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
                    + "(serial numbers \(matches.map(\.serial).joined(separator: ", "))); labels must be unique"
            )
        }
        let found = labels.isEmpty ? "none" : labels.map { "\"\($0)\"" }.joined(separator: ", ")
        throw KeychainError(
            KeychainStatus.notAvailable,
            "no token with label \"\(wantedLabel)\" in PKCS#11 module \(module.path); tokens found: \(found)"
        )
    }

    /// Checks that the token advertises `mechanism` with every flag in `needed` (`purpose` names them for people).
    private func checkMechanism(
        _ mechanism: UInt,
        name: String,
        needed: CK_FLAGS,
        purpose: String
    )
        throws(KeychainError)
    {
        var info = CK_MECHANISM_INFO()
        do {
            try ck("C_GetMechanismInfo", functions.C_GetMechanismInfo!(slot, CK_MECHANISM_TYPE(mechanism), &info))
        } catch  where error.result == .mechanismInvalid {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "mechanism \(name) is not supported by the token \"\(tokenLabel)\""
            )
        } catch {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "cannot query mechanism \(name) on token \"\(tokenLabel)\": \(error)"
            )
        }
        guard info.flags & needed == needed else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "mechanism \(name) is not supported by the token \"\(tokenLabel)\" for \(purpose)"
            )
        }
    }

    private func openSession(pin: SecretBytes?, pinFile: URL?) throws(KeychainError) {
        do {
            try ck(
                "C_OpenSession",
                functions.C_OpenSession!(
                    slot,
                    CK_FLAGS(CKF_SERIAL_SESSION) | CK_FLAGS(CKF_RW_SESSION),
                    nil,
                    nil,
                    &session
                )
            )
        } catch {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "cannot open a session on token \"\(tokenLabel)\": \(error)"
            )
        }
        var info = CK_TOKEN_INFO()
        let tokenFlags = functions.C_GetTokenInfo!(slot, &info) == CK_RV(CKR_OK) ? info.flags : 0
        let protectedPath = tokenFlags & CK_FLAGS(CKF_PROTECTED_AUTHENTICATION_PATH) != 0
        guard pin != nil || protectedPath else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "token \"\(tokenLabel)\" needs a user PIN and no PIN file was given"
            )
        }
        let session = self.session
        let functions = self.functions
        let loginKey = self.loginKey
        let credential = pinCredential(pin)
        let (result, shared): (CKResult, SharedLogin?) = logins.withLock { logins in
            let rv: CK_RV
            if let pin {
                rv = pin.withUnsafeBytes { bytes in
                    functions.C_Login!(
                        session,
                        CK_USER_TYPE(CKU_USER),
                        UnsafeMutablePointer(mutating: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)),
                        CK_ULONG(bytes.count)
                    )
                }
            } else {
                rv = functions.C_Login!(session, CK_USER_TYPE(CKU_USER), nil, 0)
            }
            let result = CKResult(rawValue: UInt(rv))
            switch result {
            case .ok:
                // The token checked the PIN (any earlier login of the process had ended).
                logins[loginKey] = TokenLogin(
                    connections: (logins[loginKey]?.connections ?? 0) + 1,
                    credential: credential
                )
                return (result, nil)
            case .userAlreadyLoggedIn:
                // The token did not look at the PIN: it must be the one the process logged in with.
                guard var login = logins[loginKey] else { return (result, .unknown) }
                guard login.accepts(credential) else { return (result, .differentPIN) }
                login.connections += 1
                logins[loginKey] = login
                return (result, .accepted)
            default:
                return (result, nil)
            }
        }
        switch result {
        case .ok:
            loggedIn = true
        case .userAlreadyLoggedIn where shared == .accepted:
            loggedIn = true
        case .userAlreadyLoggedIn where shared == .differentPIN:
            throw KeychainError(
                KeychainStatus.notAvailable,
                "wrong PIN for token \"\(tokenLabel)\": another store of this process is logged in to the token with "
                    + "a different PIN; check the PIN file " + (pinFile?.path ?? "(none)")
            )
        case .userAlreadyLoggedIn:
            throw KeychainError(
                KeychainStatus.notAvailable,
                "token \"\(tokenLabel)\" is already logged in by another user of the PKCS#11 module in this process, "
                    + "so its PIN cannot be checked; refusing to use it"
            )
        case .pinIncorrect:
            throw KeychainError(
                KeychainStatus.notAvailable,
                "wrong PIN for token \"\(tokenLabel)\" (C_Login: CKR_PIN_INCORRECT); check the PIN file "
                    + (pinFile?.path ?? "(none)")
            )
        case .pinLocked:
            throw KeychainError(
                KeychainStatus.notAvailable,
                "the user PIN of token \"\(tokenLabel)\" is locked (C_Login: CKR_PIN_LOCKED); the security officer "
                    + "must reset it"
            )
        case .userPINNotInitialized:
            throw KeychainError(
                KeychainStatus.notAvailable,
                "token \"\(tokenLabel)\" has no user PIN set (CKR_USER_PIN_NOT_INITIALIZED)"
            )
        default:
            throw KeychainError(
                KeychainStatus.notAvailable,
                "cannot log in to token \"\(tokenLabel)\": \(PKCS11CallError(function: "C_Login", result: result))"
            )
        }
    }

    /// Finds the keys, creates the format-2 keys for a new store, and refuses keys whose attributes do not qualify.
    private func findKeys(provisioning: Bool, legacy: Bool) throws(KeychainError) {
        legacyKey = try findKey(labels.legacy)
        deviceKey = try findKey(labels.device)
        passcodeKey = try findKey(labels.passcode)
        if legacy {
            // Tests only: a store sealed as releases before format 2 sealed it.
            if legacyKey == nil && provisioning { try generateLegacyKey() }
            guard legacyKey != nil else { throw keysMissing() }
        }
        if let legacyKey { try qualifyLegacy(legacyKey) }
        switch (deviceKey, passcodeKey) {
        case (.some(let device), .some(let passcode)):
            try checkMechanism(
                CKM_SHA256_HMAC,
                name: "CKM_SHA256_HMAC",
                needed: CK_FLAGS(CKF_SIGN),
                purpose: "signing (HMAC)"
            )
            try qualifyHMAC(device, label: labels.device)
            try qualifyHMAC(passcode, label: labels.passcode)
        case (nil, nil):
            if provisioning && !legacy {
                try generateHMACKeys(id: randomBytes(16))
            } else if legacyKey == nil {
                throw keysMissing()
            }
        default:
            let missing = deviceKey == nil ? labels.device : labels.passcode
            throw KeychainError(
                KeychainStatus.notAvailable,
                "token \"\(tokenLabel)\" holds only one of the two device keys: \"\(missing)\" is missing "
                    + "(removed?)"
            )
        }
    }

    /// The one secret key labelled `label`, if any; two are an error.
    private func findKey(_ label: String) throws(KeychainError) -> TokenKey? {
        let handles: [CK_OBJECT_HANDLE]
        do {
            handles = try findObjects([.ulong(CKA_CLASS, CKO_SECRET_KEY), .bytes(CKA_LABEL, Array(label.utf8))])
        } catch {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "cannot search token \"\(tokenLabel)\" for its device key: \(error)"
            )
        }
        guard handles.count <= 1 else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "token \"\(tokenLabel)\" holds \(handles.count) secret keys labelled \"\(label)\"; "
                    + "which one is the device key is ambiguous"
            )
        }
        guard let handle = handles.first else { return nil }
        let id: [UInt8]
        do {
            id = try attribute(CK_ATTRIBUTE_TYPE(CKA_ID), of: handle) ?? []
        } catch {
            throw KeychainError(KeychainStatus.notAvailable, "cannot read the id of device key \"\(label)\": \(error)")
        }
        guard id.count <= 255 else {
            throw KeychainError(KeychainStatus.notAvailable, "device key \"\(label)\" has an over-long CKA_ID")
        }
        return TokenKey(handle: handle, id: id)
    }

    private func findObjects(_ template: [Attribute]) throws(PKCS11CallError) -> [CK_OBJECT_HANDLE] {
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

    /// An HMAC key qualifies when it is a sensitive, non-extractable token object of at least 256 bits that can sign and
    /// never derive, whose allowed mechanisms are HMAC-SHA256 alone (`CKA_ALLOWED_MECHANISMS`), or, on a token
    /// without that attribute, whose only use is signing.
    private func qualifyHMAC(_ key: TokenKey, label: String) throws(KeychainError) {
        let attributes = try keyAttributes(key.handle)
        func refuse(_ reason: String) -> KeychainError {
            KeychainError(
                KeychainStatus.notAvailable,
                "device key \"\(label)\" on token \"\(tokenLabel)\" \(reason); refusing to use it (docs/PKCS11.md "
                    + "lists the attributes a key created beforehand must have)"
            )
        }
        let hmacTypes = [UInt(CKK_GENERIC_SECRET), UInt(CKK_SHA256_HMAC)]
        guard let type = attributes.keyType, hmacTypes.contains(type) else {
            throw refuse("is not a generic-secret or HMAC-SHA256 key")
        }
        guard attributes.sensitive == true, attributes.extractable == false, attributes.token == true else {
            throw refuse("is not a sensitive, non-extractable token key")
        }
        guard attributes.isPrivate == true else { throw refuse("is not private (usable without the PIN)") }
        guard attributes.sign == true else { throw refuse("cannot sign (CKA_SIGN is not true)") }
        // Deriving could copy the key's value into a new, extractable key: never allowed.
        if attributes.derive == true { throw refuse("allows CKA_DERIVE") }
        if let length = attributes.valueLength, length < 32 {
            throw refuse("is \(length * 8)-bit; at least 256 bits are required")
        }
        guard let allowed = attributes.allowedMechanisms else {
            // A token without CKA_ALLOWED_MECHANISMS: the usage flags are all there is to go by.
            let otherUses: [(String, Bool?)] = [
                ("CKA_ENCRYPT", attributes.encrypt), ("CKA_DECRYPT", attributes.decrypt), ("CKA_WRAP", attributes.wrap),
                ("CKA_UNWRAP", attributes.unwrap),
            ]
            if let use = otherUses.first(where: { $0.1 == true }) { throw refuse("allows \(use.0)") }
            return
        }
        let hmac = [UInt(CKM_SHA256_HMAC), UInt(CKM_SHA256_HMAC_GENERAL)]
        guard !allowed.isEmpty else { throw refuse("allows every mechanism (CKA_ALLOWED_MECHANISMS is empty)") }
        guard allowed.contains(UInt(CKM_SHA256_HMAC)), allowed.allSatisfy(hmac.contains) else {
            throw refuse("allows mechanisms other than CKM_SHA256_HMAC")
        }
    }

    private func qualifyLegacy(_ key: TokenKey) throws(KeychainError) {
        let attributes = try keyAttributes(key.handle)
        guard attributes.sensitive == true, attributes.extractable == false, attributes.token == true else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "device key \"\(labels.legacy)\" on token \"\(tokenLabel)\" is not a sensitive, non-extractable "
                    + "token key; refusing to use it"
            )
        }
        if let length = attributes.valueLength, length != 32 {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "device key \"\(labels.legacy)\" on token \"\(tokenLabel)\" is \(length * 8)-bit; AES-256 is "
                    + "required"
            )
        }
    }

    /// Creates the two HMAC keys (both or neither): generic secrets of 256 bits, sensitive, never extractable, whose
    /// only use is CKM_SHA256_HMAC signing.
    private func generateHMACKeys(id: [UInt8]) throws(KeychainError) {
        try checkMechanism(
            CKM_SHA256_HMAC,
            name: "CKM_SHA256_HMAC",
            needed: CK_FLAGS(CKF_SIGN),
            purpose: "signing (HMAC)"
        )
        do {
            try checkMechanism(
                CKM_GENERIC_SECRET_KEY_GEN,
                name: "CKM_GENERIC_SECRET_KEY_GEN",
                needed: CK_FLAGS(CKF_GENERATE),
                purpose: "key generation"
            )
        } catch {
            throw KeychainError(
                error.status,
                "\(error.message); create the keys \"\(labels.device)\" and \"\(labels.passcode)\" beforehand with "
                    + "the token's own tool (docs/PKCS11.md)"
            )
        }
        let device = try generateHMACKey(label: labels.device, id: id)
        let passcode: TokenKey
        do {
            passcode = try generateHMACKey(label: labels.passcode, id: id)
        } catch {
            _ = functions.C_DestroyObject!(session, device.handle)
            throw error
        }
        for (key, label) in [(device, labels.device), (passcode, labels.passcode)] {
            do {
                try qualifyHMAC(key, label: label)
            } catch {
                _ = functions.C_DestroyObject!(session, device.handle)
                _ = functions.C_DestroyObject!(session, passcode.handle)
                throw error
            }
        }
        deviceKey = device
        passcodeKey = passcode
    }

    private func generateHMACKey(label: String, id: [UInt8]) throws(KeychainError) -> TokenKey {
        let allowed = withUnsafeBytes(of: CK_MECHANISM_TYPE(CKM_SHA256_HMAC)) { Array($0) }
        let template: [Attribute] = [
            .ulong(CKA_CLASS, CKO_SECRET_KEY),
            .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET),
            .ulong(CKA_VALUE_LEN, 32),
            .bool(CKA_TOKEN, true),
            .bool(CKA_PRIVATE, true),
            .bool(CKA_SENSITIVE, true),
            .bool(CKA_EXTRACTABLE, false),
            .bool(CKA_SIGN, true),
            .bool(CKA_VERIFY, false),
            .bool(CKA_ENCRYPT, false),
            .bool(CKA_DECRYPT, false),
            .bool(CKA_WRAP, false),
            .bool(CKA_UNWRAP, false),
            .bool(CKA_DERIVE, false),
            .bool(CKA_MODIFIABLE, false),
            .bool(CKA_COPYABLE, false),
            .bytes(CKA_ALLOWED_MECHANISMS, allowed),
            .bytes(CKA_LABEL, Array(label.utf8)),
            .bytes(CKA_ID, id),
        ]
        let handle = try generate(template, mechanism: CKM_GENERIC_SECRET_KEY_GEN, label: label)
        return TokenKey(handle: handle, id: id)
    }

    private func generateLegacyKey() throws(KeychainError) {
        try checkMechanism(
            CKM_AES_GCM,
            name: "CKM_AES_GCM",
            needed: CK_FLAGS(CKF_ENCRYPT) | CK_FLAGS(CKF_DECRYPT),
            purpose: "encryption and decryption"
        )
        let id = randomBytes(16)
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
            .bytes(CKA_LABEL, Array(labels.legacy.utf8)),
            .bytes(CKA_ID, id),
        ]
        legacyKey = TokenKey(handle: try generate(template, mechanism: CKM_AES_KEY_GEN, label: labels.legacy), id: id)
    }

    /// C_GenerateKey with a clear error for tokens that advertise key generation but refuse it.
    private func generate(
        _ template: [Attribute],
        mechanism type: UInt,
        label: String
    ) throws(KeychainError)
        -> CK_OBJECT_HANDLE
    {
        let session = self.session
        let functions = self.functions
        var handle = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
        do {
            try withTemplate(template) { (pointer, count) throws(PKCS11CallError) in
                var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(type), pParameter: nil, ulParameterLen: 0)
                try withUnsafeMutablePointer(to: &mechanism) { (mechanism) throws(PKCS11CallError) in
                    try ck("C_GenerateKey", functions.C_GenerateKey!(session, mechanism, pointer, count, &handle))
                }
            }
        } catch  where error.result == .functionNotSupported || error.result == .mechanismInvalid {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "token \"\(tokenLabel)\" advertises key generation but refuses it (\(error)); create the keys "
                    + "\"\(labels.device)\" and \"\(labels.passcode)\" beforehand with the token's own tool "
                    + "(docs/PKCS11.md)"
            )
        } catch {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "cannot generate device key \"\(label)\" on token \"\(tokenLabel)\": \(error)"
            )
        }
        return handle
    }

    // MARK: Sealing (format 2)

    /// The domain and the key of a role.
    private func hmacKey(_ role: PKCS11DeviceKey.Role, creating: Bool) throws(KeychainError) -> (TokenKey, [UInt8]) {
        if deviceKey == nil && passcodeKey == nil {
            guard creating, legacyKey != nil else { throw keysMissing() }
            // A store provisioned in format 1: its keys for format 2 take the old key's id, so its identity stays.
            try generateHMACKeys(id: legacyKey?.id ?? randomBytes(16))
        }
        switch role {
        case .device: return (deviceKey!, PKCS11DeviceKey.deviceDomain)
        case .passcode: return (passcodeKey!, PKCS11DeviceKey.passcodeDomain)
        case .legacy: preconditionFailure("format-1 keys do not seal in format 2")
        }
    }

    /// W = HMAC-SHA256_token(key, domain ‖ salt ‖ authorization), computed inside the token.
    private func wrappingKey(
        _ key: TokenKey,
        domain: [UInt8],
        salt: [UInt8],
        authorization: SecretBytes?
    )
        throws(KeychainError) -> SymmetricKey
    {
        var parts = [SecretBytes(copying: domain), SecretBytes(copying: salt)]
        if let authorization { parts.append(authorization) }
        let message = SecretBytes.concatenating(parts)
        let session = self.session
        let functions = self.functions
        var failure: PKCS11CallError?
        var length = CK_ULONG(32)
        let mac = SecretBytes(count: 32) { output in
            do throws(PKCS11CallError) {
                var mechanism = CK_MECHANISM(
                    mechanism: CK_MECHANISM_TYPE(CKM_SHA256_HMAC),
                    pParameter: nil,
                    ulParameterLen: 0
                )
                try ck("C_SignInit", functions.C_SignInit!(session, &mechanism, key.handle))
                let rv = message.withUnsafeBytes { bytes in
                    functions.C_Sign!(
                        session,
                        UnsafeMutablePointer(mutating: bytes.bindMemory(to: UInt8.self).baseAddress),
                        CK_ULONG(bytes.count),
                        output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        &length
                    )
                }
                try ck("C_Sign", rv)
            } catch {
                failure = error
            }
        }
        if let failure { throw self.failure(failure, sealing: true) }
        guard length == 32 else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "token \"\(tokenLabel)\" returned a \(length)-byte HMAC-SHA256"
            )
        }
        return mac.withUnsafeBytes { SymmetricKey(data: $0) }
    }

    func seal(
        _ secret: SecretBytes,
        role: PKCS11DeviceKey.Role,
        authorization: SecretBytes?
    ) throws(KeychainError)
        -> Data
    {
        let (key, domain) = try hmacKey(role, creating: true)
        let salt = randomBytes(PKCS11DeviceKey.saltLength)
        let wrapping = try wrappingKey(key, domain: domain, salt: salt, authorization: authorization)
        let aad = [PKCS11DeviceKey.blobVersion] + domain + salt
        do {
            let box = try secret.withUnsafeBytes { plaintext in
                try AES.GCM.seal(plaintext, using: wrapping, nonce: AES.GCM.Nonce(), authenticating: aad)
            }
            return Data([PKCS11DeviceKey.blobVersion] + salt) + box.nonce + box.ciphertext + box.tag
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "sealing under the token's key failed")
        }
    }

    func unseal(
        _ blob: Data,
        role: PKCS11DeviceKey.Role,
        authorization: SecretBytes?,
        badTag: OSStatus
    )
        throws(KeychainError) -> SecretBytes
    {
        let bytes = [UInt8](blob)
        let header = 1 + PKCS11DeviceKey.saltLength + PKCS11DeviceKey.nonceLength
        guard bytes.count >= header + PKCS11DeviceKey.tagLength else {
            throw KeychainError(KeychainStatus.decode, "the sealed blob is too short to come from a PKCS#11 token")
        }
        guard bytes[0] == PKCS11DeviceKey.blobVersion else {
            throw KeychainError(KeychainStatus.decode, "the sealed blob has an unknown version \(bytes[0])")
        }
        let (key, domain) = try hmacKey(role, creating: false)
        let salt = Array(bytes[1..<(1 + PKCS11DeviceKey.saltLength)])
        let wrapping = try wrappingKey(key, domain: domain, salt: salt, authorization: authorization)
        let aad = [PKCS11DeviceKey.blobVersion] + domain + salt
        var plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: bytes[(1 + PKCS11DeviceKey.saltLength)..<header]),
                ciphertext: bytes[header..<(bytes.count - PKCS11DeviceKey.tagLength)],
                tag: bytes[(bytes.count - PKCS11DeviceKey.tagLength)...]
            )
            plaintext = try AES.GCM.open(box, using: wrapping, authenticating: aad)
        } catch {
            throw KeychainError(
                badTag,
                badTag == KeychainStatus.authFailed
                    ? "the passcode authorization does not open this sealed blob"
                    : "the sealed blob does not authenticate under device key \"\(labels.device)\" of token "
                        + "\"\(tokenLabel)\" (edited, or sealed by another token or key)"
            )
        }
        defer { plaintext.resetBytes(in: 0..<plaintext.count) }
        return SecretBytes(copying: plaintext)
    }

    // MARK: Sealing (format 1: opened to migrate; sealed only by tests)

    func legacySeal(_ secret: SecretBytes, aad: SecretBytes) throws(KeychainError) -> Data {
        let key = try handle(.legacy)
        let iv = randomBytes(PKCS11DeviceKey.ivLength)
        var output = [UInt8](repeating: 0, count: secret.count + PKCS11DeviceKey.tagLength)
        var outputLength = CK_ULONG(output.count)
        let session = self.session
        let functions = self.functions
        do {
            try withGCM(iv: iv, aad: aad) { (mechanism) throws(PKCS11CallError) in
                try ck("C_EncryptInit", functions.C_EncryptInit!(session, mechanism, key))
                let rv = secret.withUnsafeBytes { plaintext in
                    output.withUnsafeMutableBufferPointer { buffer in
                        functions.C_Encrypt!(
                            session,
                            UnsafeMutablePointer(mutating: plaintext.bindMemory(to: UInt8.self).baseAddress),
                            CK_ULONG(plaintext.count),
                            buffer.baseAddress,
                            &outputLength
                        )
                    }
                }
                try ck("C_Encrypt", rv)
            }
        } catch {
            throw failure(error, sealing: true)
        }
        return Data([PKCS11DeviceKey.legacyBlobVersion] + iv + output.prefix(Int(outputLength)))
    }

    func legacyUnseal(_ blob: Data, aad: SecretBytes, badTag: OSStatus) throws(KeychainError) -> SecretBytes {
        let bytes = [UInt8](blob)
        let header = 1 + PKCS11DeviceKey.ivLength
        guard bytes.count >= header + PKCS11DeviceKey.tagLength else {
            throw KeychainError(KeychainStatus.decode, "the sealed blob is too short to come from a PKCS#11 token")
        }
        guard legacyKey != nil else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "this store was sealed in format 1 by device key \"\(labels.legacy)\", which is not on token "
                    + "\"\(tokenLabel)\" (removed?)"
            )
        }
        let key = try handle(.legacy)
        let iv = Array(bytes[1..<header])
        var ciphertext = Array(bytes[header...])
        var outputLength = CK_ULONG(ciphertext.count)
        let session = self.session
        let functions = self.functions
        var failure: PKCS11CallError?
        let padded = SecretBytes(count: ciphertext.count) { output in
            do throws(PKCS11CallError) {
                try withGCM(iv: iv, aad: aad) { (mechanism) throws(PKCS11CallError) in
                    try ck("C_DecryptInit", functions.C_DecryptInit!(session, mechanism, key))
                    try ck(
                        "C_Decrypt",
                        functions.C_Decrypt!(
                            session,
                            &ciphertext,
                            CK_ULONG(ciphertext.count),
                            output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                            &outputLength
                        )
                    )
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
                        : "the sealed blob does not authenticate under device key \"\(labels.legacy)\" of token "
                            + "\"\(tokenLabel)\" (edited, or sealed by another token or key)"
                )
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
                "the device key was removed from the token \"\(tokenLabel)\" (\(error))"
            )
        }
        if error.result.meansTokenGone {
            return KeychainError(
                KeychainStatus.notAvailable,
                "the token \"\(tokenLabel)\" is no longer available (removed, or logged out): \(error)"
            )
        }
        return KeychainError(
            KeychainStatus.notAvailable,
            "\(sealing ? "sealing" : "unsealing") with token \"\(tokenLabel)\" failed: \(error)"
        )
    }

    // MARK: Inspection

    func keyAttributes(_ role: PKCS11DeviceKey.Role) throws(KeychainError) -> PKCS11DeviceKey.KeyAttributes {
        try keyAttributes(handle(role))
    }

    private func keyAttributes(_ handle: CK_OBJECT_HANDLE) throws(KeychainError) -> PKCS11DeviceKey.KeyAttributes {
        func flag(_ type: UInt) throws(PKCS11CallError) -> Bool? {
            try attribute(CK_ATTRIBUTE_TYPE(type), of: handle).map { $0.first.map { $0 != 0 } ?? false }
        }
        func ulong(_ bytes: [UInt8]?) -> UInt? {
            guard let bytes, bytes.count == MemoryLayout<CK_ULONG>.size else { return nil }
            return UInt(bytes.withUnsafeBytes { $0.loadUnaligned(as: CK_ULONG.self) })
        }
        do {
            var allowed: [UInt]?
            if let bytes = try attribute(CK_ATTRIBUTE_TYPE(CKA_ALLOWED_MECHANISMS), of: handle) {
                let width = MemoryLayout<CK_MECHANISM_TYPE>.size
                allowed = stride(from: 0, to: bytes.count - bytes.count % width, by: width).map { offset in
                    UInt(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: CK_MECHANISM_TYPE.self) })
                }
            }
            return PKCS11DeviceKey.KeyAttributes(
                keyType: ulong(try attribute(CK_ATTRIBUTE_TYPE(CKA_KEY_TYPE), of: handle)),
                token: try flag(CKA_TOKEN),
                isPrivate: try flag(CKA_PRIVATE),
                sensitive: try flag(CKA_SENSITIVE),
                extractable: try flag(CKA_EXTRACTABLE),
                alwaysSensitive: try flag(CKA_ALWAYS_SENSITIVE),
                neverExtractable: try flag(CKA_NEVER_EXTRACTABLE),
                encrypt: try flag(CKA_ENCRYPT),
                decrypt: try flag(CKA_DECRYPT),
                sign: try flag(CKA_SIGN),
                verify: try flag(CKA_VERIFY),
                wrap: try flag(CKA_WRAP),
                unwrap: try flag(CKA_UNWRAP),
                derive: try flag(CKA_DERIVE),
                valueLength: ulong(try attribute(CK_ATTRIBUTE_TYPE(CKA_VALUE_LEN), of: handle)).map { Int($0) },
                allowedMechanisms: allowed
            )
        } catch {
            throw failure(error, sealing: false)
        }
    }

    func destroyKey(_ role: PKCS11DeviceKey.Role) throws(KeychainError) {
        let handle = try handle(role)
        do {
            try ck("C_DestroyObject", functions.C_DestroyObject!(session, handle))
        } catch {
            throw failure(error, sealing: false)
        }
        switch role {
        case .device: deviceKey?.handle = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
        case .passcode: passcodeKey?.handle = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
        case .legacy: legacyKey = nil
        }
    }

    /// The value of one attribute of an object, or nil where the token has none or keeps it secret.
    private func attribute(_ type: CK_ATTRIBUTE_TYPE, of handle: CK_OBJECT_HANDLE) throws(PKCS11CallError) -> [UInt8]? {
        var probe = CK_ATTRIBUTE(type: type, pValue: nil, ulValueLen: 0)
        let rv = functions.C_GetAttributeValue!(session, handle, &probe, 1)
        let result = CKResult(rawValue: UInt(rv))
        if result == .attributeTypeInvalid || result == .attributeSensitive { return nil }
        try ck("C_GetAttributeValue", rv)
        guard probe.ulValueLen != CK_ULONG.max else { return nil }
        var value = [UInt8](repeating: 0, count: Int(probe.ulValueLen))
        let session = self.session
        let functions = self.functions
        let valueRV = value.withUnsafeMutableBytes { buffer in
            var attribute = CK_ATTRIBUTE(type: type, pValue: buffer.baseAddress, ulValueLen: CK_ULONG(buffer.count))
            return functions.C_GetAttributeValue!(session, handle, &attribute, 1)
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
            let loginKey = self.loginKey
            logins.withLock { logins in
                let remaining = (logins[loginKey]?.connections ?? 1) - 1
                if remaining <= 0 {
                    logins[loginKey] = nil
                    _ = functions.C_Logout!(session)
                } else {
                    logins[loginKey]?.connections = remaining
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
    iv: [UInt8],
    aad: SecretBytes,
    _ body: (UnsafeMutablePointer<CK_MECHANISM>) throws(PKCS11CallError) -> Result
) throws(PKCS11CallError) -> Result {
    let outcome = iv.withUnsafeBufferPointer { ivBuffer in
        aad.withUnsafeBytes { aadBytes in
            Swift.Result { () throws(PKCS11CallError) -> Result in
                var parameters = CK_GCM_PARAMS(
                    pIv: UnsafeMutablePointer(mutating: ivBuffer.baseAddress),
                    ulIvLen: CK_ULONG(ivBuffer.count),
                    ulIvBits: CK_ULONG(ivBuffer.count * 8),
                    pAAD: UnsafeMutablePointer(mutating: aadBytes.bindMemory(to: UInt8.self).baseAddress),
                    ulAADLen: CK_ULONG(aadBytes.count),
                    ulTagBits: CK_ULONG(PKCS11DeviceKey.tagLength * 8)
                )
                return try withUnsafeMutablePointer(to: &parameters) { (parameters) throws(PKCS11CallError) -> Result in
                    var mechanism = CK_MECHANISM(
                        mechanism: CK_MECHANISM_TYPE(CKM_AES_GCM),
                        pParameter: UnsafeMutableRawPointer(parameters),
                        ulParameterLen: CK_ULONG(MemoryLayout<CK_GCM_PARAMS>.size)
                    )
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

// MARK: - Key pairs on the token

/// P-256 key pairs generated by the token: `C_GenerateKeyPair(CKM_EC_KEY_PAIR_GEN)`, the private key a token object
/// that is private, sensitive and non-extractable, usable for `CKM_ECDSA` and `CKM_ECDH1_DERIVE`; the public key a
/// token object beside it. Both carry a random 16-byte `CKA_ID`; the blob is `"KSPK"` ‖ that id.
///
/// The token gates nothing by `authorization`: a key is usable by anyone logged in to the token (anyone with the
/// PIN, and root), whether or not the store is locked. keyseald is the only gate (docs/PKCS11.md).
extension PKCS11DeviceKey: HardwareKeyProvider {
    static let keyBlobMagic = Array("KSPK".utf8)
    static let keyIDLength = 16
    /// `CKA_EC_PARAMS` of NIST P-256: the DER OID 1.2.840.10045.3.1.7.
    static let p256Parameters: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]

    /// The label given to generated key objects: `<keyLabel>.hardware-key`.
    public var hardwareKeyLabel: String { "\(keyLabel).hardware-key" }

    public func generateP256Key(authorization: SecretBytes) throws -> HardwareKeyBlob {
        let label = hardwareKeyLabel
        return try withConnection { connection throws(KeychainError) in
            let id = randomBytes(Self.keyIDLength)
            let point = try connection.generateKeyPair(id: id, label: label)
            return HardwareKeyBlob(blob: Data(Self.keyBlobMagic + id), publicKey: Data(point))
        }
    }

    /// `CKM_ECDSA` on the digest brought to 32 bytes as ECDSA on P-256 uses it (a shorter digest left-padded with
    /// zeros, a longer one cut to its leftmost 256 bits), the token's raw r ‖ s turned into DER.
    public func sign(digest: [UInt8], keyBlob: Data, authorization: SecretBytes) throws -> Data {
        guard (20...64).contains(digest.count) else {
            throw KeychainError(KeychainStatus.param, "a digest to sign is 20 to 64 bytes, not \(digest.count)")
        }
        let digest =
            digest.count >= 32 ? Array(digest.prefix(32)) : [UInt8](repeating: 0, count: 32 - digest.count) + digest
        let id = try Self.keyID(keyBlob)
        let rs = try withConnection { connection throws(KeychainError) in try connection.signECDSA(digest, id: id) }
        do {
            return try P256.Signing.ECDSASignature(rawRepresentation: rs).derRepresentation
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "the token returned a malformed ECDSA signature")
        }
    }

    /// `C_DeriveKey(CKM_ECDH1_DERIVE, CKD_NULL)` into a session object read once and destroyed at once.
    public func keyExchange(peerPublicKey: Data, keyBlob: Data, authorization: SecretBytes) throws -> SecretBytes {
        guard peerPublicKey.count == 65, peerPublicKey.first == 0x04,
            (try? P256.KeyAgreement.PublicKey(x963Representation: peerPublicKey)) != nil
        else {
            throw KeychainError(
                KeychainStatus.param,
                "the peer's public key is not an uncompressed P-256 point (04 ‖ X ‖ Y, 65 bytes)"
            )
        }
        let id = try Self.keyID(keyBlob)
        let peer = [UInt8](peerPublicKey)
        return try withConnection { connection throws(KeychainError) in try connection.deriveECDH(peer, id: id) }
    }

    /// Destroys the private and the public key object; a key already gone is not an error.
    public func deleteKey(keyBlob: Data) throws {
        let id = try Self.keyID(keyBlob)
        try withConnection { connection throws(KeychainError) in try connection.destroyKeyPair(id: id) }
    }

    /// Whether the token holds a key pair object with this blob's id, and the private key's protection attributes.
    func hardwareKeyAttributes(_ keyBlob: Data) throws -> KeyAttributes {
        let id = try Self.keyID(keyBlob)
        return try withConnection { connection throws(KeychainError) in try connection.hardwareKeyAttributes(id: id) }
    }

    static func keyID(_ blob: Data) throws(KeychainError) -> [UInt8] {
        let bytes = [UInt8](blob)
        guard bytes.count == keyBlobMagic.count + keyIDLength, Array(bytes.prefix(keyBlobMagic.count)) == keyBlobMagic
        else {
            throw KeychainError(KeychainStatus.decode, "the key blob is not a Keyseal PKCS#11 key blob")
        }
        return Array(bytes.dropFirst(keyBlobMagic.count))
    }
}

extension Connection {
    /// Generates the pair; returns the public point `04 ‖ X ‖ Y`. A pair whose point cannot be read is destroyed.
    func generateKeyPair(id: [UInt8], label: String) throws(KeychainError) -> [UInt8] {
        let publicTemplate: [Attribute] = [
            .ulong(CKA_CLASS, CKO_PUBLIC_KEY),
            .ulong(CKA_KEY_TYPE, CKK_EC),
            .bool(CKA_TOKEN, true),
            // CKA_VERIFY left to the token: tpm2-pkcs11 derives it and refuses a template that names it.
            .bytes(CKA_EC_PARAMS, PKCS11DeviceKey.p256Parameters),
            .bytes(CKA_LABEL, Array(label.utf8)),
            .bytes(CKA_ID, id),
        ]
        let privateTemplate: [Attribute] = [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY),
            .ulong(CKA_KEY_TYPE, CKK_EC),
            .bool(CKA_TOKEN, true),
            .bool(CKA_PRIVATE, true),
            .bool(CKA_SENSITIVE, true),
            .bool(CKA_EXTRACTABLE, false),
            .bool(CKA_SIGN, true),
            .bool(CKA_DERIVE, true),
            .bool(CKA_DECRYPT, false),
            .bool(CKA_UNWRAP, false),
            .bytes(CKA_LABEL, Array(label.utf8)),
            .bytes(CKA_ID, id),
        ]
        let session = self.session
        let functions = self.functions
        var publicKey = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
        var privateKey = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
        do {
            try withTemplate(publicTemplate) { (publicPointer, publicCount) throws(PKCS11CallError) in
                try withTemplate(privateTemplate) { (privatePointer, privateCount) throws(PKCS11CallError) in
                    var mechanism = CK_MECHANISM(
                        mechanism: CK_MECHANISM_TYPE(CKM_EC_KEY_PAIR_GEN),
                        pParameter: nil,
                        ulParameterLen: 0
                    )
                    try ck(
                        "C_GenerateKeyPair",
                        functions.C_GenerateKeyPair!(
                            session,
                            &mechanism,
                            publicPointer,
                            publicCount,
                            privatePointer,
                            privateCount,
                            &publicKey,
                            &privateKey
                        )
                    )
                }
            }
        } catch {
            throw keyFailure(error, "cannot generate a P-256 key pair on")
        }
        let value: [UInt8]?
        do {
            value = try attribute(CK_ATTRIBUTE_TYPE(CKA_EC_POINT), of: publicKey)
        } catch {
            _ = functions.C_DestroyObject!(session, privateKey)
            _ = functions.C_DestroyObject!(session, publicKey)
            throw keyFailure(error, "cannot read the public key from")
        }
        guard let point = Self.uncompressedPoint(value) else {
            _ = functions.C_DestroyObject!(session, privateKey)
            _ = functions.C_DestroyObject!(session, publicKey)
            throw KeychainError(
                KeychainStatus.internalComponent,
                "token \"\(tokenLabel)\" returned no P-256 public point"
            )
        }
        return point
    }

    /// `04 ‖ X ‖ Y` from a `CKA_EC_POINT`: DER-wrapped in an OCTET STRING (PKCS#11 2.40), or raw (some tokens).
    static func uncompressedPoint(_ value: [UInt8]?) -> [UInt8]? {
        guard let value else { return nil }
        if value.count == 67, value[0] == 0x04, value[1] == 0x41, value[2] == 0x04 { return Array(value.dropFirst(2)) }
        if value.count == 65, value[0] == 0x04 { return value }
        return nil
    }

    /// The objects of class `objectClass` whose `CKA_ID` is `id`.
    private func keyObjects(_ objectClass: UInt, id: [UInt8]) throws(KeychainError) -> [CK_OBJECT_HANDLE] {
        do {
            return try findObjects([
                .ulong(CKA_CLASS, objectClass), .ulong(CKA_KEY_TYPE, CKK_EC), .bytes(CKA_ID, id),
            ])
        } catch {
            throw keyFailure(error, "cannot search for the key on")
        }
    }

    /// The private key of a blob; none is `errSecDecode` (a blob of another token, or a key deleted).
    private func privateKey(id: [UInt8]) throws(KeychainError) -> CK_OBJECT_HANDLE {
        if let handle = hardwareKeyHandles[id] { return handle }
        let found = try keyObjects(CKO_PRIVATE_KEY, id: id)
        guard found.count == 1 else {
            throw KeychainError(
                KeychainStatus.decode,
                found.isEmpty
                    ? "token \"\(tokenLabel)\" holds no private key with this key's id (another token's key, or deleted)"
                    : "token \"\(tokenLabel)\" holds \(found.count) private keys with this key's id"
            )
        }
        if hardwareKeyHandles.count >= 64 { hardwareKeyHandles.removeAll() }
        hardwareKeyHandles[id] = found[0]
        return found[0]
    }

    /// Runs `body` with the private key of `id`; when a remembered handle is no longer valid (the object was
    /// destroyed through another session), looks the key up again once.
    private func withPrivateKey<Result>(
        id: [UInt8],
        _ body: (CK_OBJECT_HANDLE) throws(PKCS11CallError) -> Result,
        failure what: String
    ) throws(KeychainError) -> Result {
        let remembered = hardwareKeyHandles[id] != nil
        let key = try privateKey(id: id)
        do {
            return try body(key)
        } catch  where remembered && (error.result == .keyHandleInvalid || error.result == .objectHandleInvalid) {
            hardwareKeyHandles[id] = nil
            let again = try privateKey(id: id)
            do {
                return try body(again)
            } catch {
                throw keyFailure(error, what)
            }
        } catch {
            throw keyFailure(error, what)
        }
    }

    /// `CKM_ECDSA` over a 32-byte digest: r ‖ s, 64 bytes.
    func signECDSA(_ digest: [UInt8], id: [UInt8]) throws(KeychainError) -> [UInt8] {
        let session = self.session
        let functions = self.functions
        var signature = [UInt8](repeating: 0, count: 64)
        var length = CK_ULONG(signature.count)
        var input = digest
        try withPrivateKey(
            id: id,
            { (key) throws(PKCS11CallError) in
                var mechanism = CK_MECHANISM(
                    mechanism: CK_MECHANISM_TYPE(CKM_ECDSA),
                    pParameter: nil,
                    ulParameterLen: 0
                )
                try ck("C_SignInit", functions.C_SignInit!(session, &mechanism, key))
                length = CK_ULONG(signature.count)
                try ck("C_Sign", functions.C_Sign!(session, &input, CK_ULONG(input.count), &signature, &length))
            },
            failure: "cannot sign with the key on"
        )
        guard length == 64 else {
            throw KeychainError(
                KeychainStatus.internalComponent,
                "token \"\(tokenLabel)\" returned a \(length)-byte P-256 signature"
            )
        }
        return signature
    }

    /// ECDH: the shared x-coordinate, derived into a non-sensitive, extractable session object that is read and
    /// destroyed at once.
    func deriveECDH(_ peer: [UInt8], id: [UInt8]) throws(KeychainError) -> SecretBytes {
        let key = try privateKey(id: id)
        let session = self.session
        let functions = self.functions
        let template: [Attribute] = [
            .ulong(CKA_CLASS, CKO_SECRET_KEY),
            .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET),
            .ulong(CKA_VALUE_LEN, 32),
            .bool(CKA_TOKEN, false),
            .bool(CKA_SENSITIVE, false),
            .bool(CKA_EXTRACTABLE, true),
        ]
        var derived = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
        var publicData = peer
        var failure: PKCS11CallError?
        publicData.withUnsafeMutableBufferPointer { buffer in
            var parameters = CK_ECDH1_DERIVE_PARAMS(
                kdf: ck_ec_kdf_t(CKD_NULL),
                ulSharedDataLen: 0,
                pSharedData: nil,
                ulPublicDataLen: CK_ULONG(buffer.count),
                pPublicData: buffer.baseAddress
            )
            withUnsafeMutablePointer(to: &parameters) { parameters in
                var mechanism = CK_MECHANISM(
                    mechanism: CK_MECHANISM_TYPE(CKM_ECDH1_DERIVE),
                    pParameter: UnsafeMutableRawPointer(parameters),
                    ulParameterLen: CK_ULONG(MemoryLayout<CK_ECDH1_DERIVE_PARAMS>.size)
                )
                do throws(PKCS11CallError) {
                    try withTemplate(template) { (pointer, count) throws(PKCS11CallError) in
                        try ck(
                            "C_DeriveKey",
                            functions.C_DeriveKey!(session, &mechanism, key, pointer, count, &derived)
                        )
                    }
                } catch {
                    failure = error
                }
            }
        }
        if let failure { throw keyFailure(failure, "cannot derive an ECDH secret with the key on") }
        defer { _ = functions.C_DestroyObject!(session, derived) }
        var length = CK_ULONG(32)
        var rv = CK_RV(CKR_OK)
        let z = SecretBytes(count: 32) { output in
            var attribute = CK_ATTRIBUTE(
                type: CK_ATTRIBUTE_TYPE(CKA_VALUE),
                pValue: output.baseAddress,
                ulValueLen: CK_ULONG(output.count)
            )
            rv = functions.C_GetAttributeValue!(session, derived, &attribute, 1)
            length = attribute.ulValueLen
        }
        do {
            try ck("C_GetAttributeValue", rv)
        } catch {
            throw keyFailure(error, "cannot read the ECDH secret from")
        }
        guard length == 32 else {
            throw KeychainError(
                KeychainStatus.internalComponent,
                "token \"\(tokenLabel)\" derived a \(length)-byte ECDH secret"
            )
        }
        return z
    }

    /// Destroys the private and public key objects with this id.
    func destroyKeyPair(id: [UInt8]) throws(KeychainError) {
        hardwareKeyHandles[id] = nil
        let objects = try keyObjects(CKO_PRIVATE_KEY, id: id) + keyObjects(CKO_PUBLIC_KEY, id: id)
        for object in objects {
            do {
                try ck("C_DestroyObject", functions.C_DestroyObject!(session, object))
            } catch {
                throw keyFailure(error, "cannot delete the key from")
            }
        }
    }

    func hardwareKeyAttributes(id: [UInt8]) throws(KeychainError) -> PKCS11DeviceKey.KeyAttributes {
        try keyAttributes(privateKey(id: id))
    }

    private func keyFailure(_ error: PKCS11CallError, _ what: String) -> KeychainError {
        if error.result.meansTokenGone {
            return KeychainError(
                KeychainStatus.notAvailable,
                "the token \"\(tokenLabel)\" is no longer available (removed, or logged out): \(error)"
            )
        }
        if error.result == .mechanismInvalid || error.result == .functionNotSupported {
            return KeychainError(KeychainStatus.unimplemented, "\(what) token \"\(tokenLabel)\": \(error)")
        }
        return KeychainError(KeychainStatus.internalComponent, "\(what) token \"\(tokenLabel)\": \(error)")
    }
}
