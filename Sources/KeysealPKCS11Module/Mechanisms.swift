import CKeysealPKCS11Entry
import FoundationEssentials
import KeysealClient

/// The mechanisms the token offers, and what each becomes on the wire (Apple's `SecKeyAlgorithm` names).
enum Mechanisms {
    static let ecdsaSign: [CK_MECHANISM_TYPE: String] = [
        CK_MECHANISM_TYPE(CKM_ECDSA): "algid:sign:ECDSA:digest-RFC4754",
        CK_MECHANISM_TYPE(CKM_ECDSA_SHA256): "algid:sign:ECDSA:message-RFC4754:SHA256",
        CK_MECHANISM_TYPE(CKM_ECDSA_SHA384): "algid:sign:ECDSA:message-RFC4754:SHA384",
        CK_MECHANISM_TYPE(CKM_ECDSA_SHA512): "algid:sign:ECDSA:message-RFC4754:SHA512",
    ]

    static let rsaSign: [CK_MECHANISM_TYPE: String] = [
        // The caller's block (a DigestInfo, for a signature) padded as PKCS#1 v1.5 type 1 and signed: Apple's
        // rsaSignatureDigestPKCS1v15Raw.
        CK_MECHANISM_TYPE(CKM_RSA_PKCS): "algid:sign:RSA:digest-PKCS1v15",
        CK_MECHANISM_TYPE(CKM_SHA1_RSA_PKCS): "algid:sign:RSA:message-PKCS1v15:SHA1",
        CK_MECHANISM_TYPE(CKM_SHA224_RSA_PKCS): "algid:sign:RSA:message-PKCS1v15:SHA224",
        CK_MECHANISM_TYPE(CKM_SHA256_RSA_PKCS): "algid:sign:RSA:message-PKCS1v15:SHA256",
        CK_MECHANISM_TYPE(CKM_SHA384_RSA_PKCS): "algid:sign:RSA:message-PKCS1v15:SHA384",
        CK_MECHANISM_TYPE(CKM_SHA512_RSA_PKCS): "algid:sign:RSA:message-PKCS1v15:SHA512",
        CK_MECHANISM_TYPE(CKM_SHA256_RSA_PKCS_PSS): "algid:sign:RSA:message-PSS:SHA256",
        CK_MECHANISM_TYPE(CKM_SHA384_RSA_PKCS_PSS): "algid:sign:RSA:message-PSS:SHA384",
        CK_MECHANISM_TYPE(CKM_SHA512_RSA_PKCS_PSS): "algid:sign:RSA:message-PSS:SHA512",
    ]

    /// The PSS mechanisms' hash and MGF1 (keyseald's PSS uses the hash for MGF1 and a salt of the hash's size).
    static let pss: [CK_MECHANISM_TYPE: (hash: CK_MECHANISM_TYPE, mgf: CK_ULONG, salt: CK_ULONG)] = [
        CK_MECHANISM_TYPE(CKM_SHA256_RSA_PKCS_PSS): (CK_MECHANISM_TYPE(CKM_SHA256), CK_ULONG(CKG_MGF1_SHA256), 32),
        CK_MECHANISM_TYPE(CKM_SHA384_RSA_PKCS_PSS): (CK_MECHANISM_TYPE(CKM_SHA384), CK_ULONG(CKG_MGF1_SHA384), 48),
        CK_MECHANISM_TYPE(CKM_SHA512_RSA_PKCS_PSS): (CK_MECHANISM_TYPE(CKM_SHA512), CK_ULONG(CKG_MGF1_SHA512), 64),
    ]

    /// CKM_RSA_PKCS_PSS over a digest the caller made: the hash its parameters name (MGF1 of the same hash, a salt of
    /// the hash's size, as keyseald's PSS), and Apple's digest-form name.
    static let pssDigest: [CK_MECHANISM_TYPE: (mgf: CK_ULONG, salt: CK_ULONG, algorithm: String)] = [
        CK_MECHANISM_TYPE(CKM_SHA_1): (CK_ULONG(CKG_MGF1_SHA1), 20, "algid:sign:RSA:digest-PSS:SHA1:SHA1:20"),
        CK_MECHANISM_TYPE(CKM_SHA224): (CK_ULONG(CKG_MGF1_SHA224), 28, "algid:sign:RSA:digest-PSS:SHA224:SHA224:24"),
        CK_MECHANISM_TYPE(CKM_SHA256): (CK_ULONG(CKG_MGF1_SHA256), 32, "algid:sign:RSA:digest-PSS:SHA256:SHA256:32"),
        CK_MECHANISM_TYPE(CKM_SHA384): (CK_ULONG(CKG_MGF1_SHA384), 48, "algid:sign:RSA:digest-PSS:SHA384:SHA384:48"),
        CK_MECHANISM_TYPE(CKM_SHA512): (CK_ULONG(CKG_MGF1_SHA512), 64, "algid:sign:RSA:digest-PSS:SHA512:SHA512:64"),
    ]

