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

    /// Every name Apple declares is implemented (`EveryAlgorithmTests`); a name Apple does not declare, or an
    /// algorithm of another key type, answers false and is errSecParam when used, never a wrong result.
    @Test("names Apple does not declare, and RSA-OAEP AES-GCM on an EC key, answer false and fail with errSecParam")
    func undeclaredAlgorithmsSayNo() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let rsa = try #require(SecKeyCopyPublicKey(try Self.key(kSecAttrKeyTypeRSA, 1024)))
            let ec = try #require(SecKeyCopyPublicKey(try Self.key(kSecAttrKeyTypeECSECPrimeRandom, 256)))
            let cases: [(SecKey, String)] = [
                (rsa, "algid:encrypt:RSA:OAEP:SHA256:AESCBC"), (rsa, "algid:encrypt:RSA:OAEP:MD5:AESGCM"),
                (rsa, "algid:encrypt:RSA:OAEP:SHA256:AESGCM:SHA256"), (rsa, "algid:encrypt:RSA:PKCS1:AESGCM"),
                // Apple declares the variable-IV forms from SHA-224 on only.
                (ec, "algid:encrypt:ECIES:ECDH:KDFX963:SHA1:AESGCM-KDFIV"),
                (ec, "algid:encrypt:ECIES:ECDHC:KDFX963:SHA1:AESGCM-KDFIV"),
                (ec, "algid:encrypt:RSA:OAEP:SHA256:AESGCM"),
            ]
            for (key, name) in cases {
                let algorithm = SecKeyAlgorithm(rawValue: name as CFString)
                #expect(!SecKeyIsAlgorithmSupported(key, .encrypt, algorithm), "\(name)")
                error = nil
                #expect(SecKeyCreateEncryptedData(key, algorithm, Data("x".utf8) as CFData, &error) == nil, "\(name)")
                #expect(takeError(error)?.code == Int(errSecParam), "\(name)")
            }
        }
    }

    /// The public key as a PEM file the openssl command reads.
    static func publicKeyFile(_ publicKey: SecKey, in directory: TemporaryDirectory) throws -> String {
        var error: Unmanaged<CFError>?
        let pkcs1 = try #require(SecKeyCopyExternalRepresentation(publicKey, &error) as Data?)
        let der = directory.appending("public.der")
        try pkcs1.write(to: der)
        let pem = directory.appending("public.pem").path
        let converted = try runProcess(
            try requireTool("openssl", package: "openssl"),
            ["pkey", "-pubin", "-inform", "DER", "-in", der.path, "-out", pem],
            environment: nil
        )
        if converted.status != 0 {
            // OpenSSL reads PKCS#1 public keys as "RSAPublicKey" through rsa -RSAPublicKey_in.
            let rsa = try runProcess(
                try requireTool("openssl", package: "openssl"),
                ["rsa", "-RSAPublicKey_in", "-inform", "DER", "-in", der.path, "-pubout", "-out", pem],
                environment: nil
            )
            #expect(rsa.status == 0, "\(rsa.stderrText)")
        }
        return pem
    }

    static func openssl(_ arguments: [String]) throws -> ProcessResult {
        try runProcess(try requireTool("openssl", package: "openssl"), arguments, environment: nil)
    }

    /// The openssl pkeyutl options of a signature algorithm's padding.
    static func pkeyutlOptions(_ name: String) -> [String] {
        let parts = name.split(separator: ":").map(String.init)
        let hash = parts.count > 4 ? parts[4].lowercased() : nil
        if parts[3] == "raw" { return ["-pkeyopt", "rsa_padding_mode:none"] }
        var options = ["-pkeyopt", "rsa_padding_mode:\(parts[3].hasSuffix("PSS") ? "pss" : "pkcs1")"]
        if let hash { options += ["-pkeyopt", "digest:\(hash)"] }
        if parts[3].hasSuffix("PSS") { options += ["-pkeyopt", "rsa_pss_saltlen:digest"] }
        return options
    }

    @Test(
        "every RSA signature algorithm, digest and message forms, signs what openssl verifies",
        arguments: [1024, 2048]
    )
    func everyRSASignature(bits: Int) throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try Self.key(kSecAttrKeyTypeRSA, bits)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let pem = try Self.publicKeyFile(publicKey, in: directory)
            let message = Data("every padding".utf8)
            var names = ["algid:sign:RSA:raw", "algid:sign:RSA:digest-PKCS1v15"]
            for hash in Self.hashes {
                let salt = hash == "SHA224" ? "24" : "\(Self.digest(message, hash).count)"
                names += [
                    "algid:sign:RSA:digest-PKCS1v15:\(hash)", "algid:sign:RSA:message-PKCS1v15:\(hash)",
                    "algid:sign:RSA:digest-PSS:\(hash):\(hash):\(salt)",
                    "algid:sign:RSA:message-PSS:\(hash):\(hash):\(salt)",
                ]
            }
            for name in names {
                let algorithm = SecKeyAlgorithm(rawValue: name as CFString)
                #expect(SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm), "\(name)")
                #expect(SecKeyIsAlgorithmSupported(publicKey, .verify, algorithm), "\(name)")
                let parts = name.split(separator: ":").map(String.init)
                // What is signed: a block of the modulus's size (raw, below the modulus), a digest, or the message.
                let input: Data
                switch parts[3] {
                case "raw": input = Data([0x00, 0x01]) + Data(repeating: 0x5a, count: bits / 8 - 2)
                case "digest-PKCS1v15" where parts.count == 4: input = Data("a short digest".utf8)
                case let form where form.hasPrefix("digest"): input = Self.digest(message, parts[4])
                default: input = message
                }
                if parts[3].hasSuffix("PSS"), bits / 8 < 2 * Self.digest(message, parts[4]).count + 2 {
                    // PSS with a salt of the digest's size needs room for both: not on a 1024-bit key with SHA-512.
                    #expect(SecKeyCreateSignature(privateKey, algorithm, input as CFData, &error) == nil)
                    #expect(takeError(error)?.code == Int(errSecParam), "\(name)")
                    continue
                }
                let signature = try #require(
                    SecKeyCreateSignature(privateKey, algorithm, input as CFData, &error) as Data?,
                    "\(name): \(String(describing: takeError(error)))"
                )
                #expect(signature.count == bits / 8)
                #expect(
                    SecKeyVerifySignature(publicKey, algorithm, input as CFData, signature as CFData, &error),
                    "\(name)"
                )
                var tampered = signature
                tampered[tampered.count / 2] ^= 1
                #expect(!SecKeyVerifySignature(publicKey, algorithm, input as CFData, tampered as CFData, &error))
                // openssl verifies the same signature over what it signs: the digest (the message's, for message forms).
                let signed = parts[3].hasPrefix("message") ? Self.digest(message, parts[4]) : input
                try signed.write(to: directory.appending("in"))
                try signature.write(to: directory.appending("sig"))
                if parts[3] == "raw" {
                    let recovered = try Self.openssl(
                        ["pkeyutl", "-verifyrecover", "-pubin", "-inkey", pem, "-in", directory.appending("sig").path]
                            + Self.pkeyutlOptions(name)
                    )
                    #expect(recovered.stdout == input, "\(name): \(recovered.stderrText)")
                    continue
                }
                let verified = try Self.openssl(
                    [
                        "pkeyutl", "-verify", "-pubin", "-inkey", pem, "-in", directory.appending("in").path,
                        "-sigfile", directory.appending("sig").path,
                    ] + Self.pkeyutlOptions(name)
                )
                #expect(verified.status == 0, "\(name): \(verified.stdoutText)\(verified.stderrText)")
            }
        }
    }

    @Test(
        "RSA encryption raw, PKCS#1 v1.5 and OAEP with every hash round-trips and decrypts what openssl encrypts",
        arguments: [1024, 2048]
    )
    func everyRSAEncryption(bits: Int) throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try Self.key(kSecAttrKeyTypeRSA, bits)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let pem = try Self.publicKeyFile(publicKey, in: directory)
            var cases: [(String, [String])] = [
                ("algid:encrypt:RSA:raw", ["-pkeyopt", "rsa_padding_mode:none"]),
                ("algid:encrypt:RSA:PKCS1", ["-pkeyopt", "rsa_padding_mode:pkcs1"]),
            ]
            for hash in Self.hashes {
                let md = hash.lowercased()
                cases.append(
                    (
                        "algid:encrypt:RSA:OAEP:\(hash)",
                        [
                            "-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:\(md)", "-pkeyopt",
                            "rsa_mgf1_md:\(md)",
                        ]
                    )
                )
            }
            for (name, options) in cases {
                let algorithm = SecKeyAlgorithm(rawValue: name as CFString)
                #expect(SecKeyIsAlgorithmSupported(publicKey, .encrypt, algorithm), "\(name)")
                #expect(SecKeyIsAlgorithmSupported(privateKey, .decrypt, algorithm), "\(name)")
                let plaintext =
                    name.hasSuffix("raw")
                    ? Data([0x00]) + Data(repeating: 0x42, count: bits / 8 - 1) : Data("a session key".utf8)
                if let hash = name.split(separator: ":").dropFirst(4).first,
                    bits / 8 - 2 * Self.digest(plaintext, String(hash)).count - 2 < plaintext.count
                {
                    // OAEP's overhead leaves no room: a 1024-bit key with SHA-512.
                    #expect(SecKeyCreateEncryptedData(publicKey, algorithm, plaintext as CFData, &error) == nil)
                    #expect(takeError(error)?.code == Int(errSecParam), "\(name)")
                    continue
                }
                let ciphertext = try #require(
                    SecKeyCreateEncryptedData(publicKey, algorithm, plaintext as CFData, &error) as Data?,
                    "\(name): \(String(describing: takeError(error)))"
                )
                #expect(
                    SecKeyCreateDecryptedData(privateKey, algorithm, ciphertext as CFData, &error) as Data? == plaintext
                )
                try plaintext.write(to: directory.appending("plain"))
                let encrypted = try Self.openssl(
                    ["pkeyutl", "-encrypt", "-pubin", "-inkey", pem, "-in", directory.appending("plain").path]
                        + options
                )
                #expect(encrypted.status == 0, "\(name): \(encrypted.stderrText)")
                #expect(
                    SecKeyCreateDecryptedData(privateKey, algorithm, encrypted.stdout as CFData, &error) as Data?
                        == plaintext,
                    "\(name)"
                )
            }
            // Too long for OAEP with SHA-512 on this key: errSecParam, no ciphertext.
            let tooLong = Data(count: max(bits / 8 - 2 * 64 - 1, 1))
            #expect(SecKeyCreateEncryptedData(publicKey, .rsaEncryptionOAEPSHA512, tooLong as CFData, &error) == nil)
            #expect(takeError(error)?.code == Int(errSecParam))
        }
    }

    @Test("a 1024-bit RSA key is generated as Apple still generates it: block size 128, its public key exported")
    func rsa1024() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try Self.key(kSecAttrKeyTypeRSA, 1024)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            #expect(SecKeyGetBlockSize(publicKey) == 128)
            let attributes = try #require(SecKeyCopyAttributes(privateKey) as? [String: Any])
            #expect(attributes[kSecAttrKeySizeInBits as String] as? Int == 1024)
            #expect(SecKeyCopyExternalRepresentation(publicKey, &error) != nil)
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
            // A negative length is bad input, refused, never a crash.
            #expect(SecKeyRawSign(privateKey, .PKCS1, digest, -1, &signature, &length) == errSecParam)
            var negative = -1
            #expect(SecKeyRawSign(privateKey, .PKCS1, digest, digest.count, &signature, &negative) == errSecParam)
            #expect(SecKeyRawVerify(publicKey, .PKCS1, digest, -32, signature, length) == errSecParam)
            #expect(SecKeyRawVerify(publicKey, .PKCS1, digest, digest.count, signature, -1) == errSecParam)
            // `.sigRaw`: RFC 4754's r ‖ s.
            length = signature.count
            #expect(SecKeyRawSign(privateKey, .sigRaw, digest, digest.count, &signature, &length) == errSecSuccess)
            #expect(length == 64)
        }
    }

    @Test(
        "SecKeyEncrypt and SecKeyDecrypt with OAEP and PKCS#1 on an RSA key; SecKeyRawSign over a digest; SecKeyGetBlockSize"
    )
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
            // PKCS#1 v1.5 encryption and the digest-form signature the legacy calls map to.
            cipherLength = ciphertext.count
            #expect(
                SecKeyEncrypt(publicKey, .PKCS1, plaintext, plaintext.count, &ciphertext, &cipherLength)
                    == errSecSuccess
            )
            decryptedLength = decrypted.count
            #expect(
                SecKeyDecrypt(privateKey, .PKCS1, ciphertext, cipherLength, &decrypted, &decryptedLength)
                    == errSecSuccess
            )
            #expect(Array(decrypted.prefix(decryptedLength)) == plaintext)
            let digest = [UInt8](SHA256.hash(data: Data(plaintext)))
            var signature = [UInt8](repeating: 0, count: 256)
            var signatureLength = signature.count
            #expect(
                SecKeyRawSign(privateKey, .PKCS1SHA256, digest, digest.count, &signature, &signatureLength)
                    == errSecSuccess
            )
            #expect(
                SecKeyRawVerify(publicKey, .PKCS1SHA256, digest, digest.count, signature, signatureLength)
                    == errSecSuccess
            )
        }
    }

    /// A legacy call over `input`: its status and output.
    static func legacy(
        _ call: (UnsafePointer<UInt8>, Int, UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<Int>) -> OSStatus,
        _ input: Data
    ) -> (OSStatus, Data) {
        var output = [UInt8](repeating: 0, count: 1024)
        var length = output.count
        let bytes = [UInt8](input)
        let status = call(bytes, bytes.count, &output, &length)
        return (status, Data(output.prefix(status == errSecSuccess ? length : 0)))
    }

    @Test("every SecPadding of the legacy calls on an RSA key maps to Apple's algorithm; the others are errSecParam")
    func legacyRSAEveryPadding() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try Self.key(kSecAttrKeyTypeRSA, 1024)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let message = Data("legacy paddings".utf8)
            // SecKeyRawSign / SecKeyRawVerify over a digest: each padding signs as its modern algorithm verifies, and
            // not as the next one does (a DigestInfo, or none, is part of what is signed).
            let block = Data([0x00, 0x01]) + Data(repeating: 0x5a, count: 126)
            let signatures: [(SecPadding, SecKeyAlgorithm, Data)] = [
                ([], .rsaSignatureRaw, block),
                (.PKCS1, .rsaSignatureDigestPKCS1v15Raw, Self.digest(message, "SHA256")),
                (.PKCS1SHA1, .rsaSignatureDigestPKCS1v15SHA1, Self.digest(message, "SHA1")),
                (.PKCS1SHA224, .rsaSignatureDigestPKCS1v15SHA224, Self.digest(message, "SHA224")),
                (.PKCS1SHA256, .rsaSignatureDigestPKCS1v15SHA256, Self.digest(message, "SHA256")),
                (.PKCS1SHA384, .rsaSignatureDigestPKCS1v15SHA384, Self.digest(message, "SHA384")),
                (.PKCS1SHA512, .rsaSignatureDigestPKCS1v15SHA512, Self.digest(message, "SHA512")),
            ]
            for (index, (padding, algorithm, input)) in signatures.enumerated() {
                let (status, signature) = Self.legacy({ SecKeyRawSign(privateKey, padding, $0, $1, $2, $3) }, input)
                #expect(status == errSecSuccess, "\(algorithm.rawValue)")
                guard signature.count == 128 else { continue }
                #expect(SecKeyVerifySignature(publicKey, algorithm, input as CFData, signature as CFData, &error))
                let other = signatures[(index + 1) % signatures.count].1
                #expect(!SecKeyVerifySignature(publicKey, other, input as CFData, signature as CFData, &error))
                let bytes = [UInt8](input)
                #expect(
                    SecKeyRawVerify(publicKey, padding, bytes, bytes.count, [UInt8](signature), signature.count)
                        == errSecSuccess,
                    "\(algorithm.rawValue)"
                )
                var tampered = [UInt8](signature)
                tampered[64] ^= 1
                #expect(
                    SecKeyRawVerify(publicKey, padding, bytes, bytes.count, tampered, tampered.count)
                        == errSecVerifyFailed,
                    "\(algorithm.rawValue)"
                )
            }
            // SecKeyEncrypt / SecKeyDecrypt with no padding: raw RSA on a block of the modulus's size.
            let (encrypted, ciphertext) = Self.legacy({ SecKeyEncrypt(publicKey, [], $0, $1, $2, $3) }, block)
            #expect(encrypted == errSecSuccess)
            #expect(ciphertext.count == 128 && ciphertext != block)
            #expect(
                SecKeyCreateDecryptedData(privateKey, .rsaEncryptionRaw, ciphertext as CFData, &error) as Data? == block
            )
            let (decrypted, plaintext) = Self.legacy({ SecKeyDecrypt(privateKey, [], $0, $1, $2, $3) }, ciphertext)
            #expect(decrypted == errSecSuccess)
            #expect(plaintext == block)
            // Paddings Apple maps to nothing for the call: errSecParam.
            let digest = Self.digest(message, "SHA256")
            for padding: SecPadding in [.OAEP, .sigRaw, .PKCS1MD2, .PKCS1MD5] {
                #expect(
                    Self.legacy({ SecKeyRawSign(privateKey, padding, $0, $1, $2, $3) }, digest).0 == errSecParam,
                    "\(padding.rawValue)"
                )
            }
            for padding: SecPadding in [.sigRaw, .PKCS1SHA256, .PKCS1MD5] {
                #expect(
                    Self.legacy({ SecKeyEncrypt(publicKey, padding, $0, $1, $2, $3) }, digest).0 == errSecParam,
                    "\(padding.rawValue)"
                )
            }
        }
    }

    @Test("SecKeyRawVerify on an EC key: RFC 4754 with .sigRaw, X9.62 with any other padding, as Apple maps them")
    func legacyECVerify() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try Self.key(kSecAttrKeyTypeECSECPrimeRandom, 384)
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let digest = Self.digest(Data("legacy verify".utf8), "SHA384")
            let bytes = [UInt8](digest)
            for (padding, algorithm): (SecPadding, SecKeyAlgorithm) in [
                (.sigRaw, .ecdsaSignatureDigestRFC4754), ([], .ecdsaSignatureDigestX962),
                (.PKCS1SHA256, .ecdsaSignatureDigestX962),
            ] {
                let signature = try #require(
                    SecKeyCreateSignature(privateKey, algorithm, digest as CFData, &error) as Data?
                )
                let signed = [UInt8](signature)
                #expect(
                    SecKeyRawVerify(publicKey, padding, bytes, bytes.count, signed, signed.count) == errSecSuccess,
                    "\(padding.rawValue)"
                )
                let (status, legacySignature) = Self.legacy(
                    { SecKeyRawSign(privateKey, padding, $0, $1, $2, $3) },
                    digest
                )
                #expect(status == errSecSuccess)
                #expect(
                    SecKeyVerifySignature(publicKey, algorithm, digest as CFData, legacySignature as CFData, &error)
                )
                var other = bytes
                other[0] ^= 1
                #expect(
                    SecKeyRawVerify(publicKey, padding, other, other.count, signed, signed.count) == errSecVerifyFailed,
                    "\(padding.rawValue)"
                )
            }
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
