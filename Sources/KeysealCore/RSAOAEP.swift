internal import CLibCrypto

/// RSA-OAEP encryption with a label (swift-crypto has OAEP without one): SHA-256 for OAEP and MGF1, through libcrypto.
/// TPM2_MakeCredential encrypts its seed to an RSA endorsement key with the label "IDENTITY" (TPM 2.0 Part 1, §24).
public enum RSAOAEP {
    /// Encrypts `message` to the RSA public key `pkcs1PublicKey` (a DER RSAPublicKey) with `label` (its bytes as
    /// given: a TPM label includes its terminating zero). Throws errSecParam for a key libcrypto does not accept.
    public static func encryptSHA256(pkcs1PublicKey: [UInt8], label: [UInt8], message: [UInt8]) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 1024)
        var length = out.count
        let ok = pkcs1PublicKey.withUnsafeBufferPointer { key in
            label.withUnsafeBufferPointer { label in
                message.withUnsafeBufferPointer { message in
                    out.withUnsafeMutableBufferPointer { out in
                        keyseal_rsa_oaep_sha256_encrypt(
                            key.baseAddress,
                            key.count,
                            label.baseAddress,
                            label.count,
                            message.baseAddress,
                            message.count,
                            out.baseAddress,
                            &length
                        )
                    }
                }
            }
        }
        guard ok == 1 else {
            throw KeychainError(
                KeychainStatus.param,
                "RSA-OAEP encryption failed (not an RSA public key of 1024 to 8192 bits)"
            )
        }
        return Array(out[0..<length])
    }
}
