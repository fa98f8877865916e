import Foundation
import KeysealCore
import KeysealStore
import KeysealTestSupport
import Testing

@testable import Keyseal

/// Each access group's item count and stored bytes, which keyseald's quotas read (`ItemStore.usage(accessGroup:)`):
/// kept in `group_usage` by triggers on `items`, so that every write keeps it exact and a count is one lookup, not a
/// scan. Runs on every backend, embedded and through keyseald (Scripts/test.sh).
@Suite("Group usage")
struct GroupUsageTests {
    /// The count as the store made it before schema 5: a scan of `items`.
    static let scanSQL =
        "SELECT count(*), coalesce(sum(length(attrs) + length(value)), 0) FROM items WHERE agrp = ?1"

    /// Removes what migration 5 added, for tests that rewrite a store to an older schema (with its own
    /// `DELETE FROM schema_version`).
    static let undoSchemaFive = """
        DROP TRIGGER group_usage_insert; DROP TRIGGER group_usage_delete; DROP TRIGGER group_usage_update;
        DROP TRIGGER group_usage_move; DROP TABLE group_usage;
        """

    /// `group_usage` and a count from `items`, each as "group:items:bytes" lines, from a copy of the files on disk.
    static func tableAndScan(_ fixture: StoreFixture) throws -> (table: String, scan: String) {
        (
            try fixture.sqlOnDisk("SELECT agrp, items, bytes FROM group_usage ORDER BY agrp"),
            try fixture.sqlOnDisk(
                "SELECT agrp, count(*), sum(length(attrs) + length(value)) FROM items GROUP BY agrp ORDER BY agrp"
            )
        )
    }

    /// `usage(accessGroup:)` and the scan, per group: [items, bytes, scanned items, scanned bytes]. Through keyseald,
    /// the row of `group_usage` that `usage` reads, from a copy of the files on disk (keyseald keeps the store open).
    static func usageAndScan(_ fixture: StoreFixture, _ groups: [String]) throws -> [String: [Int]] {
        guard !fixture.throughDaemon else {
            var result: [String: [Int]] = [:]
            for group in groups {
                let quoted = "'" + group.replacingOccurrences(of: "'", with: "''") + "'"
                let line = try fixture.sqlOnDisk(
                    "SELECT coalesce((SELECT items || '|' || bytes FROM group_usage WHERE agrp = \(quoted)), '0|0') || '|' || "
                        + "(SELECT count(*) || '|' || coalesce(sum(length(attrs) + length(value)), 0) FROM items "
                        + "WHERE agrp = \(quoted))"
                )
                result[group] = line.split(separator: "|").map { Int($0) ?? -1 }
            }
            return result
        }
        return try fixture.store.withEngine { engine in
            var result: [String: [Int]] = [:]
            for group in groups {
                let usage = try engine.store.usage(accessGroup: group)
                let scan = try engine.store.database.statement(scanSQL)
                defer { scan.reset() }
                try scan.bind(1, group)
                _ = try scan.step()
                result[group] = [usage.items, usage.bytes, Int(scan.int64(0)), Int(scan.int64(1))]
            }
            return result
        }
    }

    static func item(_ account: String, group: String, bytes: Int, pairs: [String: String]? = nil) -> NewItem {
        var attributes: [String: AttributeValue] = [
            AttributeKey.service: .string("svc"), AttributeKey.account: .string(account),
        ]
        if let pairs { attributes[AttributeKey.stringAttributes] = .data(StringAttributes.encode(pairs)) }
        return NewItem(
            itemClass: .genericPassword,
            attributes: attributes,
            accessGroup: group,
            data: Data(repeating: 0x61, count: bytes)
        )
    }

    static func query(_ account: String, group: String) -> ItemQuery {
        ItemQuery(
            itemClass: .genericPassword,
            attributes: [AttributeKey.service: .string("svc"), AttributeKey.account: .string(account)],
            accessGroup: group
        )
    }

