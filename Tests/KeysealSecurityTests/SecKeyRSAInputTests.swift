import Foundation
import KeysealSecurity
import KeysealTestSupport
import Testing

/// RSA inputs Apple accepts beyond the strict forms: raw operations on a number shorter than the modulus, and public
/// keys as X.509 SubjectPublicKeyInfo.
@Suite struct SecKeyRSAInputTests {
    @Test("Raw RSA on a short number works on the number zero-extended to a block, as openssl computes it")
    func rawShortInputIsZeroExtended() throws {
        try withStore { _ in
            let privateKey = try SecKeyAlgorithmTests.key(kSecAttrKeyTypeRSA, 1024)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let number = Data([0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09])
            let block = Data(repeating: 0, count: 128 - number.count) + number
            var error: Unmanaged<CFError>?
            let ciphertext = try #require(
                SecKeyCreateEncryptedData(publicKey, .rsaEncryptionRaw, number as CFData, &error) as Data?,
                "\(String(describing: error?.takeRetainedValue()))"
            )
            #expect(ciphertext.count == 128)
            // openssl's bare public-key operation on the zero-extended block gives the same bytes.
            let directory = try TemporaryDirectory(prefix: "keyseal-rsa-raw")
            let pem = try SecKeyAlgorithmTests.publicKeyFile(publicKey, in: directory)
            let input = directory.appending("block")
            let output = directory.appending("cipher")
            try block.write(to: input)
            let encrypted = try SecKeyAlgorithmTests.openssl([
                "pkeyutl", "-encrypt", "-pubin", "-inkey", pem, "-pkeyopt", "rsa_padding_mode:none",
                "-in", input.path, "-out", output.path,
            ])
            #expect(encrypted.status == 0, "\(encrypted.stderrText)")
            #expect(try Data(contentsOf: output) == ciphertext)
            // Decryption gives back the whole block, leading zeros included, as Apple's does.
            let decrypted = SecKeyCreateDecryptedData(privateKey, .rsaEncryptionRaw, ciphertext as CFData, &error)
            #expect(decrypted as Data? == block)
        }
    }

    @Test("A raw signature of a short number verifies, against the number and against its full block")
    func rawShortSignature() throws {
        try withStore { _ in
            let privateKey = try SecKeyAlgorithmTests.key(kSecAttrKeyTypeRSA, 1024)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let number = Data("short".utf8)
            var error: Unmanaged<CFError>?
            let signature = try #require(
                SecKeyCreateSignature(privateKey, .rsaSignatureRaw, number as CFData, &error) as Data?
            )
            #expect(signature.count == 128)
            let block = Data(repeating: 0, count: 128 - number.count) + number
            #expect(SecKeyVerifySignature(publicKey, .rsaSignatureRaw, number as CFData, signature as CFData, &error))
            #expect(SecKeyVerifySignature(publicKey, .rsaSignatureRaw, block as CFData, signature as CFData, &error))
            #expect(
                !SecKeyVerifySignature(
                    publicKey,
                    .rsaSignatureRaw,
                    Data("shorT".utf8) as CFData,
                    signature as CFData,
                    &error
                )
            )
            // Longer than the modulus is still refused.
            let long = Data(repeating: 1, count: 129)
            #expect(SecKeyCreateSignature(privateKey, .rsaSignatureRaw, long as CFData, &error) == nil)
            #expect(takeError(error)?.code == Int(errSecParam))
        }
    }

    @Test("An RSA public key given as SubjectPublicKeyInfo is read, and kept as PKCS#1")
    func subjectPublicKeyInfoIsRead() throws {
        try withStore { _ in
            let privateKey = try SecKeyAlgorithmTests.key(kSecAttrKeyTypeRSA, 2048)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            var error: Unmanaged<CFError>?
            let pkcs1 = try #require(SecKeyCopyExternalRepresentation(publicKey, &error) as Data?)
            let directory = try TemporaryDirectory(prefix: "keyseal-rsa-spki")
            let pem = try SecKeyAlgorithmTests.publicKeyFile(publicKey, in: directory)
            let spkiFile = directory.appending("spki.der")
            let converted = try SecKeyAlgorithmTests.openssl([
                "pkey", "-pubin", "-in", pem, "-outform", "DER", "-out", spkiFile.path,
            ])
            #expect(converted.status == 0, "\(converted.stderrText)")
            let spki = try Data(contentsOf: spkiFile)
            #expect(spki != pkcs1)
            let attributes: [CFString: Any] = [
                kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeyClass: kSecAttrKeyClassPublic,
            ]
            let imported = try #require(
                SecKeyCreateWithData(spki as CFData, attributes as CFDictionary, &error),
                "\(String(describing: error?.takeRetainedValue()))"
            )
            #expect(SecKeyCopyExternalRepresentation(imported, &error) as Data? == pkcs1)
            let signature = try #require(
                SecKeyCreateSignature(privateKey, .rsaSignatureMessagePKCS1v15SHA256, Data("m".utf8) as CFData, &error)
            )
            #expect(
                SecKeyVerifySignature(
                    imported,
                    .rsaSignatureMessagePKCS1v15SHA256,
                    Data("m".utf8) as CFData,
                    signature,
                    &error
                )
            )
            // An EC key's SubjectPublicKeyInfo is not an RSA key.
            let ecKey = try SecKeyAlgorithmTests.key(kSecAttrKeyTypeECSECPrimeRandom, 256)
            let ecPublic = try #require(SecKeyCopyPublicKey(ecKey))
            let ecPoint = try #require(SecKeyCopyExternalRepresentation(ecPublic, &error) as Data?)
            let ecSPKI =
                Data([
                    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
                    0x86,
                    0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
                ]) + ecPoint
            #expect(SecKeyCreateWithData(ecSPKI as CFData, attributes as CFDictionary, &error) == nil)
            #expect(takeError(error)?.code == Int(errSecParam))
        }
    }

    @Test("A public key whose modulus is 1023 bits is a 1024-bit key, as Apple reads it, and encrypts for its owner")
    func modulusShortOfItsBlock() throws {
        try withStore { _ in
            let directory = try TemporaryDirectory(prefix: "keyseal-rsa-1023")
            let privatePEM = directory.appending("private.pem").path
            let publicDER = directory.appending("public.der").path
            var result = try SecKeyAlgorithmTests.openssl([
                "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1023", "-out", privatePEM,
            ])
            #expect(result.status == 0, "\(result.stderrText)")
            result = try SecKeyAlgorithmTests.openssl([
                "rsa", "-in", privatePEM, "-RSAPublicKey_out", "-outform", "DER", "-out", publicDER,
            ])
            #expect(result.status == 0, "\(result.stderrText)")
            let attributes: [CFString: Any] = [
                kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeyClass: kSecAttrKeyClassPublic,
            ]
            var error: Unmanaged<CFError>?
            let publicKey = try #require(
                SecKeyCreateWithData(
                    try Data(contentsOf: URL(fileURLWithPath: publicDER)) as CFData,
                    attributes as CFDictionary,
                    &error
                ),
                "\(String(describing: error?.takeRetainedValue()))"
            )
            #expect(SecKeyGetBlockSize(publicKey) == 128)
            let plaintext = Data("for the owner".utf8)
            let ciphertext = try #require(
                SecKeyCreateEncryptedData(publicKey, .rsaEncryptionPKCS1, plaintext as CFData, &error) as Data?
            )
            let cipherFile = directory.appending("cipher")
            let plainFile = directory.appending("plain")
            try ciphertext.write(to: cipherFile)
            result = try SecKeyAlgorithmTests.openssl([
                "pkeyutl", "-decrypt", "-inkey", privatePEM, "-in", cipherFile.path, "-out", plainFile.path,
            ])
            #expect(result.status == 0, "\(result.stderrText)")
            #expect(try Data(contentsOf: plainFile) == plaintext)
        }
    }
}
