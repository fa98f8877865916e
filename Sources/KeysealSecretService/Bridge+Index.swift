import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

/// One item as the bridge last saw it: its attributes (never its secret; dropped when the keychain locks) or, while
/// locked, its keyed pair digests (made from the attributes as they are dropped).
struct IndexedItem {
    var collection: String
    /// nil while `record` holds the attributes they are made from.
    var digests: Set<Data>?
    var record: ItemRecord?
    /// When `record` was read (CLOCK_MONOTONIC, nanoseconds).
    var readAt: UInt64
}

extension SecretServiceBridge {
    // MARK: Index

    /// How long an item's attributes read by one request answer the property reads that follow it (libsecret reads
    /// an item's properties right after the search that found it). Changes made through the bridge update them at
    /// once; this bounds how long a change made by another keyseald client can go unseen.
    static let metadataLifetimeNanoseconds: UInt64 = 2_000_000_000

    /// Whether item knowledge may be shared between requests: not when the bridge vouches for its callers, whose
    /// access groups differ.
    var sharesItemKnowledge: Bool { !vouching }

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    func digests(_ pairs: [String: String]) -> Set<Data> {
        Set(pairs.map { digester.digest(name: $0.key, value: $0.value) })
    }

    /// Records what a request read of `record` (its attributes; never its value).
    func remember(_ record: ItemRecord) {
        guard sharesItemKnowledge, let path = Self.path(of: record), case .item(let collection, _)? = object(path)
        else { return }
        var attributes = record
        attributes.data = nil
        index[path] = IndexedItem(collection: collection, digests: nil, record: attributes, readAt: Self.now())
    }

    static func pairs(_ record: ItemRecord) -> [String: String] {
        (try? StringAttributes.pairs(attributeValue(record.attributes[AttributeKey.stringAttributes]))) ?? [:]
    }

    func forget(_ path: String) { index[path] = nil }

    /// The attributes of the item at `path` read within ``metadataLifetimeNanoseconds``, if any.
    func recentRecord(_ path: String) -> ItemRecord? {
        guard sharesItemKnowledge, let entry = index[path], let record = entry.record,
            Self.now() &- entry.readAt < Self.metadataLifetimeNanoseconds
        else { return nil }
        return record
    }

    /// Lists every item of the caller once (at start and after each unlock): the collections of access groups that
    /// hold items, and the index a search while locked answers from.
    func rebuildIndex() {
        var query = Self.baseQuery(collection: nil, returns: 2)
        query.limit = .all
        guard let records = try? find(query) else { return }
        var fresh: [String: IndexedItem] = [:]
        let now = Self.now()
        for record in records {
            guard case .string(let service)? = record.attributes[AttributeKey.service],
                service.hasPrefix(Self.servicePrefix),
                let path = Self.path(of: record)
            else { continue }
            let name = String(service.dropFirst(Self.servicePrefix.count))
            if !collections.contains(name), name == Self.sanitized(name),
                case .string(let group)? = record.attributes["agrp"]
            {
                addCollection(name, group: group, label: group)
            }
            guard sharesItemKnowledge, collections.contains(name) else { continue }
            var attributes = record
            attributes.data = nil
            fresh[path] = IndexedItem(collection: name, digests: nil, record: attributes, readAt: now)
        }
        index = fresh
        indexComplete = sharesItemKnowledge
    }

    /// The keychain locked: every item's attributes are let go, and their pairs' digests kept.
    func dropMetadata() {
        recordCache = nil
        for (path, entry) in index {
            guard let record = entry.record else { continue }
            index[path]?.digests = entry.digests ?? digests(Self.pairs(record))
            index[path]?.record = nil
        }
    }

    /// The items that hold `pairs` as the index knows them, for a search while locked. Without a complete index
    /// (the bridge has not seen the keychain unlocked, or it vouches for its callers) a search (`placeholder`)
    /// answers one locked placeholder item, so that the client asks to unlock (``pendingSearch(_:in:)``); a read of
    /// a collection's Items answers none.
    func lockedSearch(_ pairs: [String: String], in collection: String?, placeholder: Bool = true) -> [String] {
        guard indexComplete else { return placeholder ? [pendingSearch(pairs, in: collection)] : [] }
        let wanted = digests(pairs)
        return index.filter { path, entry in
            (collection == nil || entry.collection == collection)
                && wanted.isSubset(of: entry.digests ?? entry.record.map { digests(Self.pairs($0)) } ?? [])
                && object(path) != nil
        }.map(\.key).sorted()
    }

    /// A locked item standing for a search made while the keychain is locked and its items' attributes sealed: it
    /// is an item path of the searched collection (login for the service's search) with an account no item has.
    /// Once keyseald is unlocked, the path is the search's first match (keyseald searches as the caller), or no
    /// object at all when nothing matches, so that the client's GetSecrets after its Unlock reads the item it
    /// searched for. The newest ``pendingSearchLimit`` are kept.
    func pendingSearch(_ pairs: [String: String], in collection: String?) -> String {
        let account = randomBytes(16).map { String($0, radix: 16).leftPadded(2) }.joined()
        let path = Self.itemPath(collection ?? "login", account)
        pendingSearches[path] = PendingSearch(collection: collection, pairs: pairs)
        pendingOrder.append(path)
        while pendingOrder.count > Self.pendingSearchLimit { pendingSearches[pendingOrder.removeFirst()] = nil }
        return path
    }

    /// What the placeholder at `path` stands for once unlocked: its search's first match; nil while locked or when
    /// nothing matches (or `path` is no placeholder).
    func resolvePending(_ path: String) -> Object? {
        guard let entry = pendingSearches[path] else { return nil }
        if let target = entry.resolved { return object(target) }
        guard lastLocked == false,
            let record = try? find(itemQuery(collection: entry.collection, pairs: entry.pairs, returns: 2)).first,
            let target = Self.path(of: record)
        else { return nil }
        adoptCollection(of: record)
        remember(record)
        // A vouching bridge's callers differ in what they may see: it searches again for each.
        if sharesItemKnowledge { pendingSearches[path]?.resolved = target }
        return object(target)
    }
}

/// A search answered while locked by a placeholder (``SecretServiceBridge/pendingSearch(_:in:)``).
struct PendingSearch {
    var collection: String?
    var pairs: [String: String]
    var resolved: String?
}
