import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// Arbitrary string attributes of generic passwords (the Secret Service's item attributes): sealed with the item,
/// each (name, value) pair searchable through a keyed digest of the pair index. Runs on every backend, embedded
/// and through keyseald (Scripts/test.sh).
@Suite("String attributes")
struct StringAttributeTests {
    static func item(_ account: String, _ pairs: [String: String], secret: String = "s") -> NewItem {
        NewItem(
            itemClass: .genericPassword,
            attributes: [
                AttributeKey.service: .string("ss"), AttributeKey.account: .string(account),
                AttributeKey.stringAttributes: .data(StringAttributes.encode(pairs)),
            ],
            data: Data(secret.utf8)
        )
    }

    static func query(_ pairs: [String: String], returns: ReturnOptions = .attributes) -> ItemQuery {
        ItemQuery(
            itemClass: .genericPassword,
            attributes: [AttributeKey.stringAttributes: .data(StringAttributes.encode(pairs))],
            limit: .all,
            returns: returns
        )
    }

    static func accounts(_ store: KeychainStore, _ pairs: [String: String]) throws -> [String] {
        do {
            return try store.copyMatching(query(pairs)).compactMap { $0.string(AttributeKey.account) }.sorted()
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
            return []
        }
    }

    @Test func everyPairFindsItsItemsAndOnlyThem() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(Self.item("a", ["app": "mail", "user": "alice"]))
        _ = try fixture.store.add(Self.item("b", ["app": "mail", "user": "bob"]))
        _ = try fixture.store.add(Self.item("c", ["app": "chat", "user": "alice"]))
        #expect(try Self.accounts(fixture.store, ["app": "mail"]) == ["a", "b"])
        #expect(try Self.accounts(fixture.store, ["user": "alice"]) == ["a", "c"])
        #expect(try Self.accounts(fixture.store, ["app": "mail", "user": "alice"]) == ["a"])
        #expect(try Self.accounts(fixture.store, ["app": "mail", "user": "carol"]) == [])
        // A name and value are one pair: the value of one name never matches another name.
        #expect(try Self.accounts(fixture.store, ["user": "mail"]) == [])
    }

    /// A search lists its candidates from its rarest pair and probes the others (ItemStore.rarestFirst): pairs held by
    /// more items than the count bound (the candidates then come from one of them), by one item and by none still
    /// intersect exactly, in any order: the index never loses a candidate.
    @Test func pairsOfEveryFrequencyIntersect() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        for index in 0..<80 {
            _ = try fixture.store.add(
                Self.item(
                    "m\(index)",
                    ["xdg:schema": "bench", "app": "mail", "user": "u\(index)", "half": "\(index % 2)"]
                )
            )
        }
        _ = try fixture.store.add(Self.item("c", ["xdg:schema": "bench", "app": "chat", "user": "u7"]))
        #expect(try Self.accounts(fixture.store, ["xdg:schema": "bench", "app": "mail", "user": "u7"]) == ["m7"])
        #expect(try Self.accounts(fixture.store, ["user": "u7", "xdg:schema": "bench"]) == ["c", "m7"])
        #expect(try Self.accounts(fixture.store, ["app": "chat", "user": "u7"]) == ["c"])
        #expect(try Self.accounts(fixture.store, ["xdg:schema": "bench", "app": "mail", "user": "nobody"]) == [])
        // Two pairs both above the bound: their intersection, not either one.
        let odd = try Self.accounts(fixture.store, ["xdg:schema": "bench", "app": "mail", "half": "1"])
        #expect(odd == (0..<80).filter { $0 % 2 == 1 }.map { "m\($0)" }.sorted())
    }

    @Test func theAttributesComeBackAsStored() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let pairs = ["xdg:schema": "org.example.Password", "ünïcode": "välue", "empty": ""]
        _ = try fixture.store.add(Self.item("a", pairs))
        let record = try #require(try fixture.store.copyMatching(Self.query(["empty": ""])).first)
        #expect(try StringAttributes.pairs(record.attributes[AttributeKey.stringAttributes]) == pairs)
    }

    @Test func anUpdateReplacesThePairsInTheIndex() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(Self.item("a", ["k": "old"]))
        try fixture.store.update(
            Self.query(["k": "old"], returns: []),
            with: ItemChanges(attributes: [AttributeKey.stringAttributes: .data(StringAttributes.encode(["k": "new"]))])
        )
        #expect(try Self.accounts(fixture.store, ["k": "old"]) == [])
        #expect(try Self.accounts(fixture.store, ["k": "new"]) == ["a"])
        // An update that leaves the pairs alone keeps them searchable.
        try fixture.store.update(
            Self.query(["k": "new"], returns: []),
            with: ItemChanges(attributes: [AttributeKey.label: .string("L")])
        )
        #expect(try Self.accounts(fixture.store, ["k": "new"]) == ["a"])
    }

    @Test func aDeleteRemovesTheItemsIndexEntries() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(Self.item("a", ["k": "v", "x": "y"]))
        #expect(try fixture.sqlOnDisk("SELECT count(*) FROM item_pairs") == "2")
        try fixture.store.delete(Self.query(["k": "v"], returns: []))
        #expect(try fixture.sqlOnDisk("SELECT count(*) FROM item_pairs") == "0")
    }

    @Test func noNameOrValueIsInTheFileInTheClear() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(Self.item("a", ["distinctive-name": "distinctive-value"]))
        fixture.close()
        let bytes = try Data(contentsOf: URL(fileURLWithPath: fixture.databasePath))
        let wal = (try? Data(contentsOf: URL(fileURLWithPath: fixture.databasePath + "-wal"))) ?? Data()
        for text in ["distinctive-name", "distinctive-value"] {
            #expect(bytes.range(of: Data(text.utf8)) == nil && wal.range(of: Data(text.utf8)) == nil)
        }
    }

    @Test func aMalformedMapIsAParameterError() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        var item = Self.item("a", [:])
        item.attributes[AttributeKey.stringAttributes] = .data(Data([1, 0, 0, 0, 9, 65]))
        #expect(status { _ = try fixture.store.add(item) } == KeychainStatus.param)
        item.attributes[AttributeKey.stringAttributes] = .string("not data")
        #expect(status { _ = try fixture.store.add(item) } == KeychainStatus.param)
    }

    @Test(.disabled(if: TestBackend.throughDaemon, "edits the store file while it is closed"))
    func aForgedIndexEntryNeverMakesAnotherItemMatch() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(Self.item("a", ["k": "1"]))
        _ = try fixture.store.add(Self.item("b", ["k": "2"]))
        fixture.close()
        // Every digest now also points at every row: the index claims both items hold both pairs.
        try fixture.sql("INSERT OR IGNORE INTO item_pairs SELECT p.digest, i.id FROM item_pairs p, items i")
        try fixture.reopen()
        #expect(try Self.accounts(fixture.store, ["k": "1"]) == ["a"])
        #expect(try Self.accounts(fixture.store, ["k": "2"]) == ["b"])
    }

    @Test(.disabled(if: TestBackend.throughDaemon, "rewrites the store file to the previous schema"))
    func aStoreOfThePreviousSchemaOpensAndGainsTheIndex() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(.password(account: "old"))
        fixture.close()
        try fixture.sql(
            GroupUsageTests.undoSchemaFive + "DROP TABLE item_pairs; DELETE FROM schema_version WHERE version >= 4"
        )
        try fixture.reopen()
        #expect(try fixture.store.copyMatching(.password(account: "old")).count == 1)
        _ = try fixture.store.add(Self.item("new", ["k": "v"]))
        #expect(try Self.accounts(fixture.store, ["k": "v"]) == ["new"])
    }
}
