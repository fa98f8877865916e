import Foundation
import KeysealTestSupport
import Testing

@testable import KeysealStore

/// `Statement.blobs(from:count:)`: several blob columns copied into one buffer and handed out as slices. A row's
/// digests and ciphertexts are read this way, so NULL, empty and filled columns must each keep their meaning.
@Suite("Statement blob columns as slices")
struct StatementBlobsTests {
    /// Calls `body` with a new database holding `table`, removed afterwards.
    func withDatabase(_ table: String, _ body: (Database) throws -> Void) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let database = try Database(path: directory.appending("statement.db").path)
        defer { database.close() }
        try database.execute("CREATE TABLE \(table)")
        try body(database)
    }

    @Test func nullEmptyAndFilledColumnsKeepTheirMeaningAndBytes() throws {
        try withDatabase("t(a BLOB, b BLOB, c BLOB, d BLOB, e BLOB)") { database in
            let insert = try database.statement("INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)")
            let first = Data((0..<40).map { UInt8($0) })
            let last = Data([0xFF, 0x00, 0x7F])
            try insert.bind(1, first)
            try insert.bind(2, nil as Data?)
            try insert.bind(3, Data())
            try insert.bind(4, Data([9]))
            try insert.bind(5, last)
            try insert.run()

            let select = try database.statement("SELECT a, b, c, d, e FROM t")
            defer { select.reset() }
            #expect(try select.step())
            let values = select.blobs(from: 0, count: 5)
            #expect(values.count == 5)
            #expect(values[0] == first)
            #expect(values[1] == nil)
            #expect(values[2] == Data())
            #expect(values[3] == Data([9]))
            #expect(values[4] == last)
            // Read as callers read them: through their bytes.
            #expect(values[4]!.withUnsafeBytes { Array($0) } == [0xFF, 0x00, 0x7F])
            #expect(values[0].map { Array($0) } == Array(0..<40))
        }
    }

    @Test func textKeepsEveryByteAndEmptyTextIsNotNull() throws {
        try withDatabase("t(a TEXT, b TEXT)") { database in
            let insert = try database.statement("INSERT INTO t VALUES (?1, ?2)")
            try insert.bind(1, "a\u{0}b é")
            try insert.bind(2, "")
            try insert.run()
            let select = try database.statement("SELECT a, b, typeof(b) FROM t")
            defer { select.reset() }
            #expect(try select.step())
            #expect(select.text(0) == "a\u{0}b é")
            #expect(select.text(0)?.utf8.count == 6)
            #expect(select.text(1) == "")
            #expect(select.text(2) == "text")
        }
    }
}
