import Crypto
import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// Runs `body` with the default store on a store whose device key offers hardware keys (the software double on
/// the host-key backend, swtpm and SoftHSM2 on theirs).
func withHardwareStore<T>(_ body: (HardwareKeyStoreFixture) throws -> T) throws -> T {
    let fixture = try HardwareKeyStoreFixture()
    defer { fixture.remove() }
    return try KeychainStore.withDefault(fixture.store) { try body(fixture) }
}

/// The error a SecKey call left, as Apple code reads it.
func takeError(_ error: Unmanaged<CFError>?) -> (domain: String, code: Int)? {
    guard let error = error?.takeRetainedValue() else { return nil }
    return (CFErrorGetDomain(error), CFErrorGetCode(error))
}

@Suite("SecKey", .disabled(if: TestBackend.throughDaemon, "embedded only; DaemonKeyTests covers keyseald"))
struct SecKeyTests {
    static func secureEnclaveParameters(tag: String, permanent: Bool = true) -> [String: Any] {
        let access = SecAccessControlCreateWithFlags(
            kCFAllocatorDefault,
            kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
            .privateKeyUsage,
            nil
        )!
        return [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
            kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
            kSecPrivateKeyAttrs as String: [
                kSecAttrIsPermanent: permanent, kSecAttrApplicationTag: Data(tag.utf8), kSecAttrAccessControl: access,
            ] as [String: Any],
        ]
    }