    /// OAEP decryption by its hash (MGF1 of the same hash, no label).
    static let oaep: [CK_MECHANISM_TYPE: (mgf: CK_ULONG, algorithm: String)] = [
        CK_MECHANISM_TYPE(CKM_SHA_1): (CK_ULONG(CKG_MGF1_SHA1), "algid:encrypt:RSA:OAEP:SHA1"),
        CK_MECHANISM_TYPE(CKM_SHA224): (CK_ULONG(CKG_MGF1_SHA224), "algid:encrypt:RSA:OAEP:SHA224"),
        CK_MECHANISM_TYPE(CKM_SHA256): (CK_ULONG(CKG_MGF1_SHA256), "algid:encrypt:RSA:OAEP:SHA256"),
        CK_MECHANISM_TYPE(CKM_SHA384): (CK_ULONG(CKG_MGF1_SHA384), "algid:encrypt:RSA:OAEP:SHA384"),
        CK_MECHANISM_TYPE(CKM_SHA512): (CK_ULONG(CKG_MGF1_SHA512), "algid:encrypt:RSA:OAEP:SHA512"),
    ]

    static let all: [CK_MECHANISM_TYPE] =
        ([CKM_EC_KEY_PAIR_GEN, CKM_ECDH1_DERIVE, CKM_RSA_PKCS_OAEP, CKM_RSA_PKCS_PSS].map { CK_MECHANISM_TYPE($0) }
        + ecdsaSign.keys + rsaSign.keys).sorted()

    static func info(_ type: CK_MECHANISM_TYPE) -> CK_MECHANISM_INFO? {
        var info = CK_MECHANISM_INFO()
        if ecdsaSign[type] != nil {
            info.ulMinKeySize = 256
            info.ulMaxKeySize = 521
            info.flags =
                CK_FLAGS(CKF_SIGN) | CK_FLAGS(CKF_VERIFY) | CK_FLAGS(CKF_EC_F_P) | CK_FLAGS(CKF_EC_NAMEDCURVE)
                | CK_FLAGS(CKF_EC_UNCOMPRESS)
        } else if type == CK_MECHANISM_TYPE(CKM_RSA_PKCS) {
            info.ulMinKeySize = 1024
            info.ulMaxKeySize = 4096
            info.flags = CK_FLAGS(CKF_SIGN) | CK_FLAGS(CKF_VERIFY) | CK_FLAGS(CKF_DECRYPT)
        } else if rsaSign[type] != nil || type == CK_MECHANISM_TYPE(CKM_RSA_PKCS_PSS) {
            info.ulMinKeySize = 1024
            info.ulMaxKeySize = 4096
            info.flags = CK_FLAGS(CKF_SIGN) | CK_FLAGS(CKF_VERIFY)
        } else if type == CK_MECHANISM_TYPE(CKM_RSA_PKCS_OAEP) {
            info.ulMinKeySize = 1024
            info.ulMaxKeySize = 4096
            info.flags = CK_FLAGS(CKF_DECRYPT)
        } else if type == CK_MECHANISM_TYPE(CKM_EC_KEY_PAIR_GEN) {
            info.ulMinKeySize = 256
            info.ulMaxKeySize = 521
            info.flags =
                CK_FLAGS(CKF_GENERATE_KEY_PAIR) | CK_FLAGS(CKF_EC_F_P) | CK_FLAGS(CKF_EC_NAMEDCURVE)
                | CK_FLAGS(CKF_EC_UNCOMPRESS)
        } else if type == CK_MECHANISM_TYPE(CKM_ECDH1_DERIVE) {
            info.ulMinKeySize = 256
            info.ulMaxKeySize = 521
            info.flags =
                CK_FLAGS(CKF_DERIVE) | CK_FLAGS(CKF_EC_F_P) | CK_FLAGS(CKF_EC_NAMEDCURVE)
                | CK_FLAGS(CKF_EC_UNCOMPRESS)
        } else {
            return nil
        }
        // Done by the token (keyseald), not in the caller's process: what pkcs11-tool's tests look for.
        info.flags |= CK_FLAGS(CKF_HW)
        return info
    }

