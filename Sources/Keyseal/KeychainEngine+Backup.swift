import Foundation
import KeysealCore
import KeysealStore

/// Backup and restore (DESIGN §7, docs/BACKUP-FORMAT.md). The passphrase key is derived by the caller before the
/// engine is entered, so the Argon2id cost never holds the store's lock.
extension KeychainEngine {
    /// Writes a backup of every exportable item to `sink`, in pieces of about a megabyte, header first.
    ///
    /// Every class the store holds items of must be available unless `availableOnly` (then locked classes are
    /// left out and counted); otherwise `errSecInteractionNotAllowed` before anything is written.
    /// When-passcode-set-this-device-only items are never exported. An item that fails its authentication in the
    /// store fails the export (`errSecDecode`): a backup never silently leaves an item out.
    func exportBackup(
        key: BackupPassphraseKey, availableOnly: Bool, sink: ([UInt8]) throws(KeychainError) -> Void,
        progress: (_ done: Int, _ total: Int) -> Void
    ) throws(KeychainError) -> ExportReport {
        var report = ExportReport()
        var included: Set<Accessibility> = []
        var total = 0
        for (code, count) in try store.countsByAccessibility() where count > 0 {
            guard let accessibility = Accessibility(rawValue: code) else {
                throw KeychainError(KeychainStatus.decode, "an item has an unknown accessibility class")
            }
            if accessibility == .whenPasscodeSetThisDeviceOnly {
                report.skippedPasscodeOnly += count
                continue
            }
            if classKeys[accessibility] == nil {
                if availableOnly {
                    report.skippedUnavailable[accessibility, default: 0] += count
                    continue
                }
                _ = try requireClassKey(accessibility)
            }
            included.insert(accessibility)
            total += count
        }

        // D: a fresh secret only this device can recover, for the this-device-only classes.
        let deviceSecret = SecretBytes.random(count: 32)
        let sealedSecret: Data
        do {
            sealedSecret = try device.seal(deviceSecret)
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "sealing the backup's device secret failed: \(error)")
        }
        let writer = try BackupWriter(
            key: key, itemCount: total,
            device: BackupDevice(backend: keybag.backend, identity: keybag.deviceIdentity, sealedSecret: sealedSecret),
            deviceSecret: deviceSecret, created: configuration.clock())
        var output = writer.header
        output.reserveCapacity(BackupFormat.chunkSize + (64 << 10))
        var done = 0
        progress(0, total)
        try store.forEachItem { (row) throws(KeychainError) -> Bool in
            let accessibility = try Self.accessibility(of: row)
            guard included.contains(accessibility), let classKey = classKeys[accessibility] else { return true }
            try checkLedger(row)
            let aad = row.header(storeID: storeID).encoded()
            var attributes = try ItemEnvelope.openAttributes(row.sealed, aad: aad, itemID: row.itemID, classKey: classKey)
            var secret = try ItemEnvelope.openValue(row.sealed, aad: aad, classKey: classKey)
            defer {
                attributes.resetBytes(in: 0..<attributes.count)
                secret.resetBytes(in: 0..<secret.count)
            }
            let name = BackupFormat.deviceClasses.contains(accessibility)
                ? BackupFormat.name(try AttributeCodec.decode(attributes)) : nil
            try writer.appendItem(
                to: &output, accessibility: accessibility, itemClass: row.itemClass, group: row.accessGroup, name: name,
                attributes: attributes, secret: secret)
            report.exported[accessibility, default: 0] += 1
            done += 1
            if output.count >= BackupFormat.chunkSize {
                progress(done, total)
                try sink(output)
                output.removeAll(keepingCapacity: true)
            }
            return true
        }
        guard done == total else {
            throw KeychainError(KeychainStatus.internalComponent, "the store changed during the export")
        }
        try writer.appendEnd(to: &output)
        progress(done, total)
        try sink(output)
        return report
    }

    /// Whether a backup was made on this device, and if so its device secret D.
    func matchBackupDevice(_ backup: BackupDevice) -> BackupDeviceMatch {
        guard backup.backend == keybag.backend else {
            return .other("made with the \(backup.backend) backend; this store uses \(keybag.backend)")
        }
        guard backup.identity == keybag.deviceIdentity else { return .other("made on another device") }
        do {
            return .same(try device.unseal(backup.sealedSecret))
        } catch {
            return .other("this device cannot recover the backup's device secret")
        }
    }

    /// Restores what `reader` read (completely: ``BackupReader/finish()`` has passed) in one transaction, sealed
    /// under this store's keys: all that the report says, or nothing.
    ///
    /// The classes of the items to restore must be available (else `errSecInteractionNotAllowed`). An item whose
    /// primary key exists is skipped and reported, or with `replace` the existing item (whose class must then be
    /// available too) is deleted in the same transaction.
    func restoreBackup(_ reader: BackupReader, replace: Bool) throws(KeychainError) -> ImportReport {
        var report = ImportReport(
            total: reader.total ?? 0, skipped: reader.skipped, keyDerivationSeconds: reader.keyDerivationSeconds)
        for accessibility in Set(reader.items.map(\.accessibility)) { _ = try requireClassKey(accessibility) }
        // Sealed first (no store access), then inserted in one transaction; a primary-key collision shows as the
        // insert's constraint failure, which rolls back only that statement.
        var prepared: [(item: BackupItem, row: ItemRow)] = []
        prepared.reserveCapacity(reader.items.count)
        var seen: Set<Data> = []
        seen.reserveCapacity(reader.items.count)
        func skip(_ item: BackupItem, _ reason: ImportReport.SkipReason, _ detail: String) {
            let name = BackupFormat.name(item.attributes)
            report.skipped.append(
                ImportReport.SkippedItem(
                    itemClass: item.itemClass, accessibility: item.accessibility, accessGroup: item.accessGroup,
                    service: name.service, account: name.account, reason: reason, detail: detail))
        }
        let random = RandomPool()
        for item in reader.items {
            guard let itemClass = ItemClass(rawValue: item.itemClass), itemClass.isImplemented else {
                throw KeychainError(KeychainStatus.noSuchClass, "the backup holds an item of class \(item.itemClass)")
            }
            guard item.secret.count <= configuration.valueLimit else {
                throw KeychainError(
                    KeychainStatus.dataTooLarge,
                    "the backup holds a secret of \(item.secret.count) bytes; this store's limit is \(configuration.valueLimit)")
            }
            let row = try seal(
                itemID: random.bytes(16), itemClass: itemClass, group: item.accessGroup, accessibility: item.accessibility,
                generation: 1, attributes: item.attributes, secret: item.secret,
                classKey: try requireClassKey(item.accessibility), random: random)
            // The digest binds the class and the group: equal digests are the same primary key.
            guard seen.insert(row.primaryKeyDigest).inserted else {
                skip(item, .duplicateInBackup, "the backup holds an earlier item with the same primary key")
                continue
            }
            prepared.append((item, row))
        }
        // About 1 KiB of page cache an item keeps the indexes' random inserts in memory (up to 256 MiB).
        try store.withPageCache(kibibytes: min(prepared.count, 256 << 10)) { () throws(KeychainError) in
            try store.transaction { () throws(KeychainError) in
                for (item, row) in prepared {
                    do throws(KeychainError) {
                        try store.insert(row)
                    } catch {
                        guard error.status == KeychainStatus.duplicateItem else { throw error }
                        guard replace else {
                            skip(item, .exists, "an item with the same primary key is already in the store")
                            continue
                        }
                        let existing = try store.rows(
                            RowFilter(
                                itemClass: row.itemClass,
                                groups: [
                                    RowFilter.GroupTerm(group: row.accessGroup, primaryKeyDigest: row.primaryKeyDigest)
                                ])
                        ).filter { $0.itemClass == row.itemClass && $0.accessGroup == row.accessGroup }
                        // Replacing an item changes it: its class must be available too.
                        for old in existing {
                            _ = try requireClassKey(try Self.accessibility(of: old))
                            try store.delete(old)
                        }
                        try store.insert(row)
                        report.replaced += 1
                    }
                    report.restored[item.accessibility, default: 0] += 1
                }
            }
        }
        for (_, row) in prepared {
            if let itemClass = ItemClass(rawValue: row.itemClass) { groupCache[itemClass, default: []].insert(row.accessGroup) }
        }
        return report
    }
}
