internal import CLibCrypto
import Crypto
import FoundationEssentials
import Glibc

/// The freedesktop Secret Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7` session: Diffie-Hellman over RFC 2409's
/// 1024-bit MODP group (generator 2), the shared secret left-padded to 128 bytes, HKDF-SHA256 (salt 32 zero bytes,
/// no info) to a 16-byte AES-128 key; secrets travel as AES-128-CBC with PKCS#7 padding under a fresh 16-byte IV.
/// The modular arithmetic and the cipher are libcrypto's (BN_mod_exp_mont_consttime, EVP AES-128-CBC).
public struct SecretServiceDH: Sendable {
    /// RFC 2409 §6.2, the Second Oakley Group.
    static let prime: [UInt8] = Hex.decode(
        "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
            + "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
            + "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF"
    )!
    public static let publicKeyLength = 128

    private let privateKey: SecretBytes
    /// g^x mod p, 128 bytes big-endian.
    public let publicKey: [UInt8]

    /// The private exponent's length: 256 random bits. The group offers about 80 bits of security; an exponent of
    /// twice the security strength keeps the discrete logarithm (Pollard's kangaroo over the exponent, 2^128) harder
    /// than the group itself (NIST SP 800-56A rev. 3 §5.6.1.1.1, RFC 7919 §5.2), and each exponentiation costs a
    /// quarter of a full 1024-bit exponent's.
    static let privateKeyLength = 32

    public init() throws(KeychainError) {
        privateKey = SecretBytes.random(count: Self.privateKeyLength)
        publicKey = try Self.power(base: [2], exponent: privateKey)
    }

