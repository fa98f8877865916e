internal import CLibCrypto
import FoundationEssentials

/// RSA for software keys through libcrypto's EVP_PKEY interface: generation, the private-key operations and the
/// public-key ones, with every padding Apple's `SecKeyAlgorithm` names (raw, PKCS#1 v1.5 with and without a
/// DigestInfo, PSS, OAEP with SHA-1 to SHA-512). swift-crypto's `_RSA` offers a subset and refuses keys under 2048
/// bits, which Apple still generates and older peers still send (docs/DECISIONS.md, "RSA runs on libcrypto").
///
/// Private keys are PKCS#1 `RSAPrivateKey` DER, public keys PKCS#1 `RSAPublicKey` DER, as Apple exports them.
public enum RSAOperations {
    /// The hash of a padding; also the hashes of Keyseal's other algorithms (`KeyAlgorithms.Hash`), by the name
    /// Apple's algorithm identifiers give them (`algid:sign:RSA:digest-PSS:SHA256`).
    public enum Hash: String, Sendable, CaseIterable {
        case sha1 = "SHA1"
        case sha224 = "SHA224"
        case sha256 = "SHA256"
        case sha384 = "SHA384"
        case sha512 = "SHA512"

        /// The digest's size in bytes.
        public var size: Int {
            switch self {
            case .sha1: 20
            case .sha224: 28
            case .sha256: 32
            case .sha384: 48
            case .sha512: 64
            }
        }

        fileprivate var md: OpaquePointer? {
            switch self {
            case .sha1: EVP_sha1()
            case .sha224: EVP_sha224()
            case .sha256: EVP_sha256()
            case .sha384: EVP_sha384()
            case .sha512: EVP_sha512()
            }
        }
    }

    /// How a signature pads the digest it signs.
    public enum SignaturePadding: Sendable {
        /// The bare RSA operation on a block of the modulus's size (`rsaSignatureRaw`).
        case raw
        /// PKCS#1 v1.5; with a hash, the digest is wrapped in its DigestInfo, without one it is signed as given
        /// (`rsaSignatureDigestPKCS1v15Raw`).
        case pkcs1(Hash?)
        /// PSS with MGF1 of the same hash and a salt of the digest's size.
        case pss(Hash)
    }

    /// How an encryption pads the message.
    public enum EncryptionPadding: Sendable {
        case raw
        case pkcs1
        /// OAEP with MGF1 of the same hash and a label (Apple's algorithms: empty; TPM2_MakeCredential's seed to an
        /// RSA endorsement key: "IDENTITY" and its terminating zero).
        case oaep(Hash, label: [UInt8] = [])
    }

    /// The sizes of keys that can be generated: Apple's range, in steps of 8 bits.
    public static let generatableSizes = 1024...4096

