import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// Apple's idioms for `CFString` and `CFDictionary`, written as the wrappers of docs/COMPATIBILITY.md write them: on
/// Apple the `kSec…` constants are objects and any Swift dictionary converts with `as CFDictionary`. Before the
/// constants were objects, this file did not compile.
@Suite("CF types as objects")
struct CoreFoundationObjectTests {
    /// SwiftKeychainWrapper's shape: the class passed as `AnyObject`, a query keyed by `String!` names.
    private static let secClass: String! = kSecClass as String
    private static let secAttrAccount: String! = kSecAttrAccount as String
    private static let secValueData: String! = kSecValueData as String
    private static let secReturnData: String! = kSecReturnData as String

    private static func query(itemClass: AnyObject, account: String) -> [String?: AnyObject] {
        [secClass: itemClass, secAttrAccount: account as NSString]
    }

    @Test("a kSecClass constant passed as AnyObject and a [String?: AnyObject] query as CFDictionary")
    func optionalKeyedQueryOfObjects() throws {
        try withStore { _ in
            var add = Self.query(itemClass: kSecClassGenericPassword, account: "wrapper")
            add[Self.secValueData] = Data("secret".utf8) as NSData
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            var lookup = Self.query(itemClass: kSecClassGenericPassword, account: "wrapper")
            lookup[Self.secReturnData] = kCFBooleanTrue
            var result: AnyObject?
            #expect(SecItemCopyMatching(lookup as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("secret".utf8))
        }
    }

    /// KeyClip's shape: `[String: AnyObject]` with the constants as values.
    @Test("a [String: AnyObject] query with the constants as values")
    func objectValuedQuery() throws {
        try withStore { _ in
            let add: [String: AnyObject] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "clip" as NSString,
                kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock,
                kSecValueData as String: Data("v".utf8) as NSData,
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            let query: [String: AnyObject] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "clip" as NSString,
                kSecReturnAttributes as String: kCFBooleanTrue, kSecMatchLimit as String: kSecMatchLimitOne,
            ]
            var result: AnyObject?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let attributes = try #require(result as? [String: Any])
            #expect(attributes[kSecAttrAccessible as String] as? String == kSecAttrAccessibleAfterFirstUnlock as String)
        }
    }

    @Test("a [CFString: Any] query, and key generation parameters keyed by CFString")
    func cfStringKeyedDictionaries() throws {
        try withStore { _ in
            let add: [CFString: Any] = [
                kSecClass: kSecClassGenericPassword, kSecAttrAccount: "cf", kSecValueData: Data("v".utf8),
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            #expect(
                SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "cf"] as CFDictionary) == noErr
            )
            var error: Unmanaged<CFError>?
            let parameters: [CFString: Any] = [
                kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
            ]
            let key = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            let attributes = try #require(SecKeyCopyAttributes(key) as? [CFString: Any])
            #expect(attributes[kSecAttrKeyType] as? String == kSecAttrKeyTypeECSECPrimeRandom as String)
            #expect(attributes[kSecAttrKeySizeInBits] as? Int == 256)
        }
    }

    /// SwiftyKeychainKit's shape: a raw-value type initialized from either.
    private enum ItemClass: String {
        case genericPassword = "genp"
        init?(rawValue: CFString) { self.init(rawValue: rawValue as String) }
    }

    @Test("CFString is an object: init?(rawValue: CFString) beside the String one, CFGetTypeID, String(_:)")
    func cfStringIsAnObject() {
        #expect(ItemClass(rawValue: kSecClassGenericPassword) == .genericPassword)
        #expect(ItemClass(rawValue: "genp") == .genericPassword)
        #expect(CFGetTypeID(kSecClass) == CFStringGetTypeID())
        #expect(String(kSecClassGenericPassword) == "genp")
        #expect(SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:message-X962:SHA256") == .ecdsaSignatureMessageX962SHA256)
        #expect(SecCopyErrorMessageString(errSecItemNotFound, nil) as String? != nil)
    }

    @Test("a dictionary key that is not a string is errSecParam")
    func nonStringKeyIsParam() {
        let query: [AnyHashable: Any] = [kSecClass as String: kSecClassGenericPassword, 7: "seven"]
        #expect(SecItemCopyMatching(query, nil) == errSecParam)
    }
}
