import FoundationEssentials
import KeysealCore
import KeysealStore

/// A stored private key made ready for use: what its item's lookup, unsealing and (for a hardware key) the
/// authorization's derivation gave, so that the next operation with it pays none of them again. Its secrets (a
/// hardware key's authorization, a software key's material) are ``SecretBytes`` or swift-crypto key storage, zeroized
/// when the entry goes.
struct PreparedKey {
    /// The item's class: its key must be present at every use.
    let accessibility: Accessibility
    /// The item's access group: the caller must hold it at every use.
    let accessGroup: String
    let handle: PrivateKeyHandle
    /// The item's access-control flags: an authentication is checked at every use (KeychainEngine+Authentication).
    var accessControlFlags: UInt? = nil
}

/// The engine's prepared keys, by their item's persistent reference.
///
/// An entry lives only while nothing it was made from has changed:
/// - its class is available: entries of a class go when the class's key goes or is replaced (lock, auto-lock, a
///   passcode set, changed or removed, recovery, close) — ``KeychainEngine/classKeys``'s observer;
/// - the store file is as it was: every write through the store (an update or delete of any item, a restore, a
///   re-key) moves ``ItemStore/changeCount``, and a moved count empties the cache before its next use. The store's
///   connection is the file's only writer (exclusive locking under `.lock`), and keyseald's clients all reach the
///   file through its one engine, so a change by any of them is seen.
///
/// The gates of a lookup stay with each call: the class key must be present (errSecInteractionNotAllowed while
/// locked) and the caller must hold the item's group (errSecItemNotFound otherwise, as a lookup answers).
struct PreparedKeys {
    /// At most this many entries; the oldest goes first.
    static let capacity = 32

    private var entries: [Data: PreparedKey] = [:]
    private var order: [Data] = []
    /// The store's change count the entries were made at.
    private var changeCount: Int64 = -1

    var count: Int { entries.count }

    /// The entry of `reference`, if the store has not changed since the entries were made (else none are kept).
    mutating func entry(_ reference: Data, changeCount: Int64) -> PreparedKey? {
        guard changeCount == self.changeCount else {
            removeAll()
            self.changeCount = changeCount
            return nil
        }
        return entries[reference]
    }

    /// The entry of `reference` as it is kept, whatever the store's state (tests).
    func peek(_ reference: Data) -> PreparedKey? { entries[reference] }

    mutating func insert(_ key: PreparedKey, for reference: Data, changeCount: Int64) {
        if changeCount != self.changeCount {
            removeAll()
            self.changeCount = changeCount
        }
        if entries.updateValue(key, forKey: reference) == nil {
            order.append(reference)
            if order.count > Self.capacity { entries[order.removeFirst()] = nil }
        }
    }

    /// Drops the entries of the classes in `classes`.
    mutating func remove(classes: Set<Accessibility>) {
        guard !classes.isEmpty, !entries.isEmpty else { return }
        entries = entries.filter { !classes.contains($0.value.accessibility) }
        order.removeAll { entries[$0] == nil }
    }

    mutating func removeAll() {
        entries.removeAll()
        order.removeAll()
    }
}

extension KeychainEngine {
    /// The prepared key of the item `persistentRef`: from the cache when the store has not changed, else looked up
    /// as a lookup finds it (the caller's groups, the lock state), unsealed, prepared and kept. Either way the class
    /// must be available and the caller must hold the item's group now.
    func preparedKey(_ persistentRef: Data, caller: Caller) throws -> PreparedKey {
        let changeCount = store.changeCount
        if let key = preparedKeys.entry(persistentRef, changeCount: changeCount) {
            _ = try requireClassKey(key.accessibility)
            guard caller.holds(key.accessGroup) else { throw KeychainError.itemNotFound }
            return key
        }
        let key = try prepareKey(persistentRef, caller: caller)
        preparedKeys.insert(key, for: persistentRef, changeCount: changeCount)
        return key
    }

    private func prepareKey(_ persistentRef: Data, caller: Caller) throws -> PreparedKey {
        let query = ItemQuery(
            itemClass: .key,
            synchronizable: .any,
            persistentRef: persistentRef,
            returns: [.data, .attributes]
        )
        guard var record = try findItems(query, caller: caller).first else { throw KeychainError.itemNotFound }
        guard record.string(AttributeKey.keyClass) == Self.keyClassPrivate else {
            throw KeychainError(KeychainStatus.param, "the key is not a private key")
        }
        guard let group = record.string(AttributeKey.accessGroup),
            let accessibility = Accessibility(rawValue: record.string(AttributeKey.accessible) ?? "")
        else { throw KeychainError(KeychainStatus.decode, "the key item has no group or class") }
        let data = record.data ?? Data()
        record.data = nil
        let handle: PrivateKeyHandle
        if record.string(AttributeKey.tokenID) == Self.hardwareTokenID {
            let value = try HardwareKeyValue(decoding: data)
            handle = .hardware(
                HardwareKeyHandle(
                    provider: try hardwareProvider(),
                    blob: value.blob,
                    authorization: hardwareAuthorization(value.seed),
                    publicKey: try PublicKeyMaterial(keyType: .p256, bytes: value.publicKey)
                )
            )
        } else {
            let publicKey = try Self.publicKeyOf(
                keyClass: Self.keyClassPrivate,
                typeCode: record.string(AttributeKey.type) ?? "",
                data: data
            )
            handle = .software(
                try SoftwarePrivateKey(prepared: publicKey.keyType, material: SecretBytes(copying: data))
            )
        }
        return PreparedKey(
            accessibility: accessibility,
            accessGroup: group,
            handle: handle,
            accessControlFlags: Self.accessControlFlags(record.attributes)
        )
    }
}