    /// A new private key of `bits` bits (public exponent 65537).
    public static func generate(bits: Int) throws(KeychainError) -> SecretBytes {
        guard generatableSizes.contains(bits), bits % 8 == 0 else {
            throw KeychainError(KeychainStatus.param, "cannot generate an RSA key of \(bits) bits")
        }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else { throw failure("key generation") }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(bits)) == 1,
            EVP_PKEY_generate(context, &key) == 1, let key
        else { throw failure("key generation") }
        defer { EVP_PKEY_free(key) }
        return try privateDER(key)
    }

    /// The public key of a private key, and its size in bits; errSecParam when `privateKey` is not one.
    public static func publicKey(ofPrivateKey privateKey: SecretBytes) throws(KeychainError) -> (Data, bits: Int) {
        let key = try parsePrivate(privateKey)
        defer { EVP_PKEY_free(key) }
        return (try publicDER(key), blockBits(key))
    }

    /// The size in bits of a PKCS#1 public key (its block: the modulus's bytes × 8); errSecParam when `publicKey` is
    /// not one.
    public static func bits(ofPublicKey publicKey: Data) throws(KeychainError) -> Int {
        let key = try parsePublic(publicKey)
        defer { EVP_PKEY_free(key) }
        return blockBits(key)
    }

    /// A PKCS#1 `RSAPublicKey` from `data`, which is one or an X.509 `SubjectPublicKeyInfo` of an RSA key (what Apple's
    /// `SecKeyCreateWithData` accepts for an RSA public key); nil when it is neither.
    public static func pkcs1PublicKey(_ data: Data) -> Data? {
        if let key = try? parsePublic(data) {
            EVP_PKEY_free(key)
            return data
        }
        let key: OpaquePointer? = data.withUnsafeBytes { bytes in
            guard let base = bytes.bindMemory(to: UInt8.self).baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            let key = d2i_PUBKEY(nil, &cursor, bytes.count)
            // The whole input, and an RSA key: trailing bytes or another algorithm are not this key.
            guard let key, cursor == base + bytes.count, EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA else {
                EVP_PKEY_free(key)
                return nil
            }
            return key
        }
        guard let key else { return nil }
        defer { EVP_PKEY_free(key) }
        return try? publicDER(key)
    }

    /// The size in bits of a PKCS#1 private key (its block, as above); errSecParam when `privateKey` is not one.
    public static func bits(ofPrivateKey privateKey: SecretBytes) throws(KeychainError) -> Int {
        let key = try parsePrivate(privateKey)
        defer { EVP_PKEY_free(key) }
        return blockBits(key)
    }

    /// A PKCS#1 public key as a DER `SubjectPublicKeyInfo`, for PEM.
    public static func subjectPublicKeyInfo(ofPublicKey publicKey: Data) throws(KeychainError) -> Data {
        let key = try parsePublic(publicKey)
        defer { EVP_PKEY_free(key) }
        let length = i2d_PUBKEY(key, nil)
        guard length > 0 else { throw failure("key encoding") }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let written = bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return i2d_PUBKEY(key, &cursor)
        }
        guard written == length else { throw failure("key encoding") }
        return Data(bytes)
    }

    // MARK: Private-key operations

    /// Signs `input`: a digest of the padding's hash, any digest for `.pkcs1(nil)`, or for `.raw` a big-endian number
    /// of at most the modulus's size (zero-extended to a full block, as Apple does).
    public static func sign(
        privateKey: SecretBytes,
        input: [UInt8],
        padding: SignaturePadding
    ) throws(KeychainError) -> Data {
        let key = try parsePrivate(privateKey)
        defer { EVP_PKEY_free(key) }
        let size = Int(EVP_PKEY_get_size(key))
        try checkInput(input.count, padding: padding, modulusSize: size)
        if case .raw = padding {
            // The bare private-key operation is a decryption without padding.
            return try crypt(key, rawBlock(input, size: size), private: true, padding: .raw, what: "signing")
        }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw failure("signing") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_sign_init(context) == 1, configure(context, padding) else { throw failure("signing") }
        var length = size
        var signature = [UInt8](repeating: 0, count: size)
        guard EVP_PKEY_sign(context, &signature, &length, input, input.count) == 1 else {
            throw KeychainError(KeychainStatus.param, "RSA signing failed (is the input too long for the key?)")
        }
        return Data(signature.prefix(length))
    }

    /// Decrypts `data`; errSecParam (as Apple answers) when it does not decrypt under the key and padding.
    public static func decrypt(
        privateKey: SecretBytes,
        data: Data,
        padding: EncryptionPadding
    ) throws(KeychainError) -> Data {
        let key = try parsePrivate(privateKey)
        defer { EVP_PKEY_free(key) }
        guard data.count == Int(EVP_PKEY_get_size(key)) else {
            throw KeychainError(KeychainStatus.param, "an RSA ciphertext is as long as the key's modulus")
        }
        return try crypt(key, Array(data), private: true, padding: padding, what: "decryption")
    }

    // MARK: Public-key operations

    /// Whether `signature` is a valid signature of `input` (as for ``sign(privateKey:input:padding:)``).
    public static func verify(
        publicKey: Data,
        input: [UInt8],
        signature: Data,
        padding: SignaturePadding
    ) throws(KeychainError) -> Bool {
        let key = try parsePublic(publicKey)
        defer { EVP_PKEY_free(key) }
        let size = Int(EVP_PKEY_get_size(key))
        guard signature.count == size else { return false }
        try checkInput(input.count, padding: padding, modulusSize: size)
        if case .raw = padding {
            // The bare public-key operation on the signature gives back the block that was signed.
            guard let recovered = try? crypt(key, Array(signature), private: false, padding: .raw, what: "verifying")
            else { return false }
            return recovered.elementsEqual(rawBlock(input, size: size))
        }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw failure("verifying") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_verify_init(context) == 1, configure(context, padding) else { throw failure("verifying") }
        let bytes = [UInt8](signature)
        return EVP_PKEY_verify(context, bytes, bytes.count, input, input.count) == 1
    }

    /// Encrypts `data`: at most the modulus's size less the padding's overhead (for `.raw`, a big-endian number
    /// below the modulus, of at most its size, zero-extended to a full block).
    public static func encrypt(
        publicKey: Data,
        data: Data,
        padding: EncryptionPadding
    ) throws(KeychainError) -> Data {
        let key = try parsePublic(publicKey)
        defer { EVP_PKEY_free(key) }
        let size = Int(EVP_PKEY_get_size(key))
        let limit: Int
        switch padding {
        case .raw: limit = size
        case .pkcs1: limit = size - 11
        case .oaep(let hash, _): limit = size - 2 * hash.size - 2
        }
        guard data.count <= limit else {
            throw KeychainError(
                KeychainStatus.param,
                padding.isRaw
                    ? "raw RSA encrypts a number of at most \(size) bytes, not \(data.count)"
                    : "the data is too long for this RSA key and padding (at most \(max(limit, 0)) bytes)"
            )
        }
        // The input may be a secret (RSA-OAEP AES-GCM's session key): its copy is wiped.
        var input = padding.isRaw ? rawBlock(Array(data), size: size) : Array(data)
        defer { zeroize(&input) }
        return try crypt(key, input, private: false, padding: padding, what: "encryption")
    }

    // MARK: libcrypto

    private static func failure(_ what: String) -> KeychainError {
        KeychainError(KeychainStatus.internalComponent, "libcrypto's RSA \(what) failed")
    }

    private static func checkInput(_ count: Int, padding: SignaturePadding, modulusSize: Int) throws(KeychainError) {
        switch padding {
        case .raw:
            guard count <= modulusSize else {
                throw KeychainError(
                    KeychainStatus.param,
                    "a raw RSA signature signs a number of at most \(modulusSize) bytes, not \(count)"
                )
            }
        case .pkcs1(let hash?), .pss(let hash):
            guard count == hash.size else {
                throw KeychainError(
                    KeychainStatus.param,
                    "the digest is \(count) bytes; the algorithm's is \(hash.size)"
                )
            }
        case .pkcs1(nil):
            guard count <= modulusSize - 11 else {
                throw KeychainError(KeychainStatus.param, "the data is too long for this RSA key")
            }
        }
    }

    private static func configure(_ context: OpaquePointer, _ padding: SignaturePadding) -> Bool {
        switch padding {
        case .raw:
            return EVP_PKEY_CTX_set_rsa_padding(context, RSA_NO_PADDING) == 1
        case .pkcs1(let hash):
            guard EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PADDING) == 1 else { return false }
            guard let hash else { return true }
            return EVP_PKEY_CTX_set_signature_md(context, hash.md) == 1
        case .pss(let hash):
            return EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PSS_PADDING) == 1
                && EVP_PKEY_CTX_set_signature_md(context, hash.md) == 1
                && EVP_PKEY_CTX_set_rsa_mgf1_md(context, hash.md) == 1
                && EVP_PKEY_CTX_set_rsa_pss_saltlen(context, Int32(hash.size)) == 1
        }
    }

    /// A key's size as Keyseal and Apple name it: its block (the modulus's bytes) in bits. A modulus of 1023 bits is a
    /// 1024-bit key, whose blocks are 128 bytes, as some generators make them.
    private static func blockBits(_ key: OpaquePointer) -> Int {
        Int(EVP_PKEY_get_size(key)) * 8
    }

    /// A raw operation's input as Apple reads it: a big-endian number, zero-extended on the left to the modulus's
    /// size (a block as long as the modulus is taken as it is; libcrypto refuses one not below the modulus).
    private static func rawBlock(_ input: [UInt8], size: Int) -> [UInt8] {
        input.count >= size ? input : [UInt8](repeating: 0, count: size - input.count) + input
    }

    /// An encryption (public) or decryption (private) with `padding`.
    private static func crypt(
        _ key: OpaquePointer,
        _ input: [UInt8],
        private isPrivate: Bool,
        padding: EncryptionPadding,
        what: String
    ) throws(KeychainError) -> Data {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw failure(what) }
        defer { EVP_PKEY_CTX_free(context) }
        let initialized = isPrivate ? EVP_PKEY_decrypt_init(context) : EVP_PKEY_encrypt_init(context)
        guard initialized == 1 else { throw failure(what) }
        let configured: Bool
        switch padding {
        case .raw: configured = EVP_PKEY_CTX_set_rsa_padding(context, RSA_NO_PADDING) == 1
        case .pkcs1: configured = EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PADDING) == 1
        case .oaep(let hash, let label):
            configured =
                EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_OAEP_PADDING) == 1
                && EVP_PKEY_CTX_set_rsa_oaep_md(context, hash.md) == 1
                && EVP_PKEY_CTX_set_rsa_mgf1_md(context, hash.md) == 1
                && (label.isEmpty || keyseal_rsa_oaep_label(context, label, label.count) == 1)
        }
        guard configured else { throw failure(what) }
        var length = Int(EVP_PKEY_get_size(key))
        var output = [UInt8](repeating: 0, count: length)
        defer { zeroize(&output) }
        let result =
            isPrivate
            ? EVP_PKEY_decrypt(context, &output, &length, input, input.count)
            : EVP_PKEY_encrypt(context, &output, &length, input, input.count)
        guard result == 1 else {
            throw KeychainError(
                KeychainStatus.param,
                isPrivate
                    ? "RSA decryption failed (wrong key, padding or altered data)"
                    : "RSA \(what) failed (is the block below the modulus?)"
            )
        }
        return Data(output.prefix(length))
    }

    private static func parsePrivate(_ der: SecretBytes) throws(KeychainError) -> OpaquePointer {
        let key: OpaquePointer? = der.withUnsafeBytes { bytes in
            guard let base = bytes.bindMemory(to: UInt8.self).baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            return d2i_PrivateKey(EVP_PKEY_RSA, nil, &cursor, bytes.count)
        }
        guard let key else { throw KeychainError(KeychainStatus.param, "the data is not an RSA private key") }
        return key
    }

    private static func parsePublic(_ der: Data) throws(KeychainError) -> OpaquePointer {
        let key: OpaquePointer? = der.withUnsafeBytes { bytes in
            guard let base = bytes.bindMemory(to: UInt8.self).baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            return d2i_PublicKey(EVP_PKEY_RSA, nil, &cursor, bytes.count)
        }
        guard let key else { throw KeychainError(KeychainStatus.param, "the data is not an RSA public key") }
        return key
    }

    private static func privateDER(_ key: OpaquePointer) throws(KeychainError) -> SecretBytes {
        let length = i2d_PrivateKey(key, nil)
        guard length > 0 else { throw failure("key encoding") }
        var encoded: SecretBytes?
        encoded = SecretBytes(count: Int(length)) { buffer in
            var cursor = buffer.bindMemory(to: UInt8.self).baseAddress
            if i2d_PrivateKey(key, &cursor) != length { buffer.initializeMemory(as: UInt8.self, repeating: 0) }
        }
        guard let encoded, encoded.withUnsafeBytes({ $0.contains { $0 != 0 } }) else { throw failure("key encoding") }
        return encoded
    }

    private static func publicDER(_ key: OpaquePointer) throws(KeychainError) -> Data {
        let length = i2d_PublicKey(key, nil)
        guard length > 0 else { throw failure("key encoding") }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let written = bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return i2d_PublicKey(key, &cursor)
        }
        guard written == length else { throw failure("key encoding") }
        return Data(bytes)
    }
}

extension RSAOperations.EncryptionPadding {
    fileprivate var isRaw: Bool {
        if case .raw = self { return true }
        return false
    }
}
