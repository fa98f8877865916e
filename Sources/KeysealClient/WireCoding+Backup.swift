import FoundationEssentials

// The backup family: export, import (begin, chunks, end), the undecryptable items, and the reports, progress and
// chunks they are answered with. Each payload's encoding (a `WireWriter` method) stands beside its decoding (the
// `WireReader` method of the same name).

// MARK: - exportBackup: the passphrase, then whether only the available items go

extension WireWriter {
    mutating func exportBackup(passphrase: SecretBytes, availableOnly: Bool) {
        secret(passphrase)
        bool(availableOnly)
    }
}

extension WireReader {
    mutating func exportBackup() throws(KeychainError) -> WireRequest {
        let passphrase = try secret()
        return .exportBackup(passphrase: passphrase, availableOnly: try bool())
    }
}

// MARK: - importBegin: the passphrase, then whether existing items are replaced

extension WireWriter {
    mutating func importBegin(passphrase: SecretBytes, replace: Bool) {
        secret(passphrase)
        bool(replace)
    }
}

extension WireReader {
    mutating func importBegin() throws(KeychainError) -> WireRequest {
        let passphrase = try secret()
        return .importBegin(passphrase: passphrase, replace: try bool())
    }
}

// MARK: - importChunk: a piece of the backup file, at most `Wire.backupChunk` bytes

extension WireWriter {
    /// Throws errSecDataTooLarge for a chunk over the limit.
    mutating func importChunk(_ bytes: [UInt8]) throws(KeychainError) {
        guard bytes.count <= Wire.backupChunk else {
            throw KeychainError(
                status: KeychainStatus.dataTooLarge,
                message: "a backup chunk is \(bytes.count) bytes; the limit is \(Wire.backupChunk)"
            )
        }
        blob(bytes)
    }
}

extension WireReader {
    mutating func importChunk() throws(KeychainError) -> [UInt8] {
        let raw = try blob()
        guard raw.count <= Wire.backupChunk else { throw Self.malformed("backup chunk over the limit") }
        return Array(raw)
    }
}

// MARK: - deleteUndecryptable: the optional ids (none: all), a u32 count and the ids

extension WireWriter {
    mutating func undecryptableIDs(_ ids: [String]?) {
        optional(ids) { writer, ids in
            writer.u32(UInt32(clamping: ids.count))
            for id in ids { writer.string(id) }
        }
    }
}

extension WireReader {
    mutating func undecryptableIDs() throws(KeychainError) -> [String]? {
        try optional { r throws(KeychainError) -> [String] in
            let count = Int(try r.u32())
            // An id takes at least 4 bytes: a count the frame cannot hold is rejected before allocating.
            guard count * 4 <= r.remaining else { throw WireReader.malformed("ids exceed the frame") }
            var ids: [String] = []
            ids.reserveCapacity(count)
            for _ in 0..<count { ids.append(try r.string()) }
            return ids
        }
    }
}

// MARK: - backupChunk: a piece of the backup file, the bytes done and the total

extension WireWriter {
    mutating func backupChunk(bytes: [UInt8], done: Int, total: Int) {
        blob(bytes)
        int(done)
        int(total)
    }
}

extension WireReader {
    mutating func backupChunk() throws(KeychainError) -> WireResponse {
        let bytes = Array(try blob())
        let done = try int()
        return .backupChunk(bytes: bytes, done: done, total: try int())
    }
}

// MARK: - importProgress: the items done and the total

extension WireWriter {
    mutating func importProgress(done: Int, total: Int) {
        int(done)
        int(total)
    }
}

extension WireReader {
    mutating func importProgress() throws(KeychainError) -> WireResponse {
        let done = try int()
        return .importProgress(done: done, total: try int())
    }
}

// MARK: - exportReport

extension WireWriter {
    mutating func exportReport(_ report: ExportReport) {
        counts(report.exported)
        int(report.skippedPasscodeOnly)
        counts(report.skippedUnavailable)
        double(report.keyDerivationSeconds)
        undecryptable(report.undecryptable)
        skippedKeys(report.skippedKeys)
    }
}

extension WireReader {
    mutating func exportReport() throws(KeychainError) -> ExportReport {
        let exported = try counts()
        let passcodeOnly = try int()
        let unavailable = try counts()
        let seconds = try double()
        return ExportReport(
            exported: exported,
            skippedPasscodeOnly: passcodeOnly,
            skippedUnavailable: unavailable,
            keyDerivationSeconds: seconds,
            undecryptable: try undecryptable(),
            skippedKeys: try skippedKeys()
        )
    }
}

// MARK: - importReport

extension WireWriter {
    mutating func importReport(_ report: ImportReport) {
        int(report.total)
        counts(report.restored)
        int(report.replaced)
        skipped(report.skipped)
        double(report.keyDerivationSeconds)
    }
}

extension WireReader {
    mutating func importReport() throws(KeychainError) -> ImportReport {
        let total = try int()
        let restored = try counts()
        let replaced = try int()
        let skipped = try self.skipped()
        return ImportReport(
            total: total,
            restored: restored,
            replaced: replaced,
            skipped: skipped,
            keyDerivationSeconds: try double()
        )
    }
}

// MARK: - Counts by accessibility (the reports'): a u16 count of (accessibility, count) pairs

