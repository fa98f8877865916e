import CKeysealPKCS11Entry
import CLibCrypto

/// The library context verification takes libcrypto's objects from: the module's own, with the default provider
/// and no configuration file, so the host program's OpenSSL configuration (which may load providers, one of them
/// perhaps built on this very module) plays no part in a check. Made once; nil when libcrypto cannot make it. Not
/// Sendable to Swift, but libcrypto's library contexts are safe to use from several threads once made.
nonisolated(unsafe) let verificationLibraryContext: OpaquePointer? = {
    guard let context = OSSL_LIB_CTX_new() else { return nil }
    guard OSSL_PROVIDER_load(context, "default") != nil else {
        OSSL_LIB_CTX_free(context)
        return nil
    }
    return context
}()

/// `C_Verify`: a signature checked in the caller's process with the key's public part (libcrypto's EVP_PKEY). Nothing
/// secret takes part, so keyseald is not asked; the key's `SubjectPublicKeyInfo` is the one keyseald described.
struct Verification {
    /// A hash by libcrypto's name for it.
    enum Hash: String {
        case sha1 = "SHA1"
        case sha224 = "SHA224"
        case sha256 = "SHA256"
        case sha384 = "SHA384"
        case sha512 = "SHA512"

        /// The hash's implementation from the module's own library context; free it with `EVP_MD_free`.
        func fetch() throws(P11Error) -> OpaquePointer {
            guard let md = EVP_MD_fetch(verificationLibraryContext, rawValue, nil) else {
                throw P11Error(CKR_FUNCTION_FAILED)
            }
            return md
        }
    }

    enum Padding {
        /// ECDSA; the signature is r ‖ s, each the size of the curve's order (PKCS#11's form).
        case ecdsa
        /// PKCS#1 v1.5; with a hash the digest is wrapped in its DigestInfo, without one the caller's block is compared
        /// as it is (CKM_RSA_PKCS).
        case pkcs1(Hash?)
        /// PSS with MGF1 of the same hash and a salt of `salt` bytes.
        case pss(Hash, salt: Int)
    }

    /// The key's DER `SubjectPublicKeyInfo`.
    var publicKeyInfo: [UInt8]
    /// The hash the mechanism applies to the data (CKM_ECDSA_SHA256, CKM_SHA256_RSA_PKCS...); nil when the caller
    /// gives the digest or block itself.
    var messageHash: Hash?
    var padding: Padding
    /// The only signature length the key makes: CKR_SIGNATURE_LEN_RANGE for any other.
    var signatureSize: Int

    /// Checks `signature` over `data`: returns when it is valid, CKR_SIGNATURE_LEN_RANGE or CKR_SIGNATURE_INVALID
    /// otherwise.
    func verify(data: [UInt8], signature: [UInt8]) throws(P11Error) {
        guard signature.count == signatureSize else { throw P11Error(CKR_SIGNATURE_LEN_RANGE) }
        // What this function leaves in the thread's libcrypto error queue would be read by the caller's own OpenSSL
        // code (an engine, curl) as its error; what the caller had queued before stays.
        ERR_set_mark()
        defer { ERR_pop_to_mark() }
        guard let library = verificationLibraryContext else { throw P11Error(CKR_FUNCTION_FAILED) }
        let input = try messageHash.map { hash throws(P11Error) in try Self.digest(hash, data) } ?? data
        // What the caller signs itself must fit the mechanism: a digest of the hash's size for PSS, a block the
        // key can pad (k − 11 bytes) for raw PKCS#1 v1.5.
        switch (padding, messageHash) {
        case (.pss(let hash, _), nil):
            let md = try hash.fetch()
            defer { EVP_MD_free(md) }
            guard input.count == Int(EVP_MD_get_size(md)) else { throw P11Error(CKR_DATA_LEN_RANGE) }
        case (.pkcs1(nil), nil):
            guard input.count <= signatureSize - 11 else { throw P11Error(CKR_DATA_LEN_RANGE) }
        default:
            break
        }
        let key: OpaquePointer? = publicKeyInfo.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY_ex(nil, &cursor, buffer.count, library, nil)
        }
        guard let key else { throw P11Error(CKR_KEY_TYPE_INCONSISTENT) }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_PKEY_CTX_new_from_pkey(library, key, nil) else { throw P11Error(CKR_HOST_MEMORY) }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_verify_init(context) == 1 else { throw P11Error(CKR_FUNCTION_FAILED) }
        let encoded: [UInt8]
        switch padding {
        case .ecdsa:
            encoded = Self.derSignature(signature)
        case .pkcs1(let hash):
            let md = try hash.map { hash throws(P11Error) in try hash.fetch() }
            defer { EVP_MD_free(md) }
            guard EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PADDING) == 1,
                md.map({ EVP_PKEY_CTX_set_signature_md(context, $0) == 1 }) ?? true
            else { throw P11Error(CKR_FUNCTION_FAILED) }
            encoded = signature
        case .pss(let hash, let salt):
            let md = try hash.fetch()
            defer { EVP_MD_free(md) }
            guard EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PSS_PADDING) == 1,
                EVP_PKEY_CTX_set_signature_md(context, md) == 1,
                EVP_PKEY_CTX_set_rsa_mgf1_md(context, md) == 1,
                EVP_PKEY_CTX_set_rsa_pss_saltlen(context, Int32(salt)) == 1
            else { throw P11Error(CKR_FUNCTION_FAILED) }
            encoded = signature
        }
        guard EVP_PKEY_verify(context, encoded, encoded.count, input, input.count) == 1 else {
            throw P11Error(CKR_SIGNATURE_INVALID)
        }
    }

    static func digest(_ hash: Hash, _ data: [UInt8]) throws(P11Error) -> [UInt8] {
        let md = try hash.fetch()
        defer { EVP_MD_free(md) }
        var output = [UInt8](repeating: 0, count: 64)
        var length: UInt32 = 0
        guard EVP_Digest(data, data.count, &output, &length, md, nil) == 1 else {
            throw P11Error(CKR_FUNCTION_FAILED)
        }
        return Array(output.prefix(Int(length)))
    }

    /// r ‖ s as the DER `ECDSA-Sig-Value` libcrypto verifies.
    static func derSignature(_ raw: [UInt8]) -> [UInt8] {
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.isEmpty || value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02] + Encode.derLength(value.count) + value
        }
        let half = raw.count / 2
        let contents = integer(raw[..<half]) + integer(raw[half...])
        return [0x30] + Encode.derLength(contents.count) + contents
    }
}