    @Test
    func secureEnclaveKeySignsAndVerifiesAsOnApple() throws {
        try withHardwareStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try #require(
                SecKeyCreateRandomKey(Self.secureEnclaveParameters(tag: "se") as CFDictionary, &error)
            )
            #expect(CFGetTypeID(privateKey) == SecKeyGetTypeID())
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let message = Data("hello".utf8)
            let signature = try #require(
                SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, message as CFData, &error)
            )
            #expect(
                SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, signature, &error)
            )
            let external = try #require(SecKeyCopyExternalRepresentation(publicKey, &error))
            #expect(external.count == 65)
            let swiftCrypto = try P256.Signing.PublicKey(x963Representation: external)
            #expect(
                swiftCrypto.isValidSignature(
                    try P256.Signing.ECDSASignature(derRepresentation: signature),
                    for: message
                )
            )
        }
    }

    @Test
    func secureEnclavePrivateKeyHasNoExternalRepresentation() throws {
        try withHardwareStore { _ in
            var error: Unmanaged<CFError>?
            let privateKey = try #require(
                SecKeyCreateRandomKey(Self.secureEnclaveParameters(tag: "se") as CFDictionary, &error)
            )
            #expect(SecKeyCopyExternalRepresentation(privateKey, &error) == nil)
            let failure = try #require(takeError(error))
            #expect(failure.domain == "NSOSStatusErrorDomain")
            #expect(failure.code == Int(errSecUnimplemented))
            let attributes = try #require(SecKeyCopyAttributes(privateKey))
            #expect(attributes[kSecAttrTokenID] as? String == kSecAttrTokenIDSecureEnclave)
            #expect(attributes[kSecAttrIsExtractable] as? Bool == false)
        }
    }

    @Test
    func secureEnclaveKeyIsFoundByTagAsASecKey() throws {
        try withHardwareStore { _ in
            var error: Unmanaged<CFError>?
            let created = try #require(
                SecKeyCreateRandomKey(Self.secureEnclaveParameters(tag: "found") as CFDictionary, &error)
            )
            let query: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("found".utf8),
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecReturnRef as String: true,
            ]
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect(CFGetTypeID(result) == SecKeyGetTypeID())
            let found = result as! SecKey
            let signature = try #require(
                SecKeyCreateSignature(found, .ecdsaSignatureMessageX962SHA256, Data() as CFData, &error)
            )
            let publicKey = try #require(SecKeyCopyPublicKey(created))
            #expect(
                SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, Data() as CFData, signature, &error)
            )
        }
    }

    @Test func secureEnclaveKeyOnTheHostKeyBackendIsUnimplemented() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        KeychainStore.withDefault(fixture.store) {
            var error: Unmanaged<CFError>?
            #expect(SecKeyCreateRandomKey(Self.secureEnclaveParameters(tag: "x") as CFDictionary, &error) == nil)
            #expect(takeError(error)?.code == Int(errSecUnimplemented))
        }
    }

    @Test
    func secureEnclaveKeySignsOnlyWhileItsClassIsUnlocked() throws {
        try withHardwareStore { fixture in
            var error: Unmanaged<CFError>?
            let key = try #require(
                SecKeyCreateRandomKey(Self.secureEnclaveParameters(tag: "lk") as CFDictionary, &error)
            )
            try fixture.store.setPasscode("pw")
            try fixture.store.lock()
            #expect(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data() as CFData, &error) == nil)
            #expect(takeError(error)?.code == Int(errSecInteractionNotAllowed))
        }
    }

    @Test
    func secureEnclaveKeyStoredWithSecItemAddAndDeletedWithIt() throws {
        try withHardwareStore { fixture in
            var error: Unmanaged<CFError>?
            let key = try #require(
                SecKeyCreateRandomKey(Self.secureEnclaveParameters(tag: "t", permanent: false) as CFDictionary, &error)
            )
            let add: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecValueRef as String: key,
                kSecAttrApplicationTag as String: Data("added".utf8),
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            #expect(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data() as CFData, &error) != nil)
            #expect(
                SecItemDelete([kSecClass: kSecClassKey, kSecAttrApplicationTag: Data("added".utf8)] as CFDictionary)
                    == errSecSuccess
            )
            if let log = fixture.log { #expect(log.deletedBlobs.count == 1) }
            #expect(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data() as CFData, &error) == nil)
        }
    }

    @Test func softwareKeysOfEverySizeSignAndVerify() throws {
        try withStore { _ in
            for (type, bits, algorithm) in [
                (kSecAttrKeyTypeECSECPrimeRandom, 256, SecKeyAlgorithm.ecdsaSignatureMessageX962SHA256),
                (kSecAttrKeyTypeECSECPrimeRandom, 384, .ecdsaSignatureMessageX962SHA384),
                (kSecAttrKeyTypeECSECPrimeRandom, 521, .ecdsaSignatureMessageRFC4754SHA512),
                (kSecAttrKeyTypeRSA, 2048, .rsaSignatureMessagePKCS1v15SHA256),
            ] {
                var error: Unmanaged<CFError>?
                let parameters: [String: Any] = [
                    kSecAttrKeyType as String: type, kSecAttrKeySizeInBits as String: bits,
                ]
                let key = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
                let publicKey = try #require(SecKeyCopyPublicKey(key))
                let signature = try #require(SecKeyCreateSignature(key, algorithm, Data("m".utf8) as CFData, &error))
                #expect(SecKeyVerifySignature(publicKey, algorithm, Data("m".utf8) as CFData, signature, &error))
            }
        }
    }

    @Test func aBadSignatureIsVerifyFailed() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256,
            ]
            let key = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            let publicKey = try #require(SecKeyCopyPublicKey(key))
            let signature = try #require(
                SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("a".utf8) as CFData, &error)
            )
            #expect(
                !SecKeyVerifySignature(
                    publicKey,
                    .ecdsaSignatureMessageX962SHA256,
                    Data("b".utf8) as CFData,
                    signature,
                    &error
                )
            )
            let failure = try #require(takeError(error))
            #expect(failure.domain == "NSOSStatusErrorDomain" && failure.code == -67808)
        }
    }

    @Test func anAlgorithmTheKeyDoesNotSupportIsParam() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256,
            ]
            let key = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            #expect(!SecKeyIsAlgorithmSupported(key, .sign, .rsaSignatureMessagePKCS1v15SHA256))
            #expect(SecKeyIsAlgorithmSupported(key, .sign, .ecdsaSignatureMessageX962SHA256))
            #expect(SecKeyCreateSignature(key, .rsaSignatureMessagePKCS1v15SHA256, Data() as CFData, &error) == nil)
            #expect(takeError(error)?.code == Int(errSecParam))
        }
    }

    /// A missing or unknown key type is errSecUnimplemented, as on Apple (PortedProjectTests.keyGenerationRefusals).
    @Test func badKeyParametersAreParam() throws {
        try withStore { _ in
            for parameters: [String: Any] in [
                [kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 255],
                [kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 512],
                [kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 2049],
                [
                    kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 384,
                    kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                ],
            ] {
                var error: Unmanaged<CFError>?
                #expect(SecKeyCreateRandomKey(parameters as CFDictionary, &error) == nil)
                #expect(takeError(error)?.code == Int(errSecParam))
            }
        }
    }

    @Test(
        arguments: [
            (
                SecKeyAlgorithm.eciesEncryptionStandardX963SHA256AESGCM,
                SecKeyAlgorithm.eciesEncryptionCofactorX963SHA256AESGCM
            ),
            (.eciesEncryptionCofactorVariableIVX963SHA256AESGCM, .eciesEncryptionStandardVariableIVX963SHA256AESGCM),
        ])
    func eciesEncryptedWithOneVariantDecryptsWithItsTwin(encrypt: SecKeyAlgorithm, decrypt: SecKeyAlgorithm) throws {
        try withHardwareStore { _ in
            var error: Unmanaged<CFError>?
            let key = try #require(
                SecKeyCreateRandomKey(Self.secureEnclaveParameters(tag: "ecies") as CFDictionary, &error)
            )
            let publicKey = try #require(SecKeyCopyPublicKey(key))
            let plaintext = Data("a secret for the device".utf8)
            let ciphertext = try #require(SecKeyCreateEncryptedData(publicKey, encrypt, plaintext as CFData, &error))
            // Layout: ephemeral public key (65) ‖ AES-GCM ciphertext ‖ 16-byte tag.
            #expect(ciphertext.count == 65 + plaintext.count + 16)
            #expect(ciphertext.first == 4)
            #expect((try? P256.KeyAgreement.PublicKey(x963Representation: ciphertext.prefix(65))) != nil)
            #expect(SecKeyCreateDecryptedData(key, decrypt, ciphertext, &error) == plaintext)
        }
    }

    @Test func eciesStandardMatchesItsDefinition() throws {
        // Decrypts by hand what ECIES produced: X9.63 KDF over Z with the ephemeral key as shared info, AES-128-GCM
        // under a zero IV (standard) — the layout Apple's ciphertexts have.
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256,
            ]
            let key = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            let external = try #require(SecKeyCopyExternalRepresentation(key, &error))
            let agreement = try P256.KeyAgreement.PrivateKey(x963Representation: external)
            let ciphertext = try #require(
                SecKeyCreateEncryptedData(
                    SecKeyCopyPublicKey(key)!,
                    .eciesEncryptionStandardX963SHA256AESGCM,
                    Data("hi".utf8) as CFData,
                    &error
                )
            )
            let ephemeral = ciphertext.prefix(65)
            let shared = try agreement.sharedSecretFromKeyAgreement(
                with: P256.KeyAgreement.PublicKey(x963Representation: ephemeral)
            )
            let aesKey = shared.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: ephemeral, outputByteCount: 16)
            let box = try AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: Data(count: 16)),
                ciphertext: ciphertext.dropFirst(65).dropLast(16),
                tag: ciphertext.suffix(16)
            )
            #expect(try AES.GCM.open(box, using: aesKey) == Data("hi".utf8))
        }
    }

    @Test
    func ecdhStandardAndCofactorAgreeWithThePeer() throws {
        try withHardwareStore { _ in
            var error: Unmanaged<CFError>?
            let key = try #require(
                SecKeyCreateRandomKey(Self.secureEnclaveParameters(tag: "dh") as CFDictionary, &error)
            )
            let peerParameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256,
            ]
            let peer = try #require(SecKeyCreateRandomKey(peerParameters as CFDictionary, &error))
            let ours = try #require(
                SecKeyCopyKeyExchangeResult(
                    key,
                    .ecdhKeyExchangeStandard,
                    SecKeyCopyPublicKey(peer)!,
                    [:] as CFDictionary,
                    &error
                )
            )
            let cofactor = try #require(
                SecKeyCopyKeyExchangeResult(
                    key,
                    .ecdhKeyExchangeCofactor,
                    SecKeyCopyPublicKey(peer)!,
                    [:] as CFDictionary,
                    &error
                )
            )
            let theirs = try #require(
                SecKeyCopyKeyExchangeResult(
                    peer,
                    .ecdhKeyExchangeStandard,
                    SecKeyCopyPublicKey(key)!,
                    [:] as CFDictionary,
                    &error
                )
            )
            #expect(ours == theirs && cofactor == ours && ours.count == 32)
            let derived = try #require(
                SecKeyCopyKeyExchangeResult(
                    key,
                    .ecdhKeyExchangeStandardX963SHA256,
                    SecKeyCopyPublicKey(peer)!,
                    [
                        kSecKeyKeyExchangeParameterRequestedSize: 48,
                        kSecKeyKeyExchangeParameterSharedInfo: Data("i".utf8),
                    ]
                        as CFDictionary,
                    &error
                )
            )
            #expect(derived.count == 48)
        }
    }

    @Test func rsaOAEPRoundTrips() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 2048,
            ]
            let key = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            let ciphertext = try #require(
                SecKeyCreateEncryptedData(
                    SecKeyCopyPublicKey(key)!,
                    .rsaEncryptionOAEPSHA256,
                    Data("x".utf8) as CFData,
                    &error
                )
            )
            #expect(SecKeyCreateDecryptedData(key, .rsaEncryptionOAEPSHA256, ciphertext, &error) == Data("x".utf8))
        }
    }

    @Test func externalRepresentationRoundTripsThroughSecKeyCreateWithData() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
            ]
            let key = try #require(
                SecKeyCreateWithData(KeyTestMaterial.privateKey as CFData, attributes as CFDictionary, &error)
            )
            #expect(SecKeyCopyExternalRepresentation(key, &error) == KeyTestMaterial.privateKey)
            #expect(SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(key)!, &error) == KeyTestMaterial.publicKey)
            #expect(SecKeyCreateWithData(Data([1, 2, 3]) as CFData, attributes as CFDictionary, &error) == nil)
            #expect(takeError(error)?.code == Int(errSecParam))
        }
    }

    /// The review's attack through Apple's names: a software P-256 key generated with `kSecAttrIsExtractable` false,
    /// then `SecItemUpdate` setting it true; the lookup of its data stays refused and the update is
    /// errSecReadOnlyAttr, as for `kSecAttrTokenID`.
    @Test func secItemUpdateCannotMakeANonExtractableKeyExtractable() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent: true, kSecAttrIsExtractable: false, kSecAttrApplicationTag: Data("ne".utf8),
                ] as [String: Any],
            ]
            let key = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            let query: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("ne".utf8),
                kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
            ]
            var lookup = query
            lookup[kSecReturnData] = kCFBooleanTrue!
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(lookup as CFDictionary, &result) == errSecDataNotAvailable)
            #expect(
                SecItemUpdate(query as CFDictionary, [kSecAttrIsExtractable: true] as CFDictionary)
                    == errSecReadOnlyAttr
            )
            #expect(SecItemCopyMatching(lookup as CFDictionary, &result) == errSecDataNotAvailable)
            #expect(result == nil)
            #expect(SecKeyCopyExternalRepresentation(key, &error) == nil)
            #expect(SecItemUpdate(query as CFDictionary, [kSecAttrIsExtractable: false] as CFDictionary) == noErr)
        }
    }

    @Test func twoPermanentKeysUnderOneTagAreBothFound() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256,
                kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent: true, kSecAttrApplicationTag: Data("tag".utf8)]
                    as [String: Any],
            ]
            _ = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            _ = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            let query: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("tag".utf8),
                kSecMatchLimit as String: kSecMatchLimitAll,
                kSecReturnRef as String: kCFBooleanTrue!,
            ]
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == noErr)
            #expect((result as? [Any])?.count == 2)
        }
    }
}