    /// The hashes of the hashing signature mechanisms (CKM_ECDSA_SHA256, CKM_SHA256_RSA_PKCS...).
    static let messageHash: [CK_MECHANISM_TYPE: Verification.Hash] = [
        CK_MECHANISM_TYPE(CKM_ECDSA_SHA256): .sha256,
        CK_MECHANISM_TYPE(CKM_ECDSA_SHA384): .sha384,
        CK_MECHANISM_TYPE(CKM_ECDSA_SHA512): .sha512,
        CK_MECHANISM_TYPE(CKM_SHA1_RSA_PKCS): .sha1,
        CK_MECHANISM_TYPE(CKM_SHA224_RSA_PKCS): .sha224,
        CK_MECHANISM_TYPE(CKM_SHA256_RSA_PKCS): .sha256,
        CK_MECHANISM_TYPE(CKM_SHA384_RSA_PKCS): .sha384,
        CK_MECHANISM_TYPE(CKM_SHA512_RSA_PKCS): .sha512,
        CK_MECHANISM_TYPE(CKM_SHA256_RSA_PKCS_PSS): .sha256,
        CK_MECHANISM_TYPE(CKM_SHA384_RSA_PKCS_PSS): .sha384,
        CK_MECHANISM_TYPE(CKM_SHA512_RSA_PKCS_PSS): .sha512,
    ]

    /// The hashes a PSS mechanism's parameters name.
    static let parameterHash: [CK_MECHANISM_TYPE: Verification.Hash] = [
        CK_MECHANISM_TYPE(CKM_SHA_1): .sha1,
        CK_MECHANISM_TYPE(CKM_SHA224): .sha224,
        CK_MECHANISM_TYPE(CKM_SHA256): .sha256,
        CK_MECHANISM_TYPE(CKM_SHA384): .sha384,
        CK_MECHANISM_TYPE(CKM_SHA512): .sha512,
    ]

    /// A signature mechanism for a key of `keyType`: keyseald's algorithm, and what checking such a signature takes.
    struct SignatureScheme {
        var algorithm: String
        var size: Int
        var multipart: Bool
        var messageHash: Verification.Hash?
        var padding: Verification.Padding
    }

    /// The signature scheme `mechanism` names for a key of `keyType`; CKR_MECHANISM_INVALID,
    /// CKR_MECHANISM_PARAM_INVALID or CKR_KEY_TYPE_INCONSISTENT when it cannot be.
    static func signatureScheme(_ mechanism: CK_MECHANISM, keyType: KeyType) throws(P11Error) -> SignatureScheme {
        let type = mechanism.mechanism
        if let algorithm = ecdsaSign[type] {
            guard keyType.isEC else { throw P11Error(CKR_KEY_TYPE_INCONSISTENT) }
            return SignatureScheme(
                algorithm: algorithm,
                size: 2 * ((keyType.bits + 7) / 8),
                multipart: type != CK_MECHANISM_TYPE(CKM_ECDSA),
                messageHash: messageHash[type],
                padding: .ecdsa
            )
        }
        if type == CK_MECHANISM_TYPE(CKM_RSA_PKCS_PSS) {
            guard !keyType.isEC else { throw P11Error(CKR_KEY_TYPE_INCONSISTENT) }
            guard mechanism.ulParameterLen == CK_ULONG(MemoryLayout<CK_RSA_PKCS_PSS_PARAMS>.size),
                let raw = mechanism.pParameter
            else { throw P11Error(CKR_MECHANISM_PARAM_INVALID) }
            let parameters = raw.loadUnaligned(as: CK_RSA_PKCS_PSS_PARAMS.self)
            guard let expected = pssDigest[parameters.hashAlg], let hash = parameterHash[parameters.hashAlg],
                parameters.mgf == expected.mgf, parameters.sLen == expected.salt
            else { throw P11Error(CKR_MECHANISM_PARAM_INVALID) }
            return SignatureScheme(
                algorithm: expected.algorithm,
                size: (keyType.bits + 7) / 8,
                multipart: false,
                messageHash: nil,
                padding: .pss(hash, salt: Int(expected.salt))
            )
        }
        if let algorithm = rsaSign[type] {
            guard !keyType.isEC else { throw P11Error(CKR_KEY_TYPE_INCONSISTENT) }
            var padding = Verification.Padding.pkcs1(messageHash[type])
            if let expected = pss[type], let hash = messageHash[type] {
                guard mechanism.ulParameterLen == CK_ULONG(MemoryLayout<CK_RSA_PKCS_PSS_PARAMS>.size),
                    let raw = mechanism.pParameter
                else { throw P11Error(CKR_MECHANISM_PARAM_INVALID) }
                let parameters = raw.loadUnaligned(as: CK_RSA_PKCS_PSS_PARAMS.self)
                guard parameters.hashAlg == expected.hash, parameters.mgf == expected.mgf,
                    parameters.sLen == expected.salt
                else { throw P11Error(CKR_MECHANISM_PARAM_INVALID) }
                padding = .pss(hash, salt: Int(expected.salt))
            }
            return SignatureScheme(
                algorithm: algorithm,
                size: (keyType.bits + 7) / 8,
                multipart: type != CK_MECHANISM_TYPE(CKM_RSA_PKCS),
                messageHash: messageHash[type],
                padding: padding
            )
        }
        throw P11Error(CKR_MECHANISM_INVALID)
    }

