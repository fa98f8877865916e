import FoundationEssentials
import Glibc
import KeysealCore
import KeysealStore

/// Backup and restore (DESIGN §7, docs/BACKUP-FORMAT.md). The passphrase key is derived by the caller before the
/// engine is entered, so the Argon2id cost never holds the store's lock.
extension KeychainEngine {
    /// The name of a key row whose material may not leave the device — a key in the device key's hardware, or a
    /// private or symmetric software key that is not extractable (`extr` false) — or nil for any other row.
    private func keptKey(_ row: ItemRow) throws(KeychainError) -> ExportReport.SkippedKey? {
        guard row.itemClass == ItemClass.key.rawValue else { return nil }
        let classKey = try requireClassKey(Self.accessibility(of: row))
        let plain = try ItemEnvelope.openAttributes(
            row.sealed,
            aad: row.header(storeID: storeID).encoded(),
            itemID: row.itemID,
            classKey: classKey
        )
        let attributes = try AttributeCodec.decode(plain)
        let reason: ExportReport.SkippedKey.Reason
        if case .string(Self.hardwareTokenID)? = attributes[AttributeKey.tokenID] {
            reason = .hardware
        } else if case .bool(false)? = attributes[AttributeKey.isExtractable],
            attributes[AttributeKey.keyClass] != .string(Self.keyClassPublic)
        {
            reason = .notExtractable
        } else {
            return nil
        }
        var label: String?
        if case .string(let text)? = attributes[AttributeKey.label] { label = text }
        var tag: Data?
        switch attributes[AttributeKey.applicationTag] {
        case .data(let data)?: tag = data
        case .string(let text)?: tag = Data(text.utf8)
        default: tag = nil
        }
        return ExportReport.SkippedKey(accessGroup: row.accessGroup, label: label, tag: tag, reason: reason)
    }

