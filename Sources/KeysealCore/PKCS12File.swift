internal import CLibCrypto
import FoundationEssentials
import KeysealModel

/// What a PKCS#12 file (`.p12`, `.pfx`) holds, opened with its passphrase through libcrypto: one private key, the
/// certificate that goes with it and the other certificates of its chain (Apple's `SecPKCS12Import`).
public struct PKCS12File: Sendable {
    public var keyType: KeyType
    /// The private key in Apple's external representation: PKCS#1 `RSAPrivateKey` DER for RSA, `04 ‖ X ‖ Y ‖ K`
    /// for EC.
    public var privateKey: SecretBytes
    /// The certificate of the key (DER).
    public var certificate: Data
    /// The other certificates in the file (DER), in the file's order.
    public var chain: [Data]
    /// The certificate's friendly name, if the file gives one.
    public var label: String?
    /// The certificate's local key identifier, if the file gives one.
    public var keyID: Data?

    /// Opens `data` with `passphrase` (nil: no passphrase). A wrong passphrase is errSecAuthFailed; data that is not
    /// a PKCS#12 file, or one without both a key and its certificate, errSecDecode; a key other than RSA or EC,
    /// errSecUnimplemented.
    public static func open(_ data: Data, passphrase: String?) throws(KeychainError) -> PKCS12File {
        // Files written by OpenSSL 1.x and other older exporters encrypt with RC2-40 and 3DES, which OpenSSL 3 keeps
        // in its legacy provider. The file is read in a library context of its own that has it, made this thread's
        // default for the call only: the process's default context gains no legacy algorithm.
        let previous = OSSL_LIB_CTX_set0_default(legacyContext)
        defer { OSSL_LIB_CTX_set0_default(previous) }
        let file: OpaquePointer? = data.withUnsafeBytes { bytes in
            guard let base = bytes.bindMemory(to: UInt8.self).baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            return d2i_PKCS12(nil, &cursor, bytes.count)
        }
        guard let file else { throw KeychainError(KeychainStatus.decode, "the data is not a PKCS#12 file") }
        defer { PKCS12_free(file) }
        // A file without a MAC cannot tell a wrong passphrase; one with a MAC must verify before anything is read.
        if PKCS12_mac_present(file) == 1 && !verifies(file, passphrase) {
            throw KeychainError(KeychainStatus.authFailed, "the passphrase does not open the PKCS#12 file")
        }
        var key: OpaquePointer?
        var certificate: OpaquePointer?
        var others: OpaquePointer?
        let parsed = PKCS12_parse(file, passphrase ?? "", &key, &certificate, &others)
        defer {
            EVP_PKEY_free(key)
            X509_free(certificate)
            keyseal_x509_stack_free(others)
        }
        guard parsed == 1 else {
            throw KeychainError(
                KeychainStatus.decode,
                "the PKCS#12 file's contents cannot be read with this passphrase"
            )
        }
        guard let key, let certificate else {
            throw KeychainError(
                KeychainStatus.decode,
                "the PKCS#12 file does not hold a private key and its certificate"
            )
        }
        let keyType: KeyType
        let privateKey: SecretBytes
        let bits = Int(EVP_PKEY_get_bits(key))
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_RSA:
            // Sized as RSAOperations sizes RSA keys: by the block, so a 2047-bit modulus is a 2048-bit key.
            keyType = try KeyType(typeCode: KeyType.rsaTypeCode, bits: Int(EVP_PKEY_get_size(key)) * 8)
            privateKey = try rsaPrivateKey(key)
        case EVP_PKEY_EC where [256, 384, 521].contains(bits):
            keyType = .ec(bits: bits)
            privateKey = try ecPrivateKey(key, bits: bits)
        default:
            throw KeychainError(KeychainStatus.unimplemented, "the PKCS#12 file's key is not RSA or NIST P-256/384/521")
        }
        var chain: [Data] = []
        for index in 0..<keyseal_x509_stack_count(others) {
            if let other = keyseal_x509_stack_value(others, index) { chain.append(try certificateDER(other)) }
        }
        var labelLength: Int32 = 0
        let label = X509_alias_get0(certificate, &labelLength).map {
            String(decoding: UnsafeBufferPointer(start: $0, count: Int(labelLength)), as: UTF8.self)
        }
        var keyIDLength: Int32 = 0
        let keyID = X509_keyid_get0(certificate, &keyIDLength).map { Data(bytes: $0, count: Int(keyIDLength)) }
        return PKCS12File(
            keyType: keyType,
            privateKey: privateKey,
            certificate: try certificateDER(certificate),
            chain: chain,
            label: label,
            keyID: keyID
        )
    }

    /// libcrypto's default and legacy providers in a context of their own, loaded once (without the legacy provider
    /// installed, files that need it are errSecDecode).
    nonisolated(unsafe) private static let legacyContext: OpaquePointer? = {
        let context = OSSL_LIB_CTX_new()
        _ = OSSL_PROVIDER_load(context, "default")
        _ = OSSL_PROVIDER_load(context, "legacy")
        return context
    }()

    /// Whether the file's MAC verifies under `passphrase`; an empty one is tried both as "" and as none, as files
    /// written without a passphrase use either.
    private static func verifies(_ file: OpaquePointer, _ passphrase: String?) -> Bool {
        guard let passphrase, !passphrase.isEmpty else {
            return PKCS12_verify_mac(file, "", 0) == 1 || PKCS12_verify_mac(file, nil, 0) == 1
        }
        return PKCS12_verify_mac(file, passphrase, -1) == 1
    }

    private static func certificateDER(_ certificate: OpaquePointer) throws(KeychainError) -> Data {
        let length = i2d_X509(certificate, nil)
        guard length > 0 else { throw KeychainError(KeychainStatus.decode, "a certificate cannot be encoded") }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let written = bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return i2d_X509(certificate, &cursor)
        }
        guard written == length else { throw KeychainError(KeychainStatus.decode, "a certificate cannot be encoded") }
        return Data(bytes)
    }

    /// PKCS#1 `RSAPrivateKey` DER.
    private static func rsaPrivateKey(_ key: OpaquePointer) throws(KeychainError) -> SecretBytes {
        let length = i2d_PrivateKey(key, nil)
        guard length > 0 else { throw KeychainError(KeychainStatus.decode, "the private key cannot be encoded") }
        var complete = false
        let encoded = SecretBytes(count: Int(length)) { buffer in
            var cursor = buffer.bindMemory(to: UInt8.self).baseAddress
            complete = i2d_PrivateKey(key, &cursor) == length
        }
        guard complete else { throw KeychainError(KeychainStatus.decode, "the private key cannot be encoded") }
        return encoded
    }

    /// `04 ‖ X ‖ Y ‖ K`, each coordinate and the scalar on the curve's size.
    private static func ecPrivateKey(_ key: OpaquePointer, bits: Int) throws(KeychainError) -> SecretBytes {
        let size = (bits + 7) / 8
        var point = [UInt8](repeating: 0, count: 1 + 2 * size)
        var pointLength = 0
        guard EVP_PKEY_get_octet_string_param(key, "pub", &point, point.count, &pointLength) == 1,
            pointLength == point.count, point[0] == 4
        else { throw KeychainError(KeychainStatus.decode, "the EC key's public point cannot be read") }
        var scalar: OpaquePointer?
        guard EVP_PKEY_get_bn_param(key, "priv", &scalar) == 1, let scalar else {
            throw KeychainError(KeychainStatus.decode, "the EC key's private scalar cannot be read")
        }
        defer { BN_clear_free(scalar) }
        var complete = false
        let encoded = SecretBytes(count: point.count + size) { buffer in
            let bytes = buffer.bindMemory(to: UInt8.self)
            _ = UnsafeMutableBufferPointer(rebasing: bytes[..<point.count]).initialize(from: point)
            complete = BN_bn2binpad(scalar, bytes.baseAddress! + point.count, Int32(size)) == Int32(size)
        }
        guard complete else { throw KeychainError(KeychainStatus.decode, "the EC key's private scalar cannot be read") }
        return encoded
    }
}
