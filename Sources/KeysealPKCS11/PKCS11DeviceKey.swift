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
        case open(PKCS11Session)
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
                    try PKCS11Session(
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
        try withSession { session throws(KeychainError) in try session.identity() }
    }

    /// A recorded identity is this token's when it names the token and either its format-2 keys or its format-1 key.
    public func acceptsIdentity(_ recorded: Data) throws -> Bool {
        try withSession { session throws(KeychainError) in session.identities().contains(recorded) }
    }

    public func seal(_ secret: SecretBytes) throws -> Data {
        try withSession { session throws(KeychainError) in
            if sealsLegacyFormat {
                return try session.legacySeal(secret, aad: SecretBytes(copying: Self.legacySealDomain))
            }
            return try session.seal(secret, role: .device, authorization: nil)
        }
    }

    public func unseal(_ blob: Data) throws -> SecretBytes {
        try withSession { session throws(KeychainError) in
            if blob.first == Self.legacyBlobVersion {
                return try session.legacyUnseal(
                    blob,
                    aad: SecretBytes(copying: Self.legacySealDomain),
                    badTag: KeychainStatus.decode
                )
            }
            return try session.unseal(blob, role: .device, authorization: nil, badTag: KeychainStatus.decode)
        }
    }

    /// Seals `secret` under `W = HMAC_token(K_pass, domain ‖ salt ‖ authorization)`: only the token computes W, and
    /// only for the right authorization, so each passcode guess costs a call into the token. The token does not
    /// count failures.
    public func sealWithPasscode(_ secret: SecretBytes, authorization: SecretBytes) throws -> Data {
        try withSession { session throws(KeychainError) in
            if sealsLegacyFormat {
                return try session.legacySeal(secret, aad: Self.legacyPasscodeAAD(authorization))
            }
            return try session.seal(secret, role: .passcode, authorization: authorization)
        }
    }

    /// Recovers a secret sealed by ``sealWithPasscode(_:authorization:)``. A wrong authorization gives
    /// `errSecAuthFailed` (the engine compares ``deviceIdentity()`` and authenticates the keybag first, so a foreign
    /// or edited blob never reaches this call); a malformed blob gives `errSecDecode`.
    public func unsealWithPasscode(_ blob: Data, authorization: SecretBytes) throws -> SecretBytes {
        try withSession { session throws(KeychainError) in
            if blob.first == Self.legacyBlobVersion {
                return try session.legacyUnseal(
                    blob,
                    aad: Self.legacyPasscodeAAD(authorization),
                    badTag: KeychainStatus.authFailed
                )
            }
            return try session.unseal(
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
        let legacy = (try? withSession { session throws(KeychainError) in session.legacyKey != nil }) ?? false
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
            if case .open(let session) = state { session.close() }
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
        try withSession { session throws(KeychainError) in try session.keyAttributes(role) }
    }

    /// Destroys one of the token's keys (C_DestroyObject). Every blob it sealed becomes unreadable.
    func destroyKey(_ role: Role = .device) throws {
        try withSession { session throws(KeychainError) in try session.destroyKey(role) }
    }

    /// Runs `body` with the raw session and a key's handle: for tests that attack the token as its PIN holder would.
    func withRawSession<Result>(
        _ role: Role,
        _ body: (CK_FUNCTION_LIST, CK_SESSION_HANDLE, CK_OBJECT_HANDLE) throws -> Result
    ) throws -> Result {
        try state.withLock { state in
            guard case .open(let session) = state else { throw Self.closedError }
            return try body(session.functions, session.session, try session.handle(role))
        }
    }

    // MARK: Private

    static let closedError = KeychainError(KeychainStatus.notAvailable, "the PKCS#11 device key is closed")

    private func withSession<Result: Sendable>(
        _ body: (PKCS11Session) throws(KeychainError) -> Result
    ) throws(KeychainError) -> Result {
        try state.withLock { (state: inout State) throws(KeychainError) -> Result in
            switch state {
            case .open(let session): return try body(session)
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
        return try withSession { session throws(KeychainError) in
            let id = randomBytes(Self.keyIDLength)
            let point = try session.generateKeyPair(id: id, label: label)
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
        let rs = try withSession { session throws(KeychainError) in try session.signECDSA(digest, id: id) }
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
        return try withSession { session throws(KeychainError) in try session.deriveECDH(peer, id: id) }
    }

    /// Destroys the private and the public key object; a key already gone is not an error.
    public func deleteKey(keyBlob: Data) throws {
        let id = try Self.keyID(keyBlob)
        try withSession { session throws(KeychainError) in try session.destroyKeyPair(id: id) }
    }

    /// Whether the token holds a key pair object with this blob's id, and the private key's protection attributes.
    func hardwareKeyAttributes(_ keyBlob: Data) throws -> KeyAttributes {
        let id = try Self.keyID(keyBlob)
        return try withSession { session throws(KeychainError) in try session.hardwareKeyAttributes(id: id) }
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
