import KeysealCore

/// The access groups known to hold items of each class: what a lookup that names no group searches, one primary-key
/// digest per group. Kept sorted, so that a lookup reads the list as it is (no set is sorted per call).
///
/// A superset is harmless (a group without the item finds no row); a missing group would hide its items. So a class's
/// list is read from the store once, and afterwards every write that stores a class's item in a group adds the group;
/// a write before that read adds nothing (the read will see the row).
///
/// Groups are compared by their UTF-8 bytes, as the store and the digests tell them apart: two spellings of the same
/// text (composed and decomposed accents) are two groups, which Swift's `==` on strings would merge.
struct GroupCache {
    private var lists: [ItemClass: [String]] = [:]

    /// The known groups of `itemClass`, in byte order; nil when none were recorded or loaded yet.
    func groups(_ itemClass: ItemClass) -> [String]? { lists[itemClass] }

    /// Records that an item of `itemClass` is stored in `group`; nothing while the class's list is not loaded.
    mutating func insert(_ group: String, for itemClass: ItemClass) {
        guard var list = lists[itemClass] else { return }
        // Binary search: the list stays sorted and unique by bytes.
        var low = 0
        var high = list.count
        while low < high {
            let middle = (low + high) / 2
            if Self.precedes(list[middle], group) { low = middle + 1 } else { high = middle }
        }
        guard low == list.count || !list[low].utf8.elementsEqual(group.utf8) else { return }
        list.insert(group, at: low)
        lists[itemClass] = list
    }

    mutating func insert(contentsOf groups: some Sequence<String>, for itemClass: ItemClass) {
        for group in groups { insert(group, for: itemClass) }
    }

    /// Replaces what is known of `itemClass` with `groups` (read from the store).
    mutating func set(_ groups: [String], for itemClass: ItemClass) {
        lists[itemClass] = []
        insert(contentsOf: groups, for: itemClass)
    }

    private static func precedes(_ lhs: String, _ rhs: String) -> Bool {
        lhs.utf8.lexicographicallyPrecedes(rhs.utf8)
    }
}
