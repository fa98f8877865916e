import Crypto
import FoundationEssentials
import KeysealCore
import _CryptoExtras

/// A public key as Apple exports it: EC as X9.63 `04 ‖ X ‖ Y`, RSA as PKCS#1 `RSAPublicKey`.
public struct PublicKeyMaterial: Sendable, Hashable {
    public let keyType: KeyType
    public let bytes: Data

    /// Checks that `bytes` is a key of `keyType`; errSecParam otherwise.
    public init(keyType: KeyType, bytes: Data) throws(KeychainError) {
        do {
            switch keyType {
            case .ec(256): _ = try P256.Signing.PublicKey(x963Representation: bytes)
            case .ec(384): _ = try P384.Signing.PublicKey(x963Representation: bytes)
            case .ec(521): _ = try P521.Signing.PublicKey(x963Representation: bytes)
            case .rsa:
                guard try RSAOperations.bits(ofPublicKey: bytes) == keyType.bits else { throw KeychainError.param }
            default: throw KeychainError.param
            }
        } catch {
            throw KeychainError(KeychainStatus.param, "the data is not a \(keyType) public key")
        }
        self.keyType = keyType
        self.bytes = bytes
    }

    init(trusted keyType: KeyType, bytes: Data) {
        self.keyType = keyType
        self.bytes = bytes
    }

    /// An EC public key of any supported curve, told by its length.
    public init(x963 bytes: Data) throws(KeychainError) {
        let bits: Int
        switch bytes.count {
        case 65: bits = 256
        case 97: bits = 384
        case 133: bits = 521
        default: throw KeychainError(KeychainStatus.param, "\(bytes.count) bytes is not an X9.63 EC public key")
        }
        try self.init(keyType: .ec(bits: bits), bytes: bytes)
    }

    /// The public key of a key's external representation (`kcls` "0": the public key itself; "1": derived from
    /// the private key), for Apple's `type` code; errSecParam for anything else.
    public static func of(keyClass: String, typeCode: String, data: Data) throws(KeychainError) -> PublicKeyMaterial {
        try KeychainEngine.publicKeyOf(keyClass: keyClass, typeCode: typeCode, data: data)
    }

    /// The key as a DER `SubjectPublicKeyInfo` (swift-crypto's encoding), for PEM.
    public var subjectPublicKeyInfo: Data {
        switch keyType {
        case .ec(256): (try? P256.Signing.PublicKey(x963Representation: bytes))?.derRepresentation ?? Data()
        case .ec(384): (try? P384.Signing.PublicKey(x963Representation: bytes))?.derRepresentation ?? Data()
        case .ec: (try? P521.Signing.PublicKey(x963Representation: bytes))?.derRepresentation ?? Data()
        case .rsa: (try? RSAOperations.subjectPublicKeyInfo(ofPublicKey: bytes)) ?? Data()
        }
    }

    /// Apple's `kSecAttrApplicationLabel` of the key pair: SHA-1 of these octets.
    public var applicationLabel: Data { Data(Insecure.SHA1.hash(data: bytes)) }
}

/// A private key whose material the engine holds: Apple's external representation (EC `04 ‖ X ‖ Y ‖ K`, RSA
/// PKCS#1 `RSAPrivateKey`), parsed on use.
struct SoftwarePrivateKey: Sendable {
    let keyType: KeyType
    let material: SecretBytes
    /// An EC key parsed once into swift-crypto (whose key storage is zeroized when released), for a key the engine
    /// keeps prepared; nil where each use parses the material.
    private let parsedEC: ParsedECKey?

    /// An EC private key in swift-crypto's types.
    private enum ParsedECKey: Sendable {
        case p256(P256.Signing.PrivateKey)
        case p384(P384.Signing.PrivateKey)
        case p521(P521.Signing.PrivateKey)
    }

    init(keyType: KeyType, material: SecretBytes) throws(KeychainError) {
        self.keyType = keyType
        self.material = material
        parsedEC = nil
        _ = try publicKey()
    }

