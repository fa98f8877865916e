import Foundation
import Keyseal
import KeysealSecurity
import Testing

/// Names that open-source keychain wrappers use and that must compile with Apple's values (docs/COMPATIBILITY.md).
@Suite("Apple names used by keychain wrappers")
struct AppleNamesTests {
    /// Status tables (KeychainAccess, SwiftyKeychainKit) name SecBase.h's legacy codes.
    @Test func noAccessForItemHasApplesValue() {
        #expect(errSecNoAccessForItem == -25243)
    }

    @Test func invalidEncodingHasApplesValue() {
        #expect(errSecInvalidEncoding == -67853)
    }

    @Test func invalidRecordHasApplesValue() {
        #expect(errSecInvalidRecord == -67701)
    }

    @Test func diskFullHasApplesValue() {
        #expect(errSecDiskFull == -34)
    }

    /// Locksmith reads `Bundle.main.infoDictionary![String(kCFBundleIdentifierKey)]` for its default service.
    @Test func bundleIdentifierKeyIsTheInfoPlistKey() {
        #expect(kCFBundleIdentifierKey == "CFBundleIdentifier")
    }
}

/// Core Foundation types are hashable on Apple; wrappers keep them in `[String: AnyHashable]` queries.
@Suite("CF types as AnyHashable")
struct HashableTypesTests {
    private func accessControl(_ protection: CFString, _ flags: SecAccessControlCreateFlags) -> SecAccessControl {
        SecAccessControlCreateWithFlags(nil, protection, flags, nil)!
    }

    /// Valet's `Service` stores `kSecAttrAccessControl` in a `[String: AnyHashable]` query.
    @Test func accessControlGoesIntoAnAnyHashableQuery() {
        var query: [String: AnyHashable] = [:]
        query[kSecAttrAccessControl] = accessControl(kSecAttrAccessibleWhenUnlocked, .privateKeyUsage)
        #expect(query[kSecAttrAccessControl] as? SecAccessControl != nil)
    }

    @Test func accessControlsWithTheSameProtectionAndFlagsAreEqual() {
        #expect(
            accessControl(kSecAttrAccessibleWhenUnlocked, .privateKeyUsage)
                == accessControl(kSecAttrAccessibleWhenUnlocked, .privateKeyUsage)
        )
    }

    @Test func accessControlsWithOtherFlagsDiffer() {
        #expect(
            accessControl(kSecAttrAccessibleWhenUnlocked, .privateKeyUsage)
                != accessControl(kSecAttrAccessibleWhenUnlocked, .devicePasscode)
        )
    }

    @Test func accessControlsWithOtherProtectionsDiffer() {
        #expect(
            accessControl(kSecAttrAccessibleWhenUnlocked, [])
                != accessControl(kSecAttrAccessibleAfterFirstUnlock, [])
        )
    }
}

/// `kCFBooleanTrue`/`False` are objects, as on Apple.
@Suite("CFBoolean constants")
struct BooleanConstantTests {
    /// KeyClip builds its queries as `[String: AnyObject]` with `kCFBooleanTrue` values.
    @Test func trueGoesIntoAnAnyObjectQuery() {
        let query: [String: AnyObject] = [kSecReturnData as String: kCFBooleanTrue]
        #expect((query[kSecReturnData] as? NSNumber)?.boolValue == true)
    }

    /// SwiftyKeychainKit reads a Boolean attribute as a `CFNumber` and compares it with the constants.
    @Test func aTrueNumberEqualsTrue() {
        let attribute: CFNumber = NSNumber(value: true)
        #expect(attribute == kCFBooleanTrue)
    }

    @Test func aFalseNumberDiffersFromTrue() {
        let attribute: CFNumber = NSNumber(value: false)
        #expect(attribute != kCFBooleanTrue)
    }

    @Test func trueHasTheBooleanTypeID() {
        #expect(CFGetTypeID(kCFBooleanTrue) == CFBooleanGetTypeID())
    }

    /// `kSecReturnAttributes: kCFBooleanFalse` asks for no attributes: the result is the bare data.
    @Test func falseReturnAttributesIsNotAReturnKey() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            let (status, result) = copyMatching(
                genericQuery([
                    kSecReturnData as String: kCFBooleanTrue!, kSecReturnAttributes as String: kCFBooleanFalse!,
                ])
            )
            #expect(status == errSecSuccess)
            #expect(result as? Data == Data("secret".utf8))
        }
    }
}

/// `v_Data` in a query is accepted and does not take part in matching, as in Apple's securityd.
@Suite("Queries carrying v_Data")
struct ValueDataInQueryTests {
    /// Locksmith's `updateData` passes its whole add dictionary, `v_Data` included, as the update query.
    @Test func updateWithTheAddDictionaryAsQueryChangesTheItem() throws {
        try withStore { _ in
            #expect(add(genericPassword(data: Data("old".utf8))) == errSecSuccess)
            let query = genericPassword(data: Data("new".utf8))
            var changes = query
            changes[kSecClass] = nil
            #expect(SecItemUpdate(query as CFDictionary, changes as CFDictionary) == errSecSuccess)
            #expect(findData(genericQuery()) == Data("new".utf8))
        }
    }

    @Test func findIgnoresTheValueDataOfTheQuery() throws {
        try withStore { _ in
            #expect(add(genericPassword(data: Data("stored".utf8))) == errSecSuccess)
            #expect(findData(genericQuery([kSecValueData as String: Data("other".utf8)])) == Data("stored".utf8))
        }
    }

    @Test func valueDataThatIsNotDataIsAParameterError() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(SecItemDelete(genericQuery([kSecValueData as String: 42]) as CFDictionary) == errSecParam)
        }
    }
}
