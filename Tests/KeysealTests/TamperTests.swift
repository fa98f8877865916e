import Foundation
import Keyseal
import KeysealTestSupport
import Testing

/// docs/ARCHITECTURE.md, "Key hierarchy" and "Store and search digests": every edit of the file is detected, never
/// decrypts to wrong data, and affects only the item edited.
@Suite("Tamper detection")
struct TamperTests {
    /// A store with three generic passwords a, b, c; closed for editing.
    func makeFixture() throws -> StoreFixture {
        let fixture = try StoreFixture()
        for name in ["a", "b", "c"] {
            var item = NewItem.password(service: "svc-\(name)", account: name, secret: "secret-\(name)")
            item.synchronizable = name == "b"
            _ = try fixture.store.add(item)
        }
        fixture.close()
        return fixture
    }

    func id(_ fixture: StoreFixture, rank: Int) throws -> String {
        try fixture.sql("SELECT id FROM items ORDER BY id LIMIT 1 OFFSET \(rank)")
    }

    /// The status of a lookup of item `account`, found two ways that must agree: by each attribute's digest
    /// (synchronizable any), and by the whole primary key (synchronizable as stored), the lookup most calls make,
    /// which for the value alone reads the row in place.
    func find(_ fixture: StoreFixture, _ account: String, returns: ReturnOptions = .data) -> OSStatus {
        var query = ItemQuery.password(service: "svc-\(account)", account: account, returns: returns)
        query.synchronizable = .any
        let byDigests = status { _ = try fixture.store.copyMatching(query) }
        query.synchronizable = account == "b" ? .yes : .no
        let byPrimaryKey = status { _ = try fixture.store.copyMatching(query) }
        #expect(byPrimaryKey == byDigests, "found by the whole primary key: \(byPrimaryKey); by digests: \(byDigests)")
        return byDigests
    }

    func expectOthersIntact(_ fixture: StoreFixture) throws {
        let c = try fixture.store.copyMatching(.password(service: "svc-c", account: "c", returns: .data))
        #expect(c.first?.data == Data("secret-c".utf8))
    }

    func swap(_ fixture: StoreFixture, column: String) throws {
        let a = try id(fixture, rank: 0)
        let b = try id(fixture, rank: 1)
        if column == "pk" {
            // UNIQUE(class, agrp, pk): move one out of the way first.
            try fixture.sql(
                """
                CREATE TEMP TABLE t AS SELECT pk FROM items WHERE id = \(a);
                UPDATE items SET pk = x'00' WHERE id = \(a);
                UPDATE items SET pk = (SELECT pk FROM t) WHERE id = \(b);
                """
            )
            return
        }
        try fixture.sql(
            """
            CREATE TEMP TABLE t AS SELECT id, \(column) AS v FROM items WHERE id IN (\(a), \(b));
            UPDATE items SET \(column) = (SELECT v FROM t WHERE t.id = CASE items.id WHEN \(a) THEN \(b) ELSE \(a) END)
              WHERE id IN (\(a), \(b));
            """
        )
    }

    @Test func swappedValueCiphertextsAreDetected() throws {
        let fixture = try makeFixture()
        defer { fixture.remove() }
        try swap(fixture, column: "value")
        try fixture.reopen()
        #expect(find(fixture, "a") == KeychainStatus.decode)
        #expect(find(fixture, "b") == KeychainStatus.decode)
        try expectOthersIntact(fixture)
    }

    @Test func swappedAttributeCiphertextsAreDetected() throws {
        let fixture = try makeFixture()
        defer { fixture.remove() }
        try swap(fixture, column: "attrs")
        try fixture.reopen()
        #expect(find(fixture, "a", returns: .attributes) == KeychainStatus.decode)
        #expect(find(fixture, "b", returns: .attributes) == KeychainStatus.decode)
        try expectOthersIntact(fixture)
    }

    /// Each column with a query that reaches row a through the digest it took from row b.
    static let digestCases: [(String, [String: AttributeValue], SyncMatch)] = [
        ("d_acct", [AttributeKey.account: .string("b")], .any),
        ("d_svce", [AttributeKey.service: .string("svc-b")], .any),
        ("d_sync", [AttributeKey.account: .string("a")], .yes),
    ]

