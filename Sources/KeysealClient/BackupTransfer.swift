import FoundationEssentials
import Glibc
import Synchronization

// Export and import through keyseald (DESIGN §6–7). The daemon produces and consumes the backup's bytes; the
// client does the file I/O, so the daemon never opens a path a client names.
//
//   export: → exportBackup(passphrase, availableOnly)
//           ← backupChunk(bytes, done, total) …  ← exportReport | failure
//   import: → importBegin(passphrase, replace)   ← importProgress(0, 0) | failure
//           → importChunk(bytes)                 ← importProgress(done, total) | failure   (repeated)
//           → importEnd                          ← importSkipped(items) … ← importReport | failure
//
// Any failure ends the exchange, and the client closes the connection (the next request opens a new one), so a
// half-finished export or import never leaves state behind in the daemon.

extension KeysealConnection {
    /// Runs a multi-frame exchange on this connection's socket, holding it for the whole exchange. Any error closes
    /// the socket.
    func exchange<T: Sendable>(_ body: (Int32) throws(KeychainError) -> T) throws(KeychainError) -> T {
        try descriptor.withLock { fd throws(KeychainError) -> T in
            if fd >= 0 && Self.peerClosed(fd) {
                _ = close(fd)
                fd = -1
            }
            if fd < 0 { fd = try Self.open(socketPath) }
            do throws(KeychainError) {
                return try body(fd)
            } catch {
                _ = close(fd)
                fd = -1
                throw error
            }
        }
    }

    /// Sends one request frame, zeroizing it afterwards when it carries a secret.
    static func write(_ fd: Int32, _ request: WireRequest) throws(KeychainError) {
        var frame = try request.encodedFrame()
        defer {
            if request.carriesSecret {
                frame.withUnsafeMutableBytes { raw in for index in raw.indices { raw[index] = 0 } }
            }
        }
        try writeAll(fd, frame)
    }

    static func unexpected(_ response: WireResponse, during what: String) -> KeychainError {
        if case .failure(let error) = response { return error }
        return KeychainError(status: KeychainStatus.decode, message: "unexpected response from keyseald during \(what)")
    }

    /// Exports the daemon's store (administrators only; others get errSecMissingEntitlement, −34018). The backup's
    /// bytes go to `sink` in order, in pieces of at most ``Wire/backupChunk`` bytes; `progress` is called with the
    /// items written so far and the total. A wrong or locked class is errSecInteractionNotAllowed (−25308) unless
    /// `availableOnly`. When `sink` throws, the exchange stops and the error is rethrown.
    public func exportBackup(
        passphrase: SecretBytes,
        availableOnly: Bool,
        sink: ([UInt8]) throws(KeychainError) -> Void,
        progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }
    ) throws(KeychainError) -> ExportReport {
        try exchange { fd throws(KeychainError) -> ExportReport in
            try Self.write(fd, .exportBackup(passphrase: passphrase, availableOnly: availableOnly))
            while true {
                let response = try Self.readResponse(fd, path: socketPath)
                switch response {
                case .backupChunk(let bytes, let done, let total):
                    try sink(bytes)
                    progress(done, total)
                case .exportReport(let report):
                    return report
                default:
                    throw Self.unexpected(response, during: "export")
                }
            }
        }
    }

    /// Imports a backup into the daemon's store (administrators only). `source` returns the file's next bytes (at
    /// most `maxCount`, at least one) or nil at its end. `progress` is called with the items read and authenticated
    /// so far and the total. A wrong passphrase is errSecAuthFailed (−25293); a truncated, edited or unknown-
    /// version file is errSecDecode (−26275); in every failure the store is unchanged.
    public func importBackup(
        passphrase: SecretBytes,
        replace: Bool,
        source: (_ maxCount: Int) throws(KeychainError) -> [UInt8]?,
        progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }
    ) throws(KeychainError) -> ImportReport {
        try exchange { fd throws(KeychainError) -> ImportReport in
            try Self.write(fd, .importBegin(passphrase: passphrase, replace: replace))
            var response = try Self.readResponse(fd, path: socketPath)
            guard case .importProgress = response else { throw Self.unexpected(response, during: "import") }
            while let bytes = try source(Wire.backupChunk) {
                guard !bytes.isEmpty else { continue }
                try Self.write(fd, .importChunk(bytes))
                response = try Self.readResponse(fd, path: socketPath)
                guard case .importProgress(let done, let total) = response else {
                    throw Self.unexpected(response, during: "import")
                }
                progress(done, total)
            }
            try Self.write(fd, .importEnd)
            var skipped: [ImportReport.SkippedItem] = []
            while true {
                response = try Self.readResponse(fd, path: socketPath)
                switch response {
                case .importSkipped(let items): skipped += items
                case .importReport(var report):
                    report.skipped = skipped + report.skipped
                    return report
                default: throw Self.unexpected(response, during: "import")
                }
            }
        }
    }
}

