import Crypto
import FoundationEssentials
import Keyseal
import KeysealCore
import SwiftASN1
import X509
import _CryptoExtras

/// A private key held by a ``Keyseal/KeychainStore`` — in its hardware or sealed in the store — as
/// swift-certificates' `CustomPrivateKey`: `Certificate.PrivateKey(key)` signs CSRs and certificates while the key
/// itself never leaves the store (or the TPM).
public struct KeychainPrivateKey: CustomPrivateKey {
    public let store: KeychainStore
    public let reference: KeyReference
    public let publicKeyMaterial: PublicKeyMaterial
    /// Whose groups and role the key's uses are checked against (keyseald: the peer's).
    let caller: Caller

    public init(store: KeychainStore, reference: KeyReference) throws {
        try self.init(store: store, reference: reference, caller: .owner)
    }

    package init(store: KeychainStore, reference: KeyReference, caller: Caller) throws {
        self.store = store
        self.reference = reference
        self.caller = caller
        publicKeyMaterial = try store.describeKey(reference, caller: caller).publicKey
    }

    public init(_ key: HardwareP256Key) throws {
        try self.init(store: key.store, reference: key.reference)
    }

    public var publicKey: Certificate.PublicKey {
        // The material was checked when it was read from the store: these conversions do not fail.
        switch publicKeyMaterial.keyType {
        case .ec(256): Certificate.PublicKey(try! P256.Signing.PublicKey(x963Representation: publicKeyMaterial.bytes))
        case .ec(384): Certificate.PublicKey(try! P384.Signing.PublicKey(x963Representation: publicKeyMaterial.bytes))
        case .ec(_): Certificate.PublicKey(try! P521.Signing.PublicKey(x963Representation: publicKeyMaterial.bytes))
        // `unsafeDERRepresentation`: swift-crypto's name for accepting the 1024-bit keys Apple still generates.
        case .rsa: Certificate.PublicKey(try! _RSA.Signing.PublicKey(unsafeDERRepresentation: publicKeyMaterial.bytes))
        }
    }

    public var defaultSignatureAlgorithm: Certificate.SignatureAlgorithm {
        switch publicKeyMaterial.keyType {
        case .ec(256): .ecdsaWithSHA256
        case .ec(384): .ecdsaWithSHA384
        case .ec: .ecdsaWithSHA512
        case .rsa: .sha256WithRSAEncryption
        }
    }

    public var supportedSignatureAlgorithms: [Certificate.SignatureAlgorithm] {
        publicKeyMaterial.keyType.isEC
            ? [.ecdsaWithSHA256, .ecdsaWithSHA384, .ecdsaWithSHA512]
            : [.sha256WithRSAEncryption, .sha384WithRSAEncryption, .sha512WithRSAEncryption]
    }

    public func signSynchronously(
        bytes: some DataProtocol,
        signatureAlgorithm: Certificate.SignatureAlgorithm
    ) throws -> Certificate.Signature {
        let algorithm: String
        switch signatureAlgorithm {
        case .ecdsaWithSHA256: algorithm = "algid:sign:ECDSA:message-X962:SHA256"
        case .ecdsaWithSHA384: algorithm = "algid:sign:ECDSA:message-X962:SHA384"
        case .ecdsaWithSHA512: algorithm = "algid:sign:ECDSA:message-X962:SHA512"
        case .sha256WithRSAEncryption: algorithm = "algid:sign:RSA:message-PKCS1v15:SHA256"
        case .sha384WithRSAEncryption: algorithm = "algid:sign:RSA:message-PKCS1v15:SHA384"
        case .sha512WithRSAEncryption: algorithm = "algid:sign:RSA:message-PKCS1v15:SHA512"
        default:
            throw KeychainError(KeychainStatus.param, "algorithm not supported by the key: \(signatureAlgorithm)")
        }
        let signature = try store.sign(reference, algorithm: algorithm, data: Data(bytes), caller: caller)
        return try Certificate.Signature(
            signatureAlgorithm: signatureAlgorithm,
            signatureBytes: ASN1BitString(bytes: ArraySlice(signature))
        )
    }

    public static let defaultPEMDiscriminator = "PRIVATE KEY"

    /// A key in the keychain has no serialization: its material stays in the store.
    public func serializeAsPEM(discriminator: String) throws -> PEMDocument {
        throw KeychainError(KeychainStatus.unimplemented, "a key in the keychain is not serialized")
    }

    public func serialize(into coder: inout DER.Serializer) throws {
        throw KeychainError(KeychainStatus.unimplemented, "a key in the keychain is not serialized")
    }

    public static func == (lhs: KeychainPrivateKey, rhs: KeychainPrivateKey) -> Bool {
        lhs.store === rhs.store && lhs.reference == rhs.reference
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(store))
        hasher.combine(reference)
    }
}

/// A certificate and the private key whose public key it certifies, in one access group.
public struct KeychainIdentity: Sendable {
    public let certificate: Certificate
    public let privateKey: KeychainPrivateKey
}

extension KeychainStore {
    /// Stores `certificate` (its attributes read from its DER); errSecDuplicateItem if its issuer and serial number
    /// are already stored in the group.
    public func addCertificate(
        _ certificate: Certificate,
        label: String? = nil,
        accessGroup: String? = nil,
        accessibility: Accessibility = .whenUnlocked
    ) throws {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        var attributes: [String: AttributeValue] = [:]
        if let label { attributes[AttributeKey.label] = .string(label) }
        _ = try add(
            NewItem(
                itemClass: .certificate,
                attributes: attributes,
                accessGroup: accessGroup,
                accessibility: accessibility,
                data: Data(serializer.serializedBytes)
            )
        )
    }

    /// The stored certificates, in the order they were added.
    public func certificates(accessGroup: String? = nil) throws -> [Certificate] {
        let query = ItemQuery(
            itemClass: .certificate,
            accessGroup: accessGroup,
            synchronizable: .any,
            limit: .all,
            returns: [.data]
        )
        return try Self.orEmpty { try copyMatching(query) }.map {
            try Certificate(derEncoded: [UInt8]($0.data ?? Data()))
        }
    }

    /// Identities: each stored certificate whose public key belongs to a stored private key in its group.
    public func identities(accessGroup: String? = nil) throws -> [KeychainIdentity] {
        let query = ItemQuery(
            itemClass: .identity,
            accessGroup: accessGroup,
            synchronizable: .any,
            limit: .all,
            returns: [.data, .persistentRef]
        )
        return try Self.orEmpty { try copyMatching(query) }.compactMap { record in
            guard let keyRef = record.keyPersistentRef, let der = record.data else { return nil }
            return KeychainIdentity(
                certificate: try Certificate(derEncoded: [UInt8](der)),
                privateKey: try KeychainPrivateKey(store: self, reference: .item(keyRef))
            )
        }
    }

    private static func orEmpty(_ body: () throws -> [ItemRecord]) throws -> [ItemRecord] {
        do {
            return try body()
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
            return []
        }
    }
}