    @Test(arguments: digestCases)
    func swappedDigestColumnsAreDetected(column: String, attributes: [String: AttributeValue], sync: SyncMatch) throws {
        let fixture = try makeFixture()
        defer { fixture.remove() }
        try swap(fixture, column: column)
        try fixture.reopen()
        // Found through the other row's digest, the row fails authentication rather than answering for the item.
        let result = status {
            _ = try fixture.store.copyMatching(
                ItemQuery(itemClass: .genericPassword, attributes: attributes, synchronizable: sync, returns: .data)
            )
        }
        #expect(result == KeychainStatus.decode)
        try expectOthersIntact(fixture)
    }

    @Test func movedPrimaryKeyDigestIsDetected() throws {
        let fixture = try makeFixture()
        defer { fixture.remove() }
        try swap(fixture, column: "pk")
        try fixture.reopen()
        #expect(find(fixture, "a") == KeychainStatus.decode)
        try expectOthersIntact(fixture)
    }

    /// With attributes asked for, the attribute ciphertext is opened; for the value alone (found by digests) only
    /// the value is, and its associated data covers the attribute ciphertext: both detect every flipped byte.
    @Test(arguments: ["value", "attrs", "wkey"], [ReturnOptions.data, [.data, .attributes]])
    func flippedByteIsDetected(column: String, returns: ReturnOptions) throws {
        let fixture = try makeFixture()
        defer { fixture.remove() }
        let a = try id(fixture, rank: 0)
        // Change the last byte (inside the GCM tag): 0x00 becomes 0x01, anything else 0x00.
        try fixture.sql(
            """
            UPDATE items SET \(column) = CAST(substr(\(column), 1, length(\(column)) - 1)
              || CASE WHEN substr(\(column), -1) = x'00' THEN x'01' ELSE x'00' END AS BLOB) WHERE id = \(a);
            """
        )
        #expect(try fixture.sql("SELECT hex(substr(\(column), -1)) IN ('00', '01') FROM items WHERE id = \(a)") == "1")
        try fixture.reopen()
        #expect(find(fixture, "a", returns: returns) == KeychainStatus.decode)
        try expectOthersIntact(fixture)
    }

    @Test(arguments: [
        ("pdmn", "'dk'"), ("agrp", "'other'"), ("generation", "generation + 1"), ("class", "'inet'"),
    ])
    func editedPlaintextColumnIsDetected(column: String, value: String) throws {
        let fixture = try makeFixture()
        defer { fixture.remove() }
        let a = try id(fixture, rank: 0)
        try fixture.sql("UPDATE items SET \(column) = \(value) WHERE id = \(a)")
        try fixture.reopen()
        #expect(find(fixture, "a", returns: [.data, .attributes]) == KeychainStatus.decode)
        try expectOthersIntact(fixture)
    }

    @Test func olderRowPutBackIsDetected() throws {
        let fixture = try makeFixture()
        defer { fixture.remove() }
        try fixture.sql("CREATE TABLE saved AS SELECT * FROM items WHERE id = (SELECT min(id) FROM items)")
        try fixture.reopen()
        try fixture.store.update(.password(service: "svc-a", account: "a"), with: ItemChanges(data: Data("newer".utf8)))
        fixture.close()
        try fixture.sql(
            """
            DELETE FROM items WHERE id = (SELECT id FROM saved);
            INSERT INTO items SELECT * FROM saved;
            DROP TABLE saved;
            """
        )
        try fixture.reopen()
        #expect(find(fixture, "a") == KeychainStatus.decode)
        try expectOthersIntact(fixture)
    }

    @Test func editedKeybagHeaderIsRefusedAtOpen() throws {
        let fixture = try makeFixture()
        defer { fixture.remove() }
        try fixture.sql(
            "UPDATE keybag SET body = CAST(replace(CAST(body AS TEXT), '\"autoLockSeconds\":300', '\"autoLockSeconds\":301') AS BLOB)"
        )
        #expect(throws: KeychainError.decode) { try fixture.reopen() }
    }

    @Test func editedKeybagSaltIsRefusedBeforeAnyPasscodeCheck() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        fixture.close()
        let body = try fixture.sql("SELECT CAST(body AS TEXT) FROM keybag")
        let salt = try #require(body.range(of: "\"salt\":\"").map { body[$0.upperBound...].prefix(4) })
        let replacement = salt == "AAAA" ? "BBBB" : "AAAA"
        try fixture.sql(
            "UPDATE keybag SET body = CAST(replace(CAST(body AS TEXT), '\"salt\":\"\(salt)', '\"salt\":\"\(replacement)') AS BLOB)"
        )
        #expect(throws: KeychainError.decode) { try fixture.reopen() }
    }

    @Test func newerSchemaIsRefused() throws {
        let fixture = try makeFixture()
        defer { fixture.remove() }
        try fixture.sql("INSERT INTO schema_version(version) VALUES (99)")
        let error = #expect(throws: KeychainError.self) { try fixture.reopen() }
        #expect(error?.message.contains("newer Keyseal") == true)
    }
}

