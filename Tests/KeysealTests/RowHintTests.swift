import Foundation
import KeysealCore
import KeysealTestSupport
import Testing

@testable import KeysealStore

/// The in-memory row-id hints for primary-key lookups: a guess that must never change what a lookup finds.
@Suite("Row-id hints")
struct RowHintTests {
    static func digest(_ seed: Int, prefix: UInt32? = nil) -> Data {
        // 32 pseudo-random bytes from the seed (splitmix64), as uniform as the HMAC digests the store holds.
        var state = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15
        var bytes: [UInt8] = []
        for _ in 0..<4 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            withUnsafeBytes(of: z) { bytes += $0 }
        }
        if let prefix {
            for index in 0..<4 { bytes[index] = UInt8(truncatingIfNeeded: prefix >> (24 - 8 * UInt32(index))) }
        }
        return Data(bytes)
    }

    @Test func aHintIsFoundReplacedAndRemovedOnlyForItsRow() {
        var hints = RowIDHints()
        let a = Self.digest(1)
        #expect(hints.rowID(for: a) == nil)
        hints.set(a, rowID: 7)
        #expect(hints.rowID(for: a) == 7)
        hints.set(a, rowID: 9)
        #expect(hints.rowID(for: a) == 9)
        #expect(hints.count == 1)
        hints.remove(a, rowID: 7)  // an older row of the same digest: the current hint stays
        #expect(hints.rowID(for: a) == 9)
        hints.remove(a, rowID: 9)
        #expect(hints.rowID(for: a) == nil)
        #expect(hints.count == 0)
    }

    @Test func digestsSharingAPrefixShareOneHintAndTheLaterWins() {
        var hints = RowIDHints()
        let first = Self.digest(1, prefix: 0xABCD_0001)
        let second = Self.digest(2, prefix: 0xABCD_0001)
        hints.set(first, rowID: 3)
        hints.set(second, rowID: 4)
        #expect(hints.rowID(for: first) == 4)  // a wrong guess, which the lookup's own conditions reject
        #expect(hints.count == 1)
    }

    @Test func growthAndTombstonesKeepEveryLiveHint() {
        // Distinct, scattered prefixes (multiplying by an odd constant is a bijection on 32 bits), so that every
        // digest has a hint of its own.
        func digest(_ seed: Int) -> Data { Self.digest(seed, prefix: UInt32(seed) &* 2_654_435_761) }
        var hints = RowIDHints()
        for seed in 1...20_000 { hints.set(digest(seed), rowID: Int64(seed)) }
        for seed in stride(from: 1, through: 20_000, by: 2) { hints.remove(digest(seed), rowID: Int64(seed)) }
        for seed in 20_001...40_000 { hints.set(digest(seed), rowID: Int64(seed)) }
        #expect(hints.count == 30_000)
        var wrong = 0
        for seed in 1...40_000 {
            let expected: Int64? = seed <= 20_000 && seed % 2 == 1 ? nil : Int64(seed)
            if hints.rowID(for: digest(seed)) != expected { wrong += 1 }
        }
        #expect(wrong == 0)
        // 8 bytes a slot, more than a quarter full after a rebuild.
        #expect(hints.memoryBytes <= 30_000 * 8 * 4)
    }

    @Test func rowIDsBeyondThirtyTwoBitsAreNotHinted() {
        var hints = RowIDHints()
        hints.set(Self.digest(1), rowID: Int64(UInt32.max) + 5)
        #expect(hints.rowID(for: Self.digest(1)) == nil)
        #expect(hints.count == 0)
    }

    static func row(_ seed: Int, pk: Data) -> ItemRow {
        ItemRow(
            itemID: Array(Self.digest(seed).prefix(16)),
            itemClass: "genp",
            accessGroup: "default",
            accessibility: "ak",
            generation: 1,
            primaryKeyDigest: pk,
            digests: AttributeKey.digested.map { _ in nil },
            sealed: SealedItem(attributes: Data([1, UInt8(seed & 0xff)]), wrappedKey: Data([2]), value: Data([3]))
        )
    }

    static func find(_ store: ItemStore, _ pk: Data) throws -> [Int64] {
        try store.rows(RowFilter(itemClass: "genp", groups: [.init(group: "default", primaryKeyDigest: pk)])).map(\.id)
    }

    @Test func primaryKeysInSeveralGroupsFindEachGroupsRowInIDOrder() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try ItemStore(directory: directory.url)
        defer { store.close() }
        var ids: [String: Int64] = [:]
        for (seed, group) in ["b", "a", "c"].enumerated() {
            var row = Self.row(seed, pk: Self.digest(200 + seed))
            row.accessGroup = group
            ids[group] = try store.insert(row)
        }
        let terms = ["c", "a", "missing"].map { group in
            RowFilter.GroupTerm(
                group: group,
                primaryKeyDigest: Self.digest(group == "c" ? 202 : group == "a" ? 201 : 299)
            )
        }
        let filter = RowFilter(itemClass: "genp", groups: terms)
        #expect(try store.rows(filter).map(\.id) == [ids["a"]!, ids["c"]!].sorted())
        #expect(store.hintedReads == 2)  // both present groups read through their hints
        var first: [Int64] = []
        try store.forEachRow(filter) {
            first.append($0.id)
            return false
        }
        #expect(first == [min(ids["a"]!, ids["c"]!)])
    }

    @Test func aHintedReadStillAppliesTheAccessibilityItemIDAndDigestConditions() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try ItemStore(directory: directory.url)
        defer { store.close() }
        var row = Self.row(1, pk: Self.digest(300))
        let account = Data(repeating: 0xA1, count: 32)
        row.digests[AttributeKey.digested.firstIndex(of: AttributeKey.account)!] = account
        let id = try store.insert(row)
        func find(accessibility: String? = nil, itemID: [UInt8]? = nil, accountDigest: Data? = nil) throws -> [Int64] {
            let term = RowFilter.GroupTerm(
                group: "default",
                primaryKeyDigest: Self.digest(300),
                digests: accountDigest.map { [(AttributeKey.account, $0)] } ?? []
            )
            return try store.rows(
                RowFilter(itemClass: "genp", groups: [term], accessibility: accessibility, itemID: itemID)
            ).map(\.id)
        }
        #expect(try find(accessibility: "ak", itemID: row.itemID, accountDigest: account) == [id])
        #expect(store.hintedReads == 1)
        #expect(try find(accessibility: "ck") == [])
        #expect(try find(itemID: Array(repeating: 0, count: 16)) == [])
        #expect(try find(accountDigest: Data(repeating: 0xA2, count: 32)) == [])
        #expect(try find() == [id])
    }

    @Test func lookupsByPrimaryKeyUseTheHintAndFindTheSameRowsWhenItIsStale() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try ItemStore(directory: directory.url)
        let pk = Self.digest(100)
        let id = try store.insert(Self.row(1, pk: pk))
        #expect(try Self.find(store, pk) == [id])
        #expect(store.hintedReads == 1)

        // The primary key changes in place: the old digest finds nothing, the new one the row.
        let moved = Self.digest(101)
        var changed = Self.row(1, pk: moved)
        changed.id = id
        try store.update(changed)
        #expect(try Self.find(store, pk) == [])
        #expect(try Self.find(store, moved) == [id])

        // A stale hint (the row deleted and the item added again under a new id) falls back to the index.
        try store.delete(changed)
        let again = try store.insert(Self.row(2, pk: moved))
        #expect(again != id)
        store.hints.set(moved, rowID: id)
        let before = store.hintedReads
        #expect(try Self.find(store, moved) == [again])
        #expect(store.hintedReads == before)
        #expect(try Self.find(store, moved) == [again])  // repaired: read through the hint
        #expect(store.hintedReads == before + 1)

        // A rolled-back insert leaves a hint to nothing: the lookup still answers from the table.
        let ghost = Self.digest(102)
        #expect(throws: KeychainError.self) {
            try store.transaction { () throws(KeychainError) in
                try store.insert(Self.row(3, pk: ghost))
                throw KeychainError(KeychainStatus.io, "rolled back")
            }
        }
        #expect(try Self.find(store, ghost) == [])
        // The rolled-back id is given again to the next row: the ghost's hint now names another item's row.
        let reused = try store.insert(Self.row(4, pk: Self.digest(103)))
        #expect(store.hints.rowID(for: ghost) == reused)
        #expect(try Self.find(store, ghost) == [])
        #expect(try Self.find(store, Self.digest(103)) == [reused])

        // Reopened, the hints come from the file.
        store.close()
        store = try ItemStore(directory: directory.url)
        defer { store.close() }
        #expect(try Self.find(store, moved) == [again])
        #expect(store.hintedReads == 1)
    }
}
