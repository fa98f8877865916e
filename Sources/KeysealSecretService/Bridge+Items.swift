import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

extension SecretServiceBridge {
    // MARK: Items

    /// An item request, made for the D-Bus caller when keyseald accepts this bridge as vouching.
    func sendItem(_ request: WireRequest) throws(KeychainError) -> WireResponse {
        guard vouching, let pid = bus?.currentSenderPid() else { return try keyseal.send(request) }
        return try keyseal.send(.onBehalf(pid: pid, request))
    }

    /// A query for the bridge's items in `collection` (in its access group: ``collectionGroups``) or (nil) in every
    /// collection.
    func itemQuery(
        collection: String?,
        account: String? = nil,
        pairs: [String: String]? = nil,
        returns: UInt8
    )
        -> ItemQuery
    {
        var query = Self.baseQuery(collection: collection, account: account, pairs: pairs, returns: returns)
        query.accessGroup = collection.flatMap { collectionGroups[$0] }
        return query
    }

    static func baseQuery(
        collection: String?,
        account: String? = nil,
        pairs: [String: String]? = nil,
        returns: UInt8
    )
        -> ItemQuery
    {
        var attributes: [String: AttributeValue] = [:]
        if let collection { attributes[AttributeKey.service] = .string(servicePrefix + collection) }
        if let account { attributes[AttributeKey.account] = .string(account) }
        if let pairs, !pairs.isEmpty {
            attributes[AttributeKey.stringAttributes] = .data(StringAttributes.encode(pairs))
        }
        return ItemQuery(
            itemClass: .genericPassword,
            attributes: attributes,
            limit: account == nil ? .all : .one,
            returns: ReturnOptions(rawValue: returns)
        )
    }

    /// The bridge's items that hold `pairs`, in `collection` or (nil) in every collection: (unlocked, locked).
    /// keyseald searches while unlocked; while locked (attributes sealed) the items the bridge's index knows are
    /// answered as locked, so that the client can Unlock them (``lockedSearch(_:in:placeholder:)``).
    func search(_ pairs: [String: String], in collection: String?) throws -> ([String], [String]) {
        let records: [ItemRecord]
        do {
            records = try find(itemQuery(collection: collection, pairs: pairs, returns: 2))
        } catch let error as BusError where error.name == BusError.isLocked {
            return ([], lockedSearch(pairs, in: collection))
        }
        var paths: [String] = []
        paths.reserveCapacity(records.count)
        for record in records {
            adoptCollection(of: record)
            guard let path = Self.path(of: record) else { continue }
            remember(record)
            paths.append(path)
        }
        return (paths, [])
    }

    /// Registers the collection of an item found in an access group the bridge has no collection for yet.
    func adoptCollection(of record: ItemRecord) {
        guard case .string(let service)? = record.attributes[AttributeKey.service],
            service.hasPrefix(Self.servicePrefix)
        else { return }
        let name = String(service.dropFirst(Self.servicePrefix.count))
        guard !collections.contains(name), name == Self.sanitized(name),
            case .string(let group)? = record.attributes["agrp"]
        else { return }
        addCollection(name, group: group, label: group)
    }

    static func path(of record: ItemRecord) -> String? {
        guard case .string(let service)? = record.attributes[AttributeKey.service], service.hasPrefix(servicePrefix),
            case .string(let account)? = record.attributes[AttributeKey.account], isAccount(account)
        else { return nil }
        return itemPath(String(service.dropFirst(servicePrefix.count)), account)
    }

    /// Records matching `query`; none is an empty list.
    func find(_ query: ItemQuery) throws -> [ItemRecord] {
        do {
            guard case .records(let records) = try sendItem(.copyMatching(query)) else { return [] }
            return records
        } catch let error where error.status == -25300 {
            return []
        } catch {
            throw Self.busError(error)
        }
    }

    func record(_ collection: String, _ account: String, withData: Bool = false) throws -> ItemRecord {
        let path = Self.itemPath(collection, account)
        if !withData, let recent = recentRecord(path) { return recent }
        let message = bus.currentMessage
        if !withData, let cached = recordCache, cached.message == message, cached.path == path { return cached.record }
        guard
            let record = try find(itemQuery(collection: collection, account: account, returns: withData ? 3 : 2)).first
        else {
            // A placeholder for a search made while locked is a locked item until keyseald unlocks.
            if pendingSearches[path] != nil && lastLocked != false {
                throw BusError(BusError.isLocked, "the Keyseal keychain is locked; unlock it to read this item")
            }
            forget(path)
            throw noSuchObject(path)
        }
        if !withData { recordCache = (message, path, record) }
        remember(record)
        return record
    }

    /// The value of the item at `path` alone (found by its whole primary key: keyseald opens no attributes) and
    /// its content type from the attributes a search just read; both with one request otherwise.
    func secretValue(_ collection: String, _ account: String) throws -> (SecretBytes, String) {
        let path = Self.itemPath(collection, account)
        if let recent = recentRecord(path) {
            guard
                case .records(let records)? = try? sendItem(
                    .copyMatching(itemQuery(collection: collection, account: account, returns: 1))
                ),
                let data = records.first?.data
            else { return try secretValue(uncached: collection, account) }
            return (SecretBytes(copying: data), Self.contentType(recent))
        }
        return try secretValue(uncached: collection, account)
    }

    private func secretValue(uncached collection: String, _ account: String) throws -> (SecretBytes, String) {
        let record = try record(collection, account, withData: true)
        return (SecretBytes(copying: record.data ?? Data()), Self.contentType(record))
    }

    static func contentType(_ record: ItemRecord) -> String {
        if case .string(let text)? = record.attributes[AttributeKey.description], !text.isEmpty { return text }
        return "text/plain"
    }

