import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

extension SecretServiceBridge {
    // MARK: - Paths

    enum Object {
        case collection(String)
        case item(collection: String, account: String)
        case session(String)
        case prompt(String)
    }

    /// What `path` names, aliases resolved; nil for anything this service does not serve.
    func object(_ path: String) -> Object? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // "", "org", "freedesktop", "secrets", kind, name[, item]
        guard parts.count >= 6, parts[0..<4] == ["", "org", "freedesktop", "secrets"] else { return nil }
        switch (parts[4], parts.count) {
        case ("collection", 6) where collections.contains(parts[5]): return .collection(parts[5])
        case ("collection", 7) where collections.contains(parts[5]) && Self.isAccount(parts[6]):
            return resolvePending(path) ?? .item(collection: parts[5], account: parts[6])
        case ("aliases", 6): return aliases[parts[5]].map { .collection($0) }
        case ("session", 6) where sessions[path] != nil: return .session(path)
        case ("prompt", 6) where prompts[path] != nil: return .prompt(path)
        default: return nil
        }
    }

    static func isAccount(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    static func collectionPath(_ name: String) -> String { collectionPrefix + "/" + name }
    static func itemPath(_ collection: String, _ account: String) -> String {
        collectionPrefix + "/" + collection + "/" + account
    }

    func serves(path: String, interface: String) -> Bool {
        switch object(path) {
        case nil: return path == Self.root || path == Self.portalPath
        case .item(let collection, let account)? where interface != Self.itemInterface:
            // The item's own handlers answer for an item that does not exist; a call for another interface (a
            // collection's property) must find it first, as gnome-keyring's objects exist or not whatever is asked.
            do {
                _ = try record(collection, account)
                return true
            } catch let error as BusError {
                return error.name != BusError.unknownMethod
            } catch {
                return true
            }
        default: return true
        }
    }

    func exists(path: String, interface: String) -> Bool {
        switch (object(path), interface) {
        case (.collection?, Self.collectionInterface), (.item?, Self.itemInterface),
            (.session?, Self.sessionInterface), (.prompt?, Self.promptInterface):
            true
        default: false
        }
    }
}
