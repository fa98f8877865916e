import CSQLite
import Crypto
import Foundation
import Keyseal
import KeysealCore
import KeysealSecurity

func check(_ rc: Int32, _ db: OpaquePointer?, _ what: String) {
    guard rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW else {
        fatalError("\(what): \(String(cString: sqlite3_errmsg(db)))")
    }
}

/// The floor for lookups: a prepared primary-key SELECT on a table of `rows` rows shaped like the item table.
/// `lookup` runs one lookup of a random key; `close` finalizes and closes.
final class LookupFloor {
    private var db: OpaquePointer?
    private var select: OpaquePointer?
    private let rows: Int
    private var generator = SystemRandomNumberGenerator()

    init(directory: URL, rows: Int) {
        self.rows = rows
        check(sqlite3_open(directory.appendingPathComponent("floor-lookup-\(rows).db").path, &db), db, "open")
        check(sqlite3_exec(db, "PRAGMA journal_mode=WAL; CREATE TABLE t(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID", nil, nil, nil), db, "create")
        check(sqlite3_exec(db, "BEGIN", nil, nil, nil), db, "begin")
        var insert: OpaquePointer?
        check(sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?, ?)", -1, &insert, nil), db, "prepare")
        let value = [UInt8](repeating: 7, count: 200)
        for index in 0..<rows {
            let k = Self.key(index)
            sqlite3_bind_blob(insert, 1, k, 32, csqlite_transient())
            sqlite3_bind_blob(insert, 2, value, Int32(value.count), csqlite_transient())
            check(sqlite3_step(insert), db, "insert")
            sqlite3_reset(insert)
        }
        sqlite3_finalize(insert)
        check(sqlite3_exec(db, "COMMIT", nil, nil, nil), db, "commit")
        check(sqlite3_prepare_v2(db, "SELECT v FROM t WHERE k = ?", -1, &select, nil), db, "prepare")
    }

    static func key(_ index: Int) -> [UInt8] {
        var k = [UInt8](repeating: 0, count: 32)
        withUnsafeBytes(of: UInt64(index).bigEndian) { for i in 0..<8 { k[i] = $0[i] } }
        return k
    }

    func lookup() {
        let k = Self.key(Int.random(in: 0..<rows, using: &generator))
        sqlite3_bind_blob(select, 1, k, 32, csqlite_static())
        guard sqlite3_step(select) == SQLITE_ROW else { fatalError("missing row") }
        _ = sqlite3_column_blob(select, 0)
        sqlite3_reset(select)
    }

