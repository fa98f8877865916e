import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

extension KeychainStore {
    // MARK: Backup (DESIGN §7)

    /// Writes a backup of the whole store to a new file at `url` (0600; an existing file is never replaced, and a
    /// failed export leaves nothing behind), protected by `passphrase` (docs/BACKUP-FORMAT.md).
    ///
    /// When-unlocked, after-first-unlock and always items restore on any device with the passphrase; the
    /// this-device-only classes only on this device, with the passphrase; when-passcode-set-this-device-only items
    /// are never exported. A class the store holds items of that is locked fails the export with
    /// errSecInteractionNotAllowed (−25308) unless `availableOnly`, which leaves such items out and counts them.
    /// Administrators only (through the daemon, others get errSecMissingEntitlement, −34018). `progress` is called
    /// with the items written so far and the total.
    @discardableResult
    public func exportBackup(
        to url: URL,
        passphrase: String,
        availableOnly: Bool = false,
        progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws -> ExportReport {
        guard !passphrase.isEmpty else { throw KeychainError(KeychainStatus.param, "the backup passphrase is empty") }
        let file = try BackupFileWriter(path: url.path)
        do {
            let report: ExportReport
            if try isEmbedded() {
                report = try exportEmbedded(
                    passphrase: SecretBytes(utf8: passphrase),
                    availableOnly: availableOnly,
                    sink: { (bytes) throws(KeychainError) in
                        do throws(KeychainError) { try file.write(bytes) } catch { throw error }
                    },
                    progress: progress ?? { _, _ in }
                )
            } else {
                report = try exportThroughDaemon(
                    passphrase: passphrase,
                    availableOnly: availableOnly,
                    file: file,
                    progress: progress
                )
            }
            do throws(KeychainError) { try file.commit() } catch { throw error }
            return report
        } catch {
            file.discard()
            throw error
        }
    }

    /// Whether the engine runs in this process (else the daemon does).
    private func isEmbedded() throws(KeychainError) -> Bool {
        try route({ _ in true }) { _ throws(KeychainError) in false }
    }

    private func exportThroughDaemon(
        passphrase: String,
        availableOnly: Bool,
        file: BackupFileWriter,
        progress: ((Int, Int) -> Void)?
    ) throws -> ExportReport {
        try throughDaemon { connection in
            try connection.exportBackup(
                passphrase: SecretBytes(utf8: passphrase),
                availableOnly: availableOnly,
                sink: { (bytes) throws(KeychainError) in try file.write(bytes) },
                progress: { done, total in progress?(done, total) }
            )
        }
    }

    /// Runs `body` on the daemon's connection, for a caller that found the daemon to be the backend; an error other
    /// than a `KeychainError` is errSecInternalComponent.
    private func throughDaemon<T: Sendable>(_ body: (KeysealConnection) throws -> T) throws(KeychainError) -> T {
        try route({ _ throws -> T in
            throw KeychainError(KeychainStatus.internalComponent, "backend changed")
        }) { connection throws(KeychainError) -> T in
            do {
                return try body(connection)
            } catch let error as KeychainError {
                throw error
            } catch {
                throw KeychainError(KeychainStatus.internalComponent, "\(error)")
            }
        }
    }

    /// Restores the backup at `url` with `passphrase`: every restored item is sealed under this store's keys, in
    /// one transaction — all that the report says, or nothing.
    ///
    /// A wrong passphrase is errSecAuthFailed (−25293); a truncated, edited or unknown-version file is errSecDecode
    /// (−26275); neither changes the store. This-device-only items of a backup made on another device are skipped
    /// and named in the report. An item whose primary key exists is skipped and reported, or replaced with
    /// `replace`. Administrators only. `progress` is called with the items read so far and the total.
    @discardableResult
    public func importBackup(
        from url: URL,
        passphrase: String,
        replace: Bool = false,
        progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws -> ImportReport {
        guard !passphrase.isEmpty else { throw KeychainError(KeychainStatus.param, "the backup passphrase is empty") }
        let file = try BackupFileReader(path: url.path)
        defer { file.close() }
        guard try isEmbedded() else {
            return try throughDaemon { connection in
                try connection.importBackup(
                    passphrase: SecretBytes(utf8: passphrase),
                    replace: replace,
                    source: { (count) throws(KeychainError) in try file.read(maxCount: count) },
                    progress: { done, total in progress?(done, total) }
                )
            }
        }
        let session = try beginBackupImport(passphrase: SecretBytes(utf8: passphrase))
        defer { session.cancel() }
        do {
            while let bytes = try file.read() {
                try session.feed(bytes)
                if let total = session.total { progress?(session.done, total) }
            }
        } catch let error as KeychainError {
            throw error
        }
        return try session.finish(replace: replace)
    }

    // MARK: Pieces for keyseald (embedded stores)

    /// Derives the passphrase key (outside the store's lock), then writes the backup to `sink`.
    package func exportEmbedded(
        passphrase: SecretBytes,
        availableOnly: Bool,
        sink: ([UInt8]) throws(KeychainError) -> Void,
        progress: (_ done: Int, _ total: Int) -> Void
    ) throws -> ExportReport {
        let argon2 = try withEngine { $0.configuration.argon2 }
        let started = Date()
        let key = try BackupPassphraseKey.forExport(passphrase: passphrase, argon2: argon2)
        let seconds = Date().timeIntervalSince(started)
        var report = try withEngine { engine throws(KeychainError) in
            try engine.exportBackup(key: key, availableOnly: availableOnly, sink: sink, progress: progress)
        }
        report.keyDerivationSeconds = seconds
        return report
    }

    /// Starts an import into this (embedded) store: feed it the file, then finish it.
    package func beginBackupImport(passphrase: SecretBytes) throws -> BackupImport {
        let pipeline = try withEngine { SealPipeline(indexKey: $0.indexKey, storeID: $0.storeID) }
        let reader = BackupReader(passphrase: passphrase) { [self] device in
            try withEngine { engine in engine.matchBackupDevice(device) }
        }
        return BackupImport(store: self, reader: reader, pipeline: pipeline)
    }
}

/// An import in progress into an embedded store. Each piece of the file is authenticated as it arrives and the
/// items read so far are sealed under the store's keys on threads of their own (each hand-over checks, under the
/// store's lock, that their classes are available); nothing is written before ``finish(replace:)`` has checked
/// the end of the file. Used by one thread at a time; ``cancel()`` (or release) abandons it.
package final class BackupImport: @unchecked Sendable {
    private let store: KeychainStore
    private let reader: BackupReader
    private let pipeline: SealPipeline
    private var submitted = 0

    init(store: KeychainStore, reader: BackupReader, pipeline: SealPipeline) {
        self.store = store
        self.reader = reader
        self.pipeline = pipeline
    }

    deinit { pipeline.cancel() }

    /// Items announced by the file's header (nil until it has been read).
    package var total: Int? { reader.total }
    /// Items read and authenticated so far.
    package var done: Int { reader.done }

    /// Takes the next piece of the file: errSecAuthFailed for a wrong passphrase (once the header is complete),
    /// errSecDecode for anything that fails to authenticate.
    package func feed(_ bytes: [UInt8]) throws {
        try reader.feed(bytes)
        try store.withEngine { engine in
            try engine.submitReady(reader, pipeline, submitted: &submitted, final: false)
        }
    }

    /// Checks the end of the file, then restores in one transaction.
    package func finish(replace: Bool) throws -> ImportReport {
        defer { pipeline.cancel() }
        try reader.finish()
        return try store.withEngine { engine in
            try engine.submitReady(reader, pipeline, submitted: &submitted, final: true)
            return try engine.insertSealed(reader, pipeline, replace: replace)
        }
    }

    /// Abandons the import: nothing was written.
    package func cancel() { pipeline.cancel() }
}
