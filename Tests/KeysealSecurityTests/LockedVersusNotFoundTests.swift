import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// docs/COMPATIBILITY.md, "The four calls": a class key unavailable because of the lock state gives
/// errSecInteractionNotAllowed (−25308), never errSecItemNotFound (−25300), through the SecItem functions.
@Suite("Locked is not not-found")
struct LockedVersusNotFoundTests {
    static let passcode = "1234-correct"

    @Test func findOfAWhenUnlockedItemWhileLockedIsInteractionNotAllowed() throws {
        try withStore { fixture in
            try fixture.store.setPasscode(Self.passcode)
            #expect(add(genericPassword()) == errSecSuccess)
            try fixture.store.lock()
            #expect(copyMatching(genericQuery([kSecReturnData as String: true])).status == errSecInteractionNotAllowed)
        }
    }

    @Test func findWithoutReturnKeyWhileLockedIsInteractionNotAllowed() throws {
        try withStore { fixture in
            try fixture.store.setPasscode(Self.passcode)
            #expect(add(genericPassword()) == errSecSuccess)
            try fixture.store.lock()
            #expect(SecItemCopyMatching(genericQuery() as CFDictionary, nil) == errSecInteractionNotAllowed)
        }
    }

    @Test func findOfAnAfterFirstUnlockItemWhileLockedSucceeds() throws {
        try withStore { fixture in
            try fixture.store.setPasscode(Self.passcode)
            #expect(
                add(genericPassword([kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock]))
                    == errSecSuccess
            )
            try fixture.store.lock()
            #expect(findData(genericQuery()) == Data("secret".utf8))
        }
    }

    @Test func addIntoALockedClassIsInteractionNotAllowed() throws {
        try withStore { fixture in
            try fixture.store.setPasscode(Self.passcode)
            try fixture.store.lock()
            #expect(add(genericPassword()) == errSecInteractionNotAllowed)
        }
    }

    @Test func addOfADuplicateIntoALockedClassIsInteractionNotAllowed() throws {
        try withStore { fixture in
            try fixture.store.setPasscode(Self.passcode)
            #expect(add(genericPassword()) == errSecSuccess)
            try fixture.store.lock()
            #expect(add(genericPassword()) == errSecInteractionNotAllowed)
        }
    }

    @Test func updateWhileLockedIsInteractionNotAllowed() throws {
        try withStore { fixture in
            try fixture.store.setPasscode(Self.passcode)
            #expect(add(genericPassword()) == errSecSuccess)
            try fixture.store.lock()
            let status = SecItemUpdate(genericQuery() as CFDictionary, [kSecValueData: Data("x".utf8)] as CFDictionary)
            #expect(status == errSecInteractionNotAllowed)
        }
    }

    @Test func deleteWhileLockedIsInteractionNotAllowed() throws {
        try withStore { fixture in
            try fixture.store.setPasscode(Self.passcode)
            #expect(add(genericPassword()) == errSecSuccess)
            try fixture.store.lock()
            #expect(SecItemDelete(genericQuery() as CFDictionary) == errSecInteractionNotAllowed)
        }
    }

    @Test func findBeforeFirstUnlockIsInteractionNotAllowed() throws {
        try withStore { fixture in
            try fixture.store.setPasscode(Self.passcode)
            #expect(
                add(genericPassword([kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock]))
                    == errSecSuccess
            )
            try fixture.reopen()
            KeychainStore.withDefault(fixture.store) {
                #expect(SecItemCopyMatching(genericQuery() as CFDictionary, nil) == errSecInteractionNotAllowed)
            }
        }
    }
}
