import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// docs/COMPATIBILITY.md, "The four calls" (CopyMatching) and "What wrappers rely on" 1–3, 6 and 9, through
/// `SecItemCopyMatching`.
@Suite("SecItemCopyMatching")
struct SecItemCopyMatchingTests {
    /// Adds generic passwords for `accounts` under service "svc", each with data "pw-ACCOUNT".
    func addAccounts(_ accounts: [String]) {
        for account in accounts {
            #expect(add(genericPassword(account: account, data: Data("pw-\(account)".utf8))) == errSecSuccess)
        }
    }

    @Test func defaultLimitIsOne() throws {
        try withStore { _ in
            addAccounts(["a", "b"])
            let (status, result) = copyMatching(genericQuery(account: nil, [kSecReturnData as String: true]))
            #expect(status == errSecSuccess)
            #expect(result is Data)
        }
    }

    @Test func limitOneWithSeveralMatchesReturnsTheFirstInInsertionOrder() throws {
        try withStore { _ in
            addAccounts(["m", "z", "a"])
            let (_, result) = copyMatching(
                genericQuery(
                    account: nil,
                    [kSecReturnAttributes as String: true, kSecMatchLimit as String: kSecMatchLimitOne]
                )
            )
            #expect((result as? [String: Any])?[kSecAttrAccount] as? String == "m")
        }
    }