/// Writes a backup file safely: the bytes go to a new 0600 file next to the destination (created with `O_EXCL`),
/// which is synced and then linked to the destination name only when complete — an existing destination is never
/// replaced, and a failed export leaves nothing behind. Not thread-safe.
public final class BackupFileWriter {
    public let path: String
    private let temporaryPath: String
    private var fd: Int32
    private var finished = false

    /// Creates the temporary file. A destination that already exists is errSecParam (−50), before any work.
    public init(path: String) throws(KeychainError) {
        guard !path.isEmpty else {
            throw KeychainError(status: KeychainStatus.param, message: "the backup path is empty")
        }
        self.path = path
        if access(path, F_OK) == 0 {
            throw KeychainError(
                status: KeychainStatus.param,
                message: "\(path) already exists; remove it or choose another name"
            )
        }
        let directory: String
        let name: String
        if let slash = path.lastIndex(of: "/") {
            directory = slash == path.startIndex ? "/" : String(path[..<slash])
            name = String(path[path.index(after: slash)...])
        } else {
            directory = "."
            name = path
        }
        var candidate = ""
        var opened: Int32 = -1
        for _ in 0..<16 {
            let suffix = (0..<8).map { _ in String(UInt8.random(in: 0...15), radix: 16) }.joined()
            candidate = (directory == "/" ? "" : directory) + "/.\(name).partial-\(suffix)"
            opened = open(candidate, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            if opened >= 0 || errno != EEXIST { break }
        }
        guard opened >= 0 else {
            throw KeychainError(
                status: KeychainStatus.io,
                message: "cannot create a file in \(directory): \(String(cString: strerror(errno)))"
            )
        }
        _ = fchmod(opened, 0o600)
        temporaryPath = candidate
        fd = opened
    }

    deinit { discard() }

    /// Appends bytes.
    public func write(_ bytes: [UInt8]) throws(KeychainError) {
        guard fd >= 0 else { throw KeychainError(status: KeychainStatus.io, message: "the backup file is closed") }
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { raw in
                Posix.write(fd, raw.baseAddress! + written, raw.count - written)
            }
            if result < 0 {
                throw KeychainError(
                    status: KeychainStatus.io,
                    message: "cannot write \(path): \(String(cString: strerror(errno)))"
                )
            }
            written += result
        }
    }

    /// Syncs the file and gives it its name. Fails (errSecParam) if the destination appeared meanwhile.
    public func commit() throws(KeychainError) {
        guard fd >= 0 else { throw KeychainError(status: KeychainStatus.io, message: "the backup file is closed") }
        guard fsync(fd) == 0, close(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            fd = -1
            discard()
            throw KeychainError(status: KeychainStatus.io, message: "cannot write \(path): \(reason)")
        }
        fd = -1
        if link(temporaryPath, path) == 0 {
            unlink(temporaryPath)
        } else {
            let code = errno
            // File systems without hard links: a rename, the destination checked again just before.
            let noLinks = code == EPERM || code == EOPNOTSUPP || code == ENOTSUP || code == ENOSYS
            let exists = code == EEXIST || access(path, F_OK) == 0
            guard noLinks, !exists, rename(temporaryPath, path) == 0 else {
                let reason = exists ? "it already exists" : String(cString: strerror(noLinks ? errno : code))
                discard()
                throw KeychainError(
                    status: exists ? KeychainStatus.param : KeychainStatus.io,
                    message: "cannot create \(path): \(reason)"
                )
            }
        }
        finished = true
    }

    /// Removes the unfinished file (idempotent; a committed file stays).
    public func discard() {
        if fd >= 0 {
            _ = close(fd)
            fd = -1
        }
        if !finished {
            unlink(temporaryPath)
            finished = true
        }
    }
}

/// Reads a backup file sequentially. Not thread-safe.
public final class BackupFileReader {
    public let path: String
    /// The file's size when opened.
    public let size: Int
    private var fd: Int32

    public init(path: String) throws(KeychainError) {
        self.path = path
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw KeychainError(
                status: KeychainStatus.io,
                message: "cannot open \(path): \(String(cString: strerror(errno)))"
            )
        }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            _ = Posix.close(fd)
            throw KeychainError(status: KeychainStatus.param, message: "\(path) is not a regular file")
        }
        size = Int(info.st_size)
    }

    deinit { close() }

    /// The next bytes (at most `maxCount`), or nil at the end of the file.
    public func read(maxCount: Int = Wire.backupChunk) throws(KeychainError) -> [UInt8]? {
        guard fd >= 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: maxCount)
        while true {
            let count = buffer.withUnsafeMutableBytes { raw in Posix.read(fd, raw.baseAddress!, raw.count) }
            if count < 0 {
                throw KeychainError(
                    status: KeychainStatus.io,
                    message: "cannot read \(path): \(String(cString: strerror(errno)))"
                )
            }
            if count == 0 { return nil }
            buffer.removeLast(buffer.count - count)
            return buffer
        }
    }

    public func close() {
        if fd >= 0 { _ = Posix.close(fd) }
        fd = -1
    }
}
