import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

extension SecretServiceBridge {
    // MARK: Collections

    func createCollection(_ properties: [String: PropertyValue], alias: String) throws -> String {
        if !alias.isEmpty, let existing = aliases[alias] { return Self.collectionPath(existing) }
        var label = "collection"
        if case .string(let text)? = properties[Self.collectionInterface + ".Label"], !text.isEmpty { label = text }
        var name = Self.sanitized(label)
        if collections.contains(name) {
            var suffix = 1
            while collections.contains("\(name)_\(suffix)") { suffix += 1 }
            name = "\(name)_\(suffix)"
        }
        collections.append(name)
        labels[name] = label
        if !alias.isEmpty { aliases[Self.sanitized(alias)] = name }
        let path = Self.collectionPath(name)
        bus.emit(path: Self.root, interface: Self.serviceInterface, member: "CollectionCreated") {
            writer in try writer.objectPath(path)
        }
        bus.propertiesChanged(path: Self.root, interface: Self.serviceInterface, ["Collections"])
        return path
    }

    /// A name that is a valid object path element: [A-Za-z0-9_], at most 64 bytes, never empty.
    static func sanitized(_ text: String) -> String {
        let mapped = text.utf8.prefix(64).map { byte -> Character in
            switch byte {
            case 48...57, 65...90, 97...122: Character(Unicode.Scalar(byte))
            default: "_"
            }
        }
        return mapped.isEmpty ? "_" : String(mapped)
    }

    func setAlias(_ name: String, _ target: String) throws {
        let alias = Self.sanitized(name)
        if target == "/" {
            guard alias != "default" else {
                throw BusError(BusError.notSupported, "the default alias is always present")
            }
            aliases[alias] = nil
            return
        }
        guard case .collection(let collection)? = object(target) else { throw noSuchObject(target) }
        aliases[alias] = collection
    }

    func deleteCollection(_ name: String) throws {
        var query = Self.query(collection: name, returns: 0)
        query.limit = .all
        do {
            _ = try sendItem(.delete(query))
        } catch let error where error.status == -25300 {
        } catch {
            throw Self.busError(error)
        }
        bus.propertiesChanged(path: Self.collectionPath(name), interface: Self.collectionInterface, ["Items"])
        guard name != "login", name != "session" else { return }
        collections.removeAll { $0 == name }
        for (alias, target) in aliases where target == name { aliases[alias] = alias == "default" ? "login" : nil }
        let path = Self.collectionPath(name)
        bus.emit(path: Self.root, interface: Self.serviceInterface, member: "CollectionDeleted") {
            writer in try writer.objectPath(path)
        }
        bus.propertiesChanged(path: Self.root, interface: Self.serviceInterface, ["Collections"])
    }
}
