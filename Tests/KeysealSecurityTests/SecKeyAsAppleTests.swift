import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// Key code written for Apple's Security, run unchanged: what Apple accepts and answers in key generation and key
/// import. Embedded, and through keyseald with `KEYSEAL_TEST_BACKEND=daemon-…`.
@Suite("SecKey as Apple answers")
struct SecKeyAsAppleTests {
    static func keyQuery(tag: String, _ extra: [String: Any] = [:]) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(tag.utf8),
        ]
        query.merge(extra) { _, new in new }
        return query
    }

    /// The keys `query` finds, as `SecKey`s with their attributes (empty when nothing matched).
    static func keysFound(_ query: [String: Any]) -> [[String: Any]] {
        var lookup = query
        lookup[kSecReturnRef] = true
        lookup[kSecReturnAttributes] = true
        lookup[kSecMatchLimit] = kSecMatchLimitAll
        return copyMatching(lookup).result as? [[String: Any]] ?? []
    }

    @Test("a permanent public half is its own kSecClassKey item, found by its own tag and label")
    func permanentPublicHalfIsFoundByItsOwnTag() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent: true, kSecAttrApplicationTag: Data("sign.private".utf8),
                    kSecAttrLabel: "private half",
                ] as [String: Any],
                kSecPublicKeyAttrs as String: [
                    kSecAttrIsPermanent: true, kSecAttrApplicationTag: Data("sign.public".utf8),
                    kSecAttrLabel: "public half",
                ] as [String: Any],
            ]
            let privateKey = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            let expected = SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(privateKey)!, &error)

            let found = Self.keysFound(Self.keyQuery(tag: "sign.public"))
            #expect(found.count == 1)
            let item = try #require(found.first)
            #expect(item[kSecAttrKeyClass] as? String == kSecAttrKeyClassPublic)
            #expect(item[kSecAttrLabel] as? String == "public half")
            #expect(item[kSecAttrKeySizeInBits] as? Int == 256)
            let publicKey = try #require(item[kSecValueRef] as? SecKey)
            #expect(SecKeyCopyExternalRepresentation(publicKey, &error) == expected)
            #expect(
                SecKeyCopyAttributes(publicKey)?[kSecAttrKeyClass] as? String == kSecAttrKeyClassPublic
            )

            // Each half under its own tag: the private tag finds the private key only.
            let privateFound = Self.keysFound(Self.keyQuery(tag: "sign.private"))
            #expect(privateFound.map { $0[kSecAttrKeyClass] as? String } == [kSecAttrKeyClassPrivate as String])
            #expect(privateFound.first?[kSecAttrLabel] as? String == "private half")
            #expect(
                copyMatching(Self.keyQuery(tag: "sign.public", [kSecAttrKeyClass as String: kSecAttrKeyClassPrivate]))
                    .status
                    == errSecItemNotFound
            )
            // The public key found verifies what the private key signs.
            let message = Data("signed".utf8) as CFData
            let signature = try #require(
                SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, message, &error)
            )
            #expect(
                SecKeyVerifySignature(
                    publicKey,
                    .ecdsaSignatureMessageX962SHA256,
                    message,
                    signature,
                    &error
                )
            )
        }
    }

    @Test("a top-level kSecAttrIsPermanent and tag store both halves, as Apple's documentation says")
    func topLevelAttributesApplyToBothHalves() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 2048,
                kSecAttrIsPermanent as String: true,
                kSecAttrApplicationTag as String: Data("both".utf8), kSecAttrLabel as String: "pair",
            ]
            _ = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            let found = Self.keysFound(Self.keyQuery(tag: "both"))
            #expect(
                Set(found.compactMap { $0[kSecAttrKeyClass] as? String })
                    == [kSecAttrKeyClassPrivate as String, kSecAttrKeyClassPublic as String]
            )
            #expect(found.count == 2)
            #expect(found.allSatisfy { $0[kSecAttrLabel] as? String == "pair" })
        }
    }

    @Test("a public half not marked permanent is not stored: its lookup is errSecItemNotFound")
    func publicHalfNotPermanentIsNotStored() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256,
                kSecAttrApplicationTag as String: Data("private-only".utf8),
                kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent: true] as [String: Any],
            ]
            _ = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            #expect(
                copyMatching(Self.keyQuery(tag: "private-only", [kSecAttrKeyClass as String: kSecAttrKeyClassPublic]))
                    .status
                    == errSecItemNotFound
            )
            #expect(Self.keysFound(Self.keyQuery(tag: "private-only")).count == 1)
        }
    }

    /// A generation whose public half the store refuses (here: a key size that is not the key's) fails as a whole:
    /// no private key item stays behind under its tag.
    @Test("a public half the store refuses leaves no private key behind")
    func refusedPublicHalfLeavesNoPrivateKey() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256,
                kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent: true, kSecAttrApplicationTag: Data("half".utf8)]
                    as [String: Any],
                kSecPublicKeyAttrs as String: [
                    kSecAttrIsPermanent: true, kSecAttrApplicationTag: Data("half".utf8),
                    kSecAttrKeySizeInBits: 384,
                ] as [String: Any],
            ]
            #expect(SecKeyCreateRandomKey(parameters as CFDictionary, &error) == nil)
            #expect(takeError(error)?.code == Int(errSecParam))
            #expect(copyMatching(Self.keyQuery(tag: "half")).status == errSecItemNotFound)
        }
    }

    @Test("kSecPublicKeyAttrs that is not a dictionary is errSecParam, and nothing is generated")
    func publicAttributesMustBeADictionary() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256,
                kSecAttrIsPermanent as String: true,
                kSecAttrApplicationTag as String: Data("bad".utf8), kSecPublicKeyAttrs as String: "permanent",
            ]
            #expect(SecKeyCreateRandomKey(parameters as CFDictionary, &error) == nil)
            #expect(takeError(error)?.code == Int(errSecParam))
            #expect(copyMatching(Self.keyQuery(tag: "bad")).status == errSecItemNotFound)
        }
    }

    @Test(
        "a Secure Enclave key's permanent public half is found by its own tag",
        .disabled(
            if: TestBackend.throughDaemon && TestBackend.current == .hostKey,
            "keyseald on the host key has no key hardware (the software double is embedded only)"
        )
    )
    func hardwareKeyPublicHalfIsFoundByItsOwnTag() throws {
        try withHardwareStore { _ in
            var error: Unmanaged<CFError>?
            var parameters = SecKeyTests.secureEnclaveParameters(tag: "se.private")
            parameters[kSecPublicKeyAttrs] =
                [kSecAttrIsPermanent: true, kSecAttrApplicationTag: Data("se.public".utf8)] as [String: Any]
            let privateKey = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            let found = Self.keysFound(Self.keyQuery(tag: "se.public"))
            #expect(found.map { $0[kSecAttrKeyClass] as? String } == [kSecAttrKeyClassPublic as String])
            let publicKey = try #require(found.first?[kSecValueRef] as? SecKey)
            #expect(
                SecKeyCopyExternalRepresentation(publicKey, &error)
                    == SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(privateKey)!, &error)
            )
        }
    }
}

