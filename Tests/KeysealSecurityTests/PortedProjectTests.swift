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
    /// `String`, is the one that works on Apple.
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
                    } else if let accountData = attributes[kSecAttrAccount] as? Data,
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
}
