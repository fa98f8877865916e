import Crypto
import Foundation

/// An unwrapped class key CK(c) and the HKDF pseudo-random key that derives each item's metadata key
/// MK(c, i) = HKDF(CK(c), "metadata" ‖ item id) with a single HMAC.
public final class ClassKey: Sendable {
    public let accessibility: Accessibility
    let secret: SecretBytes
    let metadataPRK: SecretBytes

    public init(accessibility: Accessibility, secret: SecretBytes) {
        precondition(secret.count == 32, "class keys are 256-bit")
        self.accessibility = accessibility
        self.secret = secret
        self.metadataPRK = KeyDerivation.extract(secret)
    }

    public static func generate(_ accessibility: Accessibility) -> ClassKey {
        ClassKey(accessibility: accessibility, secret: .random(count: 32))
    }

    var symmetricKey: SymmetricKey { SymmetricKey(data: secret) }

    /// MK(c, i).
    func metadataKey(itemID: [UInt8]) -> SymmetricKey {
        SymmetricKey(
            data: HKDF<SHA256>.expand(
                pseudoRandomKey: metadataPRK, info: Array("metadata".utf8) + itemID, outputByteCount: 32))
    }

    static func wrapAAD(_ accessibility: Accessibility, storeID: [UInt8]) -> [UInt8] {
        Array("keyseal/ck/".utf8) + Array(accessibility.rawValue.utf8) + storeID
    }

    /// CK wrapped by a key-encryption key.
    public func wrapped(by kek: SecretBytes, storeID: [UInt8]) throws(KeychainError) -> Data {
        try AEAD.sealSecret(secret, key: SymmetricKey(data: kek), aad: Self.wrapAAD(accessibility, storeID: storeID))
    }

    /// Unwraps; a wrong key-encryption key (a wrong passcode) is `errSecDecode`, which callers map.
    public static func unwrap(_ blob: Data, by kek: SecretBytes, accessibility: Accessibility, storeID: [UInt8])
        throws(KeychainError) -> ClassKey
    {
        let secret = try AEAD.openSecret(
            blob, key: SymmetricKey(data: kek), aad: wrapAAD(accessibility, storeID: storeID))
        return ClassKey(accessibility: accessibility, secret: secret)
    }
}