    @Test func usageEqualsACountOfTheItemsAfterEveryKindOfWrite() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        var steps: [String] = []
        func check(_ step: String) throws {
            let (table, scan) = try Self.tableAndScan(fixture)
            #expect(table == scan, "after \(step)")
            steps.append(step)
        }
        let store = fixture.store
        for index in 0..<4 {
            _ = try store.add(Self.item("a\(index)", group: "one", bytes: 40 + index * 300), caller: .owner)
        }
        _ = try store.add(Self.item("b", group: "two", bytes: 10), caller: .owner)
        try check("adds")
        #expect(try Self.tableAndScan(fixture).table.split(separator: "\n").count == 2)
        // A Secret Service store: added, then replacing the item with a larger value.
        #expect(
            try store.addReplacingAttributes(Self.item("s", group: "two", bytes: 5, pairs: ["k": "v"]), caller: .owner)
                == nil
        )
        #expect(
            try store.addReplacingAttributes(
                Self.item("t", group: "two", bytes: 3000, pairs: ["k": "v"]),
                caller: .owner
            )
                == "s"
        )
        try check("replacing adds")
        try store.update(Self.query("a1", group: "one"), with: ItemChanges(data: Data(count: 5000)), caller: .owner)
        try check("a growing update")
        try store.update(Self.query("a3", group: "one"), with: ItemChanges(data: Data(count: 1)), caller: .owner)
        try check("a shrinking update")
        try store.update(Self.query("a2", group: "one"), with: ItemChanges(accessGroup: "three"), caller: .owner)
        try check("a move to another group")
        try store.delete(Self.query("b", group: "two"), caller: .owner)
        try store.delete(Self.query("a0", group: "one"), caller: .owner)
        try check("deletes")
        // The last item of a group leaves no row behind.
        try store.update(Self.query("a2", group: "three"), with: ItemChanges(accessGroup: "one"), caller: .owner)
        try check("a move out of a group's last item")
        #expect(!(try Self.tableAndScan(fixture).table.contains("three")))
        // An import into the store: every item skipped or replaced, and one restored after its delete.
        let file = fixture.root.appending("backup.ksb")
        try store.exportBackup(to: file, passphrase: "p")
        try store.delete(Self.query("a3", group: "one"), caller: .owner)
        try store.importBackup(from: file, passphrase: "p", replace: true)
        try check("an import")
        try store.setPasscode("1234")
        try store.changePasscode(from: "1234", to: "5678")
        try check("a passcode change")
        #expect(steps.count == 9)
        let usage = try Self.usageAndScan(fixture, ["one", "two", "three", "none"])
        for (group, counts) in usage {
            #expect(
                counts[0] == counts[2] && counts[1] == counts[3],
                "\(group): usage \(counts[0...1]), scan \(counts[2...])"
            )
        }
        #expect(usage["one"]?[0] == 3)
        #expect(usage["three"] == [0, 0, 0, 0])
        #expect(usage["none"] == [0, 0, 0, 0])
    }

    @Test(.disabled(if: TestBackend.throughDaemon, "rewrites the store file to schema 4"))
    func aStoreOfSchemaFourGetsItsUsageCountedWhenOpened() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        for index in 0..<3 {
            _ = try fixture.store.add(Self.item("x\(index)", group: "g", bytes: 100 * index), caller: .owner)
        }
        _ = try fixture.store.add(Self.item("y", group: "h", bytes: 7), caller: .owner)
        fixture.close()
        // The store as schema 4 wrote it.
        try fixture.sql(Self.undoSchemaFive + "DELETE FROM schema_version WHERE version = 5")
        try fixture.reopen()
        #expect(try fixture.sqlOnDisk("SELECT max(version) FROM schema_version") == "5")
        let usage = try Self.usageAndScan(fixture, ["g", "h"])
        #expect(usage["g"]?[0] == 3)
        #expect(usage["h"]?[0] == 1)
        for (group, counts) in usage { #expect(counts[0...1] == counts[2...3], "\(group)") }
        // And kept from then on.
        _ = try fixture.store.add(Self.item("z", group: "h", bytes: 9), caller: .owner)
        let (table, scan) = try Self.tableAndScan(fixture)
        #expect(table == scan)
    }

    /// What `usage` may cost: one primary-key lookup is a few dozen SQLite instructions; a scan of 3,000 rows is
    /// tens of thousands.
    static let lookupBound = 1_000

    @Test(.disabled(if: TestBackend.throughDaemon, "reads the engine's database"))
    func aCountDoesNotScanTheItems() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.addBatch(
            (0..<3_000).map { Self.item("i\($0)", group: $0 % 2 == 0 ? "even" : "odd", bytes: 8) }
        )
        try fixture.store.withEngine { engine in
            let database = engine.store.database
            let usage = try database.withWorkBound(instructions: Self.lookupBound) { () throws(KeychainError) in
                try engine.store.usage(accessGroup: "even")
            }
            #expect(usage?.items == 1_500)
            // The same bound stops the scan the count replaced, so that it tells a lookup from a scan.
            let scanned = try database.withWorkBound(instructions: Self.lookupBound) {
                () throws(KeychainError) -> Int64 in
                do {
                    let scan = try database.statement(Self.scanSQL)
                    defer { scan.reset() }
                    try scan.bind(1, "even")
                    _ = try scan.step()
                    return scan.int64(0)
                } catch let error as SQLiteError {
                    throw error.keychainError
                } catch {
                    throw KeychainError(KeychainStatus.io, "\(error)")
                }
            }
            #expect(scanned == nil)
        }
    }
}