extension WireWriter {
    mutating func counts(_ counts: [Accessibility: Int]) {
        u16(UInt16(clamping: counts.count))
        for (accessibility, count) in counts.sorted(by: { $0.key.rawValue < $1.key.rawValue }).prefix(Int(UInt16.max)) {
            shortString(accessibility.rawValue)
            int(count)
        }
    }
}

extension WireReader {
    mutating func counts() throws(KeychainError) -> [Accessibility: Int] {
        let count = Int(try u16())
        guard count * 9 <= remaining else { throw Self.malformed("count entries exceed the frame") }
        var counts: [Accessibility: Int] = [:]
        for _ in 0..<count {
            guard let accessibility = Accessibility(rawValue: try shortString()) else {
                throw Self.malformed("unknown accessibility in a count")
            }
            guard counts.updateValue(try int(), forKey: accessibility) == nil else {
                throw Self.malformed("duplicate count")
            }
        }
        return counts
    }
}

// MARK: - undecryptable (and the export report's): a u32 count and the rows

extension WireWriter {
    mutating func undecryptable(_ items: [UndecryptableItem]) {
        u32(UInt32(clamping: items.count))
        for item in items {
            string(item.id)
            string(item.itemClass)
            string(item.accessibility)
            string(item.accessGroup)
            shortString(item.reason.rawValue)
            string(item.detail)
        }
    }
}

extension WireReader {
    mutating func undecryptable() throws(KeychainError) -> [UndecryptableItem] {
        let count = Int(try u32())
        // An entry takes at least 21 bytes: a count the frame cannot hold is rejected before allocating.
        guard count * 21 <= remaining else { throw Self.malformed("undecryptable entries exceed the frame") }
        var items: [UndecryptableItem] = []
        items.reserveCapacity(count)
        for _ in 0..<count {
            let id = try string()
            let itemClass = try string()
            let accessibility = try string()
            let group = try string()
            guard let reason = UndecryptableItem.Reason(rawValue: try shortString()) else {
                throw Self.malformed("unknown reason for an undecryptable row")
            }
            items.append(
                UndecryptableItem(
                    id: id,
                    itemClass: itemClass,
                    accessibility: accessibility,
                    accessGroup: group,
                    reason: reason,
                    detail: try string()
                )
            )
        }
        return items
    }
}

// MARK: - The export report's keys left out: a u32 count and the keys

extension WireWriter {
    mutating func skippedKeys(_ keys: [ExportReport.SkippedKey]) {
        u32(UInt32(clamping: keys.count))
        for key in keys {
            string(key.accessGroup)
            optional(key.label) { $0.string($1) }
            optional(key.tag) { $0.blob($1) }
            shortString(key.reason.rawValue)
        }
    }
}

extension WireReader {
    mutating func skippedKeys() throws(KeychainError) -> [ExportReport.SkippedKey] {
        let count = Int(try u32())
        // An entry takes at least 7 bytes: a count the frame cannot hold is rejected before allocating.
        guard count * 7 <= remaining else { throw Self.malformed("skipped keys exceed the frame") }
        var keys: [ExportReport.SkippedKey] = []
        keys.reserveCapacity(count)
        for _ in 0..<count {
            let group = try string()
            let label = try optional { r throws(KeychainError) in try r.string() }
            let tag = try optional { r throws(KeychainError) in try r.data() }
            guard let reason = ExportReport.SkippedKey.Reason(rawValue: try shortString()) else {
                throw Self.malformed("unknown reason for a key left out of a backup")
            }
            keys.append(ExportReport.SkippedKey(accessGroup: group, label: label, tag: tag, reason: reason))
        }
        return keys
    }
}

// MARK: - importSkipped (and the import report's): a u32 count and the items

extension WireWriter {
    mutating func skipped(_ items: [ImportReport.SkippedItem]) {
        u32(UInt32(clamping: items.count))
        for item in items {
            shortString(item.itemClass)
            shortString(item.accessibility.rawValue)
            string(item.accessGroup)
            optional(item.service) { $0.string($1) }
            optional(item.account) { $0.string($1) }
            shortString(item.reason.rawValue)
            string(item.detail)
        }
    }
}

extension WireReader {
    mutating func skipped() throws(KeychainError) -> [ImportReport.SkippedItem] {
        let count = Int(try u32())
        // An entry takes at least 13 bytes: a count the frame cannot hold is rejected before allocating.
        guard count * 13 <= remaining else { throw Self.malformed("skipped entries exceed the frame") }
        var items: [ImportReport.SkippedItem] = []
        items.reserveCapacity(count)
        for _ in 0..<count {
            let itemClass = try shortString()
            let accessibility = try self.accessibility()
            let group = try string()
            let service = try optional { r throws(KeychainError) in try r.string() }
            let account = try optional { r throws(KeychainError) in try r.string() }
            guard let reason = ImportReport.SkipReason(rawValue: try shortString()) else {
                throw Self.malformed("unknown reason for a skipped item")
            }
            items.append(
                ImportReport.SkippedItem(
                    itemClass: itemClass,
                    accessibility: accessibility,
                    accessGroup: group,
                    service: service,
                    account: account,
                    reason: reason,
                    detail: try string()
                )
            )
        }
        return items
    }
}
