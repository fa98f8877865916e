import Foundation
import KeysealCore
import KeysealStore
import KeysealTestSupport
import Testing

@testable import Keyseal

/// Rows no SecItem call can reach — of a class Keyseal does not implement, or that cannot be decrypted — are
/// re-keyed or never stranded by a passcode change, listed and deleted by administrators, and reported by exports
/// instead of failing them. Runs on every backend, embedded and through keyseald (Scripts/test.sh).
@Suite("Undecryptable rows")
struct UndecryptableTests {
    /// Writes a row the way an older keyseald stored any class it was sent (no request validation), through an
    /// embedded engine on the fixture's directory (keyseald stopped and started again around it).
    static func insertLegacyRow(_ fixture: StoreFixture, _ item: NewItem) throws {
        func insert(_ store: KeychainStore) throws {
            try store.withEngine { engine in
                var attributes = item.attributes
                attributes[AttributeKey.synchronizable] = .bool(false)
                let row = try engine.seal(
                    itemID: randomBytes(16),
                    itemClass: item.itemClass,
                    group: item.accessGroup ?? "default",
                    accessibility: item.accessibility,
                    generation: 1,
                    attributes: attributes,
                    secret: item.data,
                    classKey: try engine.requireClassKey(item.accessibility)
                )
                try engine.store.transaction { () throws(KeychainError) in _ = try engine.store.insert(row) }
            }
        }
        guard fixture.throughDaemon else { return try insert(fixture.store) }
        fixture.close()
        let embedded = try KeychainStore.embedded(
            directory: fixture.storeDirectory,
            device: fixture.device,
            configuration: fixture.configuration
        )
        do {
            try insert(embedded)
        } catch {
            embedded.close()
            throw error
        }
        embedded.close()
        try fixture.reopen()
    }

    /// Runs `statement` on the closed store file, then opens it again (a reboot).
    static func edit(_ fixture: StoreFixture, _ statement: String) throws {
        fixture.close()
        try fixture.sql(statement)
        try fixture.reopen()
    }

    static func itemID(_ fixture: StoreFixture, account: String) throws -> String {
        let records = try fixture.store.copyMatching(.password(account: account, returns: .persistentRef))
        let reference = try #require(records.first?.persistentRef)
        return reference.suffix(16).map { String(format: "%02x", $0) }.joined()
    }

    static func rowID(_ fixture: StoreFixture, rank: Int) throws -> String {
        try fixture.sqlOnDisk("SELECT id FROM items ORDER BY id LIMIT 1 OFFSET \(rank)")
    }

    /// A row of a class that is never stored (an identity is a join of a certificate and a key).
    static let keyItem = NewItem(
        itemClass: .identity,
        attributes: [AttributeKey.label: .string("legacy identity")],
        accessibility: .whenUnlocked,
        data: Data("identity bytes".utf8)
    )

    @Test func aRowOfAnUnimplementedClassIsReKeyedWithEveryPasscodeChange() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(.password(account: "good"))
        try Self.insertLegacyRow(fixture, Self.keyItem)

