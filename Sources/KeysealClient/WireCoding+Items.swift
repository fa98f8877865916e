import FoundationEssentials

// The item family: add, add replacing by attributes, copy-matching, update and delete, and the records they are
// answered with. Each payload's encoding (a `WireWriter` method) stands beside its decoding (the `WireReader`
// method of the same name).

// MARK: - add and addReplacingAttributes: a new item

extension WireWriter {
    /// Throws errSecDataTooLarge for a value over the limit.
    mutating func newItem(_ item: NewItem) throws(KeychainError) {
        try WireRequest.checkValue(item.data)
        shortString(item.itemClass.rawValue)
        attributes(item.attributes)
        optional(item.accessGroup) { $0.string($1) }
        shortString(item.accessibility.rawValue)
        optional(item.accessControlFlags) { $0.u64(UInt64($1)) }
        bool(item.synchronizable)
        blob(item.data)
        u8(item.returns.rawValue)
    }
}

extension WireReader {
    mutating func newItem() throws(KeychainError) -> NewItem {
        let itemClass = try self.itemClass()
        let attributes = try self.attributes()
        let group = try optional { r throws(KeychainError) in try r.string() }
        let accessibility = try self.accessibility()
        let flags = try accessControlFlags()
        let sync = try bool()
        let data = try self.data()
        let returns = try u8()
        return NewItem(
            itemClass: itemClass,
            attributes: attributes,
            accessGroup: group,
            accessibility: accessibility,
            accessControlFlags: flags,
            synchronizable: sync,
            data: data,
            returns: ReturnOptions(rawValue: returns)
        )
    }
}

// MARK: - A query (copyMatching, delete, update, certificates)

extension WireWriter {
    /// The class, the attributes, the optional access group and accessibility, the synchronizable match (0 no,
    /// 1 yes, 2 any), the optional persistent reference, the limit (0 one, 1 all, 2 and a count), whether a limit
    /// was given, and the return options.
    mutating func query(_ query: ItemQuery) {
        shortString(query.itemClass.rawValue)
        attributes(query.attributes)
        optional(query.accessGroup) { $0.string($1) }
        optional(query.accessibility) { $0.shortString($1.rawValue) }
        switch query.synchronizable {
        case .no: u8(0)
        case .yes: u8(1)
        case .any: u8(2)
        }
        optional(query.persistentRef) { $0.blob($1) }
        switch query.limit {
        case .one: u8(0)
        case .all: u8(1)
        case .count(let n):
            u8(2)
            int(n)
        }
        bool(query.limitGiven)
        u8(query.returns.rawValue)
    }
}

extension WireReader {
    mutating func query() throws(KeychainError) -> ItemQuery {
        let itemClass = try self.itemClass()
        let attributes = try self.attributes()
        let group = try optional { r throws(KeychainError) in try r.string() }
        let accessibility = try optional { r throws(KeychainError) in try r.accessibility() }
        let sync: SyncMatch
        switch try u8() {
        case 0: sync = .no
        case 1: sync = .yes
        case 2: sync = .any
        default: throw Self.malformed("bad synchronizable match")
        }
        let persistentRef = try optional { r throws(KeychainError) in try r.data() }
        let limit: MatchLimit
        switch try u8() {
        case 0: limit = .one
        case 1: limit = .all
        case 2:
            let count = try int()
            guard count >= 1 else { throw KeychainError(KeychainStatus.param, "the match limit must be positive") }
            limit = .count(count)
        default: throw Self.malformed("bad match limit")
        }
        let limitGiven = try bool()
        let returns = try u8()
        return ItemQuery(
            itemClass: itemClass,
            attributes: attributes,
            accessGroup: group,
            accessibility: accessibility,
            synchronizable: sync,
            persistentRef: persistentRef,
            limit: limit,
            limitGiven: limitGiven,
            returns: ReturnOptions(rawValue: returns)
        )
    }
}

// MARK: - update: the query, then the changes (each optional but the attributes)

extension WireWriter {
    /// Throws errSecDataTooLarge for a value over the limit.
    mutating func update(_ query: ItemQuery, _ changes: ItemChanges) throws(KeychainError) {
        try WireRequest.checkValue(changes.data)
        self.query(query)
        attributes(changes.attributes)
        optional(changes.accessGroup) { $0.string($1) }
        optional(changes.accessibility) { $0.shortString($1.rawValue) }
        optional(changes.accessControlFlags) { $0.u64(UInt64($1)) }
        optional(changes.synchronizable) { $0.bool($1) }
        optional(changes.data) { $0.blob($1) }
    }
}

extension WireReader {
    mutating func update() throws(KeychainError) -> WireRequest {
        let query = try self.query()
        let attributes = try self.attributes()
        let group = try optional { r throws(KeychainError) in try r.string() }
        let accessibility = try optional { r throws(KeychainError) in try r.accessibility() }
        let flags = try accessControlFlags()
        let sync = try optional { r throws(KeychainError) in try r.bool() }
        let data = try optional { r throws(KeychainError) in try r.data() }
        return .update(
            query,
            ItemChanges(
                attributes: attributes,
                accessGroup: group,
                accessibility: accessibility,
                accessControlFlags: flags,
                synchronizable: sync,
                data: data
            )
        )
    }
}

// MARK: - records: a u32 count and the records

extension WireWriter {
    mutating func records(_ records: [ItemRecord]) {
        u32(UInt32(clamping: records.count))
        for record in records { self.record(record) }
    }
}

extension WireReader {
    mutating func records() throws(KeychainError) -> [ItemRecord] {
        let count = Int(try u32())
        // A record takes at least 6 bytes: a count the frame cannot hold is rejected before allocating.
        guard count * 6 <= remaining else { throw Self.malformed("record count exceeds the frame") }
        var records: [ItemRecord] = []
        records.reserveCapacity(count)
        for _ in 0..<count { records.append(try record()) }
        return records
    }
}

// MARK: - A record: the class, the attributes, the optional value, persistent reference and key reference

extension WireWriter {
    mutating func record(_ record: ItemRecord) {
        shortString(record.itemClass.rawValue)
        attributes(record.attributes)
        optional(record.data) { $0.blob($1) }
        optional(record.persistentRef) { $0.blob($1) }
        optional(record.keyPersistentRef) { $0.blob($1) }
    }
}

extension WireReader {
    mutating func record() throws(KeychainError) -> ItemRecord {
        let itemClass = try self.itemClass()
        let attributes = try self.attributes()
        let data = try optional { r throws(KeychainError) in try r.data() }
        let persistentRef = try optional { r throws(KeychainError) in try r.data() }
        return ItemRecord(
            itemClass: itemClass,
            attributes: attributes,
            data: data,
            persistentRef: persistentRef,
            keyPersistentRef: try optional { r throws(KeychainError) in try r.data() }
        )
    }
}