@Suite(
    "SecCertificate and SecIdentity",
    .disabled(if: TestBackend.throughDaemon, "embedded only; DaemonKeyTests covers keyseald")
)
struct SecCertificateTests {
    @Test func certificateFromDER() throws {
        let certificate = try #require(SecCertificateCreateWithData(nil, KeyTestMaterial.certificate as CFData))
        #expect(CFGetTypeID(certificate) == SecCertificateGetTypeID())
        #expect(SecCertificateCopyData(certificate) == KeyTestMaterial.certificate)
        #expect(SecCertificateCopySubjectSummary(certificate) == "Keyseal Test")
        var name: CFString?
        #expect(SecCertificateCopyCommonName(certificate, &name) == errSecSuccess)
        #expect(name == "Keyseal Test")
        #expect(SecCertificateCopySerialNumberData(certificate, nil) == Data([0x12, 0x34]))
        let key = try #require(SecCertificateCopyKey(certificate))
        #expect(SecKeyCopyExternalRepresentation(key, nil) == KeyTestMaterial.publicKey)
    }

    @Test func badDERIsNil() {
        #expect(SecCertificateCreateWithData(nil, Data("junk".utf8) as CFData) == nil)
        #expect(SecCertificateCreateWithData(nil, KeyTestMaterial.certificate.dropLast() as CFData) == nil)
    }