/// docs/SECURITY-MODEL.md, "Tampering": the generation ledger is authenticated (a record under K_L, by bucket of row
/// ids), so that an item's older row put back with its older ledger entry, or an item deleted with its entry, is
/// caught at open — and only the items of the bucket concerned are refused.
@Suite("Tamper detection: the authenticated ledger")
struct LedgerTamperTests {
    let tamper = TamperTests()

    /// Saves row a and its ledger entry, updates a, then puts both back (closed store).
    func replayA(_ fixture: StoreFixture) throws {
        try fixture.sql(
            """
            CREATE TABLE saved_item AS SELECT * FROM items WHERE id = (SELECT min(id) FROM items);
            CREATE TABLE saved_ledger AS SELECT * FROM ledger WHERE id = (SELECT id FROM saved_item);
            """
        )
        try fixture.reopen()
        try fixture.store.update(.password(service: "svc-a", account: "a"), with: ItemChanges(data: Data("newer".utf8)))
        fixture.close()
        try fixture.sql(
            """
            DELETE FROM items WHERE id = (SELECT id FROM saved_item);
            DELETE FROM ledger WHERE id = (SELECT id FROM saved_item);
            INSERT INTO items SELECT * FROM saved_item;
            INSERT INTO ledger SELECT * FROM saved_ledger;
            DROP TABLE saved_item;
            DROP TABLE saved_ledger;
            """
        )
        try fixture.reopen()
    }

    @Test func olderRowPutBackWithItsLedgerEntryIsDetected() throws {
        let fixture = try tamper.makeFixture()
        defer { fixture.remove() }
        try replayA(fixture)
        #expect(tamper.find(fixture, "a") == KeychainStatus.decode)
        #expect(tamper.find(fixture, "a", returns: [.data, .attributes]) == KeychainStatus.decode)
        try tamper.expectOthersIntact(fixture)
    }

    @Test func replayIsReportedInTheStatus() throws {
        let fixture = try tamper.makeFixture()
        defer { fixture.remove() }
        let a = try #require(Int64(try tamper.id(fixture, rank: 0)))
        try fixture.reopen()
        #expect(try fixture.store.status().ledger.verified)
        fixture.close()
        try replayA(fixture)
        let ledger = try fixture.store.status().ledger
        #expect(ledger.refusedBuckets == [LedgerDigest.bucket(rowID: a)])
        #expect(ledger.missingEntries == 0 && ledger.unexpectedEntries == 0)
    }

    @Test func deletedRowWithItsLedgerEntryIsReported() throws {
        let fixture = try tamper.makeFixture()
        defer { fixture.remove() }
        let b = try tamper.id(fixture, rank: 1)
        try fixture.sql("DELETE FROM items WHERE id = \(b); DELETE FROM ledger WHERE id = \(b);")
        try fixture.reopen()
        let ledger = try fixture.store.status().ledger
        #expect(ledger.refusedBuckets == [LedgerDigest.bucket(rowID: try #require(Int64(b)))])
        #expect(ledger.missingEntries == 1)
        #expect(ledger.summary.contains("1 item missing"))
        #expect(tamper.find(fixture, "b") == KeychainStatus.itemNotFound)
        try tamper.expectOthersIntact(fixture)
    }

