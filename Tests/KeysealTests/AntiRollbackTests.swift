import Foundation
import Keyseal
import KeysealTestSupport
import Testing

/// The anti-rollback counter of an embedded TPM store on swtpm (docs/TPM.md "Anti-rollback counter").
@Suite("anti-rollback counter, embedded on swtpm")
struct AntiRollbackTests {
    @Test("a TPM store from before the counter gets one at its next open")
    func upgradeDefinesCounter() throws {
        let swtpm = try SwtpmFixture(maxTries: 32)
        defer { swtpm.stop() }
        let directory = try TemporaryDirectory(prefix: "keyseal-counter")
        defer { directory.remove() }
        var store = try KeychainStore.embedded(directory: directory.url, device: .tpm(tcti: swtpm.tcti))
        #expect(try store.status().boot?.counterIndex != nil)
        try store.unsetCounterForTests()
        #expect(try store.status().boot?.counterIndex == nil)
        store.close()
        store = try KeychainStore.embedded(directory: directory.url, device: .tpm(tcti: swtpm.tcti))
        defer { store.close() }
        let boot = try #require(try store.status().boot)
        #expect(boot.counterIndex != nil && boot.counterValue != nil && !boot.rolledBack)
    }

    @Test(
        "a keybag without its counter's Name (written before it was recorded): an index put in the counter's place is a rollback"
    )
    func replacedCounterUnderOlderKeybag() throws {
        let swtpm = try SwtpmFixture(maxTries: 32)
        defer { swtpm.stop() }
        let directory = try TemporaryDirectory(prefix: "keyseal-counter")
        defer { directory.remove() }
        var store = try Self.open(directory, swtpm)
        try Self.add(store, "old")
        try store.dropCounterNameForTests()
        let boot = try #require(try store.status().boot)
        let index = try #require(boot.counterIndex)
        let value = try #require(boot.counterValue)
        store.close()
        let copy = try Self.copy(directory, name: "copy")
        store = try Self.open(directory, swtpm)
        try Self.add(store, "new")  // a checkpoint: the counter moves past the copy's value
        store.close()
        try swtpm.replaceNVIndex(index, with: .ordinaryIndex, holding: value)
        try Self.putBack(copy, over: directory)

        store = try Self.open(directory, swtpm)
        defer { store.close() }
        let reopened = try #require(try store.status().boot)
        #expect(reopened.rolledBack)
        #expect(reopened.detail.contains("is not this store's anti-rollback counter"), "\(reopened.detail)")
        #expect(reopened.counterValue == nil)
        let error = try #require(throws: KeychainError.self) { try Self.find(store, "old") }
        #expect(error.status == KeychainStatus.rolledBack)
    }

    // MARK: Item-level freshness (docs/TPM.md "Item-level freshness")

    static func open(
        _ directory: TemporaryDirectory,
        _ swtpm: SwtpmFixture,
        interval: TimeInterval = 0
    ) throws
        -> KeychainStore
    {
        try KeychainStore.embedded(
            directory: directory.url,
            device: .tpm(tcti: swtpm.tcti),
            configuration: KeychainStore.Configuration(checkpointInterval: interval)
        )
    }

    static func add(_ store: KeychainStore, _ account: String, _ accessibility: Accessibility = .whenUnlocked) throws {
        _ = try store.add(
            NewItem(
                itemClass: .genericPassword,
                attributes: [AttributeKey.account: .string(account)],
                accessibility: accessibility,
                data: Data("secret-\(account)".utf8)
            )
        )
    }

    static func find(_ store: KeychainStore, _ account: String) throws -> [ItemRecord] {
        try store.copyMatching(
            ItemQuery(
                itemClass: .genericPassword,
                attributes: [AttributeKey.account: .string(account)],
                returns: [.data]
            )
        )
    }

    /// Closes `store`, copies its directory and returns the copy's path.
    static func copy(_ directory: TemporaryDirectory, name: String) throws -> URL {
        let copy = directory.url.deletingLastPathComponent().appending(
            path: directory.url.lastPathComponent + "-" + name
        )
        try FileManager.default.copyItem(at: directory.url, to: copy)
        return copy
    }

