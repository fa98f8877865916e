// keyseal-bench: engine benchmarks in embedded mode, each next to its floor measured in the same run.
//
//   swift run -c release keyseal-bench [--quick] [--output DIR]
//
// Prints ops/s and p50/p99 for SecItemCopyMatching (return data, by service + account) at 1,000 and 100,000
// items and for durable SecItemAdd, and the floors: a raw SQLite prepared primary-key lookup and a raw
// insert + commit with synchronous=FULL. Writes the figures as JSON into bench-results/.

import CSQLite
import Foundation
import Keyseal
import KeysealCore
import KeysealSecurity

#if canImport(Glibc)
import Glibc
#endif

func nanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

struct Figure: Codable {
    var name: String
    var operations: Int
    var opsPerSecond: Double
    var p50Microseconds: Double
    var p99Microseconds: Double
    var floor: String?
    var fractionOfFloor: Double?
}

/// Times `count` calls of `body`, one sample each.
func measure(_ name: String, count: Int, _ body: (Int) throws -> Void) rethrows -> Figure {
    var samples: [UInt64] = []
    samples.reserveCapacity(count)
    let start = nanoseconds()
    for index in 0..<count {
        let t0 = nanoseconds()
        try body(index)
        samples.append(nanoseconds() - t0)
    }
    let total = Double(nanoseconds() - start) / 1e9
    samples.sort()
    func percentile(_ p: Double) -> Double { Double(samples[min(samples.count - 1, Int(Double(samples.count) * p))]) / 1000 }
    return Figure(
        name: name, operations: count, opsPerSecond: Double(count) / total, p50Microseconds: percentile(0.5),
        p99Microseconds: percentile(0.99))
}

func report(_ figure: Figure) {
    var line = String(
        format: "%-48@ %10.0f ops/s   p50 %8.1f µs   p99 %8.1f µs", figure.name as NSString, figure.opsPerSecond,
        figure.p50Microseconds, figure.p99Microseconds)
    if let floor = figure.floor, let fraction = figure.fractionOfFloor {
        line += String(format: "   %5.1f %% of %@", fraction * 100, floor)
    }
    print(line)
}

func check(_ rc: Int32, _ db: OpaquePointer?, _ what: String) {
    guard rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW else {
        fatalError("\(what): \(String(cString: sqlite3_errmsg(db)))")
    }
}

/// The floor for lookups: a prepared primary-key SELECT on a table of `rows` rows shaped like the item table.
func sqliteLookupFloor(directory: URL, rows: Int, lookups: Int) -> Figure {
    var db: OpaquePointer?
    check(sqlite3_open(directory.appendingPathComponent("floor-lookup.db").path, &db), db, "open")
    check(sqlite3_exec(db, "PRAGMA journal_mode=WAL; CREATE TABLE t(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID", nil, nil, nil), db, "create")
    check(sqlite3_exec(db, "BEGIN", nil, nil, nil), db, "begin")
    var insert: OpaquePointer?
    check(sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?, ?)", -1, &insert, nil), db, "prepare")
    let value = [UInt8](repeating: 7, count: 200)
    func key(_ index: Int) -> [UInt8] {
        var k = [UInt8](repeating: 0, count: 32)
        withUnsafeBytes(of: UInt64(index).bigEndian) { for i in 0..<8 { k[i] = $0[i] } }
        return k
    }
    for index in 0..<rows {
        let k = key(index)
        sqlite3_bind_blob(insert, 1, k, 32, csqlite_transient())
        sqlite3_bind_blob(insert, 2, value, Int32(value.count), csqlite_transient())
        check(sqlite3_step(insert), db, "insert")
        sqlite3_reset(insert)
    }
    sqlite3_finalize(insert)
    check(sqlite3_exec(db, "COMMIT", nil, nil, nil), db, "commit")
    var select: OpaquePointer?
    check(sqlite3_prepare_v2(db, "SELECT v FROM t WHERE k = ?", -1, &select, nil), db, "prepare")
    var generator = SystemRandomNumberGenerator()
    let figure = measure("floor: SQLite prepared PK lookup (\(rows) rows)", count: lookups) { _ in
        let k = key(Int.random(in: 0..<rows, using: &generator))
        sqlite3_bind_blob(select, 1, k, 32, csqlite_static())
        guard sqlite3_step(select) == SQLITE_ROW else { fatalError("missing row") }
        _ = sqlite3_column_blob(select, 0)
        sqlite3_reset(select)
    }
    sqlite3_finalize(select)
    sqlite3_close(db)
    return figure
}

