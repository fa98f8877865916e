import Foundation
import KeysealSecurity
import KeysealTestSupport
import Testing

/// Every `SecKeyAlgorithm` constant Apple declares, on every kind of software key: `SecKeyIsAlgorithmSupported`
/// answers true exactly where the operation works, and works wherever the key's type allows the algorithm. Apple's
/// own known ciphertexts decrypt, and what Keyseal encrypts with RSA-OAEP AES-GCM opens in python's `cryptography`.
@Suite(
    "Every SecKeyAlgorithm on every key type",
    .disabled(
        if: TestBackend.current != .hostKey || TestBackend.throughDaemon,
        "software keys held by the test process: the store's backend plays no part"
    )
)
struct EveryAlgorithmTests {
    /// Every constant of Apple's SecKey.h (87).
    static let all: [SecKeyAlgorithm] = [
        kSecKeyAlgorithmRSASignatureRaw, kSecKeyAlgorithmRSASignatureDigestPKCS1v15Raw,
        kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA1, kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA224,
        kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA256, kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA384,
        kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA512, kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA1,
        kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA224, kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA256,
        kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA384, kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA512,
        kSecKeyAlgorithmRSASignatureDigestPSSSHA1, kSecKeyAlgorithmRSASignatureDigestPSSSHA224,
        kSecKeyAlgorithmRSASignatureDigestPSSSHA256, kSecKeyAlgorithmRSASignatureDigestPSSSHA384,
        kSecKeyAlgorithmRSASignatureDigestPSSSHA512, kSecKeyAlgorithmRSASignatureMessagePSSSHA1,
        kSecKeyAlgorithmRSASignatureMessagePSSSHA224, kSecKeyAlgorithmRSASignatureMessagePSSSHA256,
        kSecKeyAlgorithmRSASignatureMessagePSSSHA384, kSecKeyAlgorithmRSASignatureMessagePSSSHA512,
        kSecKeyAlgorithmECDSASignatureRFC4754, kSecKeyAlgorithmECDSASignatureDigestX962,
        kSecKeyAlgorithmECDSASignatureDigestX962SHA1, kSecKeyAlgorithmECDSASignatureDigestX962SHA224,
        kSecKeyAlgorithmECDSASignatureDigestX962SHA256, kSecKeyAlgorithmECDSASignatureDigestX962SHA384,
        kSecKeyAlgorithmECDSASignatureDigestX962SHA512, kSecKeyAlgorithmECDSASignatureMessageX962SHA1,
        kSecKeyAlgorithmECDSASignatureMessageX962SHA224, kSecKeyAlgorithmECDSASignatureMessageX962SHA256,
        kSecKeyAlgorithmECDSASignatureMessageX962SHA384, kSecKeyAlgorithmECDSASignatureMessageX962SHA512,
        kSecKeyAlgorithmECDSASignatureDigestRFC4754, kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA1,
        kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA224, kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA256,
        kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA384, kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA512,
        kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA1, kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA224,
        kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA256, kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA384,
        kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA512, kSecKeyAlgorithmRSAEncryptionRaw,
        kSecKeyAlgorithmRSAEncryptionPKCS1, kSecKeyAlgorithmRSAEncryptionOAEPSHA1,
        kSecKeyAlgorithmRSAEncryptionOAEPSHA224, kSecKeyAlgorithmRSAEncryptionOAEPSHA256,
        kSecKeyAlgorithmRSAEncryptionOAEPSHA384, kSecKeyAlgorithmRSAEncryptionOAEPSHA512,
        kSecKeyAlgorithmRSAEncryptionOAEPSHA1AESGCM, kSecKeyAlgorithmRSAEncryptionOAEPSHA224AESGCM,
        kSecKeyAlgorithmRSAEncryptionOAEPSHA256AESGCM, kSecKeyAlgorithmRSAEncryptionOAEPSHA384AESGCM,
        kSecKeyAlgorithmRSAEncryptionOAEPSHA512AESGCM, kSecKeyAlgorithmECIESEncryptionStandardX963SHA1AESGCM,
        kSecKeyAlgorithmECIESEncryptionStandardX963SHA224AESGCM,
        kSecKeyAlgorithmECIESEncryptionStandardX963SHA256AESGCM,
        kSecKeyAlgorithmECIESEncryptionStandardX963SHA384AESGCM,
        kSecKeyAlgorithmECIESEncryptionStandardX963SHA512AESGCM,
        kSecKeyAlgorithmECIESEncryptionCofactorX963SHA1AESGCM, kSecKeyAlgorithmECIESEncryptionCofactorX963SHA224AESGCM,
        kSecKeyAlgorithmECIESEncryptionCofactorX963SHA256AESGCM,
        kSecKeyAlgorithmECIESEncryptionCofactorX963SHA384AESGCM,
        kSecKeyAlgorithmECIESEncryptionCofactorX963SHA512AESGCM,
        kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA224AESGCM,
        kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA256AESGCM,
        kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA384AESGCM,
        kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA512AESGCM,
        kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA224AESGCM,
        kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA256AESGCM,
        kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA384AESGCM,
        kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA512AESGCM, kSecKeyAlgorithmECDHKeyExchangeStandard,
        kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA1, kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA224,
        kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA256, kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA384,
        kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA512, kSecKeyAlgorithmECDHKeyExchangeCofactor,
        kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA1, kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA224,
        kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA256, kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA384,
        kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA512,
    ]

