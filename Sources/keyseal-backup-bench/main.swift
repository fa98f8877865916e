// keyseal-backup-bench: export and import of a large embedded store, in items per second, with the one Argon2id
// derivation per file shown on its own.
//
//   swift build -c release --product keyseal-backup-bench && .build/release/keyseal-backup-bench [--items N] [--output DIR]
//
// The store uses a host key (the device is called once per file, never per item) and the product's Argon2id cost
// (64 MiB, 3 passes). Items: generic passwords with service, account and label, 32-byte secrets, spread over the six
// exportable classes. The import goes into a fresh store on the same device, so every item is restored. Writes
// the figures as JSON into bench-results/.

import Foundation
import Keyseal
import KeysealCore

#if canImport(Glibc)
import Glibc
#endif

/// CPU seconds of this process (the machine may be shared: wall time alone can mislead).
func cpuSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func seconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

struct Figure: Codable {
    var name: String
    var items: Int
    /// Wall time of the whole call, Argon2id included.
    var totalSeconds: Double
    /// The Argon2id derivation (once per file).
    var argon2Seconds: Double
    /// Items per second without the Argon2id derivation.
    var itemsPerSecond: Double
    /// Items per second with it.
    var itemsPerSecondIncludingArgon2: Double
    var fileBytes: Int
    /// CPU seconds of the whole call (all threads of the process).
    var cpuSeconds: Double
}

func report(_ figure: Figure) {
    print(
        String(
            format: "%-34@ %8d items  %10.0f items/s  (%.0f items/s with Argon2id %.0f ms once; total %.2f s, CPU %.2f s)",
            figure.name as NSString, figure.items, figure.itemsPerSecond, figure.itemsPerSecondIncludingArgon2,
            figure.argon2Seconds * 1000, figure.totalSeconds, figure.cpuSeconds))
}

let arguments = CommandLine.arguments
func option(_ name: String) -> String? { arguments.firstIndex(of: name).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil } }
let count = option("--items").flatMap(Int.init) ?? 100_000
let outputDirectory = option("--output") ?? "bench-results"
let passphrase = "bench passphrase, not a secret"

let scratch = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("keyseal-backup-bench-\(getpid())")
try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
defer { try? FileManager.default.removeItem(at: scratch) }
let device = DeviceKey.hostKey(file: scratch.appendingPathComponent("host.key"))

print("keyseal-backup-bench: embedded store, host key, Argon2id \(Argon2Parameters.standard.memoryKiB / 1024) MiB × \(Argon2Parameters.standard.iterations), release build")

let source = try KeychainStore.embedded(directory: scratch.appendingPathComponent("source"), device: device)
let classes: [Accessibility] = [
    .whenUnlocked, .afterFirstUnlock, .always, .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly,
    .alwaysThisDeviceOnly,
]
var generator = SystemRandomNumberGenerator()
let populateStart = seconds()
for batchStart in stride(from: 0, to: count, by: 10_000) {
    let items = (batchStart..<min(count, batchStart + 10_000)).map { index in
        NewItem(
            itemClass: .genericPassword,
            attributes: [
                AttributeKey.service: .string("bench.service.\(index % 50)"),
                AttributeKey.account: .string("account-\(index)@example.com"),
                AttributeKey.label: .string("Bench item \(index)"),
            ],
            accessibility: classes[index % classes.count],
            data: Data((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }))
    }
    try source.addBatch(items)
}
print(String(format: "populated %d items in %.1f s", count, seconds() - populateStart))

let file = scratch.appendingPathComponent("backup.ksb")
var figures: [Figure] = []

let exportStart = seconds()
let exportCPU = cpuSeconds()
let exported = try source.exportBackup(to: file, passphrase: passphrase)
let exportTotal = seconds() - exportStart
guard exported.exportedCount == count else { fatalError("exported \(exported.exportedCount) of \(count)") }
let fileBytes = (try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
figures.append(
    Figure(
        name: "export", items: count, totalSeconds: exportTotal, argon2Seconds: exported.keyDerivationSeconds,
        itemsPerSecond: Double(count) / (exportTotal - exported.keyDerivationSeconds),
        itemsPerSecondIncludingArgon2: Double(count) / exportTotal, fileBytes: fileBytes,
        cpuSeconds: cpuSeconds() - exportCPU))
report(figures.last!)
source.close()

let target = try KeychainStore.embedded(directory: scratch.appendingPathComponent("target"), device: device)
let importStart = seconds()
let importCPU = cpuSeconds()
let imported = try target.importBackup(from: file, passphrase: passphrase)
let importTotal = seconds() - importStart
guard imported.restoredCount == count else { fatalError("restored \(imported.restoredCount) of \(count)") }
figures.append(
    Figure(
        name: "import (fresh store, same device)", items: count, totalSeconds: importTotal,
        argon2Seconds: imported.keyDerivationSeconds,
        itemsPerSecond: Double(count) / (importTotal - imported.keyDerivationSeconds),
        itemsPerSecondIncludingArgon2: Double(count) / importTotal, fileBytes: fileBytes,
        cpuSeconds: cpuSeconds() - importCPU))
report(figures.last!)
target.close()

print(String(format: "backup file: %d bytes (%.0f bytes an item)", fileBytes, Double(fileBytes) / Double(max(count, 1))))

try FileManager.default.createDirectory(atPath: outputDirectory, withIntermediateDirectories: true)
let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "-")
let path = "\(outputDirectory)/backup-\(stamp).json"
let encoder = JSONEncoder()
encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
try encoder.encode(figures).write(to: URL(fileURLWithPath: path))
print("wrote \(path)")
