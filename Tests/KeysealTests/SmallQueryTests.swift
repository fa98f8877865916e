import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// keyseald answers a copy-matching on the connection's event loop when the store's indexes bound its work
/// (KeychainStore.copyMatching(_:caller:resultLimit:within:)): few candidate rows and little sealed data, else it gives
/// up (nil) and the thread pool answers. The bound must follow the rows the query selects, so that a query that would
/// open many items or large values is never answered there, and what it answers must be the whole answer.
@Suite("Small queries")
struct SmallQueryTests {
    static func item(_ account: String, service: String = "svc", bytes: Int = 8) -> NewItem {
        NewItem(
            itemClass: .genericPassword,
            attributes: [AttributeKey.service: .string(service), AttributeKey.account: .string(account)],
            data: Data(repeating: 1, count: bytes)
        )
    }

    static func query(_ attributes: [String: AttributeValue]) -> ItemQuery {
        ItemQuery(itemClass: .genericPassword, attributes: attributes, limit: .all, returns: .data)
    }

    /// The records answered within `rows` and `bytes`, nil when given up; a refusal (no match) is answered too.
    static func within(
        _ store: KeychainStore,
        _ query: ItemQuery,
        caller: Caller = .owner,
        rows: Int = 8,
        bytes: Int = 1 << 16
    ) -> [ItemRecord]?? {
        do {
            return .some(
                try store.copyMatching(
                    query,
                    caller: caller,
                    resultLimit: nil,
                    within: ScanBound(rows: rows, bytes: bytes)
                )
            )
        } catch {
            return .some([])
        }
    }

    static func answered(_ result: [ItemRecord]??) -> Bool { result.flatMap { $0 } != nil }

    @Test func theBoundFollowsTheRowsTheQuerySelects() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        for index in 0..<12 { _ = try fixture.store.add(Self.item("a\(index)")) }
        _ = try fixture.store.add(Self.item("lone", service: "other"))
        let store = fixture.store
        // By account: one row. By the service 12 items share: more than 8. The whole class: 13.
        #expect(Self.within(store, Self.query([AttributeKey.account: .string("a3")]))??.count == 1)
        #expect(Self.within(store, Self.query([AttributeKey.service: .string("other")]))??.count == 1)
        #expect(Self.within(store, Self.query([AttributeKey.account: .string("none")]))??.count == 0)
        #expect(!Self.answered(Self.within(store, Self.query([AttributeKey.service: .string("svc")]))))
        #expect(!Self.answered(Self.within(store, Self.query([:]))))
        // With room for all 13 rows, the whole answer.
        #expect(Self.within(store, Self.query([:]), rows: 13)??.count == 13)
    }

    @Test func largeValuesAreNotSmall() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        _ = try fixture.store.add(Self.item("big", bytes: 300_000))
        _ = try fixture.store.add(Self.item("small", bytes: 10))
        let store = fixture.store
        #expect(!Self.answered(Self.within(store, Self.query([AttributeKey.account: .string("big")]), bytes: 1 << 18)))
        #expect(Self.within(store, Self.query([AttributeKey.account: .string("small")]), bytes: 1 << 18)??.count == 1)
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
        #expect(Self.within(fixture.store, Self.query([:]), caller: mine)??.count == 0)
        #expect(!Self.answered(Self.within(fixture.store, Self.query([:]))))
    }

    /// A Secret Service store searches for the item it replaces under the same bound: over it, nothing is written and
    /// the pool does the store from the start.
    @Test func aReplacingAddGivesUpPastTheBoundWithoutWriting() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        let store = fixture.store
        func storing(_ account: String, _ pairs: [String: String], secret: String) -> NewItem {
            StringAttributeTests.storing(account, pairs, secret: secret)
        }
        // Twelve items share the schema pair; one carries only it.
        for index in 0..<12 {
            _ = try store.add(storing("i\(index)", ["xdg:schema": "s", "user": "u\(index)"], secret: "v\(index)"))
        }
        let bound = ScanBound(rows: 8, bytes: 1 << 16)
        // By a pair one item holds: within the bound, added then replaced.
        #expect(
            try store.addReplacingAttributes(storing("a", ["user": "lone"], secret: "1"), caller: .owner, within: bound)
                == .added
        )
        #expect(
            try store.addReplacingAttributes(storing("b", ["user": "lone"], secret: "2"), caller: .owner, within: bound)
                == .replaced(account: "a")
        )
        // By the pair all twelve hold: over the bound, and nothing written.
        let schemaOnly = storing("c", ["xdg:schema": "s"], secret: "3")
        #expect(try store.addReplacingAttributes(schemaOnly, caller: .owner, within: bound) == .overBound)
        let all = try store.copyMatching(ItemQuery(itemClass: .genericPassword, limit: .all, returns: .attributes))
        #expect(all.count == 13)
        // Unbounded (the pool), the same store adds it.
        #expect(try store.addReplacingAttributes(schemaOnly, caller: .owner) == nil)
    }

    /// Rows SQLite rejects itself never reach the engine's count: a search by two pairs that many items hold apart but
    /// none together visits every one of them inside SQLite. Its work there is bounded too.
    @Test func rowsSQLiteRejectsCountAgainstTheBound() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        let item = { StringAttributeTests.storing($0, $1, secret: "v") }
        var items: [NewItem] = []
        for index in 0..<1_500 {
            items.append(item("a\(index)", ["a": "1", "k": "\(index)"]))
            items.append(item("b\(index)", ["b": "1", "k": "\(index)"]))
        }
        try fixture.store.addBatch(items)
        func pairs(_ pairs: [String: String]) -> ItemQuery {
            ItemQuery(
                itemClass: .genericPassword,
                attributes: [AttributeKey.stringAttributes: .data(StringAttributes.encode(pairs))],
                limit: .all,
                returns: .attributes
            )
        }
        // No item holds both: nothing reaches the engine, and SQLite visits 1,500 rows.
        #expect(!Self.answered(Self.within(fixture.store, pairs(["a": "1", "b": "1"]))))
        // A pair one item holds is answered.
        #expect(Self.within(fixture.store, pairs(["a": "1", "k": "7"]))??.count == 1)
    }

    /// A query for one result is bounded as any other: by a service many items share and an attribute none has, it
    /// would open every one of them.
    @Test func aQueryForOneResultIsBoundedToo() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        for index in 0..<12 { _ = try fixture.store.add(Self.item("a\(index)")) }
        var query = Self.query([AttributeKey.service: .string("svc"), AttributeKey.label: .string("none")])
        query.limit = .one
        #expect(!Self.answered(Self.within(fixture.store, query)))
        // By its whole primary key, one row.
        var lookup = Self.query([AttributeKey.service: .string("svc"), AttributeKey.account: .string("a3")])
        lookup.limit = .one
        #expect(Self.within(fixture.store, lookup)??.count == 1)
    }

    /// An identity joins a key with its certificates: no row bound covers that work, so it is never answered there.
    @Test func identitiesAreNotAnsweredWithinABound() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        let query = ItemQuery(itemClass: .identity, attributes: [:], limit: .all, returns: .attributes)
        #expect(!Self.answered(Self.within(fixture.store, query, rows: 1_000, bytes: 1 << 30)))
    }
}
