import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// `kSecAttrCreator` and `kSecAttrType` of the password classes are Apple's four-character codes, `CFNumber`s: given as
/// numbers they come back as numbers (Locksmith reads them `as? UInt`); strings, as Keyseal took them before, are still
/// accepted and come back as strings. Embedded and through keyseald.
@Suite("kSecAttrCreator and kSecAttrType as four-character codes")
struct FourCharCodeTests {
    /// Locksmith's generic-password "meta attributes" test, in its shape: numbers in, `as? UInt` out.
    @Test("numbers are stored, matched and returned as numbers")
    func numbersRoundTrip() throws {
        try withStore { _ in
            let creator: UInt = 5
            let type: UInt = 0x6170_706C  // 'appl'
            #expect(
                add(genericPassword([kSecAttrCreator as String: creator, kSecAttrType as String: type]))
                    == errSecSuccess
            )
            let attributes = try #require(findAttributes(genericQuery([kSecAttrCreator as String: creator])))
            #expect(attributes[kSecAttrCreator as String] as? UInt == creator)
            #expect(attributes[kSecAttrType as String] as? UInt == type)
            #expect(CFGetTypeID(attributes[kSecAttrType as String] as AnyObject) == CFNumberGetTypeID())
            #expect(copyMatching(genericQuery([kSecAttrCreator as String: UInt32(6)])).status == errSecItemNotFound)
            #expect(
                SecItemUpdate(
                    genericQuery() as CFDictionary,
                    [kSecAttrCreator as String: NSNumber(value: 7)] as CFDictionary
                )
                    == errSecSuccess
            )
            #expect(
                findAttributes(genericQuery([kSecAttrCreator as String: 7]))?[kSecAttrCreator as String] as? Int == 7
            )
        }
    }

    @Test("strings are accepted as before and come back as strings")
    func stringsStillWork() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrCreator as String: "KSEL"])) == errSecSuccess)
            let attributes = try #require(findAttributes(genericQuery([kSecAttrCreator as String: "KSEL"])))
            #expect(attributes[kSecAttrCreator as String] as? String == "KSEL")
        }
    }

    @Test("a number that is not a four-character code is errSecParam", arguments: [-1, 0x1_0000_0000])
    func outOfRangeIsParam(number: Int) throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrType as String: number])) == errSecParam)
        }
    }

    /// A key's `type` is its key type, a string ("73"), as before.
    @Test("a key's kSecAttrKeyType stays a string")
    func keyTypeStaysAString() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256,
                kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: Data("fcc".utf8),
            ]
            _ = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
            let attributes = try #require(
                findAttributes([
                    kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("fcc".utf8),
                    kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
                ])
            )
            #expect(attributes[kSecAttrKeyType as String] as? String == kSecAttrKeyTypeEC as String)
        }
    }
}
