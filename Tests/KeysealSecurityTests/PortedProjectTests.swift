import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// What real projects' own tests found still different from Apple (docs/COMPATIBILITY.md): each test is written as
/// that project's test is, and names it.
@Suite("Apple code ported unchanged")
struct PortedProjectTests {
    // MARK: - String and CFString keys

    /// SwiftKeychainWrapper's `allKeys()` (its testAllKeys… tests in KeychainWrapperDefaultWrapperTests), as it is
    /// written: a `[String: Any]` query keyed by `String!` names, the results cast to `[[AnyHashable: Any]]`, the account
    /// read under its `String!` name, then under `kSecAttrAccount`. Its first read never finds anything, on Apple either
    /// (an `AnyHashable` of a `String?` is not one of a `String`): the second, an `NSString` key in a dictionary keyed by
    /// `String`, is the one that works on Apple. (`as AnyHashable` spells out the conversion Apple code gets from the
    /// standard library's subscript: inside this package a package-only subscript once answered it instead.)
    @Test("a result keyed by String answers kSecAttrAccount (SwiftKeychainWrapper's allKeys)")
    func resultDictionaryAnswersCFStringKey() throws {
        try withStore { _ in
            let secClass: String! = kSecClass as String
            let secAttrService: String! = kSecAttrService as String
            let secAttrAccount: String! = kSecAttrAccount as String
            let secReturnAttributes: String! = kSecReturnAttributes as String
            let secMatchLimit: String! = kSecMatchLimit as String
            for key in ["Test Key1", "Test Key2"] {
                let item: [String: Any] = [
                    secClass: kSecClassGenericPassword, secAttrService: "wrapper", secAttrAccount: Data(key.utf8),
                    kSecValueData as String: Data("Test Value".utf8),
                ]
                #expect(SecItemAdd(item as CFDictionary, nil) == errSecSuccess)
            }
            let query: [String: Any] = [
                secClass: kSecClassGenericPassword, secAttrService: "wrapper", secReturnAttributes: kCFBooleanTrue!,
                secMatchLimit: kSecMatchLimitAll,
            ]
            var result: AnyObject?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            var keys = Set<String>()
            if let results = result as? [[AnyHashable: Any]] {
                for attributes in results {
                    if let accountData = attributes[secAttrAccount] as? Data,
                        let key = String(data: accountData, encoding: .utf8)
                    {
                        keys.insert(key)
                    } else if let accountData = attributes[kSecAttrAccount as AnyHashable] as? Data,
                        let key = String(data: accountData, encoding: .utf8)
                    {
                        keys.insert(key)
                    }
                }
            }
            #expect(keys == ["Test Key1", "Test Key2"])
        }
    }

