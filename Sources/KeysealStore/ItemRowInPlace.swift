internal import CSQLite
import KeysealCore

/// An item row read in place: the bytes SQLite holds for the statement's current row, with nothing copied.
///
/// Valid only during the call that receives it (``ItemStore/forEachRowInPlace(primaryKeyDigest:_:)``): the bytes
/// belong to SQLite until the statement steps or resets. Never store it or a buffer taken from it.
public struct ItemRowInPlace {
    private let statement: OpaquePointer

    init(_ statement: OpaquePointer) { self.statement = statement }

    // Column positions of `ItemStore.rowColumns`.
    private static let firstDigest: Int32 = 7
    private static var attributesColumn: Int32 { firstDigest + Int32(ItemStore.digestColumns.count) }

    public var id: Int64 { sqlite3_column_int64(statement, 0) }
    public var generation: Int64 { sqlite3_column_int64(statement, 5) }
    /// The generation the ledger records for this item (nil when it has no entry).
    public var ledgerGeneration: Int64? {
        let column = Self.attributesColumn + 3
        return sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, column)
    }

    public var itemClass: String { text(2) }
    public var accessGroup: String { text(3) }
    public var accessibility: String { text(4) }

    /// The three ciphertexts (empty for NULL, which then fails authentication).
    public var attributes: UnsafeRawBufferPointer { bytes(Self.attributesColumn) ?? Self.empty }
    public var wrappedKey: UnsafeRawBufferPointer { bytes(Self.attributesColumn + 1) ?? Self.empty }
    public var value: UnsafeRawBufferPointer { bytes(Self.attributesColumn + 2) ?? Self.empty }

    /// The row's header columns, in place, for the envelope's associated data.
    public func withHeaderColumns<R>(_ body: (HeaderColumns) throws(KeychainError) -> R) throws(KeychainError) -> R {
        let count = ItemStore.digestColumns.count
        return try withUnsafeTemporaryAllocation(of: UnsafeRawBufferPointer?.self, capacity: count) {
            digests throws(KeychainError) in
            for index in 0..<count { digests.initializeElement(at: index, to: bytes(Self.firstDigest + Int32(index))) }
            defer { digests.deinitialize() }
            return try body(
                HeaderColumns(
                    itemID: bytes(1) ?? Self.empty, itemClass: bytes(2) ?? Self.empty, accessGroup: bytes(3) ?? Self.empty,
                    accessibility: bytes(4) ?? Self.empty, primaryKeyDigest: bytes(6) ?? Self.empty,
                    digests: UnsafeBufferPointer(digests), generation: generation))
        }
    }

    private static var empty: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }

    private func text(_ column: Int32) -> String { String(decoding: bytes(column) ?? Self.empty, as: UTF8.self) }

    /// A column's bytes, nil for NULL. Pointer first, then length, as SQLite documents; a text column's bytes are
    /// its UTF-8 (no conversion: the store is UTF-8). The only conversions asked for are of a value to its own type.
    private func bytes(_ column: Int32) -> UnsafeRawBufferPointer? {
        if let pointer = sqlite3_column_blob(statement, column) {
            return UnsafeRawBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(statement, column)))
        }
        return sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : Self.empty
    }
}