        try fixture.store.setPasscode("one")
        try fixture.store.changePasscode(from: "one", to: "two")
        // Still decryptable under the new keys: listed for its class only, not as failing authentication.
        let listed = try fixture.store.undecryptableItems()
        #expect(listed.map(\.reason) == [.unsupportedClass])
        #expect(listed.first?.itemClass == "idnt")
        try fixture.store.removePasscode("two")
        #expect(try fixture.store.undecryptableItems().map(\.reason) == [.unsupportedClass])
        #expect(
            try fixture.store.copyMatching(.password(account: "good", returns: .data)).first?.data
                == Data("secret".utf8)
        )
    }

    @Test func aPasscodeChangeThatWouldStrandAnUndecryptableRowIsRefusedAndChangesNothing() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(.password(account: "a", secret: "secret-a"))
        _ = try fixture.store.add(.password(account: "b"))
        try fixture.store.setPasscode("one")
        let b = try Self.rowID(fixture, rank: 1)
        try Self.edit(fixture, "UPDATE items SET value = zeroblob(length(value)) WHERE id = \(b)")
        try fixture.store.unlock(passcode: "one")

        var refusal: KeychainError?
        do { try fixture.store.changePasscode(from: "one", to: "two") } catch let error as KeychainError {
            refusal = error
        }
        #expect(refusal?.status == KeychainStatus.decode)
        #expect(refusal?.message.contains("1 item of the passcode classes cannot be decrypted") == true)
        #expect(refusal?.message.contains("keyseal doctor") == true)
        #expect(status { try fixture.store.removePasscode("one") } == KeychainStatus.decode)

        // The passcode and every decryptable item are as they were.
        try fixture.reopen()
        #expect(status { try fixture.store.unlock(passcode: "two") } == KeychainStatus.authFailed)
        try fixture.store.unlock(passcode: "one")
        #expect(
            try fixture.store.copyMatching(.password(account: "a", returns: .data)).first?.data == Data("secret-a".utf8)
        )

        // Once the row is deleted, the change goes through.
        try fixture.store.deleteUndecryptable(ids: nil)
        try fixture.store.changePasscode(from: "one", to: "two")
        #expect(
            try fixture.store.copyMatching(.password(account: "a", returns: .data)).first?.data == Data("secret-a".utf8)
        )
    }

    @Test func undecryptableRowsAreListedAndDeletedByIdWithoutDecrypting() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        for account in ["a", "b", "c"] { _ = try fixture.store.add(.password(account: account)) }
        let ids = try ["a", "b", "c"].map { try Self.itemID(fixture, account: $0) }
        let b = try Self.rowID(fixture, rank: 1)
        let c = try Self.rowID(fixture, rank: 2)
        try Self.edit(
            fixture,
            "UPDATE items SET attrs = zeroblob(length(attrs)) WHERE id = \(b); "
                + "UPDATE ledger SET generation = generation + 1 WHERE id = \(c)"
        )
        // An ordinary delete decrypts first, so it cannot remove them.
        #expect(status { try fixture.store.delete(.password(account: "b")) } != 0)

        let listed = try fixture.store.undecryptableItems()
        #expect(listed.map(\.id) == [ids[1], ids[2]])
        #expect(listed.map(\.reason) == [.authentication, .generation])
        #expect(listed.allSatisfy { $0.itemClass == "genp" && $0.accessGroup == "default" && $0.accessibility == "ak" })

        // A decryptable row is not deleted this way, an unknown id is not found, a malformed one is a parameter
        // error; each leaves everything in place.
        #expect(status { try fixture.store.deleteUndecryptable(ids: [ids[0], ids[1]]) } == KeychainStatus.param)
        #expect(
            status { try fixture.store.deleteUndecryptable(ids: [String(repeating: "0", count: 32)]) }
                == KeychainStatus.itemNotFound
        )
        #expect(status { try fixture.store.deleteUndecryptable(ids: ["zz"]) } == KeychainStatus.param)
        #expect(try fixture.store.undecryptableItems().count == 2)

        let deleted = try fixture.store.deleteUndecryptable(ids: [ids[1], ids[2].uppercased()])
        #expect(deleted.map(\.id) == [ids[1], ids[2]])
        #expect(try fixture.store.undecryptableItems().isEmpty)
        #expect(
            try fixture.store.copyMatching(.password(account: "a", returns: .data)).first?.data == Data("secret".utf8)
        )
        #expect(status { _ = try fixture.store.copyMatching(.password(account: "b")) } == KeychainStatus.itemNotFound)
    }

    @Test func anExportLeavesUndecryptableRowsOutAndReportsThem() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(.password(account: "a", secret: "secret-a"))
        _ = try fixture.store.add(.password(account: "b"))
        try Self.insertLegacyRow(fixture, Self.keyItem)
        let b = try Self.itemID(fixture, account: "b")
        let bRow = try Self.rowID(fixture, rank: 1)
        try Self.edit(fixture, "UPDATE items SET value = zeroblob(length(value)) WHERE id = \(bRow)")

        let scratch = try TemporaryDirectory(prefix: "export")
        defer { scratch.remove() }
        let file = scratch.appending("backup.ksb")
        let report = try fixture.store.exportBackup(to: file, passphrase: "pp")
        #expect(report.exportedCount == 1)
        #expect(report.undecryptable.count == 2)
        #expect(report.undecryptable.first?.id == b)
        #expect(report.undecryptable.map(\.reason) == [.authentication, .unsupportedClass])

        // The backup holds the rest of the store and restores it.
        try fixture.store.delete(.password(account: "a"))
        let restored = try fixture.store.importBackup(from: file, passphrase: "pp")
        #expect(restored.restoredCount == 1)
        #expect(
            try fixture.store.copyMatching(.password(account: "a", returns: .data)).first?.data == Data("secret-a".utf8)
        )
    }

    @Test func listingNeedsEveryClassThatHoldsRowsUnlocked() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(.password(account: "a"))
        try fixture.store.setPasscode("one")
        try fixture.store.lock()
        #expect(status { _ = try fixture.store.undecryptableItems() } == KeychainStatus.interactionNotAllowed)
        #expect(status { try fixture.store.deleteUndecryptable(ids: nil) } == KeychainStatus.interactionNotAllowed)
        try fixture.store.unlock(passcode: "one")
        #expect(try fixture.store.undecryptableItems().isEmpty)
    }
}