    func createItem(
        in collection: String,
        properties: [String: PropertyValue],
        secret: WireSecretStruct,
        replace: Bool,
        sender: String
    ) throws -> String {
        var pairs: [String: String] = [:]
        if case .stringMap(let map)? = properties[Self.itemInterface + ".Attributes"] { pairs = map }
        // An item without a schema is a generic one, as gnome-keyring stamps it: a lookup with that schema (which
        // libsecret makes a search pair) finds it on either.
        if pairs[Self.schemaAttribute] == nil { pairs[Self.schemaAttribute] = Self.genericSchema }
        var label = ""
        if case .string(let text)? = properties[Self.itemInterface + ".Label"] { label = text }
        let (value, contentType) = try decodeSecret(secret, sender: sender)
        let account = randomBytes(16).map { String($0, radix: 16).leftPadded(2) }.joined()
        let item = NewItem(
            itemClass: .genericPassword,
            attributes: [
                AttributeKey.service: .string(Self.servicePrefix + collection), AttributeKey.account: .string(account),
                AttributeKey.label: .string(label), AttributeKey.description: .string(contentType),
                AttributeKey.stringAttributes: .data(StringAttributes.encode(pairs)),
            ],
            accessGroup: collectionGroups[collection],
            accessibility: .whenUnlocked,
            data: value.data
        )
        // With replace, keyseald finds the item whose attributes are exactly these and replaces it, or adds this one,
        // in one step: two clients storing the same attributes at once leave one item.
        let replaced: String?
        do throws(KeychainError) {
            guard replace else {
                _ = try sendItem(.add(item))
                return added(collection, account, pairs)
            }
            let response = try sendItem(.addReplacingAttributes(item))
            guard case .records(let records) = response, records.count <= 1 else {
                throw KeychainError(status: KeychainStatus.decode, message: "unexpected response from keyseald")
            }
            replaced = try records.first.map(Wire.replacedAccount)
        } catch {
            throw Self.busError(error)
        }
        guard let replaced else { return added(collection, account, pairs) }
        let path = Self.itemPath(collection, replaced)
        // Its string attributes are these; its label, content type and value are new (read again when asked for).
        if sharesItemKnowledge {
            index[path] = IndexedItem(collection: collection, digests: digests(pairs), record: nil, readAt: 0)
        }
        itemChanged(collection, replaced)
        return path
    }

    /// Records a new item of `collection` and announces it.
    private func added(_ collection: String, _ account: String, _ pairs: [String: String]) -> String {
        let path = Self.itemPath(collection, account)
        if sharesItemKnowledge {
            index[path] = IndexedItem(collection: collection, digests: digests(pairs), record: nil, readAt: 0)
        }
        bus.emit(path: Self.collectionPath(collection), interface: Self.collectionInterface, member: "ItemCreated") {
            writer in try writer.objectPath(path)
        }
        bus.propertiesChanged(path: Self.collectionPath(collection), interface: Self.collectionInterface, ["Items"])
        return path
    }

    static func attributeValue(_ value: AttributeValue?) -> AttributeValue? {
        if case .data(let data)? = value { return .data(data) }
        return nil
    }

    func update(_ collection: String, _ account: String, _ changes: ItemChanges) throws {
        do {
            _ = try sendItem(.update(itemQuery(collection: collection, account: account, returns: 0), changes))
        } catch {
            throw Self.busError(error, path: Self.itemPath(collection, account))
        }
        let path = Self.itemPath(collection, account)
        if let record = index[path]?.record, index[path]?.digests == nil {
            index[path]?.digests = digests(Self.pairs(record))
        }
        index[path]?.record = nil
        if let changed = changes.attributes[AttributeKey.stringAttributes],
            let pairs = try? StringAttributes.pairs(Self.attributeValue(changed))
        {
            index[path]?.digests = digests(pairs)
        }
    }

    func deleteItem(_ collection: String, _ account: String) throws {
        var query = itemQuery(collection: collection, account: account, returns: 0)
        query.limit = .all
        do {
            _ = try sendItem(.delete(query))
        } catch {
            throw Self.busError(error, path: Self.itemPath(collection, account))
        }
        let path = Self.itemPath(collection, account)
        forget(path)
        bus.emit(path: Self.collectionPath(collection), interface: Self.collectionInterface, member: "ItemDeleted") {
            writer in try writer.objectPath(path)
        }
        bus.propertiesChanged(path: Self.collectionPath(collection), interface: Self.collectionInterface, ["Items"])
    }

    func itemChanged(_ collection: String, _ account: String) {
        let path = Self.itemPath(collection, account)
        bus.emit(path: Self.collectionPath(collection), interface: Self.collectionInterface, member: "ItemChanged") {
            writer in try writer.objectPath(path)
        }
    }

    func secret(
        _ collection: String,
        _ account: String,
        session: String,
        sender: String
    ) throws
        -> WireSecretStruct
    {
        _ = try self.session(session, sender: sender)
        let (value, contentType) = try secretValue(collection, account)
        return try encodeSecret(value, contentType: contentType, session: session, sender: sender)
    }

    func getSecrets(_ items: [String], session: String, sender: String) throws -> ReplyBuilder {
        _ = try self.session(session, sender: sender)
        var secrets: [(String, WireSecretStruct)] = []
        for path in items {
            guard case .item(let collection, let account)? = object(path) else { continue }
            do {
                secrets.append((path, try secret(collection, account, session: session, sender: sender)))
            } catch let error as BusError where error.name == BusError.unknownMethod {
                continue
            }
        }
        return { writer in
            try writer.open("a", "{o(oayays)}")
            for (path, secret) in secrets {
                try writer.open("e", "o(oayays)")
                try writer.objectPath(path)
                try writer.secret(secret)
                try writer.close()
            }
            try writer.close()
        }
    }
}
