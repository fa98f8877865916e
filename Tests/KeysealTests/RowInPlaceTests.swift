import Foundation
import KeysealCore
import KeysealTestSupport
import Testing

@testable import KeysealStore

/// Rows read in place (`ItemStore.forEachRowInPlace`), what the value-only lookup opens: the same row, columns and
/// header bytes as the copied `ItemRow`, through the hint and without it.
@Suite("Rows read in place")
struct RowInPlaceTests {
    /// A row with NULL, empty and filled digest columns, empty and filled ciphertexts, and a non-ASCII group.
    static func row(pk: Data) -> ItemRow {
        var digests: [Data?] = AttributeKey.digested.map { _ in nil }
        digests[0] = Data(repeating: 0xA1, count: 32)
        digests[1] = Data()
        return ItemRow(
            itemID: Array(0..<16),
            itemClass: "genp",
            accessGroup: "tëam.group",
            accessibility: "cku",
            generation: 7,
            primaryKeyDigest: pk,
            digests: digests,
            sealed: SealedItem(attributes: Data((0..<70).map { UInt8($0) }), wrappedKey: Data(), value: Data([3, 4]))
        )
    }

    @Test func aRowInPlaceHasTheCopiedRowsColumnsAndHeaderWithAndWithoutItsHint() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let storeID = Array(repeating: UInt8(9), count: 16)
        let pk = Data(repeating: 0x5A, count: 32)
        for hinted in [true, false] {
            let url = directory.appending(hinted ? "hinted" : "direct")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            let store = try ItemStore(directory: url)
            defer { store.close() }
            let id = try store.insert(Self.row(pk: pk))
            let copied = try store.rows(
                RowFilter(itemClass: "genp", groups: [.init(group: "tëam.group", primaryKeyDigest: pk)])
            )
            #expect(copied.count == 1)
            let expected = copied[0]
            if !hinted { store.hints = RowIDHints() }  // through the index, as after a stale or missing hint
            var seen = 0
            try store.forEachRowInPlace(primaryKeyDigest: pk) { row throws(KeychainError) in
                seen += 1
                #expect(row.id == id)
                #expect(row.itemClass == "genp")
                #expect(row.accessGroup == "tëam.group")
                #expect(row.accessibility == "cku")
                #expect(row.generation == 7)
                #expect(row.ledgerGeneration == 7)
                #expect(Data(row.attributes) == expected.sealed.attributes)
                #expect(Data(row.wrappedKey) == Data())
                #expect(Data(row.value) == Data([3, 4]))
                let header = try row.withHeaderColumns { columns throws(KeychainError) in
                    columns.encoded(storeID: storeID)
                }
                #expect(header == expected.header(storeID: storeID).encoded())
                return true
            }
            #expect(seen == 1)
            #expect(store.hintedReads == 2 || !hinted)
            #expect(store.hintedReads == 1 || hinted)
        }
    }

    @Test func aMissingDigestCallsNothing() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try ItemStore(directory: directory.url)
        defer { store.close() }
        try store.insert(Self.row(pk: Data(repeating: 1, count: 32)))
        var seen = 0
        try store.forEachRowInPlace(primaryKeyDigest: Data(repeating: 2, count: 32)) { _ throws(KeychainError) in
            seen += 1
            return true
        }
        #expect(seen == 0)
    }
}
