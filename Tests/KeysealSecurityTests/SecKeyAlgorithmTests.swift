import Crypto
import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// Every `SecKeyAlgorithm` Apple declares: Apple's values, `SecKeyIsAlgorithmSupported` true exactly where the
/// operation then works, and the legacy calls (`SecKeyRawSign` …) over them.
@Suite("SecKeyAlgorithm as Apple declares it")
struct SecKeyAlgorithmTests {
    static let hashes = ["SHA1", "SHA224", "SHA256", "SHA384", "SHA512"]

    static func key(_ type: CFString, _ bits: Int) throws -> SecKey {
        var error: Unmanaged<CFError>?
        let parameters: [CFString: Any] = [kSecAttrKeyType: type, kSecAttrKeySizeInBits: bits]
        return try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
    }

    @Test("Apple's values, including PSS's MGF1 hash and salt size")
    func applesValues() {
        #expect(SecKeyAlgorithm.rsaSignatureMessagePSSSHA256.rawValue == "algid:sign:RSA:message-PSS:SHA256:SHA256:32")
        #expect(kSecKeyAlgorithmRSASignatureDigestPSSSHA224.rawValue == "algid:sign:RSA:digest-PSS:SHA224:SHA224:24")
        #expect(kSecKeyAlgorithmRSAEncryptionOAEPSHA384AESGCM.rawValue == "algid:encrypt:RSA:OAEP:SHA384:AESGCM")
        #expect(
            kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA224AESGCM.rawValue
                == "algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM-KDFIV"
        )
        #expect(kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA1.rawValue == "algid:keyexchange:ECDHC:KDFX963:SHA1")
        #expect(kSecKeyAlgorithmECDSASignatureDigestRFC4754.rawValue == "algid:sign:ECDSA:digest-RFC4754")
        #expect(kSecKeyAlgorithmRSASignatureRaw == .rsaSignatureRaw)
    }

    @Test("ECDSA with every hash signs and verifies, message and digest forms, X9.62 and RFC 4754")
    func ecdsaWithEveryHash() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try Self.key(kSecAttrKeyTypeECSECPrimeRandom, 256)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let message = Data("signed with every hash".utf8)
            for hash in Self.hashes {
                for form in ["X962", "RFC4754"] {
                    let algorithm = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:message-\(form):\(hash)" as CFString)
                    #expect(SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm), "\(form) \(hash)")
                    #expect(SecKeyIsAlgorithmSupported(publicKey, .verify, algorithm), "\(form) \(hash)")
                    let signature = try #require(SecKeyCreateSignature(privateKey, algorithm, message, &error))
                    #expect(SecKeyVerifySignature(publicKey, algorithm, message, signature, &error), "\(form) \(hash)")
                    // The digest form verifies the same signature over the message's digest.
                    let digestAlgorithm = SecKeyAlgorithm(
                        rawValue: "algid:sign:ECDSA:digest-\(form):\(hash)" as CFString
                    )
                    let digest = Self.digest(message, hash)
                    #expect(
                        SecKeyVerifySignature(publicKey, digestAlgorithm, digest, signature, &error),
                        "digest \(form) \(hash)"
                    )
                }
            }
            // SHA-224 as its definition says (FIPS 180-4 test vector "abc").
            #expect(
                Self.digest(Data("abc".utf8), "SHA224").map { String(format: "%02x", $0) }.joined()
                    == "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"
            )
        }
    }

    static func digest(_ data: Data, _ hash: String) -> Data {
        switch hash {
        case "SHA1": Data(Insecure.SHA1.hash(data: data))
        case "SHA224": Data(KeysealCore.sha224(data))
        case "SHA256": Data(SHA256.hash(data: data))
        case "SHA384": Data(SHA384.hash(data: data))
        default: Data(SHA512.hash(data: data))
        }
    }

    @Test("ECIES standard and cofactor with every hash, fixed and variable IV, round trip")
    func eciesWithEveryHash() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try Self.key(kSecAttrKeyTypeECSECPrimeRandom, 384)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let algorithms: [SecKeyAlgorithm] = [
                .eciesEncryptionStandardX963SHA1AESGCM, .eciesEncryptionStandardX963SHA224AESGCM,
                .eciesEncryptionStandardX963SHA384AESGCM, .eciesEncryptionStandardX963SHA512AESGCM,
                .eciesEncryptionCofactorX963SHA1AESGCM, .eciesEncryptionCofactorX963SHA224AESGCM,
                .eciesEncryptionCofactorX963SHA512AESGCM, .eciesEncryptionStandardVariableIVX963SHA224AESGCM,
                .eciesEncryptionStandardVariableIVX963SHA512AESGCM, .eciesEncryptionCofactorVariableIVX963SHA224AESGCM,
                .eciesEncryptionCofactorVariableIVX963SHA384AESGCM,
            ]
            for algorithm in algorithms {
                #expect(SecKeyIsAlgorithmSupported(publicKey, .encrypt, algorithm), "\(algorithm.rawValue)")
                #expect(SecKeyIsAlgorithmSupported(privateKey, .decrypt, algorithm), "\(algorithm.rawValue)")
                let plaintext = Data("ecies \(algorithm.rawValue)".utf8)
                let ciphertext = try #require(SecKeyCreateEncryptedData(publicKey, algorithm, plaintext, &error))
                #expect(SecKeyCreateDecryptedData(privateKey, algorithm, ciphertext, &error) == plaintext)
            }
        }
    }

    @Test("ECDH through the X9.63 KDF with every hash agrees with the peer")
    func ecdhWithEveryHash() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let alice = try Self.key(kSecAttrKeyTypeECSECPrimeRandom, 256)
            let bob = try Self.key(kSecAttrKeyTypeECSECPrimeRandom, 256)
            let parameters: [CFString: Any] = [
                kSecKeyKeyExchangeParameterRequestedSize: 40, kSecKeyKeyExchangeParameterSharedInfo: Data("i".utf8),
            ]
            for hash in Self.hashes {
                for variant in ["ECDH", "ECDHC"] {
                    let algorithm = SecKeyAlgorithm(
                        rawValue: "algid:keyexchange:\(variant):KDFX963:\(hash)" as CFString
                    )
                    #expect(SecKeyIsAlgorithmSupported(alice, .keyExchange, algorithm))
                    let one = SecKeyCopyKeyExchangeResult(
                        alice,
                        algorithm,
                        SecKeyCopyPublicKey(bob)!,
                        parameters as CFDictionary,
                        &error
                    )
                    let two = SecKeyCopyKeyExchangeResult(
                        bob,
                        algorithm,
                        SecKeyCopyPublicKey(alice)!,
                        parameters as CFDictionary,
                        &error
                    )
                    #expect(one != nil && one == two && one?.count == 40, "\(variant) \(hash)")
                }
            }
        }
    }

    @Test("RSA PKCS#1 v1.5 and PSS message signatures with SHA-1, -256, -384 and -512; PSS under Keyseal's old name")
    func rsaSignatures() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try Self.key(kSecAttrKeyTypeRSA, 2048)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let message = Data("rsa".utf8)
            let algorithms: [SecKeyAlgorithm] = [
                .rsaSignatureMessagePKCS1v15SHA1, .rsaSignatureMessagePKCS1v15SHA256,
                .rsaSignatureMessagePKCS1v15SHA384, .rsaSignatureMessagePKCS1v15SHA512, .rsaSignatureMessagePSSSHA1,
                .rsaSignatureMessagePSSSHA256, .rsaSignatureMessagePSSSHA384, .rsaSignatureMessagePSSSHA512,
            ]
            for algorithm in algorithms {
                #expect(SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm), "\(algorithm.rawValue)")
                let signature = try #require(SecKeyCreateSignature(privateKey, algorithm, message, &error))
                #expect(
                    SecKeyVerifySignature(publicKey, algorithm, message, signature, &error),
                    "\(algorithm.rawValue)"
                )
            }
            let oldName = SecKeyAlgorithm(rawValue: "algid:sign:RSA:message-PSS:SHA256")
            let pss = try #require(SecKeyCreateSignature(privateKey, oldName, message, &error))
            #expect(SecKeyVerifySignature(publicKey, .rsaSignatureMessagePSSSHA256, message, pss, &error))
        }
    }

    /// Declared so that Apple code compiles, not implemented: they answer false, and using one is errSecParam, never a
    /// wrong result.
    @Test("algorithms Keyseal does not implement answer false and fail with errSecParam")
    func unimplementedAlgorithmsSayNo() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try Self.key(kSecAttrKeyTypeRSA, 2048)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            for algorithm: SecKeyAlgorithm in [
                .rsaSignatureRaw, .rsaSignatureDigestPKCS1v15Raw, .rsaSignatureDigestPKCS1v15SHA256,
                .rsaSignatureMessagePKCS1v15SHA224, .rsaSignatureDigestPSSSHA256, .rsaSignatureMessagePSSSHA224,
            ] {
                #expect(!SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm), "\(algorithm.rawValue)")
                #expect(SecKeyCreateSignature(privateKey, algorithm, Data(count: 32), &error) == nil)
                #expect(takeError(error)?.code == Int(errSecParam))
            }
            for algorithm: SecKeyAlgorithm in [
                .rsaEncryptionRaw, .rsaEncryptionPKCS1, .rsaEncryptionOAEPSHA384, .rsaEncryptionOAEPSHA256AESGCM,
            ] {
                #expect(!SecKeyIsAlgorithmSupported(publicKey, .encrypt, algorithm), "\(algorithm.rawValue)")
                #expect(SecKeyCreateEncryptedData(publicKey, algorithm, Data("x".utf8), &error) == nil)
                #expect(takeError(error)?.code == Int(errSecParam))
            }
        }
    }

    @Test("SecKeyRawSign and SecKeyRawVerify on an EC key: ECDSA over the digest, as Apple maps them")
    func legacyECSignature() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try Self.key(kSecAttrKeyTypeECSECPrimeRandom, 256)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let digest = [UInt8](SHA256.hash(data: Data("legacy".utf8)))
            var signature = [UInt8](repeating: 0, count: 128)
            var length = signature.count
            #expect(SecKeyRawSign(privateKey, .PKCS1, digest, digest.count, &signature, &length) == errSecSuccess)
            let der = Data(signature.prefix(length))
            #expect(SecKeyVerifySignature(publicKey, .ecdsaSignatureDigestX962SHA256, Data(digest), der, &error))
            #expect(SecKeyRawVerify(publicKey, .PKCS1, digest, digest.count, signature, length) == errSecSuccess)
            signature[length - 1] ^= 1
            #expect(SecKeyRawVerify(publicKey, .PKCS1, digest, digest.count, signature, length) == errSecVerifyFailed)
            var small = [UInt8](repeating: 0, count: 8)
            var smallLength = small.count
            #expect(
                SecKeyRawSign(privateKey, .PKCS1, digest, digest.count, &small, &smallLength) == errSecBufferTooSmall
            )
            // `.sigRaw`: RFC 4754's r ‖ s.
            length = signature.count
            #expect(SecKeyRawSign(privateKey, .sigRaw, digest, digest.count, &signature, &length) == errSecSuccess)
            #expect(length == 64)
        }
    }

    @Test("SecKeyEncrypt and SecKeyDecrypt with OAEP on an RSA key; SecKeyGetBlockSize")
    func legacyRSAEncryption() throws {
        try withStore { _ in
            let privateKey = try Self.key(kSecAttrKeyTypeRSA, 2048)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            #expect(SecKeyGetBlockSize(publicKey) == 256)
            let plaintext = [UInt8]("legacy secret".utf8)
            var ciphertext = [UInt8](repeating: 0, count: 256)
            var cipherLength = ciphertext.count
            #expect(
                SecKeyEncrypt(publicKey, .OAEP, plaintext, plaintext.count, &ciphertext, &cipherLength)
                    == errSecSuccess
            )
            var decrypted = [UInt8](repeating: 0, count: 256)
            var decryptedLength = decrypted.count
            #expect(
                SecKeyDecrypt(privateKey, .OAEP, ciphertext, cipherLength, &decrypted, &decryptedLength)
                    == errSecSuccess
            )
            #expect(Array(decrypted.prefix(decryptedLength)) == plaintext)
            // PKCS#1 v1.5 encryption and digest-form RSA signatures are not implemented: errSecParam, nothing written.
            #expect(
                SecKeyEncrypt(publicKey, .PKCS1, plaintext, plaintext.count, &ciphertext, &cipherLength) == errSecParam
            )
            let digest = [UInt8](SHA256.hash(data: Data(plaintext)))
            #expect(
                SecKeyRawSign(privateKey, .PKCS1SHA256, digest, digest.count, &ciphertext, &cipherLength)
                    == errSecParam
            )
        }
    }

    @Test(
        "a Secure Enclave key signs with ECDSA SHA-1 and SHA-224 too",
        .disabled(
            if: TestBackend.throughDaemon && TestBackend.current == .hostKey,
            "keyseald on the host key has no key hardware (the software double is embedded only)"
        )
    )
    func hardwareKeyWithOtherHashes() throws {
        try withHardwareStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try #require(
                SecKeyCreateRandomKey(SecKeyTests.secureEnclaveParameters(tag: "hashes") as CFDictionary, &error)
            )
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let message = Data("hardware".utf8)
            for algorithm: SecKeyAlgorithm in [.ecdsaSignatureMessageX962SHA1, .ecdsaSignatureMessageX962SHA224] {
                #expect(SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm))
                let signature = try #require(SecKeyCreateSignature(privateKey, algorithm, message, &error))
                #expect(SecKeyVerifySignature(publicKey, algorithm, message, signature, &error))
            }
        }
    }
}
