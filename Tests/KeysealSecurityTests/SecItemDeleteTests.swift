import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// docs/COMPATIBILITY.md, "The four calls" (Delete) and "What wrappers rely on" 8, through `SecItemDelete`.
@Suite("SecItemDelete")
struct SecItemDeleteTests {
    @Test func deleteRemovesEveryMatch() throws {
        try withStore { _ in
            for account in ["a", "b", "c"] { #expect(add(genericPassword(account: account)) == errSecSuccess) }
            #expect(SecItemDelete(genericQuery(account: nil) as CFDictionary) == errSecSuccess)
            #expect(SecItemCopyMatching(genericQuery(account: nil) as CFDictionary, nil) == errSecItemNotFound)
        }
    }

    @Test func deleteLeavesItemsThatDoNotMatch() throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "a")) == errSecSuccess)
            #expect(add(genericPassword(account: "b")) == errSecSuccess)
            #expect(SecItemDelete(genericQuery(account: "a") as CFDictionary) == errSecSuccess)
            #expect(findAll(genericQuery(account: nil)).compactMap { $0[kSecAttrAccount] as? String } == ["b"])
        }
    }

    @Test func limitOneIsAParameterError() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            let status = SecItemDelete(genericQuery([kSecMatchLimit as String: kSecMatchLimitOne]) as CFDictionary)
            #expect(status == errSecParam)
        }
    }

    @Test func limitOneDeletesNothing() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            _ = SecItemDelete(genericQuery([kSecMatchLimit as String: kSecMatchLimitOne]) as CFDictionary)
            #expect(SecItemCopyMatching(genericQuery() as CFDictionary, nil) == errSecSuccess)
        }
    }

    @Test func limitAllIsAccepted() throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "a")) == errSecSuccess)
            #expect(add(genericPassword(account: "b")) == errSecSuccess)
            let status = SecItemDelete(
                genericQuery(account: nil, [kSecMatchLimit as String: kSecMatchLimitAll]) as CFDictionary
            )
            #expect(status == errSecSuccess)
            #expect(findAll(genericQuery(account: nil)).isEmpty)
        }
    }

    @Test func nothingMatchedIsNotFound() throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "a")) == errSecSuccess)
            #expect(SecItemDelete(genericQuery(account: "b") as CFDictionary) == errSecItemNotFound)
        }
    }

    @Test func deleteWithSyncAnyRemovesSynchronizableAndOtherItems() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(add(genericPassword([kSecAttrSynchronizable as String: true])) == errSecSuccess)
            let query = genericQuery([kSecAttrSynchronizable as String: kSecAttrSynchronizableAny])
            #expect(SecItemDelete(query as CFDictionary) == errSecSuccess)
            #expect(SecItemCopyMatching(query as CFDictionary, nil) == errSecItemNotFound)
        }
    }

    @Test func persistentRefDeletesItsItem() throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "a")) == errSecSuccess)
            #expect(add(genericPassword(account: "b")) == errSecSuccess)
            let reference = try #require(
                copyMatching(genericQuery(account: "a", [kSecReturnPersistentRef as String: true])).result as? Data
            )
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecValuePersistentRef as String: reference,
            ]
            #expect(SecItemDelete(query as CFDictionary) == errSecSuccess)
            #expect(findAll(genericQuery(account: nil)).compactMap { $0[kSecAttrAccount] as? String } == ["b"])
        }
    }

    @Test func queryWithoutSyncDoesNotDeleteSynchronizableItems() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrSynchronizable as String: true])) == errSecSuccess)
            #expect(SecItemDelete(genericQuery() as CFDictionary) == errSecItemNotFound)
            let synced = genericQuery([kSecAttrSynchronizable as String: true])
            #expect(SecItemCopyMatching(synced as CFDictionary, nil) == errSecSuccess)
        }
    }
}
