// Export and import of the 100,000-item store (host key: the device is called once per file, never per item) at
// the product's Argon2id cost (64 MiB, 3 passes), on a disk; the one Argon2id derivation per file is shown apart.
// The import goes into a fresh store on the same device, so every item is restored. One run each: the figures are
// items per second (custom metrics) and the whole call's wall time.
import Benchmark
import Foundation
import Keyseal
import KeysealBenchSupport

let passphrase = "bench passphrase, not a secret"

let benchmarks: @Sendable () -> Void = {
    let items = BenchEnvironment.largeItems + 1  // the bench items and the 1 MiB item
    let perSecond = metric("items/s without Argon2id", biggerIsBetter: true)
    let perSecondAll = metric("items/s with Argon2id", biggerIsBetter: true)
    let argon2 = metric("Argon2id once (ms)")
    let fileBytes = metric("file bytes")
    let configuration = onceConfiguration([.wallClock, perSecond, perSecondAll, argon2, fileBytes])
    let source = Shared<(directory: URL, hostKey: URL)>()
    let file = Shared<URL>()

    func prepare() throws {
        source.value = try copyOfSharedStore(items: BenchEnvironment.largeItems, base: BenchEnvironment.disk)
        file.value = source.value.directory.deletingLastPathComponent().appendingPathComponent("backup.ksb")
    }
    func record(_ benchmark: Benchmark, seconds: Double, derivation: Double) {
        benchmark.measurement(perSecond, Int(Double(items) / (seconds - derivation)))
        benchmark.measurement(perSecondAll, Int(Double(items) / seconds))
        benchmark.measurement(argon2, Int(derivation * 1000))
        let size = (try? FileManager.default.attributesOfItem(atPath: file.value.path)[.size] as? Int) ?? 0
        benchmark.measurement(fileBytes, size)
    }

    Benchmark(
        "backup: export (\(BenchEnvironment.largeItems) items)",
        configuration: configuration,
        closure: { benchmark in
            orFail("export") {
                let store = try KeychainStore.embedded(
                    directory: source.value.directory,
                    device: .hostKey(file: source.value.hostKey)
                )
                defer { store.close() }
                let start = nanoseconds()
                let report = try store.exportBackup(to: file.value, passphrase: passphrase)
                let seconds = Double(nanoseconds() - start) / 1e9
                guard report.exportedCount == items else {
                    throw BenchError("exported \(report.exportedCount) of \(items)")
                }
                record(benchmark, seconds: seconds, derivation: report.keyDerivationSeconds)
            }
        },
        setup: { try prepare() },
        teardown: { try? FileManager.default.removeItem(at: source.value.directory.deletingLastPathComponent()) }
    )

    let target = Shared<URL>()
    Benchmark(
        "backup: import into a fresh store (\(BenchEnvironment.largeItems) items)",
        configuration: configuration,
        closure: { benchmark in
            orFail("import") {
                let store = try KeychainStore.embedded(
                    directory: target.value,
                    device: .hostKey(file: source.value.hostKey)
                )
                defer { store.close() }
                let start = nanoseconds()
                let report = try store.importBackup(from: file.value, passphrase: passphrase)
                let seconds = Double(nanoseconds() - start) / 1e9
                guard report.restoredCount == items else {
                    throw BenchError("restored \(report.restoredCount) of \(items)")
                }
                record(benchmark, seconds: seconds, derivation: report.keyDerivationSeconds)
            }
        },
        setup: {
            try prepare()
            let store = try KeychainStore.embedded(
                directory: source.value.directory,
                device: .hostKey(file: source.value.hostKey)
            )
            defer { store.close() }
            _ = try store.exportBackup(to: file.value, passphrase: passphrase)
            target.value = source.value.directory.deletingLastPathComponent().appendingPathComponent("imported")
        },
        teardown: { try? FileManager.default.removeItem(at: source.value.directory.deletingLastPathComponent()) }
    )
}
