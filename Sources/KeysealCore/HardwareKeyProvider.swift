import struct FoundationEssentials.Data

/// A key pair generated inside the device key's hardware (Apple's `kSecAttrTokenIDSecureEnclave`): NIST P-256
/// only, its private part never outside the hardware.
public struct HardwareKeyBlob: Sendable, Equatable {
    /// What the hardware returns to hold the key (a TPM's `TPM2B_PUBLIC`‖`TPM2B_PRIVATE` under the storage
    /// primary; a token object's `CKA_ID`). Opaque to the engine, stored sealed with the item.
    public var blob: Data
    /// The public key in X9.63 form, `04 ‖ X ‖ Y` (65 bytes).
    public var publicKey: Data

    public init(blob: Data, publicKey: Data) {
        self.blob = blob
        self.publicKey = publicKey
    }
}

/// Private-key operations inside the hardware that holds the device key.
///
/// `authorization` is 32 bytes the engine derives from a per-key seed wrapped by the item's class key, so that
/// a key cannot be used while its class is locked. A TPM makes it the key's authValue (`noDA`, so a client's
/// mistakes never count against the dictionary-attack limit); a PKCS#11 token, whose keys are gated by the
/// daemon only, may ignore it.
///
/// Called like ``DeviceKeyProvider``: under the engine's lock, one thread at a time. Errors are
/// ``KeychainError``s: a wrong authorization `errSecAuthFailed`, a blob from other hardware or edited
/// `errSecDecode`, bad input `errSecParam`, hardware unreachable `errSecNotAvailable`.
public protocol HardwareKeyProvider: AnyObject {
    /// Generates a P-256 key pair inside the hardware, usable for signing and for ECDH.
    func generateP256Key(authorization: SecretBytes) throws -> HardwareKeyBlob

    /// ECDSA over `digest` (the caller hashes; 20 to 64 bytes), as an X9.62 DER `SEQUENCE { r, s }`.
    func sign(digest: [UInt8], keyBlob: Data, authorization: SecretBytes) throws -> Data

    /// ECDH with the peer's X9.63 public key: the shared point's x-coordinate (32 bytes).
    func keyExchange(peerPublicKey: Data, keyBlob: Data, authorization: SecretBytes) throws -> SecretBytes

    /// Removes what the hardware itself holds for the key (a token object). A TPM key lives only in its blob,
    /// so there this does nothing.
    func deleteKey(keyBlob: Data) throws

    /// Drops what the hardware's library holds of keys' authorizations between operations (a TPM session through
    /// which a key's authValue was used keeps it in tpm2-tss's record of the session). Called when classes lock.
    func forgetKeyAuthorizations()
}

extension HardwareKeyProvider {
    public func forgetKeyAuthorizations() {}
}

extension DeviceKeyProvider {
    /// The hardware's key operations, or nil where the backend has none (the host key file): a request for a
    /// hardware key there is errSecUnimplemented, never a software key.
    public var hardwareKeys: (any HardwareKeyProvider)? { self as? any HardwareKeyProvider }
}
