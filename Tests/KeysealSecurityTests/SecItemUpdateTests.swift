import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// docs/COMPATIBILITY.md, "The four calls" (Update) and "What wrappers rely on" 4, 5 and 8, through `SecItemUpdate`.
@Suite("SecItemUpdate")
struct SecItemUpdateTests {
    func update(_ query: [String: Any], _ attributes: [String: Any]) -> OSStatus {
        SecItemUpdate(query as CFDictionary, attributes as CFDictionary)
    }

    @Test func updateChangesTheData() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(update(genericQuery(), [kSecValueData as String: Data("new".utf8)]) == errSecSuccess)
            #expect(findData(genericQuery()) == Data("new".utf8))
        }
    }

    @Test(arguments: [
        kSecReturnData as String, kSecReturnAttributes as String, kSecReturnPersistentRef as String,
        kSecReturnRef as String,
    ])
    func returnKeysInTheAttributesToUpdateAreParameterErrors(key: String) throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(update(genericQuery(), [kSecValueData as String: Data("new".utf8), key: true]) == errSecParam)
        }
    }

    @Test func matchLimitInTheAttributesToUpdateIsAParameterError() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            let status = update(
                genericQuery(),
                [kSecValueData as String: Data("new".utf8), kSecMatchLimit as String: kSecMatchLimitAll]
            )
            #expect(status == errSecParam)
        }
    }

    @Test func caseInsensitiveInTheAttributesToUpdateIsAParameterError() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            let status = update(
                genericQuery(),
                [kSecValueData as String: Data("new".utf8), kSecMatchCaseInsensitive as String: false]
            )
            #expect(status == errSecParam)
        }
    }

    @Test func parameterErrorChangesNothing() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(
                update(genericQuery(), [kSecValueData as String: Data("new".utf8), kSecReturnData as String: true])
                    == errSecParam
            )
            #expect(findData(genericQuery()) == Data("secret".utf8))
        }
    }

    @Test func classInTheAttributesToUpdateIsNoSuchAttr() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(update(genericQuery(), [kSecClass as String: kSecClassInternetPassword]) == errSecNoSuchAttr)
        }
    }

    @Test func attributeOfAnotherClassInTheAttributesToUpdateIsNoSuchAttr() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(update(genericQuery(), [kSecAttrServer as String: "example.com"]) == errSecNoSuchAttr)
        }
    }

    @Test func returnKeyInTheUpdateQueryIsAParameterError() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(
                update(genericQuery([kSecReturnData as String: true]), [kSecValueData as String: Data("new".utf8)])
                    == errSecParam
            )
        }
    }

    @Test func nothingMatchedIsNotFound() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(
                update(genericQuery(account: "bob"), [kSecValueData as String: Data("new".utf8)]) == errSecItemNotFound
            )
        }
    }

    @Test func collisionWithAnotherItemsPrimaryKeyIsDuplicate() throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "a", data: Data("pw-a".utf8))) == errSecSuccess)
            #expect(add(genericPassword(account: "b", data: Data("pw-b".utf8))) == errSecSuccess)
            #expect(update(genericQuery(account: "a"), [kSecAttrAccount as String: "b"]) == errSecDuplicateItem)
        }
    }

    @Test func collisionChangesNothing() throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "a", data: Data("pw-a".utf8))) == errSecSuccess)
            #expect(add(genericPassword(account: "b", data: Data("pw-b".utf8))) == errSecSuccess)
            _ = update(
                genericQuery(account: "a"),
                [kSecAttrAccount as String: "b", kSecValueData as String: Data("changed".utf8)]
            )
            let items = findAll(genericQuery(account: nil))
            let pairs = items.map { ($0[kSecAttrAccount] as? String ?? "?", $0[kSecValueData] as? Data ?? Data()) }
            #expect(pairs.map(\.0) == ["a", "b"])
            #expect(pairs.map(\.1) == [Data("pw-a".utf8), Data("pw-b".utf8)])
        }
    }

    @Test func collisionOfTwoMatchesWithEachOtherIsDuplicate() throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "a")) == errSecSuccess)
            #expect(add(genericPassword(account: "b")) == errSecSuccess)
            #expect(update(genericQuery(account: nil), [kSecAttrAccount as String: "c"]) == errSecDuplicateItem)
            let accounts = findAll(genericQuery(account: nil)).compactMap { $0[kSecAttrAccount] as? String }
            #expect(Set(accounts) == ["a", "b"])
        }
    }

    @Test func changingAccessibilityFindsTheItemUnderTheNewClass() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(
                update(genericQuery(), [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock])
                    == errSecSuccess
            )
            let query = genericQuery([kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock])
            #expect(findData(query) == Data("secret".utf8))
        }
    }

    @Test func changingAccessibilityLeavesNothingUnderTheOldClass() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(
                update(genericQuery(), [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock])
                    == errSecSuccess
            )
            let status = SecItemCopyMatching(
                genericQuery([kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlocked]) as CFDictionary,
                nil
            )
            #expect(status == errSecItemNotFound)
        }
    }

    @Test func changingAccessibilityReEncryptsUnderTheNewClass() throws {
        try withStore { fixture in
            try fixture.store.setPasscode("1234")
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(
                update(genericQuery(), [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock])
                    == errSecSuccess
            )
            try fixture.store.lock()
            // A when-unlocked item would now be refused; an after-first-unlock one is readable while locked.
            #expect(findData(genericQuery()) == Data("secret".utf8))
        }
    }

    @Test func updateChangesEveryMatch() throws {
        try withStore { _ in
            for account in ["a", "b", "c"] { #expect(add(genericPassword(account: account)) == errSecSuccess) }
            #expect(update(genericQuery(account: nil), [kSecAttrLabel as String: "relabelled"]) == errSecSuccess)
            let labels = findAll(genericQuery(account: nil)).map { $0[kSecAttrLabel] as? String }
            #expect(labels == ["relabelled", "relabelled", "relabelled"])
        }
    }

    @Test func accessControlSetsTheAccessibility() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            var error: Unmanaged<CFError>?
            let control = try #require(
                SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleAfterFirstUnlock, [], &error)
            )
            #expect(update(genericQuery(), [kSecAttrAccessControl as String: control]) == errSecSuccess)
            let accessible = findAttributes(genericQuery())?[kSecAttrAccessible] as? String
            #expect(accessible == kSecAttrAccessibleAfterFirstUnlock)
        }
    }

    @Test(arguments: [SecAccessControlCreateFlags.watch, .applicationPassword])
    func unenforceableAccessControlFlagsAreUnimplemented(flags: SecAccessControlCreateFlags) throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            var error: Unmanaged<CFError>?
            let control = try #require(
                SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlocked, flags, &error)
            )
            #expect(update(genericQuery(), [kSecAttrAccessControl as String: control]) == errSecUnimplemented)
        }
    }

    @Test(.disabled(if: TestBackend.throughDaemon, "sets the test clock, which only an embedded engine reads"))
    func updateMovesTheModificationDate() throws {
        try withStore { fixture in
            #expect(add(genericPassword()) == errSecSuccess)
            let added = fixture.clock.now
            fixture.clock.advance(by: 90)
            #expect(update(genericQuery(), [kSecValueData as String: Data("new".utf8)]) == errSecSuccess)
            let modified = findAttributes(genericQuery())?[kSecAttrModificationDate] as? Date
            #expect(modified == added.addingTimeInterval(90))
        }
    }

    @Test(.disabled(if: TestBackend.throughDaemon, "sets the test clock, which only an embedded engine reads"))
    func updateKeepsTheCreationDate() throws {
        try withStore { fixture in
            #expect(add(genericPassword()) == errSecSuccess)
            let added = fixture.clock.now
            fixture.clock.advance(by: 90)
            #expect(update(genericQuery(), [kSecValueData as String: Data("new".utf8)]) == errSecSuccess)
            #expect(findAttributes(genericQuery())?[kSecAttrCreationDate] as? Date == added)
        }
    }

    @Test func updateCanMakeAnItemSynchronizable() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(update(genericQuery(), [kSecAttrSynchronizable as String: true]) == errSecSuccess)
            #expect(SecItemCopyMatching(genericQuery() as CFDictionary, nil) == errSecItemNotFound)
            let synced = genericQuery([kSecAttrSynchronizable as String: true])
            #expect(SecItemCopyMatching(synced as CFDictionary, nil) == errSecSuccess)
        }
    }

    @Test func updateOfAnInternetPasswordWithoutPortChangesAnyPort() throws {
        try withStore { _ in
            let item: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecAttrAccount as String: "alice",
                kSecAttrPort as String: 8443, kSecValueData as String: Data("pw".utf8),
            ]
            #expect(add(item) == errSecSuccess)
            let query: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
            ]
            #expect(update(query, [kSecValueData as String: Data("new".utf8)]) == errSecSuccess)
            #expect(findData(query) == Data("new".utf8))
        }
    }

    @Test func queryWithoutSyncDoesNotUpdateSynchronizableItems() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrSynchronizable as String: true])) == errSecSuccess)
            #expect(update(genericQuery(), [kSecValueData as String: Data("new".utf8)]) == errSecItemNotFound)
        }
    }
}
