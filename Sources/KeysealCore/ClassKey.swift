import Crypto
import FoundationEssentials
import Glibc

/// An unwrapped class key CK(c) and the HKDF pseudo-random key that derives each item's metadata key
/// MK(c, i) = HKDF(CK(c), "metadata" ‖ item id) with a single HMAC.
///
/// The key and the keyed HMAC state are prepared once per unlock; per item only one HMAC runs.
public final class ClassKey: @unchecked Sendable {
    // Immutable after init; swift-crypto's key storage is zeroized when released.
    public let accessibility: Accessibility
    let secret: SecretBytes
    let symmetricKey: SymmetricKey
    private let metadataHMAC: PreparedHMAC
    /// CK(c) keyed into libcrypto once per unlock, for unwrapping item keys; cleared when this key is released.
    private let unwrapContext: GCMContext

    public init(accessibility: Accessibility, secret: SecretBytes) {
        precondition(secret.count == 32, "class keys are 256-bit")
        self.accessibility = accessibility
        self.secret = secret
        self.symmetricKey = SymmetricKey(data: secret)
        self.metadataHMAC = PreparedHMAC(key: KeyDerivation.extract(secret))
        self.unwrapContext = secret.withUnsafeBytes { GCMContext(key: $0) }
    }

    /// Opens a wrapped item key into `itemKey` (32 bytes); `errSecDecode`, with `itemKey` zeroed, if it fails.
    func unwrapItemKey(
        _ wrapped: UnsafeRawBufferPointer,
        aad: UnsafeRawBufferPointer,
        into itemKey: UnsafeMutableRawBufferPointer
    ) throws(KeychainError) {
        try unwrapContext.open(wrapped, aad: aad, exactlyInto: itemKey)
    }

    /// Calls `body` with MK(c, i) (see ``metadataKey(itemID:)``), zeroed afterwards.
    func withMetadataKey<R>(
        itemID: [UInt8],
        _ body: (UnsafeRawBufferPointer) throws(KeychainError) -> R
    )
        throws(KeychainError) -> R
    {
        // Derived into a stack buffer, cleared on return: the key never reaches the heap.
        var key = KeyBuffer()
        defer { key.clear() }
        return try key.withUnsafeMutableBytes { out throws(KeychainError) in
            Self.metadataLabel.withUnsafeBytes { label in
                itemID.withUnsafeBytes { id in
                    Self.counterOne.withUnsafeBytes { counter in
                        metadataHMAC.authenticate(label, id, counter, into: out)
                    }
                }
            }
            return try body(UnsafeRawBufferPointer(out))
        }
    }

    public static func generate(_ accessibility: Accessibility) -> ClassKey {
        ClassKey(accessibility: accessibility, secret: .random(count: 32))
    }

    static let metadataLabel = Array("metadata".utf8)
    static let counterOne: [UInt8] = [1]

    /// MK(c, i) = HKDF-Expand(PRK, "metadata" ‖ item id, 32) = HMAC(PRK, "metadata" ‖ item id ‖ 0x01).
    public func metadataKey(itemID: [UInt8]) -> SymmetricKey {
        var mac = metadataHMAC.authenticate(Self.metadataLabel, itemID, Self.counterOne)
        defer { for index in mac.indices { mac[index] = 0 } }
        return SymmetricKey(data: mac)
    }

    static func wrapAAD(_ accessibility: Accessibility, storeID: [UInt8]) -> [UInt8] {
        Array("keyseal/ck/".utf8) + Array(accessibility.rawValue.utf8) + storeID
    }

    /// CK wrapped by a key-encryption key.
    public func wrapped(by kek: SecretBytes, storeID: [UInt8]) throws(KeychainError) -> Data {
        try AEAD.sealSecret(secret, key: SymmetricKey(data: kek), aad: Self.wrapAAD(accessibility, storeID: storeID))
    }

    /// Unwraps; a wrong key-encryption key (a wrong passcode) is `errSecDecode`, which callers map.
    public static func unwrap(
        _ blob: Data,
        by kek: SecretBytes,
        accessibility: Accessibility,
        storeID: [UInt8]
    )
        throws(KeychainError) -> ClassKey
    {
        let secret = try AEAD.openSecret(
            blob,
            key: SymmetricKey(data: kek),
            aad: wrapAAD(accessibility, storeID: storeID)
        )
        return ClassKey(accessibility: accessibility, secret: secret)
    }

    /// Unwraps a class key wrapped under its class's device KEK
    /// (``KeyDerivation/deviceKEK(deviceSecret:accessibility:storeID:)``): the classes without a passcode, and every
    /// class while no passcode is set.
    public static func unwrap(
        _ blob: Data,
        deviceSecret: SecretBytes,
        accessibility: Accessibility,
        storeID: [UInt8]
    )
        throws(KeychainError) -> ClassKey
    {
        let kek = KeyDerivation.deviceKEK(deviceSecret: deviceSecret, accessibility: accessibility, storeID: storeID)
        return try unwrap(blob, by: kek, accessibility: accessibility, storeID: storeID)
    }
}