    /// The signing operation `mechanism` asks of `key` (a private key).
    static func signing(_ mechanism: CK_MECHANISM, key: P11Object) throws(P11Error) -> PendingOperation {
        guard case .privateKey(let reference) = key.source, let keyType = key.keyType else {
            throw P11Error(CKR_KEY_TYPE_INCONSISTENT)
        }
        let scheme = try signatureScheme(mechanism, keyType: keyType)
        return PendingOperation(
            kind: .sign,
            reference: reference,
            algorithm: scheme.algorithm,
            outputSize: scheme.size,
            multipart: scheme.multipart
        )
    }

    /// The verification `mechanism` asks of `key` (a public key): done in this process with its public part.
    static func verification(_ mechanism: CK_MECHANISM, key: P11Object) throws(P11Error) -> PendingOperation {
        guard case .publicKey(let reference) = key.source, let keyType = key.keyType, !key.publicKeyInfo.isEmpty
        else { throw P11Error(CKR_KEY_TYPE_INCONSISTENT) }
        let scheme = try signatureScheme(mechanism, keyType: keyType)
        return PendingOperation(
            kind: .verify,
            reference: reference,
            algorithm: scheme.algorithm,
            outputSize: scheme.size,
            multipart: scheme.multipart,
            verification: Verification(
                publicKeyInfo: key.publicKeyInfo,
                messageHash: scheme.messageHash,
                padding: scheme.padding,
                signatureSize: scheme.size
            )
        )
    }

    /// The decryption `mechanism` asks of `key`: RSA PKCS#1 v1.5, or OAEP with SHA-1 to SHA-512 (MGF1 of the same
    /// hash, no label).
    static func decryption(_ mechanism: CK_MECHANISM, key: P11Object) throws(P11Error) -> PendingOperation {
        guard
            mechanism.mechanism == CK_MECHANISM_TYPE(CKM_RSA_PKCS_OAEP)
                || mechanism.mechanism == CK_MECHANISM_TYPE(CKM_RSA_PKCS)
        else { throw P11Error(CKR_MECHANISM_INVALID) }
        guard case .privateKey(let reference) = key.source, let keyType = key.keyType, !keyType.isEC else {
            throw P11Error(CKR_KEY_TYPE_INCONSISTENT)
        }
        if mechanism.mechanism == CK_MECHANISM_TYPE(CKM_RSA_PKCS) {
            return PendingOperation(
                kind: .decrypt,
                reference: reference,
                algorithm: "algid:encrypt:RSA:PKCS1",
                outputSize: (keyType.bits + 7) / 8,
                multipart: false
            )
        }
        guard mechanism.ulParameterLen == CK_ULONG(MemoryLayout<CK_RSA_PKCS_OAEP_PARAMS>.size),
            let raw = mechanism.pParameter
        else { throw P11Error(CKR_MECHANISM_PARAM_INVALID) }
        let parameters = raw.loadUnaligned(as: CK_RSA_PKCS_OAEP_PARAMS.self)
        guard let expected = oaep[parameters.hashAlg], parameters.mgf == expected.mgf else {
            throw P11Error(CKR_MECHANISM_PARAM_INVALID)
        }
        let algorithm = expected.algorithm
        guard parameters.source == 0 || parameters.ulSourceDataLen == 0 else {
            throw P11Error(CKR_MECHANISM_PARAM_INVALID)
        }
        return PendingOperation(
            kind: .decrypt,
            reference: reference,
            algorithm: algorithm,
            outputSize: (keyType.bits + 7) / 8,
            multipart: false
        )
    }
}