    /// The AES-128 key shared with the peer whose public value is `peer` (big-endian, at most 128 bytes). A value
    /// outside 2 … p − 2 is errSecParam.
    public func sharedKey(peer: [UInt8]) throws(KeychainError) -> SecretBytes {
        guard peer.count <= Self.publicKeyLength, Self.inRange(peer) else {
            throw KeychainError(KeychainStatus.param, "the peer's Diffie-Hellman public value is out of range")
        }
        let shared = try Self.power(base: peer, exponent: privateKey)
        let derived = shared.withUnsafeBytes { bytes in
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: bytes),
                salt: [UInt8](repeating: 0, count: 32),
                info: [UInt8](),
                outputByteCount: 16
            )
        }
        return derived.withUnsafeBytes { SecretBytes(copying: $0) }
    }

    /// 1 < value < p − 1.
    static func inRange(_ value: [UInt8]) -> Bool {
        let padded = [UInt8](repeating: 0, count: publicKeyLength - value.count) + value
        let one = [UInt8](repeating: 0, count: publicKeyLength - 1) + [1]
        var pMinusOne = prime
        pMinusOne[publicKeyLength - 1] -= 1
        return one.lexicographicallyPrecedes(padded) && padded.lexicographicallyPrecedes(pMinusOne)
    }

    /// base^exponent mod p, left-padded to 128 bytes (the result is secret when the base is the peer's value).
    static func power(base: [UInt8], exponent: SecretBytes) throws(KeychainError) -> [UInt8] {
        guard let context = BN_CTX_new() else { throw failure }
        defer { BN_CTX_free(context) }
        let modulus = prime.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        let baseNumber = base.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        let exponentNumber = exponent.withUnsafeBytes {
            BN_bin2bn($0.bindMemory(to: UInt8.self).baseAddress, Int32($0.count), nil)
        }
        let result = BN_new()
        defer {
            BN_free(modulus)
            BN_free(baseNumber)
            BN_clear_free(exponentNumber)
            BN_clear_free(result)
        }
        guard let modulus, let baseNumber, let exponentNumber, let result else { throw failure }
        BN_set_flags(exponentNumber, Int32(BN_FLG_CONSTTIME))
        guard BN_mod_exp_mont_consttime(result, baseNumber, exponentNumber, modulus, context, nil) == 1 else {
            throw failure
        }
        var out = [UInt8](repeating: 0, count: publicKeyLength)
        guard
            out.withUnsafeMutableBufferPointer({ BN_bn2binpad(result, $0.baseAddress, Int32(publicKeyLength)) })
                == Int32(publicKeyLength)
        else { throw failure }
        return out
    }

    // MARK: AES-128-CBC with PKCS#7 padding

    /// Encrypts `plaintext` under `key` (16 bytes) and a fresh IV: (iv, ciphertext).
    public static func encrypt(
        _ plaintext: SecretBytes,
        key: SecretBytes
    ) throws(KeychainError) -> (
        iv: [UInt8], ciphertext: [UInt8]
    ) {
        let iv = randomBytes(16)
        let ciphertext = plaintext.withUnsafeBytes { plain in
            Result { () throws(KeychainError) in try cbc(encrypt: true, key: key, iv: iv, input: plain) }
        }
        return (iv, try ciphertext.get())
    }

    /// Decrypts and unpads; a wrong IV length, a ciphertext that is not whole blocks or bad padding is errSecParam.
    public static func decrypt(
        _ ciphertext: [UInt8],
        iv: [UInt8],
        key: SecretBytes
    ) throws(KeychainError)
        -> SecretBytes
    {
        guard iv.count == 16, !ciphertext.isEmpty, ciphertext.count % 16 == 0 else {
            throw KeychainError(KeychainStatus.param, "the secret is not AES-128-CBC data with a 16-byte IV")
        }
        var plain = try ciphertext.withUnsafeBytes { input in
            Result { () throws(KeychainError) in try cbc(encrypt: false, key: key, iv: iv, input: input) }
        }.get()
        defer { zeroize(&plain, plain.count) }
        return SecretBytes(copying: plain)
    }

    private static func cbc(
        encrypt: Bool,
        key: SecretBytes,
        iv: [UInt8],
        input: UnsafeRawBufferPointer
    )
        throws(KeychainError) -> [UInt8]
    {
        guard key.count == 16, let context = EVP_CIPHER_CTX_new() else { throw failure }
        defer { EVP_CIPHER_CTX_free(context) }
        let started = key.withUnsafeBytes { keyBytes in
            iv.withUnsafeBufferPointer { ivBytes in
                EVP_CipherInit_ex2(
                    context,
                    EVP_aes_128_cbc(),
                    keyBytes.bindMemory(to: UInt8.self).baseAddress,
                    ivBytes.baseAddress,
                    encrypt ? 1 : 0,
                    nil
                )
            }
        }
        guard started == 1 else { throw failure }
        var output = [UInt8](repeating: 0, count: input.count + 16)
        var written: Int32 = 0
        var final: Int32 = 0
        let ok = output.withUnsafeMutableBufferPointer { out -> Bool in
            guard
                EVP_CipherUpdate(
                    context,
                    out.baseAddress,
                    &written,
                    input.bindMemory(to: UInt8.self).baseAddress,
                    Int32(input.count)
                )
                    == 1
            else { return false }
            return EVP_CipherFinal_ex(context, out.baseAddress! + Int(written), &final) == 1
        }
        guard ok else {
            zeroize(&output, output.count)
            throw KeychainError(KeychainStatus.param, "the secret failed to decrypt (wrong session key or padding)")
        }
        let count = Int(written + final)
        let result = Array(output[..<count])
        zeroize(&output, output.count)
        return result
    }

    private static var failure: KeychainError {
        KeychainError(KeychainStatus.internalComponent, "libcrypto failed in the Secret Service session")
    }
}

/// Keyed digests of Secret Service attribute pairs under a key of the process's own, made at start and never stored
/// (swift-crypto's `SymmetricKey` clears it when let go): what the Secret Service bridge keeps of its items'
/// attributes while the keychain is locked, so that a search can name the matching items as locked.
public struct SecretServicePairDigester: Sendable {
    private let key = SymmetricKey(size: .bits256)

    public init() {}

    /// The digest of one (name, value) pair (length-prefixed, so no two pairs share bytes).
    public func digest(name: String, value: String) -> Data {
        var mac = HMAC<SHA256>(key: key)
        for field in [name, value] {
            let bytes = Array(field.utf8)
            let count = UInt32(bytes.count)
            mac.update(data: [
                UInt8(count >> 24), UInt8((count >> 16) & 0xff), UInt8((count >> 8) & 0xff), UInt8(count & 0xff),
            ])
            mac.update(data: bytes)
        }
        return Data(mac.finalize())
    }
}