    /// Writes a backup of every exportable item to `sink`, in pieces of about a megabyte, header first.
    ///
    /// Every class the store holds items of must be available unless `availableOnly` (then locked classes are
    /// left out and counted); otherwise `errSecInteractionNotAllowed` before anything is written.
    /// When-passcode-set-this-device-only items are never exported. A row no SecItem call can reach (it fails
    /// its authentication, or is of a class Keyseal does not implement) is left out and named in the report's
    /// `undecryptable`: the rest of the store is exported, and a backup never silently leaves an item out.
    /// Keys whose material may not leave the device (in hardware, or not extractable) are left out and named in
    /// `skippedKeys`.
    func exportBackup(
        key: BackupPassphraseKey,
        availableOnly: Bool,
        sink: ([UInt8]) throws(KeychainError) -> Void,
        progress: (_ done: Int, _ total: Int) -> Void
    ) throws(KeychainError) -> ExportReport {
        var report = ExportReport()
        var included: Set<Accessibility> = []
        var total = 0
        for (code, count) in try store.countsByAccessibility() where count > 0 {
            // Rows of an unknown class are reported by the check below.
            guard let accessibility = Accessibility(rawValue: code) else { continue }
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

        // The header announces the count: rows that cannot be served are found first (each row's value opened
        // and wiped), left out and reported.
        var leftOut: Set<Int64> = []
        try store.forEachItem { (row) throws(KeychainError) -> Bool in
            let known = Accessibility(rawValue: row.accessibility)
            if let known, !included.contains(known) { return true }
            if let reason = try undecryptableReason(row) {
                report.undecryptable.append(undecryptableItem(row, reason))
                leftOut.insert(row.id)
                if known != nil { total -= 1 }
            } else if let key = try keptKey(row) {
                report.skippedKeys.append(key)
                leftOut.insert(row.id)
                total -= 1
            }
            return true
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
            key: key,
            itemCount: total,
            device: BackupDevice(backend: keybag.backend, identity: keybag.deviceIdentity, sealedSecret: sealedSecret),
            deviceSecret: deviceSecret,
            created: configuration.clock()
        )
        var output = writer.header
        output.reserveCapacity(BackupFormat.chunkSize + (64 << 10))
        var done = 0
        progress(0, total)
        try store.forEachItem { (row) throws(KeychainError) -> Bool in
            guard !leftOut.contains(row.id) else { return true }
            let accessibility = try Self.accessibility(of: row)
            guard included.contains(accessibility), let classKey = classKeys[accessibility] else { return true }
            try checkLedger(row)
            let aad = row.header(storeID: storeID).encoded()
            var attributes = try ItemEnvelope.openAttributes(
                row.sealed,
                aad: aad,
                itemID: row.itemID,
                classKey: classKey
            )
            var secret = try ItemEnvelope.openValue(row.sealed, aad: aad, classKey: classKey)
            defer {
                attributes.resetBytes(in: 0..<attributes.count)
                secret.resetBytes(in: 0..<secret.count)
            }
            let name =
                BackupFormat.deviceClasses.contains(accessibility)
                ? BackupFormat.name(try AttributeCodec.decode(attributes)) : nil
            try writer.appendItem(
                to: &output,
                accessibility: accessibility,
                itemClass: row.itemClass,
                group: row.accessGroup,
                name: name,
                attributes: attributes,
                secret: secret
            )
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

    /// Hands the items read so far to the sealing threads, in whole chunks (and the rest when `final`), after
    /// checking each: a class this store knows, a secret within its limit, an available class.
    func submitReady(
        _ reader: BackupReader,
        _ pipeline: SealPipeline,
        submitted: inout Int,
        final: Bool
    ) throws(KeychainError) {
        let items = reader.items
        while items.count - submitted >= SealPipeline.chunkSize || (final && submitted < items.count) {
            let end = min(items.count, submitted + SealPipeline.chunkSize)
            var classKeys: [Accessibility: ClassKey] = [:]
            for item in items[submitted..<end] {
                guard let itemClass = ItemClass(rawValue: item.itemClass), itemClass.isStored else {
                    throw KeychainError(
                        KeychainStatus.noSuchClass,
                        "the backup holds an item of class \(item.itemClass)"
                    )
                }
                guard item.secret.count <= configuration.valueLimit else {
                    throw KeychainError(
                        KeychainStatus.dataTooLarge,
                        "the backup holds a secret of \(item.secret.count) bytes; this store's limit is "
                            + "\(configuration.valueLimit)"
                    )
                }
                if classKeys[item.accessibility] == nil {
                    classKeys[item.accessibility] = try requireClassKey(item.accessibility)
                }
            }
            pipeline.submit(Array(items[submitted..<end]), classKeys: classKeys)
            submitted = end
        }
        if final { pipeline.close() }
    }

    /// Restores what `reader` read (``BackupReader/finish()`` has passed: the whole file authenticated) in one
    /// transaction: every item sealed under this store's keys — all that the report says, or nothing.
    ///
    /// The classes of the items to restore must be available (else `errSecInteractionNotAllowed`). An item whose
    /// primary key exists is skipped and reported, or with `replace` the existing item (whose class must then be
    /// available too) is deleted in the same transaction. A primary-key collision shows as the insert's constraint
    /// failure, which rolls back only that statement.
    func insertSealed(
        _ reader: BackupReader,
        _ pipeline: SealPipeline,
        replace: Bool
    ) throws(KeychainError)
        -> ImportReport
    {
        var report = ImportReport(
            total: reader.total ?? 0,
            skipped: reader.skipped,
            keyDerivationSeconds: reader.keyDerivationSeconds
        )
        let items = reader.items
        var seen: Set<Data> = []
        seen.reserveCapacity(items.count)
        var groups: [ItemClass: Set<String>] = [:]
        func skip(_ item: BackupItem, _ reason: ImportReport.SkipReason, _ detail: String) {
            let name = BackupFormat.name(item.attributes)
            report.skipped.append(
                ImportReport.SkippedItem(
                    itemClass: item.itemClass,
                    accessibility: item.accessibility,
                    accessGroup: item.accessGroup,
                    service: name.service,
                    account: name.account,
                    reason: reason,
                    detail: detail
                )
            )
        }
        // About 1 KiB of page cache an item keeps the indexes' random inserts in memory (up to 256 MiB).
        try store.withPageCache(kibibytes: min(items.count, 256 << 10)) { () throws(KeychainError) in
            try itemTransaction { () throws(KeychainError) in
                for chunk in 0..<pipeline.chunkCount {
                    let rows = try pipeline.rows(chunk)
                    for (offset, row) in rows.enumerated() {
                        let item = items[chunk * SealPipeline.chunkSize + offset]
                        // The digest binds the class and the group: equal digests are the same primary key.
                        guard seen.insert(row.primaryKeyDigest).inserted else {
                            skip(item, .duplicateInBackup, "the backup holds an earlier item with the same primary key")
                            continue
                        }
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
                                        RowFilter.GroupTerm(
                                            group: row.accessGroup,
                                            primaryKeyDigest: row.primaryKeyDigest
                                        )
                                    ]
                                )
                            ).filter { $0.itemClass == row.itemClass && $0.accessGroup == row.accessGroup }
                            // Replacing an item changes it: its class must be available too.
                            for old in existing {
                                _ = try requireClassKey(try Self.accessibility(of: old))
                                try store.delete(old)
                            }
                            try store.insert(row)
                            report.replaced += 1
                        }
                        if let itemClass = ItemClass(rawValue: row.itemClass) {
                            groups[itemClass, default: []].insert(row.accessGroup)
                        }
                        report.restored[item.accessibility, default: 0] += 1
                    }
                }
            }
        }
        for (itemClass, names) in groups { groupCache.insert(contentsOf: names, for: itemClass) }
        return report
    }
}

