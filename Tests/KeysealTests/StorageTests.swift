import Foundation
import Keyseal
import KeysealTestSupport
import Testing

@Suite("Store file, durability and limits")
struct StorageTests {
    /// Every file in the store directory, concatenated.
    func storeBytes(_ fixture: StoreFixture) throws -> [UInt8] {
        var bytes: [UInt8] = []
        let names = try FileManager.default.contentsOfDirectory(atPath: fixture.storeDirectory.path)
        for name in names {
            bytes += [UInt8](try Data(contentsOf: fixture.storeDirectory.appendingPathComponent(name)))
        }
        return bytes
    }

    func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        let first = needle[0]
        var index = 0
        while index <= haystack.count - needle.count {
            if haystack[index] == first && Array(haystack[index..<index + needle.count]) == needle { return true }
            index += 1
        }
        return false
    }

    @Test func noSecretOrAttributeOrTimestampInClearInAnyFile() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let markers = [
            "SECRET-VALUE-7f3a", "ACCOUNT-NAME-91bd", "SERVICE-NAME-2c4e", "SERVER-HOST-5d6f", "LABEL-TEXT-8e9a",
            "COMMENT-TEXT-0b1c",
        ]
        _ = try fixture.store.add(
            NewItem(
                itemClass: .genericPassword,
                attributes: [
                    AttributeKey.account: .string(markers[1]), AttributeKey.service: .string(markers[2]),
                    AttributeKey.label: .string(markers[4]), AttributeKey.comment: .string(markers[5]),
                ],
                data: Data(markers[0].utf8)
            )
        )
        _ = try fixture.store.add(
            NewItem(
                itemClass: .internetPassword,
                attributes: [AttributeKey.account: .string(markers[1]), AttributeKey.server: .string(markers[3])],
                data: Data(markers[0].utf8)
            )
        )
        // A second item written and then updated, so that both old and new pages and the WAL hold data.
        _ = try fixture.store.add(.password(service: markers[2], account: "other", secret: markers[0]))
        try fixture.store.update(
            .password(service: markers[2], account: "other"),
            with: ItemChanges(data: Data(markers[0].utf8))
        )
        let bytes = try storeBytes(fixture)
        #expect(FileManager.default.fileExists(atPath: fixture.databasePath + "-wal"))
        for marker in markers {
            #expect(!contains(bytes, Array(marker.utf8)), "\(marker) appears in clear")
        }
        // The creation time as stored (a Double's bit pattern), in either byte order.
        let bits = fixture.clock.now.timeIntervalSinceReferenceDate.bitPattern
        #expect(!contains(bytes, withUnsafeBytes(of: bits.bigEndian) { Array($0) }))
        #expect(!contains(bytes, withUnsafeBytes(of: bits.littleEndian) { Array($0) }))
    }

    @Test func filesAre0600AndDirectory0700() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        _ = try fixture.store.add(.password(account: "a"))
        let manager = FileManager.default
        let directoryMode = try manager.attributesOfItem(atPath: fixture.storeDirectory.path)[.posixPermissions] as? Int
        #expect(directoryMode == 0o700)
        for name in try manager.contentsOfDirectory(atPath: fixture.storeDirectory.path) {
            let mode =
                try manager.attributesOfItem(atPath: fixture.storeDirectory.appendingPathComponent(name).path)[
                    .posixPermissions
                ] as? Int
            #expect(mode == 0o600, "\(name) has mode \(String(mode ?? 0, radix: 8))")
        }
        let keyMode =
            try manager.attributesOfItem(atPath: fixture.root.appending("host.key").path)[.posixPermissions] as? Int
        #expect(keyMode == 0o600)
    }

    @Test func aSchemaOneStoreMigratesAndKeepsDetectingAPutBackRow() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(.password(account: "a", secret: "secret-a"))
        _ = try fixture.store.add(.password(account: "b", secret: "secret-b"))
        try fixture.store.unmarkLedgerForTests()
        fixture.close()
        try fixture.sql("CREATE TABLE saved AS SELECT * FROM items WHERE id = (SELECT min(id) FROM items)")
        // The store as schema version 1 wrote it: the ledger keyed by item id, no ledger record.
        try fixture.sql(
            """
            CREATE TABLE ledger_v1(item_id BLOB PRIMARY KEY, generation INTEGER NOT NULL) WITHOUT ROWID;
            INSERT INTO ledger_v1 SELECT i.item_id, l.generation FROM items i JOIN ledger l ON l.id = i.id;
            DROP TABLE ledger;
            ALTER TABLE ledger_v1 RENAME TO ledger;
            DROP TABLE ledger_record;
            DROP TABLE item_pairs;
            DELETE FROM schema_version WHERE version > 1;
            """ + GroupUsageTests.undoSchemaFive
        )
        try fixture.reopen()
        let found = try fixture.store.copyMatching(.password(service: "svc", account: "b", returns: .data))
        #expect(found.first?.data == Data("secret-b".utf8))
        try fixture.store.update(.password(service: "svc", account: "a"), with: ItemChanges(data: Data("new-a".utf8)))
        fixture.close()
        #expect(try fixture.sql("SELECT max(version) FROM schema_version") == "5")
        #expect(
            try fixture.sql("SELECT group_concat(generation) FROM (SELECT generation FROM ledger ORDER BY id)") == "2,1"
        )
        // The row of generation 1 put back in place of generation 2 is still refused.
        try fixture.sql("DELETE FROM items WHERE id = (SELECT id FROM saved); INSERT INTO items SELECT * FROM saved")
        try fixture.reopen()
        #expect(
            status { _ = try fixture.store.copyMatching(.password(service: "svc", account: "a", returns: .data)) }
                == KeychainStatus.decode
        )
    }

    @Test func storeUsesWriteAheadLogging() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        #expect(try fixture.sqlOnDisk("PRAGMA journal_mode") == "wal")
    }

    @Test func aSuccessfulAddIsCommittedBeforeItReturns() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(.password(account: "a"))
        // The files on disk hold the row while the store is still open (what a crash now would leave).
        #expect(try fixture.sqlOnDisk("SELECT count(*) FROM items") == "1")
        try fixture.store.delete(.password(account: "a"))
        #expect(try fixture.sqlOnDisk("SELECT count(*) FROM items") == "0")
    }

    @Test func aCopyTakenBeforeAPasscodeChangeOpensNothingWrittenAfterIt() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("old")
        _ = try fixture.store.add(.password(account: "before", secret: "b"))
        fixture.close()
        let copy = fixture.root.appending("copy")
        try FileManager.default.copyItem(at: fixture.storeDirectory, to: copy)
        try fixture.reopen()
        try fixture.store.changePasscode(from: "old", to: "new")
        _ = try fixture.store.add(.password(account: "after", secret: "a"))
        fixture.close()
        // Put the rows written after the change into the old copy, then open the copy with the old passcode.
        let sqlite = try requireTool("sqlite3", package: "sqlite3")
        let moved = try runProcess(
            sqlite,
            [
                copy.appendingPathComponent("keyseal.db").path,
                """
                ATTACH '\(fixture.databasePath)' AS new;
                DELETE FROM main.items; DELETE FROM main.ledger;
                INSERT INTO main.items SELECT * FROM new.items;
                INSERT INTO main.ledger SELECT * FROM new.ledger;
                """,
            ]
        )
        #expect(moved.status == 0, "\(moved.stderrText)")
        let old = try KeychainStore.embedded(
            directory: copy,
            device: fixture.device,
            configuration: fixture.configuration
        )
        defer { old.close() }
        try old.unlock(passcode: "old")
        for account in ["before", "after"] {
            let result = status { _ = try old.copyMatching(.password(account: account, returns: .data)) }
            #expect(result == KeychainStatus.decode, "\(account)")
        }
    }

    @Test func theFileHoldsNoneOfTheOldWrappedKeysAfterAChange() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("old")
        _ = try fixture.store.add(.password(account: "a"))
        fixture.close()
        let oldBody = try fixture.sql("SELECT CAST(body AS TEXT) FROM keybag")
        let oldKeys = try #require(
            (try JSONSerialization.jsonObject(with: Data(oldBody.utf8)) as? [String: Any])?["classKeys"]
                as? [String: String]
        )
        let oldWrapped = try fixture.sql("SELECT hex(wkey) FROM items")
        try fixture.reopen()
        try fixture.store.changePasscode(from: "old", to: "new")
        let bytes = try storeBytes(fixture)
        for accessibility in Accessibility.allCases where accessibility.isPasscodeProtected {
            guard let wrapped = oldKeys[accessibility.rawValue] else { continue }
            #expect(!contains(bytes, Array(wrapped.utf8)), "old \(accessibility.rawValue) key text remains")
            let raw = try #require(Data(base64Encoded: wrapped))
            #expect(!contains(bytes, [UInt8](raw)), "old \(accessibility.rawValue) key bytes remain")
        }
        let oldItemKey = stride(from: 0, to: oldWrapped.count, by: 2).map {
            UInt8(oldWrapped[oldWrapped.index(oldWrapped.startIndex, offsetBy: $0)...].prefix(2), radix: 16)!
        }
        #expect(!contains(bytes, oldItemKey), "the old wrapped item key remains")
        for accessibility in [Accessibility.always, .alwaysThisDeviceOnly] {
            // The always classes are not re-keyed by a passcode change.
            #expect(oldKeys[accessibility.rawValue] != nil)
        }
    }

    @Test func valuesUpToTheLimitRoundTripAndLargerAreRefused() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let limit = 1 << 20
        let exact = Data((0..<limit).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        _ = try fixture.store.add(NewItem.password(account: "exact").with(data: exact))
        #expect(try fixture.store.copyMatching(.password(account: "exact", returns: .data)).first?.data == exact)
        let result = status { _ = try fixture.store.add(NewItem.password(account: "big").with(data: exact + [0])) }
        #expect(result == KeychainStatus.dataTooLarge)
        let update = status {
            try fixture.store.update(.password(account: "exact"), with: ItemChanges(data: exact + [1]))
        }
        #expect(update == KeychainStatus.dataTooLarge)
        #expect(try fixture.store.copyMatching(.password(account: "exact", returns: .data)).first?.data == exact)
    }

    @Test(arguments: [Data(), Data([0xff, 0xfe, 0x00, 0xc3, 0x28]), Data([0])])
    func emptyAndNonUTF8ValuesRoundTripByteExact(value: Data) throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(NewItem.password(account: "v").with(data: value))
        try fixture.reopen()
        #expect(try fixture.store.copyMatching(.password(account: "v", returns: .data)).first?.data == value)
    }

    @Test func manyThreadsAtOnceGetOnlyExpectedStatuses() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let store = fixture.store
        let unexpected = Counter()
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for index in 0..<40 {
                let account = "t\(thread)-\(index % 5)"
                let results = [
                    status { _ = try store.add(.password(account: account)) },
                    status { _ = try store.copyMatching(.password(account: account, returns: .data)) },
                    status { try store.update(.password(account: account), with: ItemChanges(data: Data("u".utf8))) },
                    status { try store.delete(.password(account: account)) },
                ]
                for result in results
                where ![0, KeychainStatus.duplicateItem, KeychainStatus.itemNotFound].contains(result) {
                    unexpected.increment()
                }
            }
        }
        #expect(unexpected.value == 0)
        #expect(
            status { _ = try store.copyMatching(ItemQuery(itemClass: .genericPassword, limit: .all)) }
                == KeychainStatus.itemNotFound
        )
    }

    @Test func aSecondOpenOfTheSameStoreIsRefused() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let error = #expect(throws: KeychainError.self) { _ = try fixture.openSecond() }
        #expect(error?.status == KeychainStatus.notAvailable)
        #expect(error?.message.contains("another process") == true)
    }

    @Test func aProvisionedStoreWithoutItsHostKeyIsAnErrorNotANewKey() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        fixture.close()
        try FileManager.default.removeItem(at: fixture.root.appending("host.key"))
        let error = #expect(throws: KeychainError.self) { try fixture.reopen() }
        #expect(error?.status == KeychainStatus.notAvailable)
        #expect(!FileManager.default.fileExists(atPath: fixture.root.appending("host.key").path))
    }

    @Test func anotherHostKeyIsAnotherDevice() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        fixture.close()
        let other = fixture.root.appending("other.key")
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: other)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: other.path)
        let error = #expect(throws: KeychainError.self) {
            _ = try KeychainStore.embedded(
                directory: fixture.storeDirectory,
                device: .hostKey(file: other),
                configuration: fixture.configuration
            )
        }
        #expect(error?.status == KeychainStatus.decode)
        #expect(error?.message.contains("another device") == true)
    }

    @Test func aHostKeyInsideTheStoreDirectoryIsRefused() throws {
        let root = try TemporaryDirectory()
        defer { root.remove() }
        let directory = root.appending("store")
        let error = #expect(throws: KeychainError.self) {
            _ = try KeychainStore.embedded(
                directory: directory,
                device: .hostKey(file: directory.appendingPathComponent("host.key"))
            )
        }
        #expect(error?.status == KeychainStatus.param)
    }

    @Test func aHostKeyReadableByOthersIsRefused() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        fixture.close()
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o644],
            ofItemAtPath: fixture.root.appending("host.key").path
        )
        #expect(throws: KeychainError.param) { try fixture.reopen() }
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

extension NewItem {
    func with(data: Data) -> NewItem {
        var copy = self
        copy.data = data
        return copy
    }
}
