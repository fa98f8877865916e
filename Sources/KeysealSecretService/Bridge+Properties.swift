import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

extension SecretServiceBridge {
    // MARK: Properties

    func property(path: String, interface: String, name: String, into reply: MessageWriter) throws {
        switch (object(path), interface, name) {
        case (_, Self.portalInterface, "version"): try reply.uint32(1)
        case (_, Self.serviceInterface, "Collections"):
            try reply.objectPaths(collections.map(Self.collectionPath))
        case (.collection(let collection)?, _, "Items"):
            // While locked: the items the index knows (none without one); Locked says why.
            let paths: [String]
            if lastLocked == true {
                paths = lockedSearch([:], in: collection, placeholder: false)
            } else {
                paths = (try? search([:], in: collection)).map { $0.0 + $0.1 } ?? []
            }
            try reply.objectPaths(paths)
        case (.collection(let collection)?, _, "Label"): try reply.string(labels[collection] ?? collection)
        // The lock state as keyseald's lock-state subscription last announced it (no request per read).
        case (.collection?, _, "Locked"), (.item?, _, "Locked"): try reply.bool(lastLocked ?? isLocked())
        case (.collection?, _, "Created"), (.collection?, _, "Modified"): try reply.uint64(0)
        case (.item(let collection, let account)?, _, let property):
            // While locked an item's attributes are sealed: it shows an empty label and attributes (Locked says
            // why) and announces its properties once unlocked; its secret stays IsLocked.
            let record: ItemRecord
            do {
                record = try self.record(collection, account)
            } catch let error as BusError where error.name == BusError.isLocked {
                record = ItemRecord(itemClass: .genericPassword, attributes: [:])
            }
            switch property {
            case "Attributes":
                try reply.stringMap(
                    (try? StringAttributes.pairs(Self.attributeValue(record.attributes[AttributeKey.stringAttributes])))
                        ?? [:]
                )
            case "Label":
                if case .string(let label)? = record.attributes[AttributeKey.label] {
                    try reply.string(label)
                } else {
                    try reply.string("")
                }
            case "Type":
                let pairs =
                    (try? StringAttributes.pairs(Self.attributeValue(record.attributes[AttributeKey.stringAttributes])))
                    ?? [:]
                try reply.string(pairs[Self.schemaAttribute] ?? Self.genericSchema)
            case "Created", "Modified":
                let key = property == "Created" ? AttributeKey.creationDate : AttributeKey.modificationDate
                var seconds: UInt64 = 0
                if case .date(let date)? = record.attributes[key] {
                    seconds = UInt64(max(0, date.timeIntervalSince1970))
                }
                try reply.uint64(seconds)
            default: throw BusError(BusError.invalidArgs, "no property \(property)")
            }
        default:
            throw noSuchObject(path)
        }
    }

    func setProperty(path: String, interface: String, name: String, from value: MessageReader) throws {
        switch (object(path), name) {
        case (.collection(let collection)?, "Label"):
            labels[collection] = try value.string()
        case (.item(let collection, let account)?, "Label"):
            try update(collection, account, ItemChanges(attributes: [AttributeKey.label: .string(try value.string())]))
            itemChanged(collection, account)
        case (.item(let collection, let account)?, "Attributes"):
            let pairs = try value.stringMap()
            try update(
                collection,
                account,
                ItemChanges(attributes: [AttributeKey.stringAttributes: .data(StringAttributes.encode(pairs))])
            )
            itemChanged(collection, account)
        default:
            throw BusError(BusError.invalidArgs, "\(name) cannot be set on \(path)")
        }
    }
}
