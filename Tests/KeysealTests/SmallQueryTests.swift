import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// keyseald answers a copy-matching on the connection's event loop when the store's indexes bound its work
/// (KeychainStore.isSmall): few candidate rows and little sealed data. The bound must follow the rows the query
/// selects, so that a query that would open many items or large values is never taken for a small one.
@Suite("Small queries")
struct SmallQueryTests {
    static func item(_ account: String, service: String = "svc", bytes: Int = 8) -> NewItem {
        NewItem(
            itemClass: .genericPassword,
            attributes: [AttributeKey.service: .string(service), AttributeKey.account: .string(account)],
            data: Data(repeating: 1, count: bytes))
    }

    static func query(_ attributes: [String: AttributeValue]) -> ItemQuery {
        ItemQuery(itemClass: .genericPassword, attributes: attributes, limit: .all, returns: .data)
    }

    @Test func theBoundFollowsTheRowsTheQuerySelects() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        for index in 0..<12 { _ = try fixture.store.add(Self.item("a\(index)")) }
        _ = try fixture.store.add(Self.item("lone", service: "other"))
        let store = fixture.store
        // By account: one row. By the service 12 items share: more than 8. The whole class: 13.
        #expect(store.isSmall(Self.query([AttributeKey.account: .string("a3")]), caller: .owner, rows: 8, bytes: 1 << 16))
        #expect(store.isSmall(Self.query([AttributeKey.service: .string("other")]), caller: .owner, rows: 8, bytes: 1 << 16))
        #expect(!store.isSmall(Self.query([AttributeKey.service: .string("svc")]), caller: .owner, rows: 8, bytes: 1 << 16))
        #expect(!store.isSmall(Self.query([:]), caller: .owner, rows: 8, bytes: 1 << 16))
        #expect(store.isSmall(Self.query([:]), caller: .owner, rows: 13, bytes: 1 << 16))
    }

    @Test func largeValuesAreNotSmall() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        _ = try fixture.store.add(Self.item("big", bytes: 300_000))
        _ = try fixture.store.add(Self.item("small", bytes: 10))
        let store = fixture.store
        #expect(!store.isSmall(Self.query([AttributeKey.account: .string("big")]), caller: .owner, rows: 8, bytes: 1 << 18))
        #expect(store.isSmall(Self.query([AttributeKey.account: .string("small")]), caller: .owner, rows: 8, bytes: 1 << 18))
    }

    @Test func anotherGroupsRowsDoNotCount() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        var other = Self.item("x")
        other.accessGroup = "com.example.other"
        for index in 0..<10 {
            other.attributes[AttributeKey.account] = .string("x\(index)")
            _ = try fixture.store.add(other)
        }
        let mine = Caller(accessGroups: ["default"], defaultGroup: "default", isAdministrator: false)
        // The caller holds none of the ten rows: its query has no candidates.
        #expect(fixture.store.isSmall(Self.query([:]), caller: mine, rows: 8, bytes: 1 << 16))
        #expect(!fixture.store.isSmall(Self.query([:]), caller: .owner, rows: 8, bytes: 1 << 16))
    }
}