    @Test("the list is every constant KeysealSecurity declares, each once: Apple's 87")
    func listIsEveryDeclaredConstant() throws {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/KeysealSecurity/SecKeyAlgorithm.swift")
        let text = try String(contentsOf: source, encoding: .utf8)
        let declared = try Regex(#""(algid:[^"]+)""#)
        let names = Set(text.matches(of: declared).map { String(text[$0.range].dropFirst().dropLast()) })
        let listed = Self.all.map { $0.rawValue as String }
        #expect(Set(listed).count == listed.count)
        #expect(listed.count == 87)
        #expect(Set(listed) == names)
    }

    /// A software key of each type Apple generates, with a second one of the same type for key exchange (RSA has
    /// none: its "peer" is itself, and every key exchange must fail).
    enum KeyKind: String, CaseIterable, CustomTestStringConvertible {
        case rsa2048 = "RSA 2048"
        case p256 = "P-256"
        case p384 = "P-384"
        case p521 = "P-521"

        var testDescription: String { rawValue }
        var isRSA: Bool { self == .rsa2048 }
        var parameters: [CFString: Any] {
            switch self {
            case .rsa2048: [kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: 2048]
            case .p256: [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256]
            case .p384: [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 384]
            case .p521: [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 521]
            }
        }
    }

    static let message = Data("every algorithm, every key".utf8)

    /// What a signature algorithm signs: a block of the modulus's size (raw RSA, below the modulus), a digest of the
    /// algorithm's hash (SHA-256's size where the name has none), or the message.
    static func signedInput(_ name: String, blockSize: Int) -> Data {
        let parts = name.split(separator: ":").map(String.init) + [""]
        if parts[3] == "raw" { return Data([0x00, 0x01]) + Data(repeating: 0x5a, count: blockSize - 2) }
        if parts[3].hasPrefix("message") { return message }
        return SecKeyAlgorithmTests.digest(message, parts.count > 5 ? parts[4] : "SHA256")
    }

    /// What an encryption algorithm encrypts: a block of the modulus's size for raw RSA, else a short message.
    static func plaintext(_ name: String, blockSize: Int) -> Data {
        name == "algid:encrypt:RSA:raw" ? Data([0x00]) + Data(repeating: 0x42, count: blockSize - 1) : message
    }

    /// The first byte changed (ECDSA keeps only a digest's leading bits, as many as the curve's order has: a change
    /// at the end of a SHA-512 digest does not reach a P-256 signature).
    static func altered(_ data: Data) -> Data {
        var changed = data
        changed[changed.startIndex] ^= 1
        return changed
    }

    @Test(
        "SecKeyIsAlgorithmSupported is true exactly where the operation works, and it works wherever the key type allows",
        arguments: KeyKind.allCases
    )
    func supportedExactlyWhereItWorks(kind: KeyKind) throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try #require(SecKeyCreateRandomKey(kind.parameters as CFDictionary, &error))
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let peerPrivate =
                kind.isRSA ? privateKey : try #require(SecKeyCreateRandomKey(kind.parameters as CFDictionary, &error))
            let peerPublic = try #require(SecKeyCopyPublicKey(peerPrivate))
            let blockSize = SecKeyGetBlockSize(privateKey)
            let exchange: [CFString: Any] = [
                kSecKeyKeyExchangeParameterRequestedSize: 32,
                kSecKeyKeyExchangeParameterSharedInfo: Data("shared".utf8),
            ]
            var supportedCount = 0
            for algorithm in Self.all {
                let name = algorithm.rawValue as String
                let parts = name.split(separator: ":").map(String.init)
                // The key type allows the algorithm when the family its name gives is the key's: RSA or an EC one.
                let allowed = (parts[2] == "RSA") == kind.isRSA
                func supported(_ key: SecKey, _ operation: SecKeyOperationType) -> Bool {
                    SecKeyIsAlgorithmSupported(key, operation, algorithm)
                }

                // Sign with the private key; the public key (and the private key, for its public half) verifies it,
                // and not over other data.
                let input = Self.signedInput(name, blockSize: blockSize)
                let signature = SecKeyCreateSignature(privateKey, algorithm, input as CFData, nil) as Data?
                let verifies = { (key: SecKey) -> Bool in
                    guard let signature else { return false }
                    return SecKeyVerifySignature(key, algorithm, input as CFData, signature as CFData, nil)
                        && !SecKeyVerifySignature(
                            key,
                            algorithm,
                            Self.altered(input) as CFData,
                            signature as CFData,
                            nil
                        )
                }
                let signs = verifies(publicKey)
                #expect(signs == (allowed && parts[1] == "sign"), "\(kind.rawValue): \(name) signs")
                #expect(supported(privateKey, .sign) == signs, "\(kind.rawValue): \(name) .sign")
                #expect(supported(publicKey, .verify) == signs, "\(kind.rawValue): \(name) .verify")
                #expect(
                    supported(privateKey, .verify) == verifies(privateKey),
                    "\(kind.rawValue): \(name) private .verify"
                )
                #expect(
                    supported(publicKey, .sign)
                        == (SecKeyCreateSignature(publicKey, algorithm, input as CFData, nil) != nil),
                    "\(kind.rawValue): \(name) public .sign"
                )