/// What Apple accepts and ignores in key generation and import.
@Suite("SecKey accepts what Apple ignores")
struct SecKeyAcceptsWhatAppleIgnoresTests {
    @Test("return keys in key generation are accepted and ignored", arguments: [false, true])
    func returnKeysInKeyGenerationAreIgnored(permanent: Bool) throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                kSecReturnRef as String: true, kSecReturnData as String: false, kSecReturnAttributes as String: true,
                kSecReturnPersistentRef as String: true,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent: permanent, kSecAttrApplicationTag: Data("returns".utf8),
                    kSecReturnRef: true,
                ] as [String: Any],
            ]
            let key = SecKeyCreateRandomKey(parameters as CFDictionary, &error)
            #expect(key != nil, "\(String(describing: takeError(error)))")
            #expect(
                copyMatching(SecKeyAsAppleTests.keyQuery(tag: "returns")).status
                    == (permanent ? errSecSuccess : errSecItemNotFound)
            )
        }
    }

    @Test("an unknown return-like key in key generation is still errSecParam")
    func unknownKeyInKeyGenerationIsParam() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256,
                "r_Everything": true,
            ]
            #expect(SecKeyCreateRandomKey(parameters as CFDictionary, &error) == nil)
            #expect(takeError(error)?.code == Int(errSecParam))
        }
    }

    /// Apple derives the size from the data: a `kSecAttrKeySizeInBits` that does not match is ignored.
    @Test("SecKeyCreateWithData takes the size from the data, whatever kSecAttrKeySizeInBits says")
    func createWithDataIgnoresAMismatchingSize() throws {
        var error: Unmanaged<CFError>?
        for (data, keyClass) in [
            (KeyTestMaterial.publicKey, kSecAttrKeyClassPublic),
            (KeyTestMaterial.privateKey, kSecAttrKeyClassPrivate),
        ] {
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass as String: keyClass,
                kSecAttrKeySizeInBits as String: 2048,
            ]
            let key = SecKeyCreateWithData(data as CFData, attributes as CFDictionary, &error)
            #expect(key != nil, "\(keyClass): \(String(describing: takeError(error)))")
            #expect(key.flatMap(SecKeyCopyAttributes)?[kSecAttrKeySizeInBits] as? Int == 256)
            #expect(key.map(SecKeyGetBlockSize) == 32)
        }
    }
}
