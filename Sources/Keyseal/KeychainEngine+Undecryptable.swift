import FoundationEssentials
import KeysealCore
import KeysealStore

/// Rows no SecItem call can reach: listed for administrators, deleted by id without decrypting, left out of
/// exports (and reported), and never silently stranded by a passcode change.
extension KeychainEngine {
    /// Why `row` cannot be served, or nil when it decrypts and is of an implemented class (a row of another class
    /// that does not decrypt either is reported as not decrypting). A row whose class is locked is
    /// `errSecInteractionNotAllowed`: whether it decrypts cannot be told until the class is unlocked.
    /// Opening the value authenticates the whole row (the header, the attribute ciphertext through its digest, the
    /// wrapped key); the plaintext is wiped at once.
    func undecryptableReason(_ row: ItemRow) throws(KeychainError) -> (UndecryptableItem.Reason, String)? {
        guard let accessibility = Accessibility(rawValue: row.accessibility) else {
            return (.unknownAccessibility, "unknown accessibility class \(Self.printable(row.accessibility))")
        }
        guard keybag.classKeys[accessibility.rawValue] != nil else {
            return (.noClassKey, "the store holds no key for \(accessibility.name) items")
        }
        guard let classKey = classKeys[accessibility] else {
            throw KeychainError(
                KeychainStatus.interactionNotAllowed,
                "the keychain is \(lockState.rawValue): unlock it to check \(accessibility.name) items"
            )
        }
        do throws(KeychainError) {
            try checkLedger(row)
        } catch {
            return (.generation, error.message)
        }
        do throws(KeychainError) {
            var value = try ItemEnvelope.openValue(
                row.sealed,
                aad: row.header(storeID: storeID).encoded(),
                classKey: classKey
            )
            value.resetBytes(in: 0..<value.count)
        } catch {
            return (
                .authentication,
                "the item fails authentication under its class key (edited, or sealed under a "
                    + "key this store no longer has)"
            )
        }
        guard let itemClass = ItemClass(rawValue: row.itemClass), itemClass.isStored else {
            return (.unsupportedClass, "item class \(Self.printable(row.itemClass)) is not implemented")
        }
        return nil
    }

    func undecryptableItem(_ row: ItemRow, _ reason: (UndecryptableItem.Reason, String)) -> UndecryptableItem {
        UndecryptableItem(
            id: Hex.encode(row.itemID),
            itemClass: row.itemClass,
            accessibility: row.accessibility,
            accessGroup: row.accessGroup,
            reason: reason.0,
            detail: reason.1
        )
    }

    /// Every row no SecItem call can reach, in insertion order.
    func undecryptableItems() throws -> [UndecryptableItem] {
        var found: [UndecryptableItem] = []
        try store.forEachItem { (row) throws(KeychainError) -> Bool in
            if let reason = try undecryptableReason(row) { found.append(undecryptableItem(row, reason)) }
            return true
        }
        return found
    }

    /// Deletes the rows with these ids (hex item ids; nil: every such row) in one transaction, without decrypting
    /// them, and returns them. An id that names no row is `errSecItemNotFound`; one that names a row that can be
    /// served is `errSecParam` (delete it with an ordinary delete); either way nothing is deleted.
    func deleteUndecryptable(ids: [String]?) throws -> [UndecryptableItem] {
        var wanted: Set<String>?
        if let ids {
            guard !ids.isEmpty else { throw KeychainError(KeychainStatus.param, "no item id given") }
            var set: Set<String> = []
            for id in ids {
                let normalized = id.lowercased()
                guard normalized.utf8.count == 32, Hex.decode(normalized) != nil else {
                    throw KeychainError(KeychainStatus.param, "\(Self.printable(id)) is not an item id (32 hex digits)")
                }
                set.insert(normalized)
            }
            wanted = set
        }
        var rows: [ItemRow] = []
        var deleted: [UndecryptableItem] = []
        var seen: Set<String> = []
        try store.forEachItem { (row) throws(KeychainError) -> Bool in
            let id = Hex.encode(row.itemID)
            if let wanted, !wanted.contains(id) { return true }
            seen.insert(id)
            guard let reason = try undecryptableReason(row) else {
                if wanted == nil { return true }
                throw KeychainError(
                    KeychainStatus.param,
                    "item \(id) can be decrypted: delete it with an ordinary delete"
                )
            }
            rows.append(row)
            deleted.append(undecryptableItem(row, reason))
            return true
        }
        if let wanted, let missing = wanted.subtracting(seen).sorted().first {
            throw KeychainError(KeychainStatus.itemNotFound, "no item has the id \(missing)")
        }
        guard !rows.isEmpty else { return [] }
        let refused = Set(store.refusedBuckets)
        let emptied = try itemTransaction { () throws(KeychainError) -> Set<Int> in
            for row in rows { try store.delete(row) }
            return try store.clearLedgerBuckets(refused)
        }
        try repairLedger(emptied: emptied)
        try store.checkpoint()
        groupCache = GroupCache()
        return deleted
    }

    /// After a delete of undecryptable rows: the refused buckets that no longer hold a row (`emptied`, their record
    /// entries cleared in the same transaction) verify again, and are served and written to as any other; the
    /// others stay refused. A record that could not be used at all is replaced by the empty set's once the store
    /// holds no row. The buckets are compared with the file again, as at open.
    private func repairLedger(emptied: Set<Int>) throws {
        guard !emptied.isEmpty else { return }
        if ledger.recordProblem != nil {
            guard emptied.count == LedgerDigest.bucketCount else { return }
            var fresh = LedgerDigest()
            fresh.checkpoint = keybag.counter?.value
            store.attachLedger(key: ledgerKey(), record: fresh)
            do {
                try store.transaction { () throws(KeychainError) in try store.writeLedgerRecord() }
            } catch {
                store.detachLedger()
                throw error
            }
            ledgerCheckpointAtOpen = fresh.checkpoint
        }
        compareLedger(record: store.ledgerRecord, actual: try store.computeLedgerDigest(key: ledgerKey()))
    }

    /// A stored code for a message: at most 64 characters, control characters replaced.
    static func printable(_ text: String) -> String {
        let scalars = text.unicodeScalars.prefix(64).map {
            $0.properties.generalCategory == .control ? "?" : Character($0)
        }
        return String(scalars) + (text.unicodeScalars.count > 64 ? "…" : "")
    }
}