    /// A key kept for repeated use: an EC key is parsed here once (which checks it), an RSA key checked as
    /// ``init(keyType:material:)`` does.
    init(prepared keyType: KeyType, material: SecretBytes) throws(KeychainError) {
        self.keyType = keyType
        self.material = material
        do {
            parsedEC = try material.withUnsafeBytes { bytes throws -> ParsedECKey? in
                switch keyType {
                case .ec(256): .p256(try P256.Signing.PrivateKey(x963Representation: bytes))
                case .ec(384): .p384(try P384.Signing.PrivateKey(x963Representation: bytes))
                case .ec(521): .p521(try P521.Signing.PrivateKey(x963Representation: bytes))
                default: nil
                }
            }
        } catch {
            throw KeychainError(KeychainStatus.param, "the data is not a \(keyType) private key")
        }
        if parsedEC == nil { _ = try publicKey() }
    }

    static func generate(_ keyType: KeyType) throws(KeychainError) -> SoftwarePrivateKey {
        let material: Data
        switch keyType {
        case .ec(256): material = P256.Signing.PrivateKey().x963Representation
        case .ec(384): material = P384.Signing.PrivateKey().x963Representation
        case .ec(521): material = P521.Signing.PrivateKey().x963Representation
        case .rsa(let bits):
            return try SoftwarePrivateKey(keyType: keyType, material: RSAOperations.generate(bits: bits))
        default: throw KeychainError(KeychainStatus.param, "cannot generate a \(keyType) key")
        }
        return try SoftwarePrivateKey(keyType: keyType, material: SecretBytes(copying: material))
    }

    private func parse<T>(_ body: (Data) throws -> T) throws(KeychainError) -> T {
        do {
            return try material.withUnsafeBytes { try body(Data($0)) }
        } catch {
            throw KeychainError(KeychainStatus.param, "the data is not a \(keyType) private key")
        }
    }

    func publicKey() throws(KeychainError) -> PublicKeyMaterial {
        switch keyType {
        case .ec(256):
            PublicKeyMaterial(
                trusted: keyType,
                bytes: try parse { try P256.Signing.PrivateKey(x963Representation: $0).publicKey.x963Representation }
            )
        case .ec(384):
            PublicKeyMaterial(
                trusted: keyType,
                bytes: try parse { try P384.Signing.PrivateKey(x963Representation: $0).publicKey.x963Representation }
            )
        case .ec(521):
            PublicKeyMaterial(
                trusted: keyType,
                bytes: try parse { try P521.Signing.PrivateKey(x963Representation: $0).publicKey.x963Representation }
            )
        case .rsa:
            try rsaPublicKey()
        default: throw KeychainError(KeychainStatus.param, "unsupported key type \(keyType)")
        }
    }

