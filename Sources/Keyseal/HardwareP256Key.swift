import Crypto
import FoundationEssentials
import KeysealCore

/// A P-256 key generated inside the store's hardware (TPM or PKCS#11 token), shaped like CryptoKit's
/// `SecureEnclave.P256` keys: its public halves are swift-crypto types, and signing and key agreement happen in
/// the hardware, gated by the key's accessibility class (errSecInteractionNotAllowed while it is locked).
public struct HardwareP256Key: Sendable {
    public let store: KeychainStore
    public let reference: KeyReference
    public let publicKey: P256.Signing.PublicKey

    init(store: KeychainStore, description: KeyDescription) throws {
        self.store = store
        reference = description.reference
        do {
            publicKey = try P256.Signing.PublicKey(x963Representation: description.publicKey.bytes)
        } catch {
            throw KeychainError(KeychainStatus.param, "the key is not a P-256 key")
        }
    }

    /// The same key as a key-agreement public key.
    public var keyAgreementPublicKey: P256.KeyAgreement.PublicKey {
        // Both are the same point; this conversion cannot fail.
        try! P256.KeyAgreement.PublicKey(x963Representation: publicKey.x963Representation)
    }

    /// `kSecAttrApplicationLabel`: SHA-1 of the public key octets.
    public var applicationLabel: Data { Data(Insecure.SHA1.hash(data: publicKey.x963Representation)) }

    /// ECDSA with SHA-256 over `data`.
    public func signature<D: DataProtocol>(for data: D) throws -> P256.Signing.ECDSASignature {
        let der = try store.sign(reference, algorithm: "algid:sign:ECDSA:message-X962:SHA256", data: Data(data))
        return try P256.Signing.ECDSASignature(derRepresentation: der)
    }

    /// ECDSA over a digest the caller computed.
    public func signature<D: Digest>(for digest: D) throws -> P256.Signing.ECDSASignature {
        let bytes = digest.withUnsafeBytes { Data($0) }
        let der = try store.sign(reference, algorithm: "algid:sign:ECDSA:digest-X962", data: bytes)
        return try P256.Signing.ECDSASignature(derRepresentation: der)
    }

    /// ECDH with `peer`, in the hardware.
    /// An attestation that this key was generated in the TPM and cannot leave it: TPM2_Certify by the store's
    /// attestation key over `challenge`, as the WebAuthn "tpm" statement (CBOR) or, with `bindingProperties`, Keyseal's
    /// JSON document that also binds the item's accessibility class (docs/TPM.md, "Key attestation").
    public func attestation<D: DataProtocol>(challenge: D, bindingProperties: Bool = false) throws -> Data {
        try store.attest(reference, challenge: Data(challenge), format: bindingProperties ? "json" : "webauthn-tpm")
    }

    public func sharedSecret(with peer: P256.KeyAgreement.PublicKey) throws -> KeychainSharedSecret {
        KeychainSharedSecret(
            try store.keyExchange(reference, algorithm: "algid:keyexchange:ECDH", peer: peer.x963Representation)
        )
    }
}

/// An ECDH shared secret (the point's x-coordinate), with swift-crypto's `SharedSecret` derivations.
public struct KeychainSharedSecret: Sendable {
    public let secret: SecretBytes

    public init(_ secret: SecretBytes) { self.secret = secret }

    public func hkdfDerivedSymmetricKey<H: HashFunction>(
        using hash: H.Type,
        salt: some DataProtocol,
        sharedInfo: some DataProtocol,
        outputByteCount: Int
    ) -> SymmetricKey {
        let key = secret.withUnsafeBytes { SymmetricKey(data: $0) }
        return HKDF<H>.deriveKey(inputKeyMaterial: key, salt: salt, info: sharedInfo, outputByteCount: outputByteCount)
    }

    /// ANSI X9.63 with SHA-256, as swift-crypto's `x963DerivedSymmetricKey(using: SHA256.self, …)`.
    public func x963DerivedSymmetricKey(sharedInfo: Data, outputByteCount: Int) -> SymmetricKey {
        KeyAlgorithms.x963KDF(shared: secret, sharedInfo: sharedInfo, size: outputByteCount, hash: .sha256)
            .withUnsafeBytes { SymmetricKey(data: $0) }
    }
}

extension KeychainStore {
    /// Generates a P-256 key in the store's hardware and stores it as a private key item under `tag`.
    public func generateHardwareP256Key(
        tag: Data,
        label: String? = nil,
        accessibility: Accessibility = .whenUnlockedThisDeviceOnly,
        accessGroup: String? = nil
    ) throws -> HardwareP256Key {
        var attributes: [String: AttributeValue] = [AttributeKey.applicationTag: .data(tag)]
        if let label { attributes[AttributeKey.label] = .string(label) }
        let description = try generateKey(
            KeyGenerationRequest(
                keyType: .p256,
                inHardware: true,
                attributes: attributes,
                accessGroup: accessGroup,
                accessibility: accessibility
            )
        )
        return try HardwareP256Key(store: self, description: description)
    }

    /// The hardware keys stored under `tag`, in the order they were added.
    public func hardwareP256Keys(tag: Data) throws -> [HardwareP256Key] {
        let query = ItemQuery(
            itemClass: .key,
            attributes: [AttributeKey.applicationTag: .data(tag), AttributeKey.tokenID: .string("com.apple.setoken")],
            synchronizable: .any,
            limit: .all,
            returns: [.persistentRef]
        )
        let records: [ItemRecord]
        do {
            records = try copyMatching(query)
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
            return []
        }
        return try records.compactMap { record in
            guard let reference = record.persistentRef else { return nil }
            return try HardwareP256Key(store: self, description: describeKey(.item(reference)))
        }
    }

    /// A hardware key by its item's persistent reference.
    public func hardwareP256Key(_ reference: KeyReference) throws -> HardwareP256Key {
        try HardwareP256Key(store: self, description: describeKey(reference))
    }
}