    @Test func identityFoundAfterAddingItsKeyAndCertificate() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
            ]
            let key = try #require(
                SecKeyCreateWithData(KeyTestMaterial.privateKey as CFData, attributes as CFDictionary, &error)
            )
            let certificate = try #require(SecCertificateCreateWithData(nil, KeyTestMaterial.certificate as CFData))
            #expect(SecItemAdd([kSecValueRef: key] as CFDictionary, nil) == errSecSuccess)
            #expect(
                SecItemAdd([kSecClass: kSecClassCertificate, kSecValueRef: certificate] as CFDictionary, nil)
                    == errSecSuccess
            )
            var result: CFTypeRef?
            let query: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect(CFGetTypeID(result) == SecIdentityGetTypeID())
            let identity = result as! SecIdentity
            var copiedCertificate: SecCertificate?
            var copiedKey: SecKey?
            #expect(SecIdentityCopyCertificate(identity, &copiedCertificate) == errSecSuccess)
            #expect(SecIdentityCopyPrivateKey(identity, &copiedKey) == errSecSuccess)
            #expect(copiedCertificate.map(SecCertificateCopyData) == KeyTestMaterial.certificate)
            let signature = try #require(
                SecKeyCreateSignature(copiedKey!, .ecdsaSignatureMessageX962SHA256, Data("t".utf8) as CFData, &error)
            )
            #expect(
                SecKeyVerifySignature(
                    SecCertificateCopyKey(certificate)!,
                    .ecdsaSignatureMessageX962SHA256,
                    Data("t".utf8) as CFData,
                    signature,
                    &error
                )
            )
        }
    }

    @Test func certificateAttributesComeBackFromSecItemCopyMatching() throws {
        try withStore { _ in
            let certificate = try #require(SecCertificateCreateWithData(nil, KeyTestMaterial.certificate as CFData))
            #expect(SecItemAdd([kSecValueRef: certificate] as CFDictionary, nil) == errSecSuccess)
            var result: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassCertificate, kSecReturnAttributes as String: true,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let attributes = try #require(result as? [String: Any])
            #expect(attributes[kSecAttrLabel] as? String == "Keyseal Test")
            #expect(attributes[kSecAttrCertificateType] as? Int == 3)
            #expect(attributes[kSecAttrSerialNumber] as? Data == Data([0x12, 0x34]))
            #expect(SecItemAdd([kSecValueRef: certificate] as CFDictionary, nil) == errSecDuplicateItem)
            #expect(SecItemDelete([kSecValueRef: certificate] as CFDictionary) == errSecSuccess)
        }
    }
}
