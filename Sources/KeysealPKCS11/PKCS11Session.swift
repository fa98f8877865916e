internal import CP11Kit
internal import Crypto
import FoundationEssentials
import KeysealCore
import Synchronization

/// The labels of a device key's token objects.
struct KeyLabels {
    var legacy: String
    var device: String
    var passcode: String
}

/// Per-process login bookkeeping. PKCS#11 login state belongs to the application and the token, not to a
/// session: every session of this process on a token shares it, and one C_Logout logs all of them out. Each
/// open connection counts itself here; the last one to close logs out. A record is keyed by the module, the slot,
/// the token's label and its serial number: tpm2-pkcs11 gives every token the same serial number
/// (`0000000000000000`), so the serial alone would let one token's login stand for another's.
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

/// One open token session with the device keys found: the only owner of the module and session handles, and the
/// only caller of the module's `C_*` functions besides ``PKCS11Module`` (which initializes and finalizes it).
///
/// Not thread-safe: ``PKCS11DeviceKey`` reaches it only under its lock. Sealing is in PKCS11Session+Sealing.swift,
/// the hardware key pairs in PKCS11Session+KeyPairs.swift, the attribute templates in PKCS11Templates.swift.
final class PKCS11Session {
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
        loginKey = [
            URL(fileURLWithPath: resolved).resolvingSymlinksInPath().path, String(slot), tokenLabel.trimmed(),
            tokenSerial,
        ].joined(separator: "\u{0}")
        do {
            try openSession(pin: pin, pinFile: pinFile)
            try findKeys(provisioning: provisioning, legacy: legacy)
        } catch {
            close()
            throw error
        }
    }

    deinit { assert(closed, "PKCS11Session released without close()") }

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

    func keysMissing() -> KeychainError {
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
            handles = try findObjects(Templates.secretKey(label: label))
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

    func findObjects(_ template: [Attribute]) throws(PKCS11CallError) -> [CK_OBJECT_HANDLE] {
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
    func generateHMACKeys(id: [UInt8]) throws(KeychainError) {
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
        let template = Templates.hmacKey(label: label, id: id)
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
        let template = Templates.legacyKey(label: labels.legacy, id: id)
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

    func failure(_ error: PKCS11CallError, sealing: Bool) -> KeychainError {
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

    func keyAttributes(_ handle: CK_OBJECT_HANDLE) throws(KeychainError) -> PKCS11DeviceKey.KeyAttributes {
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
    func attribute(_ type: CK_ATTRIBUTE_TYPE, of handle: CK_OBJECT_HANDLE) throws(PKCS11CallError) -> [UInt8]? {
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

/// A fixed-width, space-padded PKCS#11 text field (label, serial number) without its padding.
private func paddedString<Field>(_ field: Field) -> String {
    withUnsafeBytes(of: field) { bytes in
        String(decoding: bytes, as: UTF8.self).trimmed { $0 == " " || $0 == "\0" }
    }
}
