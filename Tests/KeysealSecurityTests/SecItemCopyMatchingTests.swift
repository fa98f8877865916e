import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// FACTS.md "The four calls" (CopyMatching) and SECURITY-COMPAT.md Semantics 1–3, 6 and 9, through
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
            let (status, result) = copyMatching(genericQuery(account: nil, [kSecReturnData: true]))
            #expect(status == errSecSuccess)
            #expect(result is Data)
        }
    }

    @Test func limitOneWithSeveralMatchesReturnsTheFirstInInsertionOrder() throws {
        try withStore { _ in
            addAccounts(["m", "z", "a"])
            let (_, result) = copyMatching(
                genericQuery(account: nil, [kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitOne]))
            #expect((result as? [String: Any])?[kSecAttrAccount] as? String == "m")
        }
    }

    @Test func limitAllGivesAnArrayOfEveryMatch() throws {
        try withStore { _ in
            addAccounts(["a", "b", "c"])
            let (status, result) = copyMatching(
                genericQuery(account: nil, [kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll]))
            #expect(status == errSecSuccess)
            let accounts = (result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount] as? String }
            #expect(accounts == ["a", "b", "c"])
        }
    }

    @Test func limitAllWithOneMatchStillGivesAnArray() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (_, result) = copyMatching(
                genericQuery(account: nil, [kSecReturnData: true, kSecMatchLimit: kSecMatchLimitAll]))
            #expect((result as? [Data]) == [Data("pw-a".utf8)])
        }
    }

    @Test func numericLimitAboveOneGivesAnArrayOfAtMostThatMany() throws {
        try withStore { _ in
            addAccounts(["a", "b", "c"])
            let (_, result) = copyMatching(genericQuery(account: nil, [kSecReturnData: true, kSecMatchLimit: 2]))
            #expect((result as? [Data]) == [Data("pw-a".utf8), Data("pw-b".utf8)])
        }
    }

    @Test func returnDataAloneGivesBareData() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (_, result) = copyMatching(genericQuery(account: "a", [kSecReturnData: true]))
            #expect(result as? Data == Data("pw-a".utf8))
        }
    }

    @Test func returnAttributesAloneGivesADictionaryWithoutData() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (_, result) = copyMatching(genericQuery(account: "a", [kSecReturnAttributes: true]))
            let attributes = try #require(result as? [String: Any])
            #expect(attributes[kSecAttrAccount] as? String == "a")
            #expect(attributes[kSecClass] as? String == kSecClassGenericPassword)
            #expect(attributes[kSecValueData] == nil)
        }
    }

    @Test func returnPersistentRefAloneGivesBareData() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (_, result) = copyMatching(genericQuery(account: "a", [kSecReturnPersistentRef: true]))
            let reference = try #require(result as? Data)
            #expect(!reference.isEmpty)
        }
    }

    @Test func severalReturnKeysGiveADictionaryWithDataAndPersistentRef() throws {
        try withStore { _ in
            addAccounts(["a"])
            let (_, result) = copyMatching(
                genericQuery(
                    account: "a", [kSecReturnData: true, kSecReturnAttributes: true, kSecReturnPersistentRef: true]))
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
                genericQuery(account: "a", [kSecReturnData: true, kSecReturnPersistentRef: true]))
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
                        kSecReturnData: true, kSecReturnAttributes: true, kSecReturnRef: true,
                        kSecReturnPersistentRef: true,
                    ]))
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
            let status = SecItemCopyMatching(genericQuery(account: "a", [kSecReturnData: true]) as CFDictionary, nil)
            #expect(status == errSecParam)
        }
    }

    @Test func nothingMatchedIsNotFound() throws {
        try withStore { _ in
            addAccounts(["a"])
            #expect(copyMatching(genericQuery(account: "b", [kSecReturnData: true])).status == errSecItemNotFound)
        }
    }

    @Test func persistentRefFindsItsItem() throws {
        try withStore { _ in
            addAccounts(["a", "b"])
            let reference = try #require(
                copyMatching(genericQuery(account: "b", [kSecReturnPersistentRef: true])).result as? Data)
            let query: [String: Any] = [
                kSecClass: kSecClassGenericPassword, kSecValuePersistentRef: reference, kSecReturnData: true,
            ]
            #expect(copyMatching(query).result as? Data == Data("pw-b".utf8))
        }
    }

    @Test func queryWithoutPortMatchesAnyPortForInternetPasswords() throws {
        try withStore { _ in
            let item: [String: Any] = [
                kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "alice",
                kSecAttrProtocol: kSecAttrProtocolHTTPS, kSecAttrPort: 8443, kSecValueData: Data("pw".utf8),
            ]
            #expect(add(item) == errSecSuccess)
            let query: [String: Any] = [
                kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "alice",
                kSecReturnData: true,
            ]
            #expect(copyMatching(query).result as? Data == Data("pw".utf8))
        }
    }

    @Test func queryWithAnotherPortFindsNothing() throws {
        try withStore { _ in
            let item: [String: Any] = [
                kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "alice",
                kSecAttrPort: 8443, kSecValueData: Data("pw".utf8),
            ]
            #expect(add(item) == errSecSuccess)
            let query: [String: Any] = [
                kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrPort: 443,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, nil) == errSecItemNotFound)
        }
    }

    @Test func queryWithoutSyncMatchesOnlyNonSynchronizableItems() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrSynchronizable: true])) == errSecSuccess)
            #expect(SecItemCopyMatching(genericQuery() as CFDictionary, nil) == errSecItemNotFound)
        }
    }

    @Test func syncAnyMatchesSynchronizableAndOtherItems() throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "synced", [kSecAttrSynchronizable: true])) == errSecSuccess)
            #expect(add(genericPassword(account: "local")) == errSecSuccess)
            let items = findAll(genericQuery(account: nil, [kSecAttrSynchronizable: kSecAttrSynchronizableAny]))
            #expect(Set(items.compactMap { $0[kSecAttrAccount] as? String }) == ["synced", "local"])
        }
    }

    @Test func syncTrueMatchesOnlySynchronizableItems() throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "synced", [kSecAttrSynchronizable: true])) == errSecSuccess)
            #expect(add(genericPassword(account: "local")) == errSecSuccess)
            let items = findAll(genericQuery(account: nil, [kSecAttrSynchronizable: true]))
            #expect(items.compactMap { $0[kSecAttrAccount] as? String } == ["synced"])
        }
    }

    @Test func syncIsPartOfThePrimaryKey() throws {
        try withStore { _ in
            #expect(add(genericPassword(data: Data("local".utf8))) == errSecSuccess)
            #expect(add(genericPassword(data: Data("synced".utf8), [kSecAttrSynchronizable: true])) == errSecSuccess)
            let items = findAll(genericQuery([kSecAttrSynchronizable: kSecAttrSynchronizableAny]))
            #expect(Set(items.compactMap { $0[kSecValueData] as? Data }) == [Data("local".utf8), Data("synced".utf8)])
        }
    }

    @Test func synchronizableThisDeviceOnlyItemIsAccepted() throws {
        try withStore { _ in
            let status = add(
                genericPassword([
                    kSecAttrSynchronizable: true, kSecAttrAccessible: kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                ]))
            #expect(status == errSecSuccess)
            let attributes = findAttributes(genericQuery([kSecAttrSynchronizable: true]))
            #expect(attributes?[kSecAttrSynchronizable] as? Bool == true)
        }
    }

    @Test func queryWithoutAccessGroupMatchesEveryGroup() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrAccessGroup: "group.one"])) == errSecSuccess)
            #expect(add(genericPassword([kSecAttrAccessGroup: "group.two"])) == errSecSuccess)
            let groups = findAll(genericQuery()).compactMap { $0[kSecAttrAccessGroup] as? String }
            #expect(Set(groups) == ["group.one", "group.two"])
        }
    }

    @Test func queryWithAccessGroupMatchesOnlyThatGroup() throws {
        try withStore { _ in
            #expect(add(genericPassword(data: Data("one".utf8), [kSecAttrAccessGroup: "group.one"])) == errSecSuccess)
            #expect(add(genericPassword(data: Data("two".utf8), [kSecAttrAccessGroup: "group.two"])) == errSecSuccess)
            #expect(findData(genericQuery([kSecAttrAccessGroup: "group.two"])) == Data("two".utf8))
        }
    }

    static var useKeys: [String: Any] {
        [
            kSecUseOperationPrompt: "Authenticate", kSecUseAuthenticationUI: kSecUseAuthenticationUISkip,
            kSecUseDataProtectionKeychain: true, kSecUseNoAuthenticationUI: true,
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
                [kSecValueData: Data("new".utf8), kSecUseDataProtectionKeychain: true] as CFDictionary)
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
            let status = SecItemCopyMatching(genericQuery([kSecMatchCaseInsensitive: true]) as CFDictionary, nil)
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
                kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "alice",
                kSecAttrProtocol: kSecAttrProtocolHTTPS, kSecAttrAuthenticationType: kSecAttrAuthenticationTypeDefault,
                kSecAttrPort: 8443, kSecValueData: Data("pw".utf8),
            ]
            #expect(add(item) == errSecSuccess)
            let query: [String: Any] = [kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com"]
            let attributes = findAttributes(query)
            #expect(attributes?[kSecAttrPort] as? Int == 8443)
            #expect(attributes?[kSecAttrProtocol] as? String == kSecAttrProtocolHTTPS)
        }
    }

    @Test func internetPasswordsDifferingOnlyInPortCoexist() throws {
        try withStore { _ in
            for port in [443, 8443] {
                let item: [String: Any] = [
                    kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "alice",
                    kSecAttrPort: port, kSecValueData: Data("pw-\(port)".utf8),
                ]
                #expect(add(item) == errSecSuccess)
            }
            #expect(findAll([kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com"]).count == 2)
        }
    }
}
