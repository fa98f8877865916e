/// The asymmetric key types Keyseal generates, stores and uses.
public enum KeyType: Sendable, Hashable, CustomStringConvertible {
    /// NIST P-256, P-384 or P-521 (Apple's `kSecAttrKeyTypeECSECPrimeRandom`, `type` = "73").
    case ec(bits: Int)
    /// RSA of 1024 to 4096 bits (`kSecAttrKeyTypeRSA`, `type` = "42"); under 2048 bits weak, and generated only
    /// because Apple still does (docs/SECURITY-MODEL.md).
    case rsa(bits: Int)

    public static let p256 = KeyType.ec(bits: 256)
    public static let p384 = KeyType.ec(bits: 384)
    public static let p521 = KeyType.ec(bits: 521)

    /// Apple's `type` attribute of keys.
    public static let ecTypeCode = "73"
    public static let rsaTypeCode = "42"

    /// A key type from Apple's `type` code and size; errSecParam for anything Keyseal does not offer.
    public init(typeCode: String, bits: Int) throws(KeychainError) {
        switch typeCode {
        case Self.ecTypeCode where [256, 384, 521].contains(bits): self = .ec(bits: bits)
        case Self.rsaTypeCode where (1024...4096).contains(bits) && bits % 8 == 0: self = .rsa(bits: bits)
        case Self.ecTypeCode, Self.rsaTypeCode:
            throw KeychainError(KeychainStatus.param, "a key of type \(typeCode) cannot have \(bits) bits")
        default:
            throw KeychainError(KeychainStatus.param, "key type \(typeCode) is not supported (EC \"73\" or RSA \"42\")")
        }
    }

    public var typeCode: String {
        switch self {
        case .ec: Self.ecTypeCode
        case .rsa: Self.rsaTypeCode
        }
    }

    public var bits: Int {
        switch self {
        case .ec(let bits), .rsa(let bits): bits
        }
    }

    public var isEC: Bool { if case .ec = self { true } else { false } }

    /// The bytes of an EC coordinate or scalar.
    package var coordinateSize: Int { (bits + 7) / 8 }

    public var description: String {
        switch self {
        case .ec(let bits): "ec\(bits)"
        case .rsa(let bits): "rsa\(bits)"
        }
    }
}

/// How to generate a key pair (Apple's `SecKeyCreateRandomKey` parameters).
public struct KeyGenerationRequest: Sendable, Hashable {
    public var keyType: KeyType
    /// `kSecAttrTokenIDSecureEnclave`: generated inside the device key's hardware, P-256 only.
    public var inHardware: Bool
    /// Stored as an item (`kSecAttrIsPermanent`). A software key that is not stored reaches the engine only when its
    /// access control asks for an authentication (KeysealSecurity keeps the others in its process).
    public var isPermanent: Bool
    /// Further attributes of the private key item (`labl`, `atag`, `crtr`, `desc`, `icmt`, …).
    public var attributes: [String: AttributeValue]
    public var accessGroup: String?
    public var accessibility: Accessibility
    public var accessControlFlags: UInt?
    public var synchronizable: Bool
    /// `kSecAttrIsExtractable` of a software key (a hardware key never is).
    public var isExtractable: Bool

    public init(
        keyType: KeyType,
        inHardware: Bool = false,
        isPermanent: Bool = true,
        attributes: [String: AttributeValue] = [:],
        accessGroup: String? = nil,
        accessibility: Accessibility = .whenUnlocked,
        accessControlFlags: UInt? = nil,
        synchronizable: Bool = false,
        isExtractable: Bool = true
    ) {
        self.keyType = keyType
        self.inHardware = inHardware
        self.isPermanent = isPermanent
        self.attributes = attributes
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.accessControlFlags = accessControlFlags
        self.synchronizable = synchronizable
        self.isExtractable = isExtractable
    }
}
