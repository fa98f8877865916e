internal import CSQLite
import FoundationEssentials
import KeysealCore

#if canImport(Glibc)
import Glibc
#endif

/// A SQLite result code: an open set of values, matched by the primary code.
public struct SQLiteResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public var primary: SQLiteResultCode { SQLiteResultCode(rawValue: rawValue & 0xFF) }

    public static let ok = SQLiteResultCode(rawValue: SQLITE_OK)
    public static let row = SQLiteResultCode(rawValue: SQLITE_ROW)
    public static let done = SQLiteResultCode(rawValue: SQLITE_DONE)
    public static let busy = SQLiteResultCode(rawValue: SQLITE_BUSY)
    public static let constraint = SQLiteResultCode(rawValue: SQLITE_CONSTRAINT)
    public static let corrupt = SQLiteResultCode(rawValue: SQLITE_CORRUPT)
    public static let notADatabase = SQLiteResultCode(rawValue: SQLITE_NOTADB)
    public static let full = SQLiteResultCode(rawValue: SQLITE_FULL)

    public var description: String { String(cString: sqlite3_errstr(rawValue)) }
}

/// A failed SQLite call: which function, which code, and SQLite's message (never bound values).
public struct SQLiteError: Error, CustomStringConvertible {
    public var code: SQLiteResultCode
    public var function: String
    public var message: String

    public var description: String { "\(function): \(message) (\(code.rawValue))" }

    /// The keychain status for this failure.
    public var keychainError: KeychainError {
        switch code.primary {
        case .constraint: KeychainError(KeychainStatus.duplicateItem)
        case .corrupt, .notADatabase: KeychainError(KeychainStatus.decode, "the store file is corrupt: \(message)")
        case .busy: KeychainError(KeychainStatus.notAvailable, "the store is busy: \(message)")
        default: KeychainError(KeychainStatus.io, "store I/O failed: \(description)")
        }
    }
}

/// The instructions a bounded piece of work may still run (``Database/withWorkBound(instructions:_:)``).
private final class WorkBudget {
    /// SQLite calls the progress handler every this many instructions.
    static let period: Int32 = 100
    private var calls: Int
    private(set) var exhausted = false

    init(calls: Int) { self.calls = calls }

    /// Nonzero (interrupt) once the budget is spent.
    func spend() -> Int32 {
        calls -= 1
        if calls < 0 { exhausted = true }
        return exhausted ? 1 : 0
    }
}

/// One SQLite connection with a cache of prepared statements. Not thread-safe: its owner serializes access.
public final class Database {
    private var handle: OpaquePointer?
    private var statements: [String: Statement] = [:]

    /// Opens (creating if needed) the database at `path`. The file is created 0600 before SQLite opens it, so the
    /// WAL and shared-memory files SQLite creates next to it get the same mode.
    public init(path: String) throws(SQLiteError) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd >= 0 {
            _ = fchmod(fd, 0o600)
            Glibc.close(fd)
        }
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close_v2(db)
            throw SQLiteError(code: SQLiteResultCode(rawValue: rc), function: "sqlite3_open_v2", message: message)
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { assert(handle == nil, "Database deinitialized without close()") }