    /// ECDSA over a digest, as X9.62 DER.
    func ecdsaSign(digest: [UInt8]) throws(KeychainError) -> Data {
        let prehashed = PrehashedDigest(bytes: digest)
        do {
            switch parsedEC {
            case .p256(let key): return try key.signature(for: prehashed).derRepresentation
            case .p384(let key): return try key.signature(for: prehashed).derRepresentation
            case .p521(let key): return try key.signature(for: prehashed).derRepresentation
            case nil: break
            }
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "ECDSA signing failed")
        }
        switch keyType {
        case .ec(256):
            return try parse {
                try P256.Signing.PrivateKey(x963Representation: $0).signature(for: prehashed).derRepresentation
            }
        case .ec(384):
            return try parse {
                try P384.Signing.PrivateKey(x963Representation: $0).signature(for: prehashed).derRepresentation
            }
        case .ec(521):
            return try parse {
                try P521.Signing.PrivateKey(x963Representation: $0).signature(for: prehashed).derRepresentation
            }
        default: throw KeyAlgorithms.unsupported
        }
    }

    /// ECDH with an X9.63 peer key: the shared point's x-coordinate.
    func ecdh(peer: Data) throws(KeychainError) -> SecretBytes {
        do {
            let shared: SharedSecret
            switch keyType {
            case .ec(256):
                shared = try parse { try P256.KeyAgreement.PrivateKey(x963Representation: $0) }
                    .sharedSecretFromKeyAgreement(with: P256.KeyAgreement.PublicKey(x963Representation: peer))
            case .ec(384):
                shared = try parse { try P384.KeyAgreement.PrivateKey(x963Representation: $0) }
                    .sharedSecretFromKeyAgreement(with: P384.KeyAgreement.PublicKey(x963Representation: peer))
            case .ec(521):
                shared = try parse { try P521.KeyAgreement.PrivateKey(x963Representation: $0) }
                    .sharedSecretFromKeyAgreement(with: P521.KeyAgreement.PublicKey(x963Representation: peer))
            default: throw KeyAlgorithms.unsupported
            }
            return shared.withUnsafeBytes { SecretBytes(copying: $0) }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(KeychainStatus.param, "the other party's key is not a \(keyType) public key")
        }
    }

    private func rsaPublicKey() throws(KeychainError) -> PublicKeyMaterial {
        let (bytes, bits): (Data, Int)
        do {
            (bytes, bits) = try RSAOperations.publicKey(ofPrivateKey: material)
        } catch {
            throw KeychainError(KeychainStatus.param, "the data is not a \(keyType) private key")
        }
        guard bits == keyType.bits else {
            throw KeychainError(KeychainStatus.param, "the data is not a \(keyType) private key")
        }
        return PublicKeyMaterial(trusted: keyType, bytes: bytes)
    }
}

/// A digest the caller computed, for swift-crypto's `signature(for:)` of a digest (ECDSA signs the bytes as given,
/// truncated to the curve's order as X9.62 says).
struct PrehashedDigest: Digest {
    static var byteCount: Int { 32 }
    let bytes: [UInt8]

    func makeIterator() -> IndexingIterator<[UInt8]> { bytes.makeIterator() }
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }
    var description: String { "prehashed digest" }
}

/// A software private key held by its caller, never stored (Apple's non-permanent keys and
/// `SecKeyCreateWithData`): the same algorithms as a stored key.
public struct SoftwareKey: Sendable {
    let key: SoftwarePrivateKey

    public static func generate(_ keyType: KeyType) throws(KeychainError) -> SoftwareKey {
        SoftwareKey(key: try SoftwarePrivateKey.generate(keyType))
    }

    /// A key from Apple's external representation (EC `04 ‖ X ‖ Y ‖ K`, RSA PKCS#1); errSecParam otherwise.
    public init(keyType: KeyType, externalRepresentation: Data) throws(KeychainError) {
        key = try SoftwarePrivateKey(keyType: keyType, material: SecretBytes(copying: externalRepresentation))
    }

    /// A key from Apple's external representation held as a secret (a key read from a PKCS#12 file).
    public init(keyType: KeyType, externalRepresentation: SecretBytes) throws(KeychainError) {
        key = try SoftwarePrivateKey(keyType: keyType, material: externalRepresentation)
    }

    init(key: SoftwarePrivateKey) { self.key = key }

    public var keyType: KeyType { key.keyType }
    public var externalRepresentation: SecretBytes { key.material }
    public func publicKey() throws(KeychainError) -> PublicKeyMaterial { try key.publicKey() }

    public func sign(algorithm: String, data: Data) throws(KeychainError) -> Data {
        try KeyAlgorithms.sign(.software(key), algorithm: algorithm, data: data)
    }

    public func decrypt(algorithm: String, data: Data) throws(KeychainError) -> Data {
        try KeyAlgorithms.decrypt(.software(key), algorithm: algorithm, data: data)
    }

    public func keyExchange(
        algorithm: String,
        peer: Data,
        requestedSize: Int?,
        sharedInfo: Data?
    ) throws(KeychainError)
        -> Data
    {
        try KeyAlgorithms.keyExchange(
            .software(key),
            algorithm: algorithm,
            peer: peer,
            requestedSize: requestedSize,
            sharedInfo: sharedInfo
        )
    }
}
