import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

extension SecretServiceBridge {
    // MARK: - Methods

    func call(_ message: MessageReader, path: String, interface: String, member: String) throws -> ReplyBuilder {
        switch (interface, member) {
        case (Self.serviceInterface, "OpenSession"): return try openSession(message)
        case (Self.serviceInterface, "SearchItems"):
            let (unlocked, locked) = try search(try message.stringMap(), in: nil)
            return { writer in
                try writer.objectPaths(unlocked)
                try writer.objectPaths(locked)
            }
        case (Self.serviceInterface, "Unlock"):
            return try unlock(try message.objectPaths(), sender: Self.sender(message))
        case (Self.serviceInterface, "Lock"): return try lock(try message.objectPaths())
        case (Self.serviceInterface, "GetSecrets"):
            let items = try message.objectPaths()
            let session = try message.objectPath()
            return try getSecrets(items, session: session, sender: Self.sender(message))
        case (Self.serviceInterface, "ReadAlias"):
            let name = try message.string()
            let target = aliases[name].map(Self.collectionPath) ?? "/"
            return { writer in try writer.objectPath(target) }
        case (Self.serviceInterface, "SetAlias"):
            let name = try message.string()
            let target = try message.objectPath()
            try setAlias(name, target)
            return { _ in }
        case (Self.serviceInterface, "CreateCollection"):
            let properties = try message.properties()
            let alias = try message.string()
            let created = try createCollection(properties, alias: alias)
            return { writer in
                try writer.objectPath(created)
                try writer.objectPath("/")
            }
        case (Self.collectionInterface, "SearchItems"):
            guard case .collection(let name)? = object(path) else { throw noSuchObject(path) }
            let (unlocked, locked) = try search(try message.stringMap(), in: name)
            return { writer in try writer.objectPaths(unlocked + locked) }
        case (Self.collectionInterface, "CreateItem"):
            guard case .collection(let name)? = object(path) else { throw noSuchObject(path) }
            let properties = try message.properties()
            let secret = try message.secret()
            let replace = try message.bool()
            let item = try createItem(
                in: name,
                properties: properties,
                secret: secret,
                replace: replace,
                sender: Self.sender(message)
            )
            return { writer in
                try writer.objectPath(item)
                try writer.objectPath("/")
            }
        case (Self.collectionInterface, "Delete"):
            guard case .collection(let name)? = object(path) else { throw noSuchObject(path) }
            try deleteCollection(name)
            return { writer in try writer.objectPath("/") }
        case (Self.itemInterface, "Delete"):
            guard case .item(let collection, let account)? = object(path) else { throw noSuchObject(path) }
            try deleteItem(collection, account)
            return { writer in try writer.objectPath("/") }
        case (Self.itemInterface, "GetSecret"):
            guard case .item(let collection, let account)? = object(path) else { throw noSuchObject(path) }
            let session = try message.objectPath()
            let secret = try secret(collection, account, session: session, sender: Self.sender(message))
            return { writer in try writer.secret(secret) }
        case (Self.itemInterface, "SetSecret"):
            guard case .item(let collection, let account)? = object(path) else { throw noSuchObject(path) }
            let secret = try message.secret()
            let (value, contentType) = try decodeSecret(secret, sender: Self.sender(message))
            try update(
                collection,
                account,
                ItemChanges(
                    attributes: [AttributeKey.description: .string(contentType)],
                    data: value.data
                )
            )
            itemChanged(collection, account)
            return { _ in }
        case (Self.sessionInterface, "Close"):
            try closeSession(path, sender: Self.sender(message))
            return { _ in }
        case (Self.promptInterface, "Prompt"):
            try runPrompt(path)
            return { _ in }
        case (Self.portalInterface, "RetrieveSecret"): return try retrieveSecret(message)
        case (Self.promptInterface, "Dismiss"):
            dismissPrompt(path)
            return { _ in }
        default:
            throw BusError(BusError.notSupported, "\(interface).\(member) is not supported")
        }
    }

    static func sender(_ message: MessageReader) -> String { BusConnection.sender(message) }

    /// An object that does not exist (an item deleted, a path never served): answered as gnome-keyring does.
    func noSuchObject(_ path: String) -> BusError { BusError.unknownObject(path) }
}