    /// Finalizes every statement and closes the connection.
    public func close() {
        for statement in statements.values { statement.finalize() }
        statements.removeAll()
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    var connection: OpaquePointer {
        guard let handle else { preconditionFailure("database used after close()") }
        return handle
    }

    /// Runs `body` with the work of the statements it steps bounded: once they have executed about `instructions`
    /// of SQLite's virtual-machine instructions (every row a statement visits costs some, whether it returns it or
    /// rejects it), the statement running fails with SQLITE_INTERRUPT and this returns nil. Without a bound a query
    /// whose terms reject rows inside SQLite could visit any number of them unseen by its caller.
    public func withWorkBound<T>(instructions: Int, _ body: () throws(KeychainError) -> T) throws(KeychainError) -> T? {
        let budget = WorkBudget(calls: max(1, instructions / Int(WorkBudget.period)))
        sqlite3_progress_handler(
            connection,
            WorkBudget.period,
            { context in
                guard let context else { return 0 }
                return Unmanaged<WorkBudget>.fromOpaque(context).takeUnretainedValue().spend()
            },
            Unmanaged.passUnretained(budget).toOpaque()
        )
        defer { sqlite3_progress_handler(connection, 0, nil, nil) }
        defer { withExtendedLifetime(budget) {} }
        do {
            let result = try body()
            return budget.exhausted ? nil : result
        } catch {
            if budget.exhausted { return nil }
            throw error
        }
    }

    func check(_ rc: Int32, _ function: String) throws(SQLiteError) {
        guard rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE else {
            throw SQLiteError(
                code: SQLiteResultCode(rawValue: rc),
                function: function,
                message: String(cString: sqlite3_errmsg(connection))
            )
        }
    }

    /// Runs SQL with no parameters and no result rows.
    public func execute(_ sql: String) throws(SQLiteError) {
        try check(sqlite3_exec(connection, sql, nil, nil, nil), "sqlite3_exec")
    }

    /// A prepared statement for `sql`, cached for the connection's lifetime and reset for reuse.
    public func statement(_ sql: String) throws(SQLiteError) -> Statement {
        try statement(key: sql) { sql }
    }

    /// A prepared statement cached under `key`; `sql` is called only when the key is new.
    public func statement(key: String, sql: () -> String) throws(SQLiteError) -> Statement {
        if let cached = statements[key] {
            cached.reset()
            return cached
        }
        var raw: OpaquePointer?
        try check(
            sqlite3_prepare_v3(connection, sql(), -1, UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil),
            "sqlite3_prepare_v3"
        )
        let statement = Statement(raw!, database: self)
        statements[key] = statement
        return statement
    }

    /// Runs `body` in one IMMEDIATE transaction; commits if it returns, rolls back if it throws.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// The value of a single-value query (`PRAGMA …`).
    public func scalarText(_ sql: String) throws(SQLiteError) -> String? {
        let statement = try self.statement(sql)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return statement.text(0)
    }

    public var changes: Int { Int(sqlite3_changes(connection)) }
}

/// A prepared statement. Owned by its ``Database``; finalized when the database closes.
public final class Statement {
    private var raw: OpaquePointer?
    private unowned let database: Database

    init(_ raw: OpaquePointer, database: Database) {
        self.raw = raw
        self.database = database
    }

    func finalize() {
        sqlite3_finalize(raw)
        raw = nil
    }

    var pointer: OpaquePointer {
        guard let raw else { preconditionFailure("statement used after its database closed") }
        return raw
    }

    public func reset() {
        sqlite3_reset(pointer)
        sqlite3_clear_bindings(pointer)
    }

    /// Binds the string's UTF-8, every byte of it (an embedded NUL included; a C-string bind would stop there).
    public func bind(_ index: Int32, _ value: String) throws(SQLiteError) {
        var value = value
        let rc = value.withUTF8 { utf8 in
            utf8.withMemoryRebound(to: CChar.self) { text in
                guard let base = text.baseAddress, !text.isEmpty else {
                    // An empty string still binds as text, not NULL.
                    return sqlite3_bind_text(pointer, index, "", 0, csqlite_transient())
                }
                return sqlite3_bind_text(pointer, index, base, Int32(text.count), csqlite_transient())
            }
        }
        try database.check(rc, "sqlite3_bind_text")
    }

    public func bind(_ index: Int32, _ value: Int64) throws(SQLiteError) {
        try database.check(sqlite3_bind_int64(pointer, index, value), "sqlite3_bind_int64")
    }

    public func bind(_ index: Int32, _ value: Data?) throws(SQLiteError) {
        guard let value else {
            try database.check(sqlite3_bind_null(pointer, index), "sqlite3_bind_null")
            return
        }
        try database.check(value.withUnsafeBytes { bindBlob(index, $0) }, "sqlite3_bind_blob")
    }