/// Seals the items of an import on threads of their own, a chunk at a time, while the engine's thread reads the
/// rest of the file and then inserts the chunks in order. Uses only immutable inputs. Dedicated threads (not a
/// shared pool), so the engine's thread waiting for a chunk can never starve the work it waits for.
final class SealPipeline: @unchecked Sendable {
    static let chunkSize = 512

    private struct Work {
        var index: Int
        var items: [BackupItem]
        var classKeys: [Accessibility: ClassKey]
    }

    // Immutable.
    private let indexKey: IndexKey
    private let storeID: [UInt8]
    // Guarded by `condition`.
    private let condition = ConditionLock()
    private var queue: [Work] = []
    private var queueStart = 0
    private var sealed: [Int: Result<[ItemRow], KeychainError>] = [:]
    private var submittedCount = 0
    private var closed = false
    private var cancelled = false
    private var started = false

    init(indexKey: IndexKey, storeID: [UInt8]) {
        self.indexKey = indexKey
        self.storeID = storeID
    }

    /// Chunks submitted (all of them once ``close()`` was called).
    var chunkCount: Int { condition.withLock { submittedCount } }

    /// Queues a chunk; the sealing threads start with the first (one per processor, at least one, at most four).
    func submit(_ items: [BackupItem], classKeys: [Accessibility: ClassKey]) {
        let startWorkers = condition.withLock { () -> Bool in
            queue.append(Work(index: submittedCount, items: items, classKeys: classKeys))
            submittedCount += 1
            condition.broadcast()
            defer { started = true }
            return !started
        }
        guard startWorkers else { return }
        let workers = max(1, min(4, ProcessInfo.processInfo.activeProcessorCount))
        for _ in 0..<workers {
            startThread { [self] in run() }
        }
    }

    /// No more chunks will come; the threads end when the queue is empty.
    func close() {
        condition.withLock {
            closed = true
            condition.broadcast()
        }
    }

    /// Stops sealing (after a failure, or when done); rows not yet taken are dropped.
    func cancel() {
        condition.withLock {
            cancelled = true
            closed = true
            queue.removeAll()
            queueStart = 0
            sealed.removeAll()
            condition.broadcast()
        }
    }

    /// The rows of chunk `index`, in item order, waiting until they are sealed.
    func rows(_ index: Int) throws(KeychainError) -> [ItemRow] {
        condition.lock()
        defer { condition.unlock() }
        while sealed[index] == nil {
            if cancelled { throw KeychainError(KeychainStatus.internalComponent, "the import was cancelled") }
            condition.wait()
        }
        return try sealed.removeValue(forKey: index)!.get()
    }

    private func run() {
        let random = RandomPool()
        while true {
            condition.lock()
            while queueStart == queue.count && !closed { condition.wait() }
            if cancelled || queueStart == queue.count {
                condition.unlock()
                return
            }
            let work = queue[queueStart]
            queue[queueStart].items = []
            queueStart += 1
            condition.unlock()

            let result: Result<[ItemRow], KeychainError>
            do throws(KeychainError) {
                var rows: [ItemRow] = []
                rows.reserveCapacity(work.items.count)
                for item in work.items {
                    guard let itemClass = ItemClass(rawValue: item.itemClass),
                        let classKey = work.classKeys[item.accessibility]
                    else {
                        throw KeychainError(KeychainStatus.internalComponent, "an item was not checked before sealing")
                    }
                    rows.append(
                        try KeychainEngine.seal(
                            indexKey: indexKey,
                            storeID: storeID,
                            itemID: random.bytes(16),
                            itemClass: itemClass,
                            group: item.accessGroup,
                            accessibility: item.accessibility,
                            generation: 1,
                            attributes: item.attributes,
                            secret: item.secret,
                            classKey: classKey,
                            random: random,
                            encodedAttributes: item.encodedAttributes
                        )
                    )
                }
                result = .success(rows)
            } catch {
                result = .failure(error)
            }
            condition.withLock {
                if !cancelled { sealed[work.index] = result }
                condition.broadcast()
            }
        }
    }
}
