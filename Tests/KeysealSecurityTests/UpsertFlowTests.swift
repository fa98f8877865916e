import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// docs/COMPATIBILITY.md, "What wrappers rely on" 4: KeychainAccess's `set` — CopyMatching(query, nil), then on success
/// or −25308 Update(query + syna, attributes), on −25300 Add.
@Suite("KeychainAccess upsert flow")
struct UpsertFlowTests {
    /// KeychainAccess's base query for a generic-password keychain: class, service, sync any.
    static func baseQuery(key: String) -> [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "com.example.app",
            kSecAttrSynchronizable as String: kSecAttrSynchronizableAny, kSecAttrAccount as String: key,
        ]
    }

    /// The statuses of one `set(value, key:)`, in call order.
    @discardableResult
    static func set(_ value: String, key: String) -> [OSStatus] {
        let query = baseQuery(key: key)
        var statuses = [SecItemCopyMatching(query as CFDictionary, nil)]
        let changes: [String: Any] = [
            kSecValueData as String: Data(value.utf8), kSecAttrLabel as String: "label",
            kSecAttrComment as String: "comment",
            kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock, kSecAttrSynchronizable as String: false,
        ]
        switch statuses[0] {
        case errSecSuccess, errSecInteractionNotAllowed:
            statuses.append(SecItemUpdate(query as CFDictionary, changes as CFDictionary))
        case errSecItemNotFound:
            var attributes = query
            attributes.merge(changes) { _, new in new }
            statuses.append(SecItemAdd(attributes as CFDictionary, nil))
        default: break
        }
        return statuses
    }

    static func items(key: String) -> [[String: Any]] {
        findAll(baseQuery(key: key))
    }

    @Test func firstSetAdds() throws {
        try withStore { _ in
            #expect(Self.set("one", key: "token") == [errSecItemNotFound, errSecSuccess])
        }
    }

    @Test func secondSetUpdates() throws {
        try withStore { _ in
            Self.set("one", key: "token")
            #expect(Self.set("two", key: "token") == [errSecSuccess, errSecSuccess])
        }
    }

    @Test func secondSetChangesTheValue() throws {
        try withStore { _ in
            Self.set("one", key: "token")
            Self.set("two", key: "token")
            #expect(Self.items(key: "token").map { $0[kSecValueData] as? Data } == [Data("two".utf8)])
        }
    }

    @Test func setTwiceLeavesOneItemWithTheAttributes() throws {
        try withStore { _ in
            Self.set("one", key: "token")
            Self.set("two", key: "token")
            let items = Self.items(key: "token")
            #expect(items.count == 1)
            #expect(items.first?[kSecAttrLabel] as? String == "label")
            #expect(items.first?[kSecAttrComment] as? String == "comment")
            #expect(items.first?[kSecAttrAccessible] as? String == kSecAttrAccessibleAfterFirstUnlock)
        }
    }

    @Test func setOverAWhenUnlockedItemMovesItToTheNewClass() throws {
        try withStore { _ in
            var existing = Self.baseQuery(key: "token")
            existing[kSecAttrSynchronizable] = nil
            existing[kSecValueData] = Data("old".utf8)
            #expect(add(existing) == errSecSuccess)
            #expect(Self.set("new", key: "token") == [errSecSuccess, errSecSuccess])
            let items = Self.items(key: "token")
            #expect(items.map { $0[kSecAttrAccessible] as? String } == [kSecAttrAccessibleAfterFirstUnlock as String])
        }
    }
}
