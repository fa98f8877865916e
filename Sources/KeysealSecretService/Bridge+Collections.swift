import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

extension SecretServiceBridge {
    // MARK: Collections

    /// A collection is one of the caller's access groups: CreateCollection's label names the group (an existing
    /// collection of that group is returned). keyseald decides whether the caller holds it: a group its policy does
    /// not grant is refused with AccessDenied and no collection is made.
    func createCollection(_ properties: [String: PropertyValue], alias: String) throws -> String {
        if !alias.isEmpty, let existing = aliases[alias] { return Self.collectionPath(existing) }
        guard case .string(let group)? = properties[Self.collectionInterface + ".Label"], !group.isEmpty else {
            throw BusError(
                BusError.invalidArgs,
                "a collection is one of your access groups: give its name as the collection's Label"
            )
        }
        if let name = collectionGroups.first(where: { $0.value == group })?.key {
            if !alias.isEmpty { aliases[Self.sanitized(alias)] = name }
            return Self.collectionPath(name)
        }
        try requireGranted(group)
        var name = Self.sanitized(group)
        if collections.contains(name) {
            var suffix = 1
            while collections.contains("\(name)_\(suffix)") { suffix += 1 }
            name = "\(name)_\(suffix)"
        }
        addCollection(name, group: group, label: group)
        if !alias.isEmpty { aliases[Self.sanitized(alias)] = name }
        let path = Self.collectionPath(name)
        bus.emit(path: Self.root, interface: Self.serviceInterface, member: "CollectionCreated") {
            writer in try writer.objectPath(path)
        }
        bus.propertiesChanged(path: Self.root, interface: Self.serviceInterface, ["Collections"])
        return path
    }

    func addCollection(_ name: String, group: String, label: String) {
        collections.append(name)
        collectionGroups[name] = group
        labels[name] = label
    }

    /// Throws AccessDenied unless keyseald grants `group` to the caller (a search in it is refused with -34018
    /// otherwise; not found and locked mean it is granted).
    func requireGranted(_ group: String) throws {
        var query = Self.baseQuery(collection: nil, returns: 2)
        query.accessGroup = group
        query.limit = .one
        do {
            _ = try sendItem(.copyMatching(query))
        } catch let error where error.status == -34018 {
            throw BusError(
                BusError.accessDenied,
                "keyseald's policy does not grant the access group \(group) to this caller; a collection is one of "
                    + "the caller's access groups"
            )
        } catch let error where error.status == -25300 || error.status == -25308 {
        } catch {
            throw Self.busError(error)
        }
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
        var query = itemQuery(collection: name, returns: 0)
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
        collectionGroups[name] = nil
        labels[name] = nil
        index = index.filter { $0.value.collection != name }
        for (alias, target) in aliases where target == name { aliases[alias] = alias == "default" ? "login" : nil }
        let path = Self.collectionPath(name)
        bus.emit(path: Self.root, interface: Self.serviceInterface, member: "CollectionDeleted") {
            writer in try writer.objectPath(path)
        }
        bus.propertiesChanged(path: Self.root, interface: Self.serviceInterface, ["Collections"])
    }
}
