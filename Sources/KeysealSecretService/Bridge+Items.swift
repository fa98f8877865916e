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

    static func query(collection: String?, account: String? = nil, pairs: [String: String]? = nil, returns: UInt8)
        -> ItemQuery
    {
        var attributes: [String: AttributeValue] = [:]
        if let collection { attributes[AttributeKey.service] = .string(servicePrefix + collection) }
        if let account { attributes[AttributeKey.account] = .string(account) }
        if let pairs, !pairs.isEmpty { attributes[AttributeKey.stringAttributes] = .data(StringAttributes.encode(pairs)) }
        return ItemQuery(
            itemClass: .genericPassword, attributes: attributes, limit: account == nil ? .all : .one,
            returns: ReturnOptions(rawValue: returns))
    }

    /// The bridge's items that hold `pairs`, in `collection` or (nil) in every collection: (unlocked, locked).
    /// A locked keychain cannot be searched (attributes are sealed): IsLocked.
    func search(_ pairs: [String: String], in collection: String?) throws -> ([String], [String]) {
        let records = try find(Self.query(collection: collection, pairs: pairs, returns: 2))
        return (records.compactMap(Self.path(of:)), [])
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
        let message = bus.currentMessage
        if !withData, let cached = recordCache, cached.message == message, cached.path == path { return cached.record }
        guard let record = try find(Self.query(collection: collection, account: account, returns: withData ? 3 : 2)).first
        else { throw noSuchObject(path) }
        if !withData { recordCache = (message, path, record) }
        return record
    }

    func createItem(
        in collection: String, properties: [String: PropertyValue], secret: WireSecretStruct, replace: Bool,
        sender: String
    ) throws -> String {
        var pairs: [String: String] = [:]
        if case .stringMap(let map)? = properties[Self.itemInterface + ".Attributes"] { pairs = map }
        var label = ""
        if case .string(let text)? = properties[Self.itemInterface + ".Label"] { label = text }
        let (value, contentType) = try decodeSecret(secret, sender: sender)
        if replace,
            let existing = try find(Self.query(collection: collection, pairs: pairs, returns: 2)).first(where: {
                (try? StringAttributes.pairs(Self.attributeValue($0.attributes[AttributeKey.stringAttributes])))
                    == pairs
            }),
            case .string(let account)? = existing.attributes[AttributeKey.account]
        {
            try update(collection, account, ItemChanges(
                attributes: [AttributeKey.label: .string(label), AttributeKey.description: .string(contentType)],
                data: value.data))
            itemChanged(collection, account)
            return Self.itemPath(collection, account)
        }
        let account = randomBytes(16).map { String($0, radix: 16).leftPadded(2) }.joined()
        let item = NewItem(
            itemClass: .genericPassword,
            attributes: [
                AttributeKey.service: .string(Self.servicePrefix + collection), AttributeKey.account: .string(account),
                AttributeKey.label: .string(label), AttributeKey.description: .string(contentType),
                AttributeKey.stringAttributes: .data(StringAttributes.encode(pairs)),
            ],
            accessibility: .whenUnlocked, data: value.data)
        do {
            _ = try sendItem(.add(item))
        } catch {
            throw Self.busError(error)
        }
        let path = Self.itemPath(collection, account)
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
            _ = try sendItem(.update(Self.query(collection: collection, account: account, returns: 0), changes))
        } catch {
            throw Self.busError(error, path: Self.itemPath(collection, account))
        }
    }

    func deleteItem(_ collection: String, _ account: String) throws {
        var query = Self.query(collection: collection, account: account, returns: 0)
        query.limit = .all
        do {
            _ = try sendItem(.delete(query))
        } catch {
            throw Self.busError(error, path: Self.itemPath(collection, account))
        }
        let path = Self.itemPath(collection, account)
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

    func secret(_ collection: String, _ account: String, session: String, sender: String) throws
        -> WireSecretStruct
    {
        _ = try self.session(session, sender: sender)
        let record = try record(collection, account, withData: true)
        let value = SecretBytes(copying: record.data ?? Data())
        var contentType = "text/plain"
        if case .string(let text)? = record.attributes[AttributeKey.description], !text.isEmpty { contentType = text }
        return try encodeSecret(value, contentType: contentType, session: session, sender: sender)
    }

    func getSecrets(_ items: [String], session: String, sender: String) throws -> ReplyBuilder {
        _ = try self.session(session, sender: sender)
        var secrets: [(String, WireSecretStruct)] = []
        for path in items {
            guard case .item(let collection, let account)? = object(path) else { continue }
            do {
                secrets.append((path, try secret(collection, account, session: session, sender: sender)))
            } catch let error as BusError where error.name == BusError.noSuchObject {
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
