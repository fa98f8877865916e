internal import CSQLite
import KeysealCore

/// An item row read in place: the bytes SQLite holds for the statement's current row, with nothing copied.
///
/// Valid only during the call that receives it (``ItemStore/forEachRowInPlace(primaryKeyDigest:_:)``): the bytes
/// belong to SQLite until the statement steps or resets. Never store it or a buffer taken from it.
package struct ItemRowInPlace {
    private let statement: OpaquePointer

    init(_ statement: OpaquePointer) { self.statement = statement }

    // Column positions of `ItemStore.rowColumns`.
    private static let firstDigest: Int32 = 7
    private static var attributesColumn: Int32 { firstDigest + Int32(ItemStore.digestColumns.count) }

    package var id: Int64 { sqlite3_column_int64(statement, 0) }
    package var generation: Int64 { sqlite3_column_int64(statement, 5) }
    /// The generation the ledger records for this item (nil when it has no entry).
    package var ledgerGeneration: Int64? {
        let column = Self.attributesColumn + 3
        return sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, column)
    }

    package var itemClass: String { text(2) }
    package var accessGroup: String { text(3) }
    package var accessibility: String { text(4) }

    /// The three ciphertexts (empty for NULL, which then fails authentication).
    package var attributes: UnsafeRawBufferPointer { bytes(Self.attributesColumn) ?? Self.empty }
    package var wrappedKey: UnsafeRawBufferPointer { bytes(Self.attributesColumn + 1) ?? Self.empty }
    package var value: UnsafeRawBufferPointer { bytes(Self.attributesColumn + 2) ?? Self.empty }

    /// The row's header columns, in place, for the envelope's associated data.
    package func withHeaderColumns<R>(_ body: (HeaderColumns) throws(KeychainError) -> R) throws(KeychainError) -> R {
        let count = ItemStore.digestColumns.count
        return try withUnsafeTemporaryAllocation(of: UnsafeRawBufferPointer?.self, capacity: count) {
            digests throws(KeychainError) in
            for index in 0..<count { digests.initializeElement(at: index, to: bytes(Self.firstDigest + Int32(index))) }
            defer { digests.deinitialize() }
            return try body(
                HeaderColumns(
                    itemID: bytes(1) ?? Self.empty,
                    itemClass: bytes(2) ?? Self.empty,
                    accessGroup: bytes(3) ?? Self.empty,
                    accessibility: bytes(4) ?? Self.empty,
                    primaryKeyDigest: bytes(6) ?? Self.empty,
                    digests: UnsafeBufferPointer(digests),
                    generation: generation
                )
            )
        }
    }

    private static var empty: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }

    private func text(_ column: Int32) -> String { String(decoding: bytes(column) ?? Self.empty, as: UTF8.self) }

    /// A column's bytes, nil for NULL: the type first (before any conversion), then the pointer, then the length, as
    /// SQLite documents. A text column read as a blob is its bytes unchanged, the UTF-8 it was bound as (the store's
    /// encoding is SQLite's default, UTF-8); every byte counts, an embedded NUL included.
    private func bytes(_ column: Int32) -> UnsafeRawBufferPointer? {
        guard sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
        guard let pointer = sqlite3_column_blob(statement, column) else { return Self.empty }
        return UnsafeRawBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(statement, column)))
    }
}
