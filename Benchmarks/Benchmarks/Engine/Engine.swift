// The engine in this process (embedded, host key): SecItemCopyMatching at 1,000 and 100,000 items next to a raw
// SQLite primary-key lookup on a table of the same size, durable SecItemAdd next to a raw INSERT + COMMIT
// (synchronous=FULL) on the same disk, the store open of the large store, and AES-256-GCM opens through swift-crypto
// next to libcrypto's EVP interface (the library the engine opens items with, docs/DECISIONS.md).
import Benchmark
import CKeysealBenchFloors
import Crypto
import Foundation
import Keyseal
import KeysealBenchSupport
import KeysealSecurity

let benchmarks: @Sendable () -> Void = {
    for rows in [1_000, BenchEnvironment.largeItems] {
        let floor = Shared<OpaquePointer>()
        let directory = Shared<URL>()
        Benchmark(
            "floor: SQLite prepared PK lookup (\(rows) rows)",
            configuration: benchConfiguration(),
            closure: { benchmark in
                var generator = SystemRandomNumberGenerator()
                for _ in benchmark.scaledIterations {
                    guard keyseal_sqlite_lookup_floor(floor.value, generator.next()) == 0 else {
                        fatalError("missing row")
                    }
                }
            },
            setup: {
                directory.value = try BenchEnvironment.privateDirectory("sqlite-floor")
                guard
                    let opened = keyseal_sqlite_lookup_floor_open(
                        directory.value.appendingPathComponent("floor.db").path,
                        Int32(rows)
                    )
                else { throw BenchError("the SQLite floor did not open") }
                floor.value = opened
            },
            teardown: {
                keyseal_sqlite_floor_close(floor.value)
                try? FileManager.default.removeItem(at: directory.value)
            }
        )

        let store = Shared<KeychainStore>()
        Benchmark(
            "embedded: SecItemCopyMatching return data (\(rows) items)",
            configuration: benchConfiguration(),
            closure: { benchmark in
                var generator = SystemRandomNumberGenerator()
                for _ in benchmark.scaledIterations { lookupOnce(items: rows, using: &generator) }
            },
            setup: {
                let shared = try sharedStore(items: rows)
                store.value = try KeychainStore.embedded(
                    directory: shared.directory,
                    device: .hostKey(file: shared.hostKey)
                )
                KeychainStore.default = store.value
            },
            teardown: { store.value.close() }
        )
    }

    // The large value of the daemon suite's 1 MiB figure, looked up in this process: its floor's engine part.
    let largeStore = Shared<KeychainStore>()
    Benchmark(
        "embedded: SecItemCopyMatching return data, 1 MiB value",
        configuration: benchConfiguration(maxIterations: 2_000),
        closure: { benchmark in
            for _ in benchmark.scaledIterations { lookupAccount(largeValueAccount) }
        },
        setup: {
            let shared = try sharedStore(items: 1_000)
            largeStore.value = try KeychainStore.embedded(
                directory: shared.directory,
                device: .hostKey(file: shared.hostKey)
            )
            KeychainStore.default = largeStore.value
        },
        teardown: { largeStore.value.close() }
    )

    // Opening the large store: the keybag, the row hints and the generation ledger's verification.
    let openStore = Shared<(directory: URL, hostKey: URL)>()
    Benchmark(
        "embedded: store open (\(BenchEnvironment.largeItems) items)",
        configuration: benchConfiguration(maxIterations: 20, seconds: 20, warmup: 1),
        closure: { benchmark in
            for _ in benchmark.scaledIterations {
                orFail("store open") {
                    try KeychainStore.embedded(
                        directory: openStore.value.directory,
                        device: .hostKey(file: openStore.value.hostKey)
                    )
                    .close()
                }
            }
        },
        setup: { openStore.value = try sharedStore(items: BenchEnvironment.largeItems) }
    )

    // Durable adds, on a disk (KEYSEAL_BENCH_DISK): one transaction each, next to SQLite's own commit.
    let commitFloor = Shared<OpaquePointer>()
    let commitDirectory = Shared<URL>()
    Benchmark(
        "floor: SQLite insert + commit (synchronous=FULL)",
        configuration: benchConfiguration(maxIterations: 2_000),
        closure: { benchmark in
            for _ in benchmark.scaledIterations {
                guard keyseal_sqlite_commit_floor(commitFloor.value, UInt64.random(in: 0...UInt64.max)) == 0 else {
                    fatalError("the commit floor failed")
                }
            }
        },
        setup: {
            commitDirectory.value = try BenchEnvironment.privateDirectory("commit-floor", base: BenchEnvironment.disk)
            guard
                let opened = keyseal_sqlite_commit_floor_open(
                    commitDirectory.value.appendingPathComponent("floor.db").path
                )
            else { throw BenchError("the SQLite commit floor did not open") }
            commitFloor.value = opened
        },
        teardown: {
            keyseal_sqlite_floor_close(commitFloor.value)
            try? FileManager.default.removeItem(at: commitDirectory.value)
        }
    )

    let addStore = Shared<KeychainStore>()
    let addDirectory = Shared<URL>()
    Benchmark(
        "embedded: SecItemAdd, durable (one transaction each)",
        configuration: benchConfiguration(maxIterations: 2_000),
        closure: { benchmark in
            for _ in benchmark.scaledIterations {
                let query: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench.adds",
                    kSecAttrAccount as String: "account-\(UInt64.random(in: 0...UInt64.max))",
                    kSecValueData as String: Data("secret-value".utf8),
                ]
                let status = SecItemAdd(query as CFDictionary, nil)
                guard status == errSecSuccess else { fatalError("add failed: \(status)") }
            }
        },
        setup: {
            addDirectory.value = try BenchEnvironment.privateDirectory("adds", base: BenchEnvironment.disk)
            addStore.value = try KeychainStore.embedded(
                directory: addDirectory.value.appendingPathComponent("store"),
                device: .hostKey(file: addDirectory.value.appendingPathComponent("host.key"))
            )
            KeychainStore.default = addStore.value
        },
        teardown: {
            addStore.value.close()
            try? FileManager.default.removeItem(at: addDirectory.value)
        }
    )

    // The item envelope's AES-256-GCM open of a lookup-sized box (a 40-byte value, 300 bytes of associated data).
    let key = SymmetricKey(size: .bits256)
    let keyBytes = key.withUnsafeBytes { Array($0) }
    let aad = [UInt8](repeating: 7, count: 300)
    let box = orFail("seal") {
        try AES.GCM.seal([UInt8](repeating: 3, count: 40), using: key, authenticating: aad).combined!
    }
    let boxBytes = [UInt8](box)
    Benchmark("AES-256-GCM open: swift-crypto", configuration: benchConfiguration(maxIterations: 100_000)) {
        benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(
                orFail("open") { try AES.GCM.open(AES.GCM.SealedBox(combined: box), using: key, authenticating: aad) }
            )
        }
    }
    let context = Shared<OpaquePointer>()
    Benchmark(
        "AES-256-GCM open: libcrypto EVP, keyed context (C)",
        configuration: benchConfiguration(maxIterations: 100_000),
        closure: { benchmark in
            var plaintext = [UInt8](repeating: 0, count: 64)
            for _ in benchmark.scaledIterations {
                guard keyseal_gcm_open(context.value, boxBytes, boxBytes.count, aad, aad.count, &plaintext) == 0 else {
                    fatalError("open failed")
                }
            }
        },
        setup: { context.value = keyseal_gcm_new(keyBytes) },
        teardown: { keyseal_gcm_free(context.value) }
    )
    Benchmark(
        "AES-256-GCM open: libcrypto EVP, fresh context (C)",
        configuration: benchConfiguration(maxIterations: 100_000)
    ) {
        benchmark in
        var plaintext = [UInt8](repeating: 0, count: 64)
        for _ in benchmark.scaledIterations {
            guard keyseal_gcm_open_fresh(keyBytes, boxBytes, boxBytes.count, aad, aad.count, &plaintext) == 0 else {
                fatalError("open failed")
            }
        }
    }
}
