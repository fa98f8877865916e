import Crypto
import FoundationEssentials
import Glibc

extension SecretBytes: ContiguousBytes {}

/// HKDF-SHA256 and the key names of the hierarchy (docs/ARCHITECTURE.md, "Key hierarchy").
public enum KeyDerivation {
    /// HKDF-SHA256 with no salt.
    public static func hkdf(_ inputKeyMaterial: SecretBytes, info: [UInt8], count: Int = 32) -> SecretBytes {
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: inputKeyMaterial),
            info: info,
            outputByteCount: count
        )
        return key.withUnsafeBytes { SecretBytes(copying: $0) }
    }

    /// The HKDF-Extract half, so that per-item expansions cost one HMAC.
    public static func extract(_ inputKeyMaterial: SecretBytes) -> SecretBytes {
        let prk = HKDF<SHA256>.extract(inputKeyMaterial: SymmetricKey(data: inputKeyMaterial), salt: [UInt8]())
        return prk.withUnsafeBytes { SecretBytes(copying: $0) }
    }

    static func info(_ label: String, _ parts: [UInt8]...) -> [UInt8] {
        var bytes = Array(label.utf8)
        for part in parts { bytes += part }
        return bytes
    }

    /// KEK_dev(c) = HKDF(DS, "keyseal/kek/dev/" ‖ c ‖ store id).
    public static func deviceKEK(
        deviceSecret: SecretBytes,
        accessibility: Accessibility,
        storeID: [UInt8]
    )
        -> SecretBytes
    {
        hkdf(deviceSecret, info: info("keyseal/kek/dev/", Array(accessibility.rawValue.utf8), storeID))
    }

    /// KEK_pass(c) = HKDF(DS ‖ PS ‖ P, "keyseal/kek/pass/" ‖ c ‖ store id).
    public static func passcodeKEK(
        deviceSecret: SecretBytes,
        passcodeSecret: SecretBytes,
        passcodeKey: SecretBytes,
        accessibility: Accessibility,
        storeID: [UInt8]
    ) -> SecretBytes {
        let material = SecretBytes.concatenating([deviceSecret, passcodeSecret, passcodeKey])
        return hkdf(material, info: info("keyseal/kek/pass/", Array(accessibility.rawValue.utf8), storeID))
    }

    /// IX = HKDF(DS, "keyseal/index" ‖ store id): keys the search digests.
    public static func indexKey(deviceSecret: SecretBytes, storeID: [UInt8]) -> SecretBytes {
        hkdf(deviceSecret, info: info("keyseal/index", storeID))
    }

    /// The key that authenticates the keybag header.
    public static func keybagMACKey(deviceSecret: SecretBytes, storeID: [UInt8]) -> SecretBytes {
        hkdf(deviceSecret, info: info("keyseal/keybag-mac", storeID))
    }
}

/// AES-256-GCM in the combined form nonce ‖ ciphertext ‖ tag.
public enum AEAD {
    public static func seal(
        _ plaintext: some DataProtocol,
        key: SymmetricKey,
        aad: some DataProtocol,
        nonce: AES.GCM.Nonce? = nil
    ) throws(KeychainError) -> Data {
        do {
            return try AES.GCM.seal(plaintext, using: key, nonce: nonce, authenticating: aad).combined!
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "encryption failed")
        }
    }

    /// Opens a combined box; any failure is `errSecDecode`.
    public static func open(_ combined: Data, key: SymmetricKey, aad: [UInt8]) throws(KeychainError) -> Data {
        try open(combined, key: key, aad: aad[...])
    }

    /// ``open(_:key:aad:)`` with the associated data a slice of a larger buffer. Opens go through libcrypto
    /// (``GCMContext``); seals stay with swift-crypto.
    public static func open(_ combined: Data, key: SymmetricKey, aad: ArraySlice<UInt8>) throws(KeychainError) -> Data {
        guard key.bitCount == 256 else { throw KeychainError(KeychainStatus.decode, "not an AES-256 key") }
        return try key.withUnsafeBytes { keyBytes in
            Result { () throws(KeychainError) in
                try aad.withBytes { aadBytes throws(KeychainError) in
                    try GCMContext.open(combined, key: keyBytes, aad: aadBytes)
                }
            }
        }.get()
    }

    /// Opens into secret storage (for wrapped keys).
    public static func openSecret(
        _ combined: Data,
        key: SymmetricKey,
        aad: [UInt8]
    ) throws(KeychainError)
        -> SecretBytes
    {
        var plain = try open(combined, key: key, aad: aad)
        defer { plain.resetBytes(in: 0..<plain.count) }
        return SecretBytes(copying: plain)
    }

    public static func sealSecret(
        _ secret: SecretBytes,
        key: SymmetricKey,
        aad: [UInt8]
    ) throws(KeychainError)
        -> Data
    {
        do {
            return try secret.withUnsafeBytes { bytes in
                try AES.GCM.seal(bytes, using: key, authenticating: aad).combined!
            }
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "encryption failed")
        }
    }
}