    /// The other way round, as SimpleKeychain's and twilio-verify-ios's tests compare dictionaries built with the
    /// constants (`[CFString: Any]`, `as CFDictionary`) with ones keyed by `String`, and read `SecKeyCopyAttributes`'s
    /// result with the constants.
    @Test("an NSString key and a String key are one key: AnyHashable, NSDictionary.isEqual, [String: Any] casts")
    func stringAndCFStringKeysAreOneKey() throws {
        #expect(AnyHashable(kSecAttrAccount) == AnyHashable("acct"))
        #expect(AnyHashable(kSecAttrAccount).hashValue == AnyHashable("acct").hashValue)
        let query = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "alice"] as CFDictionary
        #expect(query["acct"] as? String == "alice")
        #expect(query[kSecAttrAccount] as? String == "alice")
        let expected: [String: Any] = ["class": "genp", "acct": "alice"]
        #expect(NSDictionary(dictionary: query).isEqual(to: expected))
        #expect((query as? [String: Any])?["acct"] as? String == "alice")
        try withStore { _ in
            let parameters =
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256] as CFDictionary
            let key = try #require(SecKeyCreateRandomKey(parameters, nil))
            let attributes = try #require(SecKeyCopyAttributes(key))
            #expect(attributes[kSecAttrKeySizeInBits] as? Int == 256)
            #expect(attributes[kSecAttrKeyType] as? String == kSecAttrKeyTypeECSECPrimeRandom as String)
        }
    }

    // MARK: - Equatable Security objects

    /// twilio-verify-ios's KeychainTests.testCopyItemMatching_witMatches_shouldReturnKey: the public key read back from
    /// the keychain equals the one stored (Apple's `CFEqual` of two keys compares the keys); and
    /// testAccessControl_withValidProtection_shouldReturnAccesControl, which compares two access controls.
    @Test("a public key read back equals the stored one; access controls, certificates, identities compare")
    func securityObjectsAreEquatable() throws {
        try withStore { _ in
            let pairAttributes =
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                    kSecPublicKeyAttrs: [kSecAttrApplicationTag as String: "com.security.testspublic"],
                    kSecPrivateKeyAttrs: [kSecAttrApplicationTag as String: "com.security.testsprivate"],
                ] as CFDictionary
            var publicKey: SecKey?
            var privateKey: SecKey?
            #expect(SecKeyGeneratePair(pairAttributes, &publicKey, &privateKey) == errSecSuccess)
            let pair = (publicKey: try #require(publicKey), privateKey: try #require(privateKey))
            let keyQuery =
                [
                    kSecClass: kSecClassKey, kSecAttrKeyClass: kSecAttrKeyClassPublic, kSecAttrLabel: "alias",
                    kSecReturnRef: true, kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom,
                    kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                ] as [CFString: Any]
            var query =
                [
                    kSecClass: kSecClassKey, kSecAttrLabel: "alias",
                    kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                ] as [CFString: Any]
            query[kSecValueRef] = pair.publicKey
            #expect(SecItemAdd(query as CFDictionary, nil) == errSecSuccess)
            var keyObject: AnyObject?
            #expect(SecItemCopyMatching(keyQuery as CFDictionary, &keyObject) == errSecSuccess)
            let key = keyObject as! SecKey
            #expect(key == pair.publicKey)
            #expect(Set([key, pair.publicKey]).count == 1)
            #expect(key != pair.privateKey)
            #expect(SecKeyCopyPublicKey(pair.privateKey) == pair.publicKey)
            #expect(SecItemDelete(keyQuery as CFDictionary) == errSecSuccess)

            let protection = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            #expect(
                SecAccessControlCreateWithFlags(kCFAllocatorDefault, protection, [], nil)
                    == SecAccessControlCreateWithFlags(kCFAllocatorDefault, protection, [], nil)
            )

            let first = try #require(SecCertificateCreateWithData(nil, KeyTestMaterial.certificate as CFData))
            let second = try #require(SecCertificateCreateWithData(nil, KeyTestMaterial.certificate as CFData))
            #expect(first == second)
            #expect(Set([first, second]).count == 1)

            var error: Unmanaged<CFError>?
            let keyAttributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
            ]
            let identityKey = try #require(
                SecKeyCreateWithData(KeyTestMaterial.privateKey as CFData, keyAttributes as CFDictionary, &error)
            )
            #expect(SecItemAdd([kSecValueRef: identityKey] as CFDictionary, nil) == errSecSuccess)
            #expect(
                SecItemAdd([kSecClass: kSecClassCertificate, kSecValueRef: first] as CFDictionary, nil)
                    == errSecSuccess
            )
            let identityQuery: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true]
            var found: [SecIdentity] = []
            for _ in 0..<2 {
                var result: CFTypeRef?
                #expect(SecItemCopyMatching(identityQuery as CFDictionary, &result) == errSecSuccess)
                found.append(try #require(result as? SecIdentity))
            }
            #expect(found[0] == found[1])
            #expect(Set(found).count == 1)
        }
    }

    // MARK: - Key generation's refusals

    /// twilio-verify-ios's KeychainTests.testGenerateKeyPair_withInvalidParameters_shouldThrow: empty parameters are
    /// errSecUnimplemented (−4), Apple's errSecUnsupportedAlgorithm; so is a key type that is neither EC nor RSA. What
    /// Apple's EC and RSA generators refuse (a size) is errSecParam.
    @Test(
        "SecKeyCreateRandomKey refuses as Apple's does",
        arguments: [
            (nil, nil, errSecUnimplemented), ("99", 256, errSecUnimplemented),
            (kSecAttrKeyTypeEC as String, 255, errSecParam),
            (kSecAttrKeyTypeRSA as String, 1000, errSecParam),
        ] as [(String?, Int?, OSStatus)]
    )
    func keyGenerationRefusals(type: String?, bits: Int?, status: OSStatus) throws {
        var parameters: [String: Any] = [:]
        parameters[kSecAttrKeyType] = type
        parameters[kSecAttrKeySizeInBits] = bits
        try withStore { _ in
            var error: Unmanaged<CFError>?
            #expect(SecKeyCreateRandomKey(parameters as CFDictionary, &error) == nil)
            let failure = try #require(error?.takeRetainedValue())
            #expect(CFErrorGetDomain(failure) == NSOSStatusErrorDomain)
            #expect(CFErrorGetCode(failure) == Int(status))
        }
    }

    // MARK: - A key item of attributes alone

    /// twilio-verify-ios's KeychainTests.testAddItem_withValidArguments_shouldSucceed (its `saveKeyQuery`: a class, a
    /// label, an accessibility, no key), then its tearDown's clearKeychain; and
    /// testCopyItemMatching_withoutMatches_shouldThrow's query for a public EC key, which such an item does not answer.
    @Test("a key item of attributes alone is added, not found as a public EC key, and deleted")
    func keyItemOfAttributesAlone() throws {
        try withStore { _ in
            let saveKeyQuery =
                [
                    kSecClass: kSecClassKey, kSecAttrLabel: "alias",
                    kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                ] as [CFString: Any]
            #expect(SecItemAdd(saveKeyQuery as CFDictionary, nil) == errSecSuccess)
            let keyQuery =
                [
                    kSecClass: kSecClassKey, kSecAttrKeyClass: kSecAttrKeyClassPublic, kSecAttrLabel: "alias",
                    kSecReturnRef: true, kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom,
                    kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                ] as [CFString: Any]
            var result: AnyObject?
            #expect(SecItemCopyMatching(keyQuery as CFDictionary, &result) == errSecItemNotFound)
            let attributes =
                [kSecClass: kSecClassKey, kSecAttrLabel: "alias", kSecReturnAttributes: true] as CFDictionary
            #expect(SecItemCopyMatching(attributes, &result) == errSecSuccess)
            #expect((result as? [String: Any])?[kSecAttrLabel as String] as? String == "alias")
            // No key can be made of it.
            let reference = [kSecClass: kSecClassKey, kSecAttrLabel: "alias", kSecReturnRef: true] as CFDictionary
            #expect(SecItemCopyMatching(reference, &result) == errSecParam)
            #expect(SecItemDelete([kSecClass: kSecClassKey] as CFDictionary) == errSecSuccess)
        }
    }

    // MARK: - No value, no v_Data

    /// OneTimePassword's KeychainTests.testMissingSecret: an item added with `kSecAttrGeneric` and no `kSecValueData`,
    /// read back by its persistent ref with data, attributes and persistent ref, has no `v_Data`.
    @Test("an item added without kSecValueData reads back without v_Data (OneTimePassword's testMissingSecret)")
    func itemWithoutValueHasNoValueData() throws {
        try withStore { _ in
            var attributes: [String: AnyObject] = [kSecAttrGeneric as String: Data("otpauth".utf8) as NSData]
            attributes[kSecClass as String] = kSecClassGenericPassword
            attributes[kSecReturnPersistentRef as String] = kCFBooleanTrue
            attributes[kSecAttrAccount as String] = UUID().uuidString as NSString
            var added: AnyObject?
            #expect(SecItemAdd(attributes as CFDictionary, &added) == errSecSuccess)
            let persistentRef = try #require(added as? Data)
            let queryDict: [String: AnyObject] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecValuePersistentRef as String: persistentRef as NSData,
                kSecReturnPersistentRef as String: kCFBooleanTrue,
                kSecReturnAttributes as String: kCFBooleanTrue,
                kSecReturnData as String: kCFBooleanTrue,
            ]
            var result: AnyObject?
            #expect(SecItemCopyMatching(queryDict as CFDictionary, &result) == errSecSuccess)
            let keychainDictionary = try #require(result as? NSDictionary)
            #expect(keychainDictionary[kSecAttrGeneric as String] as? Data == Data("otpauth".utf8))
            #expect(keychainDictionary[kSecValuePersistentRef as String] as? Data == persistentRef)
            #expect(keychainDictionary[kSecValueData as String] == nil)
        }
    }

    // MARK: - CFError descriptions

    /// twilio-verify-ios's KeychainTests.testAccessControl_withInvalidProtection_shouldThrow: Core Foundation's
    /// description of Security's error, with Apple's apostrophe (U+2019); and key generation's message.
    @Test("a CFError's localized description is Apple's: \"The operation couldn’t be completed. (OSStatus error …)\"")
    func errorDescriptionsInApplesForm() throws {
        var error: Unmanaged<CFError>?
        #expect(SecAccessControlCreateWithFlags(kCFAllocatorDefault, String() as CFString, [], &error) == nil)
        let accessControlError = try #require(error?.takeRetainedValue() as? Error)
        let expectedLocalizedDescription =
            "The operation couldn\u{2019}t be completed. (OSStatus error -50 - SecAccessControl: invalid protection: )"
        #expect(accessControlError.localizedDescription.contains(expectedLocalizedDescription))
        #expect((accessControlError as NSError).code == -50)
        #expect((accessControlError as NSError).domain == "NSOSStatusErrorDomain")

        error = nil
        #expect(SecKeyCreateRandomKey([:] as CFDictionary, &error) == nil)
        let generationError = try #require(error?.takeRetainedValue())
        #expect(
            generationError.localizedDescription
                == "The operation couldn\u{2019}t be completed. (OSStatus error -4 - Key generation failed, error -4)"
        )
    }
}
