import FoundationEssentials
import Glibc
import KeysealCore

/// Generic passwords of one service, in the spirit of KeychainAccess:
///
/// ```swift
/// let keychain = Keychain(service: "com.example.app").accessibility(.afterFirstUnlock)
/// try keychain.set("s3cr3t", key: "token")
/// let token = try keychain.get("token")
/// ```
///
/// `set` is an upsert. `get` returns nil when the item is absent and throws ``KeychainError`` when the keychain
/// is locked (`errSecInteractionNotAllowed`) or on any other failure.
public struct Keychain: Sendable {
    public let service: String
    public let accessGroup: String?
    private let explicitStore: KeychainStore?
    public private(set) var accessibility: Accessibility = .whenUnlocked
    public private(set) var label: String?
    public private(set) var comment: String?

    public init(service: String, accessGroup: String? = nil, store: KeychainStore? = nil) {
        self.service = service
        self.accessGroup = accessGroup
        self.explicitStore = store
    }

    /// The store this keychain uses: the one given, else ``KeychainStore/default``.
    public var store: KeychainStore { explicitStore ?? KeychainStore.default }

    public func accessibility(_ accessibility: Accessibility) -> Keychain {
        var copy = self
        copy.accessibility = accessibility
        return copy
    }

    public func label(_ label: String) -> Keychain {
        var copy = self
        copy.label = label
        return copy
    }

    public func comment(_ comment: String) -> Keychain {
        var copy = self
        copy.comment = comment
        return copy
    }

    private func query(_ key: String?, returns: ReturnOptions = [], limit: MatchLimit = .one) -> ItemQuery {
        var attributes: [String: AttributeValue] = [AttributeKey.service: .string(service)]
        if let key { attributes[AttributeKey.account] = .string(key) }
        return ItemQuery(
            itemClass: .genericPassword,
            attributes: attributes,
            accessGroup: accessGroup,
            limit: limit,
            limitGiven: limit != .one,
            returns: returns
        )
    }

    public func set(_ value: String, key: String) throws { try set(Data(value.utf8), key: key) }

    /// Stores `value` under `key`: updates the item if it exists (its data, accessibility, label and comment),
    /// adds it otherwise.
    public func set(_ value: Data, key: String) throws {
        var extra: [String: AttributeValue] = [:]
        if let label { extra[AttributeKey.label] = .string(label) }
        if let comment { extra[AttributeKey.comment] = .string(comment) }
        do {
            try store.update(
                query(key),
                with: ItemChanges(attributes: extra, accessibility: accessibility, data: value)
            )
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
            var attributes = extra
            attributes[AttributeKey.service] = .string(service)
            attributes[AttributeKey.account] = .string(key)
            _ = try store.add(
                NewItem(
                    itemClass: .genericPassword,
                    attributes: attributes,
                    accessGroup: accessGroup,
                    accessibility: accessibility,
                    data: value
                )
            )
        }
    }

    /// The value under `key` as UTF-8 text; nil when absent; `errSecDecode` if it is not UTF-8.
    public func get(_ key: String) throws -> String? {
        guard let data = try getData(key) else { return nil }
        guard let text = String(data: data, encoding: .utf8) else {
            throw KeychainError(KeychainStatus.decode, "the value of \(key) is not UTF-8 text")
        }
        return text
    }

    public func getData(_ key: String) throws -> Data? {
        do {
            return try store.copyMatching(query(key, returns: .data)).first?.data
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
            return nil
        }
    }

    public func contains(_ key: String) throws -> Bool {
        do {
            _ = try store.copyMatching(query(key))
            return true
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
            return false
        }
    }

    /// Removes `key`; removing an absent key is not an error.
    public func remove(_ key: String) throws {
        do {
            try store.delete(query(key))
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {}
    }

    /// Removes every item of this service (in this keychain's access group, if it names one).
    public func removeAll() throws {
        do {
            try store.delete(query(nil))
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {}
    }

    /// The accounts of this service, in insertion order.
    public func allKeys() throws -> [String] {
        do {
            return try store.copyMatching(query(nil, returns: .attributes, limit: .all)).compactMap {
                $0.string(AttributeKey.account)
            }
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
            return []
        }
    }
}