    @Test func limitAllGivesAnArrayOfEveryMatch() throws {
        try withStore { _ in
            addAccounts(["a", "b", "c"])
            let (status, result) = copyMatching(
                genericQuery(
                    account: nil,
                    [kSecReturnAttributes as String: true, kSecMatchLimit as String: kSecMatchLimitAll]
                )
            )
            #expect(status == errSecSuccess)
            let accounts = (result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount] as? String }
            #expect(accounts == ["a", "b", "c"])
        }
    }

    @Test func limitAllWithOneMatchStillGivesAnArray() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (_, result) = copyMatching(
                genericQuery(
                    account: nil,
                    [kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitAll]
                )
            )
            #expect((result as? [Data]) == [Data("pw-a".utf8)])
        }
    }

    @Test func numericLimitAboveOneGivesAnArrayOfAtMostThatMany() throws {
        try withStore { _ in
            addAccounts(["a", "b", "c"])
            let (_, result) = copyMatching(
                genericQuery(account: nil, [kSecReturnData as String: true, kSecMatchLimit as String: 2])
            )
            #expect((result as? [Data]) == [Data("pw-a".utf8), Data("pw-b".utf8)])
        }
    }

    @Test func returnDataAloneGivesBareData() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (_, result) = copyMatching(genericQuery(account: "a", [kSecReturnData as String: true]))
            #expect(result as? Data == Data("pw-a".utf8))
        }
    }

    @Test func returnAttributesAloneGivesADictionaryWithoutData() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (_, result) = copyMatching(genericQuery(account: "a", [kSecReturnAttributes as String: true]))
            let attributes = try #require(result as? [String: Any])
            #expect(attributes[kSecAttrAccount] as? String == "a")
            #expect(attributes[kSecClass] as? String == kSecClassGenericPassword)
            #expect(attributes[kSecValueData] == nil)
        }
    }

    @Test func returnPersistentRefAloneGivesBareData() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (_, result) = copyMatching(genericQuery(account: "a", [kSecReturnPersistentRef as String: true]))
            let reference = try #require(result as? Data)
            #expect(!reference.isEmpty)
        }
    }

    @Test func severalReturnKeysGiveADictionaryWithDataAndPersistentRef() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (_, result) = copyMatching(
                genericQuery(
                    account: "a",
                    [
                        kSecReturnData as String: true, kSecReturnAttributes as String: true,
                        kSecReturnPersistentRef as String: true,
                    ]
                )
            )
            let item = try #require(result as? [String: Any])
            #expect(item[kSecValueData] as? Data == Data("pw-a".utf8))
            #expect(item[kSecValuePersistentRef] is Data)
            #expect(item[kSecAttrAccount] as? String == "a")
        }
    }

    @Test func dataAndPersistentRefWithoutAttributesGiveADictionary() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (_, result) = copyMatching(
                genericQuery(account: "a", [kSecReturnData as String: true, kSecReturnPersistentRef as String: true])
            )
            let item = try #require(result as? [String: Any])
            #expect(item[kSecValueData] as? Data == Data("pw-a".utf8))
            #expect(item[kSecValuePersistentRef] is Data)
        }
    }

    @Test func allFourReturnKeysOnAPasswordGiveADictionary() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (status, result) = copyMatching(
                genericQuery(
                    account: "a",
                    [
                        kSecReturnData as String: true, kSecReturnAttributes as String: true,
                        kSecReturnRef as String: true,
                        kSecReturnPersistentRef as String: true,
                    ]
                )
            )
            #expect(status == errSecSuccess)
            let item = try #require(result as? [String: Any])
            #expect(item[kSecValueData] as? Data == Data("pw-a".utf8))
            #expect(item[kSecValuePersistentRef] is Data)
            #expect(item[kSecAttrService] as? String == "svc")
        }
    }

    @Test func severalReturnKeysWithLimitAllGiveAnArrayOfDictionaries() throws {
        try withStore { _ in
            addAccounts(["a", "b"])
            let items = findAll(genericQuery(account: nil))
            #expect(items.count == 2)
            #expect(items.map { $0[kSecValueData] as? Data } == [Data("pw-a".utf8), Data("pw-b".utf8)])
        }
    }

    @Test func noReturnKeyGivesStatusOnlyAndLeavesTheResultNil() throws {
        try withStore { _ in
            addAccounts(["a"])
            var result: CFTypeRef? = NSString(string: "untouched")
            let status = SecItemCopyMatching(genericQuery(account: "a") as CFDictionary, &result)
            #expect(status == errSecSuccess)
            #expect(result == nil)
        }
    }

    @Test func noReturnKeyAndNoResultPointerReportsAMatch() throws {
        try withStore { _ in
            addAccounts(["a"])
            #expect(SecItemCopyMatching(genericQuery(account: "a") as CFDictionary, nil) == errSecSuccess)
        }
    }

    @Test func returnKeyWithoutResultPointerIsAParameterError() throws {
        try withStore { _ in
            addAccounts(["a"])
            let status = SecItemCopyMatching(
                genericQuery(account: "a", [kSecReturnData as String: true]) as CFDictionary,
                nil
            )
            #expect(status == errSecParam)
        }
    }

    @Test func nothingMatchedIsNotFound() throws {
        try withStore { _ in
            addAccounts(["a"])
            #expect(
                copyMatching(genericQuery(account: "b", [kSecReturnData as String: true])).status == errSecItemNotFound
            )
        }
    }

    @Test func persistentRefFindsItsItem() throws {
        try withStore { _ in
            addAccounts(["a", "b"])
            let reference = try #require(
                copyMatching(genericQuery(account: "b", [kSecReturnPersistentRef as String: true])).result as? Data
            )
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecValuePersistentRef as String: reference,
                kSecReturnData as String: true,
            ]
            #expect(copyMatching(query).result as? Data == Data("pw-b".utf8))
        }
    }

    @Test func queryWithoutPortMatchesAnyPortForInternetPasswords() throws {
        try withStore { _ in
            let item: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecAttrAccount as String: "alice",
                kSecAttrProtocol as String: kSecAttrProtocolHTTPS, kSecAttrPort as String: 8443,
                kSecValueData as String: Data("pw".utf8),
            ]
            #expect(add(item) == errSecSuccess)
            let query: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecAttrAccount as String: "alice",
                kSecReturnData as String: true,
            ]
            #expect(copyMatching(query).result as? Data == Data("pw".utf8))
        }
    }

    @Test func queryWithAnotherPortFindsNothing() throws {
        try withStore { _ in
            let item: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecAttrAccount as String: "alice",
                kSecAttrPort as String: 8443, kSecValueData as String: Data("pw".utf8),
            ]
            #expect(add(item) == errSecSuccess)
            let query: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecAttrPort as String: 443,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, nil) == errSecItemNotFound)
        }
    }

    @Test func queryWithoutSyncMatchesOnlyNonSynchronizableItems() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrSynchronizable as String: true])) == errSecSuccess)
            #expect(SecItemCopyMatching(genericQuery() as CFDictionary, nil) == errSecItemNotFound)
        }
    }

    @Test func syncAnyMatchesSynchronizableAndOtherItems() throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "synced", [kSecAttrSynchronizable as String: true])) == errSecSuccess)
            #expect(add(genericPassword(account: "local")) == errSecSuccess)
            let items = findAll(
                genericQuery(account: nil, [kSecAttrSynchronizable as String: kSecAttrSynchronizableAny])
            )
            #expect(Set(items.compactMap { $0[kSecAttrAccount] as? String }) == ["synced", "local"])
        }
    }

    @Test func syncTrueMatchesOnlySynchronizableItems() throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "synced", [kSecAttrSynchronizable as String: true])) == errSecSuccess)
            #expect(add(genericPassword(account: "local")) == errSecSuccess)
            let items = findAll(genericQuery(account: nil, [kSecAttrSynchronizable as String: true]))
            #expect(items.compactMap { $0[kSecAttrAccount] as? String } == ["synced"])
        }
    }

    @Test func syncIsPartOfThePrimaryKey() throws {
        try withStore { _ in
            #expect(add(genericPassword(data: Data("local".utf8))) == errSecSuccess)
            #expect(
                add(genericPassword(data: Data("synced".utf8), [kSecAttrSynchronizable as String: true]))
                    == errSecSuccess
            )
            let items = findAll(genericQuery([kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]))
            #expect(Set(items.compactMap { $0[kSecValueData] as? Data }) == [Data("local".utf8), Data("synced".utf8)])
        }
    }

    @Test func synchronizableThisDeviceOnlyItemIsAccepted() throws {
        try withStore { _ in
            let status = add(
                genericPassword([
                    kSecAttrSynchronizable as String: true,
                    kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                ])
            )
            #expect(status == errSecSuccess)
            let attributes = findAttributes(genericQuery([kSecAttrSynchronizable as String: true]))
            #expect(attributes?[kSecAttrSynchronizable] as? Bool == true)
        }
    }

    @Test func queryWithoutAccessGroupMatchesEveryGroup() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrAccessGroup as String: "group.one"])) == errSecSuccess)
            #expect(add(genericPassword([kSecAttrAccessGroup as String: "group.two"])) == errSecSuccess)
            let groups = findAll(genericQuery()).compactMap { $0[kSecAttrAccessGroup] as? String }
            #expect(Set(groups) == ["group.one", "group.two"])
        }
    }

    @Test func queryWithAccessGroupMatchesOnlyThatGroup() throws {
        try withStore { _ in
            #expect(
                add(genericPassword(data: Data("one".utf8), [kSecAttrAccessGroup as String: "group.one"]))
                    == errSecSuccess
            )
            #expect(
                add(genericPassword(data: Data("two".utf8), [kSecAttrAccessGroup as String: "group.two"]))
                    == errSecSuccess
            )
            #expect(findData(genericQuery([kSecAttrAccessGroup as String: "group.two"])) == Data("two".utf8))
        }
    }

    static var useKeys: [String: Any] {
        [
            kSecUseOperationPrompt as String: "Authenticate",
            kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip,
            kSecUseDataProtectionKeychain as String: true, kSecUseNoAuthenticationUI as String: true,
        ]
    }

    @Test func useKeysAreAcceptedByAdd() throws {
        try withStore { _ in
            #expect(add(genericPassword(Self.useKeys)) == errSecSuccess)
        }
    }

    @Test func useKeysAreAcceptedByCopyMatching() throws {
        try withStore { _ in
            addAccounts(["alice"])
            #expect(SecItemCopyMatching(genericQuery(Self.useKeys) as CFDictionary, nil) == errSecSuccess)
        }
    }

    @Test func useKeysAreAcceptedByUpdate() throws {
        try withStore { _ in
            addAccounts(["alice"])
            let status = SecItemUpdate(
                genericQuery(Self.useKeys) as CFDictionary,
                [kSecValueData: Data("new".utf8), kSecUseDataProtectionKeychain: true] as CFDictionary
            )
            #expect(status == errSecSuccess)
        }
    }

    @Test func useKeysAreAcceptedByDelete() throws {
        try withStore { _ in
            addAccounts(["alice"])
            #expect(SecItemDelete(genericQuery(Self.useKeys) as CFDictionary) == errSecSuccess)
        }
    }

    @Test func caseInsensitiveMatchingIsUnimplemented() throws {
        try withStore { _ in
            addAccounts(["alice"])
            let status = SecItemCopyMatching(
                genericQuery([kSecMatchCaseInsensitive as String: true]) as CFDictionary,
                nil
            )
            #expect(status == errSecUnimplemented)
        }
    }

    @Test func missingClassIsAParameterError() throws {
        try withStore { _ in
            #expect(SecItemCopyMatching([kSecAttrAccount: "a"] as CFDictionary, nil) == errSecParam)
        }
    }

    @Test func unknownClassIsNoSuchClass() throws {
        try withStore { _ in
            #expect(SecItemCopyMatching([kSecClass: "zzzz"] as CFDictionary, nil) == errSecNoSuchClass)
        }
    }

    @Test func internetPasswordAttributesCarryThePortAsAnInt() throws {
        try withStore { _ in
            let item: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecAttrAccount as String: "alice",
                kSecAttrProtocol as String: kSecAttrProtocolHTTPS,
                kSecAttrAuthenticationType as String: kSecAttrAuthenticationTypeDefault,
                kSecAttrPort as String: 8443, kSecValueData as String: Data("pw".utf8),
            ]
            #expect(add(item) == errSecSuccess)
            let query: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
            ]
            let attributes = findAttributes(query)
            #expect(attributes?[kSecAttrPort] as? Int == 8443)
            #expect(attributes?[kSecAttrProtocol] as? String == kSecAttrProtocolHTTPS)
        }
    }

    @Test func internetPasswordsDifferingOnlyInPortCoexist() throws {
        try withStore { _ in
            for port in [443, 8443] {
                let item: [String: Any] = [
                    kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                    kSecAttrAccount as String: "alice",
                    kSecAttrPort as String: port, kSecValueData as String: Data("pw-\(port)".utf8),
                ]
                #expect(add(item) == errSecSuccess)
            }
            #expect(
                findAll([kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com"]).count
                    == 2
            )
        }
    }
}