                // Encrypt with the public key (and with the private key, for its public half); the private key
                // decrypts.
                let plaintext = Self.plaintext(name, blockSize: blockSize)
                let roundTrips = { (encryptor: SecKey) -> Bool in
                    guard
                        let ciphertext = SecKeyCreateEncryptedData(encryptor, algorithm, plaintext as CFData, nil)
                            as Data?,
                        ciphertext != plaintext
                    else { return false }
                    return SecKeyCreateDecryptedData(privateKey, algorithm, ciphertext as CFData, nil) as Data?
                        == plaintext
                }
                let encrypts = roundTrips(publicKey)
                #expect(encrypts == (allowed && parts[1] == "encrypt"), "\(kind.rawValue): \(name) encrypts")
                #expect(supported(publicKey, .encrypt) == encrypts, "\(kind.rawValue): \(name) .encrypt")
                #expect(supported(privateKey, .decrypt) == encrypts, "\(kind.rawValue): \(name) .decrypt")
                #expect(
                    supported(privateKey, .encrypt) == roundTrips(privateKey),
                    "\(kind.rawValue): \(name) private .encrypt"
                )
                let sealed =
                    SecKeyCreateEncryptedData(publicKey, algorithm, plaintext as CFData, nil) ?? plaintext as CFData
                #expect(
                    supported(publicKey, .decrypt)
                        == (SecKeyCreateDecryptedData(publicKey, algorithm, sealed, nil) != nil),
                    "\(kind.rawValue): \(name) public .decrypt"
                )

                // Key exchange: both sides derive the same secret.
                let parameters = exchange as CFDictionary
                let one = SecKeyCopyKeyExchangeResult(privateKey, algorithm, peerPublic, parameters, nil) as Data?
                let two = SecKeyCopyKeyExchangeResult(peerPrivate, algorithm, publicKey, parameters, nil) as Data?
                let agrees = one != nil && one == two
                #expect(agrees == (allowed && parts[1] == "keyexchange"), "\(kind.rawValue): \(name) agrees")
                #expect(supported(privateKey, .keyExchange) == agrees, "\(kind.rawValue): \(name) .keyExchange")
                #expect(
                    supported(publicKey, .keyExchange)
                        == (SecKeyCopyKeyExchangeResult(publicKey, algorithm, peerPublic, parameters, nil) != nil),
                    "\(kind.rawValue): \(name) public .keyExchange"
                )
                if signs || encrypts || agrees { supportedCount += 1 }
            }
            // RSA: 22 signature and 12 encryption algorithms; each curve: 23 ECDSA, 18 ECIES and 12 ECDH.
            #expect(supportedCount == (kind.isRSA ? 34 : 53))
        }
    }

    @Test(
        "Apple's known ciphertexts decrypt: RSA-OAEP AES-GCM and ECIES, one changed byte is errSecParam",
        arguments: KnownCiphertext.apple
    )
    func applesKnownCiphertexts(vector: KnownCiphertext) throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let attributes: [CFString: Any] = [
                kSecAttrKeyType: vector.isRSA ? kSecAttrKeyTypeRSA : kSecAttrKeyTypeECSECPrimeRandom,
                kSecAttrKeyClass: kSecAttrKeyClassPrivate,
            ]
            let privateKey = try #require(
                SecKeyCreateWithData(
                    KnownCiphertext.decode(vector.privateKey) as CFData,
                    attributes as CFDictionary,
                    &error
                )
            )
            #expect(SecKeyGetBlockSize(privateKey) == (vector.bits + 7) / 8)
            #expect(SecKeyIsAlgorithmSupported(privateKey, .decrypt, vector.algorithm))
            let ciphertext = KnownCiphertext.decode(vector.ciphertext)
            error = nil
            let decrypted = SecKeyCreateDecryptedData(privateKey, vector.algorithm, ciphertext as CFData, &error)
            #expect(decrypted as Data? == KnownCiphertext.plaintext, "\(String(describing: takeError(error)))")
            // The tag, the ciphertext and (RSA) the wrapped key are each checked.
            for index in [ciphertext.count - 1, ciphertext.count - 17, 5] {
                var changed = ciphertext
                changed[index] ^= 0x20
                error = nil
                #expect(SecKeyCreateDecryptedData(privateKey, vector.algorithm, changed as CFData, &error) == nil)
                #expect(takeError(error)?.code == Int(errSecParam), "byte \(index)")
            }
            // Too short to hold the wrapped key (or ephemeral key) and the tag.
            let short = ciphertext.prefix(ciphertext.count - 16 - KnownCiphertext.plaintext.count - 1)
            error = nil
            #expect(SecKeyCreateDecryptedData(privateKey, vector.algorithm, short as CFData, &error) == nil)
            #expect(takeError(error)?.code == Int(errSecParam))
        }
    }

    /// Decrypts Apple's RSA-OAEP AES-GCM as Apple's SecKey.h describes it, with python's `cryptography`: arguments
    /// the hash, the PKCS#1 private key's file and the ciphertext's; prints the session key's size (one byte) and the
    /// plaintext.
    static let pythonOpen = """
        import sys
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        hash_name, key_path, data_path = sys.argv[1:4]
        key = serialization.load_der_private_key(open(key_path, "rb").read(), None)
        data = open(data_path, "rb").read()
        size = (key.key_size + 7) // 8
        md = getattr(hashes, hash_name)
        session = key.decrypt(data[:size], padding.OAEP(mgf=padding.MGF1(md()), algorithm=md(), label=None))
        public = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.PKCS1)
        plaintext = AESGCM(session).decrypt(bytes(16), data[size:], public)
        sys.stdout.buffer.write(bytes([len(session)]) + plaintext)
        """

    @Test(
        "RSA-OAEP AES-GCM as Keyseal encrypts it opens in python's cryptography: AES-128 under 4096 bits, AES-256 at 4096",
        arguments: KnownCiphertext.apple.filter(\.isRSA)
    )
    func rsaAESGCMOpensInPython(vector: KnownCiphertext) throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let python = ProcessInfo.processInfo.environment["KEYSEAL_PYTHON"] ?? "/opt/keyseal-python/bin/python3"
            let keyData = KnownCiphertext.decode(vector.privateKey)
            let attributes: [CFString: Any] = [
                kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
            ]
            let privateKey = try #require(SecKeyCreateWithData(keyData as CFData, attributes as CFDictionary, &error))
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            #expect(SecKeyIsAlgorithmSupported(publicKey, .encrypt, vector.algorithm))
            let plaintext = Data("opened by another implementation".utf8)
            let ciphertext = try #require(
                SecKeyCreateEncryptedData(publicKey, vector.algorithm, plaintext as CFData, &error) as Data?,
                "\(String(describing: takeError(error)))"
            )
            // RSA-OAEP(session key) ‖ AES-GCM ciphertext ‖ 16-byte tag.
            #expect(ciphertext.count == vector.bits / 8 + plaintext.count + 16)
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            try keyData.write(to: directory.appending("key.der"))
            try ciphertext.write(to: directory.appending("sealed"))
            let hash = (vector.algorithm.rawValue as String).split(separator: ":")[4]
            let opened = try runProcess(
                python,
                [
                    "-c", Self.pythonOpen, String(hash), directory.appending("key.der").path,
                    directory.appending("sealed").path,
                ]
            )
            #expect(opened.status == 0, "\(opened.stderrText)")
            #expect(opened.stdout.first == (vector.bits >= 4096 ? 32 : 16))
            #expect(opened.stdout.dropFirst() == plaintext)
            // A fresh session key each time: the same plaintext encrypts differently.
            let again = SecKeyCreateEncryptedData(publicKey, vector.algorithm, plaintext as CFData, &error) as Data?
            #expect(again != nil && again != ciphertext)
        }
    }
}
