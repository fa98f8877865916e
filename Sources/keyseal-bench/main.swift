// keyseal-bench: Keyseal's benchmarks, each figure next to its floor or target, measured in the same run.
//
//   swift build -c release --product keyseal-bench --product keyseald
//   .build/release/keyseal-bench [--quick] [--output DIR] [--only engine,daemon,unlock,keys]
//
// engine: embedded SecItemCopyMatching (return data) at 1,000 and 100,000 items and durable SecItemAdd, next to a
//         raw SQLite lookup and a raw insert + commit (synchronous=FULL); AES-256-GCM opens through swift-crypto and
//         through libcrypto (the engine's path).
// daemon: lookups with return data through a release keyseald (host key) from 1 client and from 8 concurrent
//         clients (8 threads, each with its own connection), next to a bare unix-socket request/reply between two
//         processes with the same frame sizes; the daemon's VmRSS with 100,000 items after the lookups, locked,
//         and after an unlock.
// unlock: per stack (host key; swtpm's socket; tpm2-abrmd on a private bus; tpm2-pkcs11 behind that tpm2-abrmd;
//         SoftHSM2): store open, the hardware part of unlock apart from Argon2id, Argon2id at the product cost, and
//         lookups per backend; on the TPM stacks, a raw ESAPI Esys_Unseal loop (the floor) in the same run.
// keys:   hardware key signing through KeysealTPM (swtpm) and KeysealPKCS11 (SoftHSM2), each next to a raw loop
//         in C on the same library (ESAPI TPM2_Sign on a loaded key; C_SignInit + C_Sign).
// Figures are printed and written as JSON into bench-results/ (or --output DIR).

import Foundation
import Keyseal

#if canImport(Glibc)
import Glibc
#endif

let arguments = CommandLine.arguments
if arguments.count == 4 && arguments[1] == "--echo-server" {
    echoServer(path: arguments[2], replyBytes: Int(arguments[3]) ?? 0)
}
let quick = arguments.contains("--quick")
let outputDirectory = arguments.firstIndex(of: "--output").map { arguments[$0 + 1] } ?? "bench-results"
let allSections = ["engine", "daemon", "unlock", "keys"]
let sections = arguments.firstIndex(of: "--only").map { arguments[$0 + 1].split(separator: ",").map(String.init) }
    ?? allSections
for section in sections where !allSections.contains(section) {
    FileHandle.standardError.write(Data("keyseal-bench: unknown section \(section) (engine, daemon, unlock, keys)\n".utf8))
    exit(64)
}
let large = quick ? 20_000 : 100_000
let lookupCount = quick ? 5_000 : 20_000
let addCount = quick ? 500 : 2_000
// The unlock section needs a few SoftHSM2 tokens, not the tests' pool of 32.
setenv("KEYSEAL_SOFTHSM_TOKENS", "4", 0)
// tpm2-pkcs11: the shared and the second token are enough.
setenv("KEYSEAL_TPM2_PKCS11_OWN", "0", 0)
setenv("TSS2_LOG", "all+NONE", 0)

let scratch = URL(fileURLWithPath: "/tmp").appendingPathComponent("keyseal-bench-\(getpid())")
try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
defer { try? FileManager.default.removeItem(at: scratch) }

if arguments.contains("--profile") {
    // A short lookup loop for instruction-level profiling (valgrind --tool=callgrind).
    let store = try KeychainStore.embedded(
        directory: scratch.appendingPathComponent("store-profile"),
        device: .hostKey(file: scratch.appendingPathComponent("host-profile.key")))
    // KEYSEAL_PROFILE_ITEMS and KEYSEAL_PROFILE_LOOKUPS set the store's size and the loop (2,000 and 5,000).
    let environment = ProcessInfo.processInfo.environment
    let items = environment["KEYSEAL_PROFILE_ITEMS"].flatMap { Int($0) } ?? 2_000
    try populate(store, count: items)
    FileHandle.standardError.write(Data("profile: \(items) items stored; lookups start (pid \(getpid()))\n".utf8))
    report(lookups(store, items: items, count: environment["KEYSEAL_PROFILE_LOOKUPS"].flatMap { Int($0) } ?? 5_000))
    store.close()
    exit(0)
}

#if DEBUG
print("keyseal-bench: DEBUG build — figures are not representative; use swift build -c release")
#endif
print("keyseal-bench: release build\(quick ? " (quick)" : ""), sections: \(sections.joined(separator: ", ")), \(ProcessInfo.processInfo.activeProcessorCount) CPUs")
let results = Results()
if sections.contains("engine") {
    print("— engine (embedded, host key)")
    try engineSection(scratch: scratch, large: large, lookupCount: lookupCount, addCount: addCount, results: results)
}
if sections.contains("daemon") {
    print("— daemon (keyseald, host key: the throughput does not depend on the backend)")
    try daemonSection(scratch: scratch, items: large, lookupCount: lookupCount, results: results)
}
if sections.contains("unlock") {
    print("— unlock and store open per backend (embedded)")
    try unlockSection(scratch: scratch, quick: quick, results: results)
}
if sections.contains("keys") {
    print("— hardware key signing next to raw loops in C (swtpm, SoftHSM2)")
    try keysSection(quick: quick, results: results, scratch: scratch)
}
let path = try results.write(directory: outputDirectory, quick: quick, sections: sections)
print("wrote \(path)")