    @Test func editedLedgerGenerationIsDetected() throws {
        let fixture = try tamper.makeFixture()
        defer { fixture.remove() }
        let a = try tamper.id(fixture, rank: 0)
        // The row and its entry moved forward together: the row fails its authentication, the entry the record.
        try fixture.sql("UPDATE ledger SET generation = generation + 1 WHERE id = \(a)")
        try fixture.reopen()
        #expect(tamper.find(fixture, "a") == KeychainStatus.decode)
        #expect(
            try fixture.store.status().ledger.refusedBuckets == [LedgerDigest.bucket(rowID: try #require(Int64(a)))]
        )
        try tamper.expectOthersIntact(fixture)
    }

    /// Only the replayed item's bucket is refused: an item of the same bucket too, the items of other buckets not.
    @Test func onlyTheBucketOfTheReplayedItemIsRefused() throws {
        let fixture = try tamper.makeFixture()
        defer { fixture.remove() }
        try fixture.reopen()
        // Rows 4 … 4 + bucketCount - 1: the last shares a's bucket.
        try fixture.store.addBatch(
            (0..<LedgerDigest.bucketCount).map {
                NewItem.password(service: "svc-n", account: "n\($0)", secret: "s\($0)")
            }
        )
        fixture.close()
        let a = try #require(Int64(try tamper.id(fixture, rank: 0)))
        let sameBucket = try fixture.sql(
            "SELECT count(*) FROM items WHERE id != \(a) AND id % \(LedgerDigest.bucketCount) = \(a % Int64(LedgerDigest.bucketCount))"
        )
        #expect(sameBucket == "1")
        try replayA(fixture)
        #expect(tamper.find(fixture, "a") == KeychainStatus.decode)
        let sharer = "n\(LedgerDigest.bucketCount - 3)"  // row 4 + 125 = 129 = 1 + 128
        #expect(
            status { _ = try fixture.store.copyMatching(.password(service: "svc-n", account: sharer, returns: .data)) }
                == KeychainStatus.decode
        )
        try tamper.expectOthersIntact(fixture)
        let other = try fixture.store.copyMatching(.password(service: "svc-n", account: "n0", returns: .data))
        #expect(other.first?.data == Data("s0".utf8))
        // Writes keep the record current: after an add and a delete elsewhere, the same bucket alone is refused.
        _ = try fixture.store.add(.password(service: "svc-n", account: "later", secret: "later"))
        try fixture.store.delete(.password(service: "svc-n", account: "n1"))
        try fixture.reopen()
        #expect(try fixture.store.status().ledger.refusedBuckets == [LedgerDigest.bucket(rowID: a)])
        let later = try fixture.store.copyMatching(.password(service: "svc-n", account: "later", returns: .data))
        #expect(later.first?.data == Data("later".utf8))
    }

