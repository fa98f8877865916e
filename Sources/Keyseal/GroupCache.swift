import KeysealCore

/// The access groups known to hold items of each class: what a lookup that names no group searches, one primary-key
/// digest per group. Kept sorted, so that a lookup reads the list as it is (no set is sorted per call).
///
/// A superset is harmless (a group without the item finds no row); a missing group would hide its items. So a class's
/// list is read from the store once, and afterwards every write that stores a class's item in a group adds the group;
/// a write before that read adds nothing (the read will see the row).
struct GroupCache {
    private var lists: [ItemClass: [String]] = [:]

    /// The known groups of `itemClass`, sorted; nil when none were recorded or loaded yet.
    func groups(_ itemClass: ItemClass) -> [String]? { lists[itemClass] }

    /// Records that an item of `itemClass` is stored in `group`; nothing while the class's list is not loaded.
    mutating func insert(_ group: String, for itemClass: ItemClass) {
        guard var list = lists[itemClass] else { return }
        // Binary search: the list stays sorted and unique.
        var low = 0
        var high = list.count
        while low < high {
            let middle = (low + high) / 2
            if list[middle] < group { low = middle + 1 } else { high = middle }
        }
        guard low == list.count || list[low] != group else { return }
        list.insert(group, at: low)
        lists[itemClass] = list
    }

    mutating func insert(contentsOf groups: some Sequence<String>, for itemClass: ItemClass) {
        for group in groups { insert(group, for: itemClass) }
    }

    /// Replaces what is known of `itemClass` with `groups` (read from the store).
    mutating func set(_ groups: [String], for itemClass: ItemClass) {
        lists[itemClass] = Array(Set(groups)).sorted()
    }
}