    static func putBack(_ copy: URL, over directory: TemporaryDirectory) throws {
        try FileManager.default.removeItem(at: directory.url)
        try FileManager.default.moveItem(at: copy, to: directory.url)
    }

    @Test("items written after a checkpoint, then the older copy put back: rolled back (errKeysealRolledBack)")
    func itemRollbackDetected() throws {
        let swtpm = try SwtpmFixture(maxTries: 32)
        defer { swtpm.stop() }
        let directory = try TemporaryDirectory(prefix: "keyseal-fresh")
        defer { directory.remove() }
        var store = try Self.open(directory, swtpm)
        try Self.add(store, "old")
        store.close()
        let copy = try Self.copy(directory, name: "copy")
        store = try Self.open(directory, swtpm)
        try Self.add(store, "new")
        store.close()
        try Self.putBack(copy, over: directory)

        store = try Self.open(directory, swtpm)
        defer { store.close() }
        #expect(try store.status().boot?.rolledBack == true)
        do {
            _ = try Self.find(store, "old")
            Issue.record("the rolled-back store served a when-unlocked item")
        } catch let error as KeychainError {
            #expect(error.status == KeychainStatus.rolledBack)
        }
    }

    @Test("an older copy's items and ledger record under the current keybag: rolled back, naming the mixed copies")
    func mixedCopiesDetected() throws {
        let swtpm = try SwtpmFixture(maxTries: 32)
        defer { swtpm.stop() }
        let directory = try TemporaryDirectory(prefix: "keyseal-fresh")
        defer { directory.remove() }
        var store = try Self.open(directory, swtpm)
        try Self.add(store, "old", .always)
        store.close()
        let copy = try Self.copy(directory, name: "copy")
        store = try Self.open(directory, swtpm)
        try Self.delete(store, "old")
        store.close()
        // The current keybag (counter value = the TPM's) over the older copy's items and ledger record.
        try KeychainStoreTestHooks.copyKeybag(from: directory.url, to: copy)
        try Self.putBack(copy, over: directory)

        store = try Self.open(directory, swtpm)
        defer { store.close() }
        let boot = try #require(try store.status().boot)
        #expect(boot.rolledBack)
        #expect(boot.detail.contains("different copies"))
    }

    static func delete(_ store: KeychainStore, _ account: String) throws {
        try store.delete(
            ItemQuery(itemClass: .genericPassword, attributes: [AttributeKey.account: .string(account)], limit: .all)
        )
    }

    @Test("1,000 item adds with a 15-minute checkpoint interval make at most one increment of the counter")
    func checkpointBudget() throws {
        let swtpm = try SwtpmFixture(maxTries: 32)
        defer { swtpm.stop() }
        let directory = try TemporaryDirectory(prefix: "keyseal-fresh")
        defer { directory.remove() }
        let store = try Self.open(directory, swtpm, interval: 900)
        defer { store.close() }
        let before = try #require(try store.status().boot?.counterValue)
        let start = ContinuousClock.now
        for index in 0..<1_000 { try Self.add(store, "item-\(index)") }
        let elapsed = ContinuousClock.now - start
        let after = try #require(try store.status().boot?.counterValue)
        print("checkpointBudget: 1000 adds, \(after - before) increment(s), \(elapsed)")
        #expect(after - before <= 1)
        #expect(try store.ledgerCheckpointForTests() == after)
    }

    @Test("a ledger record from before checkpoints opens and takes the counter value at the next checkpoint")
    func oldRecordGetsCheckpoint() throws {
        let swtpm = try SwtpmFixture(maxTries: 32)
        defer { swtpm.stop() }
        let directory = try TemporaryDirectory(prefix: "keyseal-fresh")
        defer { directory.remove() }
        var store = try Self.open(directory, swtpm)
        try Self.add(store, "first")
        try store.dropLedgerCheckpointForTests()
        store.close()
        store = try Self.open(directory, swtpm)
        defer { store.close() }
        #expect(try store.ledgerCheckpointForTests() == nil)
        #expect(try store.status().boot?.rolledBack == false)
        #expect(try Self.find(store, "first").count == 1)
        try Self.add(store, "second")
        let counter = try #require(try store.status().boot?.counterValue)
        #expect(try store.ledgerCheckpointForTests() == counter)
    }
}