    /// The review's finding: after a detected replay, `doctor --delete-undecryptable` and a restart, the bucket was
    /// still refused, and a later add landing in it was accepted but unreadable. An add is never placed in a refused
    /// bucket (it goes past it and is served); deleting the bucket's rows repairs it at once and across a restart,
    /// and items landing in it are served again.
    @Test func deletingTheUndecryptableRowsOfAReplayRestoresTheirBucket() throws {
        let fixture = try tamper.makeFixture()
        defer { fixture.remove() }
        try fixture.reopen()
        // Rows 4 … 128: the next row, 129, falls in a's bucket (row 1).
        try fixture.store.addBatch(
            (0..<125).map { NewItem.password(service: "svc-n", account: "n\($0)", secret: "s\($0)") }
        )
        fixture.close()
        let a = try #require(Int64(try tamper.id(fixture, rank: 0)))
        let bucket = LedgerDigest.bucket(rowID: a)
        try replayA(fixture)
        #expect(try fixture.store.status().ledger.refusedBuckets == [bucket])
        #expect(tamper.find(fixture, "a") == KeychainStatus.decode)

        // Before any repair: the add is served, from a row outside the refused bucket.
        _ = try fixture.store.add(.password(service: "svc-n", account: "later", secret: "later"))
        #expect(
            try fixture.store.copyMatching(.password(service: "svc-n", account: "later", returns: .data)).first?.data
                == Data("later".utf8)
        )
        fixture.close()
        let later = try #require(
            Int64(try fixture.sql("SELECT id FROM items ORDER BY id DESC LIMIT 1"))
        )
        #expect(LedgerDigest.bucket(rowID: later) != bucket)
        try fixture.reopen()
        #expect(try fixture.store.status().ledger.refusedBuckets == [bucket])

        // The doctor deletes the replayed row: its bucket verifies at once, and after a restart.
        let deleted = try fixture.store.deleteUndecryptable(ids: nil)
        #expect(deleted.map(\.reason) == [.generation])
        #expect(try fixture.store.status().ledger.verified)
        try fixture.reopen()
        #expect(try fixture.store.status().ledger.verified)
        // Items written into the repaired bucket are served, across a restart too.
        _ = try fixture.store.add(.password(service: "svc-a", account: "a", secret: "again"))
        try fixture.store.addBatch(
            (0..<LedgerDigest.bucketCount).map {
                NewItem.password(service: "svc-m", account: "m\($0)", secret: "m\($0)")
            }
        )
        fixture.close()
        let inBucket = try fixture.sql(
            "SELECT count(*) FROM items WHERE id % \(LedgerDigest.bucketCount) = \(bucket)"
        )
        #expect(inBucket == "1")
        try fixture.reopen()
        #expect(try fixture.store.status().ledger.verified)
        for index in 0..<LedgerDigest.bucketCount {
            #expect(
                try fixture.store.copyMatching(.password(service: "svc-m", account: "m\(index)", returns: .data)).first?
                    .data == Data("m\(index)".utf8)
            )
        }
        #expect(tamper.find(fixture, "a") == KeychainStatus.success)
        try tamper.expectOthersIntact(fixture)
    }

    /// With a record that fails its MAC every bucket is refused: an add is refused with errSecDecode and writes
    /// nothing; once the doctor has deleted every row the store gets a fresh record and serves again.
    @Test func anAddIsRefusedWhileEveryBucketIsRefusedAndTheDoctorRepairsTheStore() throws {
        let fixture = try tamper.makeFixture()
        defer { fixture.remove() }
        try fixture.sql(
            "UPDATE ledger_record SET body = CAST(substr(body, 1, 10) || x'ff' || substr(body, 12) AS BLOB)"
        )
        try fixture.reopen()
        #expect(try fixture.store.status().ledger.recordProblem != nil)
        #expect(throws: KeychainError(KeychainStatus.decode)) {
            _ = try fixture.store.add(.password(service: "svc-n", account: "new", secret: "new"))
        }
        fixture.close()
        #expect(try fixture.sql("SELECT count(*) FROM items") == "3")
        #expect(try fixture.sql("SELECT seq FROM sqlite_sequence WHERE name = 'items'") == "3")
        try fixture.reopen()
        #expect(try fixture.store.deleteUndecryptable(ids: nil).count == 3)
        #expect(try fixture.store.status().ledger.verified)
        try fixture.reopen()
        #expect(try fixture.store.status().ledger.verified)
        _ = try fixture.store.add(.password(service: "svc-n", account: "new", secret: "new"))
        #expect(
            try fixture.store.copyMatching(.password(service: "svc-n", account: "new", returns: .data)).first?.data
                == Data("new".utf8)
        )
    }

    @Test func editedOrMissingLedgerRecordRefusesEveryItem() throws {
        for edit in [
            "UPDATE ledger_record SET body = CAST(substr(body, 1, 10) || x'ff' || substr(body, 12) AS BLOB)",
            "DELETE FROM ledger_record",
        ] {
            let fixture = try tamper.makeFixture()
            defer { fixture.remove() }
            try fixture.sql(edit)
            try fixture.reopen()
            let ledger = try fixture.store.status().ledger
            #expect(ledger.recordProblem != nil, "\(edit)")
            #expect(ledger.refusedBuckets.count == LedgerDigest.bucketCount)
            #expect(tamper.find(fixture, "c") == KeychainStatus.decode)
        }
    }

    /// A store written before the ledger record (schema 2, a keybag that marks none) gets its record at the first
    /// open, and from then on a replay is caught.
    @Test func storeFromBeforeTheRecordIsUpgraded() throws {
        let fixture = try tamper.makeFixture()
        defer { fixture.remove() }
        try fixture.reopen()
        try fixture.store.unmarkLedgerForTests()
        fixture.close()
        try fixture.sql(
            GroupUsageTests.undoSchemaFive
                + "DROP TABLE ledger_record; DROP TABLE item_pairs; DELETE FROM schema_version WHERE version >= 3;"
        )
        try fixture.reopen()
        #expect(try fixture.store.status().ledger.verified)
        try tamper.expectOthersIntact(fixture)
        fixture.close()
        #expect(try fixture.sql("SELECT max(version) FROM schema_version") == "5")
        #expect(try fixture.sql("SELECT count(*) FROM ledger_record") == "1")
        #expect(try fixture.sql("SELECT instr(CAST(body AS TEXT), '\"ledgerVersion\":1') > 0 FROM keybag") == "1")
        try replayA(fixture)
        #expect(tamper.find(fixture, "a") == KeychainStatus.decode)
    }
}