    public func bind(_ index: Int32, _ value: [UInt8]) throws(SQLiteError) {
        try database.check(value.withUnsafeBytes { bindBlob(index, $0) }, "sqlite3_bind_blob")
    }

    /// Binds a copy of `bytes`; a zero-length blob still binds as a blob, not NULL.
    private func bindBlob(_ index: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        sqlite3_bind_blob(
            pointer,
            index,
            bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1),
            Int32(bytes.count),
            csqlite_transient()
        )
    }

    /// Steps once: true for a row, false when done.
    public func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(pointer)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        let error = SQLiteError(
            code: SQLiteResultCode(rawValue: rc),
            function: "sqlite3_step",
            message: String(cString: sqlite3_errmsg(database.connection))
        )
        sqlite3_reset(pointer)
        throw error
    }

    /// Steps a statement that returns no rows.
    public func run() throws(SQLiteError) {
        _ = try step()
    }

    public func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(pointer, column) }

    public func isNull(_ column: Int32) -> Bool { sqlite3_column_type(pointer, column) == SQLITE_NULL }

    /// The column's text, every byte of its UTF-8 (an embedded NUL included); nil for NULL.
    public func text(_ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(pointer, column) else { return nil }
        let count = Int(sqlite3_column_bytes(pointer, column))
        return String(decoding: UnsafeRawBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    public func blob(_ column: Int32) -> Data? {
        if isNull(column) { return nil }
        let count = Int(sqlite3_column_bytes(pointer, column))
        guard count > 0, let bytes = sqlite3_column_blob(pointer, column) else { return Data() }
        return Data(bytes: bytes, count: count)
    }

    /// The blob columns `first..<first + count`, copied into one allocation of which each value is a slice (nil for
    /// NULL). A row's ciphertexts and digests then cost one buffer rather than two allocations each. The slices
    /// keep their offsets in the shared buffer: read them through `withUnsafeBytes` or `Data` APIs, never by an
    /// integer index from 0.
    public func blobs(from first: Int32, count: Int) -> [Data?] {
        withUnsafeTemporaryAllocation(of: (pointer: UnsafeRawPointer?, count: Int).self, capacity: count) { columns in
            var total = 0
            for index in 0..<count {
                let column = first + Int32(index)
                // Pointer first, then length: the order SQLite documents for a value that is already a blob. A null
                // pointer is either NULL or an empty blob; only then is the type asked.
                guard let bytes = sqlite3_column_blob(pointer, column) else {
                    let isNull = sqlite3_column_type(pointer, column) == SQLITE_NULL
                    columns.initializeElement(at: index, to: (nil, isNull ? -1 : 0))
                    continue
                }
                let length = Int(sqlite3_column_bytes(pointer, column))
                columns.initializeElement(at: index, to: (bytes, length))
                total += length
            }
            var whole = Data(count: total)
            whole.withUnsafeMutableBytes { out in
                var offset = 0
                for (bytes, length) in columns where length > 0 {
                    if let bytes { out.baseAddress!.advanced(by: offset).copyMemory(from: bytes, byteCount: length) }
                    offset += length
                }
            }
            var values: [Data?] = []
            values.reserveCapacity(count)
            var offset = whole.startIndex
            for (_, length) in columns {
                if length < 0 {
                    values.append(nil)
                } else {
                    values.append(whole[offset..<offset + length])
                    offset += length
                }
            }
            columns.deinitialize()
            return values
        }
    }

    public func bytes(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(pointer, column))
        guard count > 0, let bytes = sqlite3_column_blob(pointer, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
}

extension Database {
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(connection) }

    /// Rows inserted, updated or deleted through this connection since it opened (`sqlite3_total_changes64`), rolled
    /// back or not: a value that has not moved means nothing was written through it.
    public var totalChanges: Int64 { sqlite3_total_changes64(connection) }
}