    func close() {
        sqlite3_finalize(select)
        sqlite3_close(db)
    }
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
        let k = LookupFloor.key(index)
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

/// The lookup every figure times: SecItemCopyMatching by service and account, returning the data.
func lookupQuery(account: String) -> [String: Any] {
    [
        kSecClass: kSecClassGenericPassword, kSecAttrService: "bench.service", kSecAttrAccount: account,
        kSecReturnData: true,
    ]
}

func lookups(_ store: KeychainStore, items: Int, count: Int, name: String = "warm-up") -> Figure {
    var generator = SystemRandomNumberGenerator()
    return KeychainStore.withDefault(store) {
        measure("\(name): SecItemCopyMatching return data (\(items) items)", count: count) { _ in
            lookupOnce(items: items, using: &generator)
        }
    }
}

/// One SecItemCopyMatching by service and a random account of `items`, returning the data, on the default store.
func lookupOnce(items: Int, using generator: inout SystemRandomNumberGenerator) {
    let account = "account-\(Int.random(in: 0..<items, using: &generator))"
    var result: CFTypeRef?
    let status = SecItemCopyMatching(lookupQuery(account: account) as CFDictionary, &result)
    guard status == errSecSuccess, result is Data else { fatalError("lookup failed: \(status)") }
}

/// Embedded lookups at 1,000 and `large` items, each next to the SQLite floor on a table of the same size, measured
/// in alternation (10 rounds) so that the machine's drift falls on all alike; durable adds next to the commit floor.
///
/// Flatness is printed for both, the engine's fall from 1,000 to `large` items next to SQLite's own (a table that no
/// longer fits the page cache reads a leaf from the OS per lookup), and the large store against the small floor.
func engineSection(scratch: URL, large: Int, lookupCount: Int, addCount: Int, results: Results) throws {
    let floor = LookupFloor(directory: scratch, rows: large)
    defer { floor.close() }
    let smallFloor = LookupFloor(directory: scratch, rows: 1_000)
    defer { smallFloor.close() }
    var stores: [(items: Int, store: KeychainStore)] = []
    defer { for entry in stores { entry.store.close() } }
    for items in [1_000, large] {
        let store = try KeychainStore.embedded(
            directory: scratch.appendingPathComponent("store-\(items)"),
            device: .hostKey(file: scratch.appendingPathComponent("host-\(items).key")))
        stores.append((items, store))
        try populate(store, count: items)
    }
    let previousDefault = KeychainStore.default
    defer { KeychainStore.default = previousDefault }
    var generator = SystemRandomNumberGenerator()
    var bodies: [(name: String, body: (Int) throws -> Void)] = [
        ("floor: SQLite prepared PK lookup (\(large) rows)", { _ in floor.lookup() }),
        ("floor: SQLite prepared PK lookup (1000 rows)", { _ in smallFloor.lookup() }),
    ]
    for (items, store) in stores {
        bodies.append(
            ("embedded: SecItemCopyMatching return data (\(items) items)",
                { call in
                    if call % 500 == 0 { KeychainStore.default = store }  // once per round (rounds are multiples of 500)
                    lookupOnce(items: items, using: &generator)
                }))
    }
    // Warm caches and statements, then measure.
    _ = try interleaved(rounds: 1, perRound: 1_000, bodies)
    let figures = try interleaved(rounds: 10, perRound: max(500, lookupCount / 10 / 500 * 500), bodies)
    // Each store size against the floor on a table of its own size, the fraction the issue names (≥ 25 %).
    results.add(figures[0])
    results.add(figures[1])
    for (index, floor) in [(2, figures[1]), (3, figures[0])] {
        var figure = figures[index]
        figure.floor = "the floor on \(index == 2 ? 1_000 : large) rows"
        figure.fractionOfFloor = figure.opsPerSecond / floor.opsPerSecond
        figure.target = "≥ 25 %"
        figure.meetsTarget = figure.fractionOfFloor! >= 0.25
        results.add(figure)
    }
    // Flatness: each store size's lookups against each other, and the floor's own fall over the same sizes.
    results.add(Measurement(
        name: "flatness: embedded lookups, \(large) ÷ 1000 items", value: figures[3].opsPerSecond / figures[2].opsPerSecond,
        unit: "×"))
    results.add(Measurement(
        name: "flatness: SQLite floor, \(large) ÷ 1000 rows", value: figures[0].opsPerSecond / figures[1].opsPerSecond,
        unit: "×"))
    // The strictest reading: the large store against the floor on 1,000 rows, which fits SQLite's page cache.
    results.add(Measurement(
        name: "embedded lookups, \(large) items, against the floor on 1000 rows",
        value: figures[3].opsPerSecond / figures[1].opsPerSecond * 100, unit: "%"))

    // Opening the large store: the keybag, DS, the row hints and the generation ledger's verification, each one
    // pass over the store.
    if let index = stores.firstIndex(where: { $0.items == large }) {
        stores[index].store.close()
        let directory = scratch.appendingPathComponent("store-\(large)")
        let device = DeviceKey.hostKey(file: scratch.appendingPathComponent("host-\(large).key"))
        results.add(
            try measure("embedded: store open (\(large) items)", count: 7) { _ in
                try KeychainStore.embedded(directory: directory, device: device).close()
            })
        stores[index].store = try KeychainStore.embedded(directory: directory, device: device)
    }

    let commitFloor = sqliteCommitFloor(directory: scratch, commits: addCount)
    results.add(commitFloor)
    let directory = scratch.appendingPathComponent("store-adds")
    let store = try KeychainStore.embedded(
        directory: directory, device: .hostKey(file: scratch.appendingPathComponent("host-adds.key")))
    var figure = KeychainStore.withDefault(store) {
        measure("embedded: SecItemAdd, durable (one transaction each)", count: addCount) { index in
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
    figure.target = "≥ 35 %"
    figure.meetsTarget = figure.fractionOfFloor! >= 0.35
    results.add(figure)
    store.close()

    try gcmOpenFigures(results: results)
}

/// The item envelope's AES-256-GCM open of a lookup-sized box (a 40-byte value, 300 bytes of associated data)
/// through swift-crypto and through libcrypto as the engine calls it (a context keyed once, as for a class key;
/// a fresh context, as for an item key), measured in alternation: the figures behind docs/ARCHITECTURE.md's
/// choice of libcrypto for opening.
func gcmOpenFigures(results: Results) throws {
    let key = SymmetricKey(size: .bits256)
    let aad = [UInt8](repeating: 7, count: 300)
    let box = try AES.GCM.seal([UInt8](repeating: 3, count: 40), using: key, authenticating: aad).combined!
    let keyBytes = key.withUnsafeBytes { Array($0) }
    let context = keyBytes.withUnsafeBytes { GCMContext(key: $0) }
    let bodies: [(name: String, body: (Int) throws -> Void)] = [
        ("AES-256-GCM open: swift-crypto", { _ in
            _ = try AES.GCM.open(AES.GCM.SealedBox(combined: box), using: key, authenticating: aad)
        }),
        ("AES-256-GCM open: libcrypto, keyed context", { _ in
            _ = try aad.withBytes { associated throws(KeychainError) in try context.open(box, aad: associated) }
        }),
        ("AES-256-GCM open: libcrypto, fresh context", { _ in
            _ = try keyBytes.withBytes { raw throws(KeychainError) in
                try aad.withBytes { associated throws(KeychainError) in
                    try GCMContext.open(box, key: raw, aad: associated)
                }
            }
        }),
    ]
    _ = try interleaved(rounds: 1, perRound: 2_000, bodies)
    let figures = try interleaved(rounds: 10, perRound: 10_000, bodies)
    results.add(figures[0])
    for var figure in figures.dropFirst() {
        figure.floor = "swift-crypto's open"
        figure.fractionOfFloor = figure.opsPerSecond / figures[0].opsPerSecond
        results.add(figure)
    }
}