/// The floor for durable adds: one INSERT + COMMIT with WAL and synchronous=FULL.
func sqliteCommitFloor(directory: URL, commits: Int) -> Figure {
    var db: OpaquePointer?
    check(sqlite3_open(directory.appendingPathComponent("floor-commit.db").path, &db), db, "open")
    check(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t(k BLOB PRIMARY KEY, v BLOB)", nil, nil, nil), db, "create")
    var insert: OpaquePointer?
    check(sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?, ?)", -1, &insert, nil), db, "prepare")
    let value = [UInt8](repeating: 7, count: 200)
    let figure = measure("floor: SQLite insert + commit (synchronous=FULL)", count: commits) { index in
        check(sqlite3_exec(db, "BEGIN", nil, nil, nil), db, "begin")
        var k = [UInt8](repeating: 0, count: 32)
        withUnsafeBytes(of: UInt64(index).bigEndian) { for i in 0..<8 { k[i] = $0[i] } }
        sqlite3_bind_blob(insert, 1, k, 32, csqlite_transient())
        sqlite3_bind_blob(insert, 2, value, Int32(value.count), csqlite_transient())
        check(sqlite3_step(insert), db, "insert")
        sqlite3_reset(insert)
        check(sqlite3_exec(db, "COMMIT", nil, nil, nil), db, "commit")
    }
    sqlite3_finalize(insert)
    sqlite3_close(db)
    return figure
}

func populate(_ store: KeychainStore, count: Int) throws {
    var index = 0
    while index < count {
        let batch = (index..<min(count, index + 5000)).map { i in
            NewItem(
                itemClass: .genericPassword,
                attributes: [AttributeKey.service: .string("bench.service"), AttributeKey.account: .string("account-\(i)")],
                data: Data("secret-value-\(i)".utf8))
        }
        try store.addBatch(batch)
        index += batch.count
    }
}

func lookups(_ store: KeychainStore, items: Int, count: Int) -> Figure {
    var generator = SystemRandomNumberGenerator()
    return KeychainStore.withDefault(store) {
        measure("SecItemCopyMatching return data (\(items) items)", count: count) { _ in
            let account = "account-\(Int.random(in: 0..<items, using: &generator))"
            let query: [String: Any] = [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "bench.service", kSecAttrAccount: account,
                kSecReturnData: true,
            ]
            var result: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &result)
            guard status == errSecSuccess, result is Data else { fatalError("lookup failed: \(status)") }
        }
    }
}

// MARK: - Main

let arguments = CommandLine.arguments
let quick = arguments.contains("--quick")
let outputDirectory = arguments.firstIndex(of: "--output").map { arguments[$0 + 1] } ?? "bench-results"
let small = 1_000
let large = quick ? 20_000 : 100_000
let lookupCount = quick ? 5_000 : 20_000
let addCount = quick ? 500 : 2_000

let scratch = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("keyseal-bench-\(getpid())")
try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
defer { try? FileManager.default.removeItem(at: scratch) }

if arguments.contains("--profile") {
    // A short lookup loop for instruction-level profiling (valgrind --tool=callgrind).
    let store = try KeychainStore.embedded(
        directory: scratch.appendingPathComponent("store-profile"),
        device: .hostKey(file: scratch.appendingPathComponent("host-profile.key")))
    try populate(store, count: 2_000)
    report(lookups(store, items: 2_000, count: 5_000))
    store.close()
    exit(0)
}

print("keyseal-bench: embedded store, host key, release build\(quick ? " (quick)" : "")")
var figures: [Figure] = []

let lookupFloor = sqliteLookupFloor(directory: scratch, rows: large, lookups: lookupCount * 2)
let commitFloor = sqliteCommitFloor(directory: scratch, commits: addCount)
report(lookupFloor)
report(commitFloor)
figures += [lookupFloor, commitFloor]

for items in [small, large] {
    let directory = scratch.appendingPathComponent("store-\(items)")
    let store = try KeychainStore.embedded(
        directory: directory, device: .hostKey(file: scratch.appendingPathComponent("host-\(items).key")))
    try populate(store, count: items)
    _ = lookups(store, items: items, count: 1000)  // warm caches and statements
    var figure = lookups(store, items: items, count: lookupCount)
    figure.floor = "the SQLite lookup floor"
    figure.fractionOfFloor = figure.opsPerSecond / lookupFloor.opsPerSecond
    report(figure)
    figures.append(figure)
    store.close()
}

do {
    let directory = scratch.appendingPathComponent("store-adds")
    let store = try KeychainStore.embedded(
        directory: directory, device: .hostKey(file: scratch.appendingPathComponent("host-adds.key")))
    var figure = KeychainStore.withDefault(store) {
        measure("SecItemAdd, durable (one transaction each)", count: addCount) { index in
            let query: [String: Any] = [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "bench.adds", kSecAttrAccount: "account-\(index)",
                kSecValueData: Data("secret-\(index)".utf8),
            ]
            let status = SecItemAdd(query as CFDictionary, nil)
            guard status == errSecSuccess else { fatalError("add failed: \(status)") }
        }
    }
    figure.floor = "the commit floor"
    figure.fractionOfFloor = figure.opsPerSecond / commitFloor.opsPerSecond
    report(figure)
    figures.append(figure)
    store.close()
}

try FileManager.default.createDirectory(atPath: outputDirectory, withIntermediateDirectories: true)
let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "-")
let path = "\(outputDirectory)/engine-\(stamp).json"
let encoder = JSONEncoder()
encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
try encoder.encode(figures).write(to: URL(fileURLWithPath: path))
print("wrote \(path)")
