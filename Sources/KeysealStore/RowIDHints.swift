import FoundationEssentials

/// Where each item's row is, by primary-key digest: an in-memory accelerator for lookups by primary key.
///
/// A lookup through SQLite's primary-key index reads an index leaf and then a table leaf; in a large store both
/// miss the page cache. With a hint the lookup reads the row by id (`WHERE id = ? AND pk = ? …`), one descent of
/// the table, whose interior pages stay cached. A hint is only ever a guess: the row read must still carry the
/// digest and every other condition, and when it does not (an item deleted, its primary key changed, a write
/// rolled back) the lookup falls back to the index and repairs the hint. So hints need no transactional care.
///
/// Open addressing over one array of `UInt64`: the digest's first four bytes (HMAC output, uniformly random) in
/// the high half, the row id in the low half. Rows with ids of 2³² or more are not hinted. Two digests sharing
/// their first four bytes share a slot: the later one wins and the other falls back to the index. 8 bytes a slot
/// at a load of at most 0.8: about 1 MiB for 100,000 items. Digests are authenticated values stored in the clear
/// in the file already; nothing secret is held here.
struct RowIDHints {
    private var slots: [UInt64]
    /// Live entries.
    private(set) var count = 0
    /// Live entries plus tombstones: what limits probing.
    private var occupied = 0

    private static let empty: UInt64 = 0
    private static let tombstone: UInt64 = .max
    private static let maximumLoad = 0.8

    init(expected: Int = 0) {
        var capacity = 1024
        while Double(expected) > Double(capacity) * Self.maximumLoad { capacity *= 2 }
        slots = [UInt64](repeating: Self.empty, count: capacity)
    }

    static func prefix(_ digest: Data) -> UInt32? {
        guard digest.count >= 4 else { return nil }
        return digest.withUnsafeBytes { raw -> UInt32 in
            var value: UInt32 = 0
            for index in 0..<4 { value = value << 8 | UInt32(raw[index]) }
            return value
        }
    }

    /// The row id hinted for `digest`, if any.
    func rowID(for digest: Data) -> Int64? {
        guard let prefix = Self.prefix(digest) else { return nil }
        let mask = slots.count - 1
        var index = Int(prefix) & mask
        while true {
            let slot = slots[index]
            if slot == Self.empty { return nil }
            if slot != Self.tombstone && UInt32(truncatingIfNeeded: slot >> 32) == prefix {
                return Int64(slot & 0xFFFF_FFFF)
            }
            index = (index + 1) & mask
        }
    }

    /// Records that `digest`'s row has id `rowID`, replacing what was hinted for its prefix.
    mutating func set(_ digest: Data, rowID: Int64) {
        guard let prefix = Self.prefix(digest), rowID > 0, rowID < Int64(UInt32.max) else { return }
        let entry = UInt64(prefix) << 32 | UInt64(rowID)
        let mask = slots.count - 1
        var index = Int(prefix) & mask
        var reusable: Int?
        while true {
            let slot = slots[index]
            if slot == Self.empty { break }
            if slot == Self.tombstone {
                if reusable == nil { reusable = index }
            } else if UInt32(truncatingIfNeeded: slot >> 32) == prefix {
                slots[index] = entry
                return
            }
            index = (index + 1) & mask
        }
        if let reusable {
            slots[reusable] = entry
        } else {
            slots[index] = entry
            occupied += 1
        }
        count += 1
        if Double(occupied) > Double(slots.count) * Self.maximumLoad { rebuild() }
    }

    /// Forgets the hint for `digest` if it points at `rowID` (the row was deleted).
    mutating func remove(_ digest: Data, rowID: Int64) {
        guard let prefix = Self.prefix(digest), rowID > 0, rowID < Int64(UInt32.max) else { return }
        let entry = UInt64(prefix) << 32 | UInt64(rowID)
        let mask = slots.count - 1
        var index = Int(prefix) & mask
        while slots[index] != Self.empty {
            if slots[index] == entry {
                slots[index] = Self.tombstone
                count -= 1
                return
            }
            index = (index + 1) & mask
        }
    }

    /// Rehashes the live entries into a table sized for them (tombstones dropped).
    private mutating func rebuild() {
        let live = slots.filter { $0 != Self.empty && $0 != Self.tombstone }
        self = RowIDHints(expected: live.count + live.count / 2)
        let mask = slots.count - 1
        for entry in live {
            var index = Int(entry >> 32) & mask
            while slots[index] != Self.empty { index = (index + 1) & mask }
            slots[index] = entry
        }
        count = live.count
        occupied = live.count
    }

    /// Bytes held by the table.
    var memoryBytes: Int { slots.count * MemoryLayout<UInt64>.stride }
}
