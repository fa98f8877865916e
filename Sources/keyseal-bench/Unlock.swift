import Foundation
import Keyseal
import KeysealCore
import KeysealSecurity
import KeysealTestSupport

/// One device-key backend (a stack: how the device key is reached) with whatever process or token it needs (the
/// test fixtures': an own swtpm with its dictionary-attack limits set; the process's one tpm2-abrmd on a private
/// bus, on its own swtpm; a tpm2-pkcs11 token made with tpm2_ptool behind that tpm2-abrmd; an own SoftHSM2 token).
struct BenchBackend {
    var name: String
    var device: DeviceKey
    /// The TCTI of a TPM stack, for the raw ESAPI floor.
    var tcti: String?
    var cleanup: () -> Void

    /// The stacks, in the order they are measured.
    static let names = ["host-key", "swtpm", "tabrmd", "tpm2-pkcs11", "softhsm2"]

    /// - Parameter second: a second device of the stack for a second store (a token holds one store's key).
    static func make(_ name: String, scratch: URL, second: Bool = false) throws -> BenchBackend {
        switch name {
        case "host-key":
            return BenchBackend(
                name: name, device: .hostKey(file: scratch.appendingPathComponent("unlock-host.key")), cleanup: {})
        case "swtpm":
            let tpm = try SwtpmFixture(maxTries: 32)
            return BenchBackend(name: name, device: .tpm(tcti: tpm.tcti), tcti: tpm.tcti, cleanup: { tpm.stop() })
        case "tabrmd":
            // Every store on it shares the one TPM; it stops when the process exits.
            let broker = try ResourceManagerFixture.shared()
            return BenchBackend(name: name, device: .tpm(tcti: broker.tcti), tcti: broker.tcti, cleanup: {})
        case "tpm2-pkcs11":
            let token = try TPM2PKCS11Pool.shared().token(second ? .second : .shared)
            return BenchBackend(
                name: name, device: .pkcs11(module: token.module, token: token.tokenLabel, pinFile: token.pinFile),
                cleanup: { token.remove() })
        case "softhsm2":
            let token = try SoftHSMFixture()
            return BenchBackend(
                name: name, device: .pkcs11(module: token.module, token: token.tokenLabel, pinFile: token.pinFile),
                cleanup: { token.remove() })
        default: throw BenchError("unknown backend \(name)")
        }
    }
}

/// Latency percentiles of `count` runs of `body`, in milliseconds.
func milliseconds(count: Int, _ body: () throws -> Void) rethrows -> (p50: Double, max: Double) {
    var samples: [UInt64] = []
    for _ in 0..<count {
        let t0 = nanoseconds()
        try body()
        samples.append(nanoseconds() - t0)
    }
    samples.sort()
    return (Double(samples[samples.count / 2]) / 1e6, Double(samples.last!) / 1e6)
}

/// Per backend: store open, unlock with the hardware part apart from Argon2id, and lookups (which must not depend
/// on the backend: class keys are unwrapped once per unlock).
func unlockSection(scratch: URL, quick: Bool, results: Results) throws {
    let repetitions = quick ? 10 : 30
    let productRepetitions = quick ? 3 : 5
    let passcode = "bench-passcode"
    // The smallest cost libargon2 accepts: an unlock at this cost is the hardware part (plus HKDF and unwrapping
    // the class keys); Argon2id at the product's cost is timed on its own.
    let minimal = Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)
    let salt = Data(repeating: 7, count: 16)
    let argon2Minimal = try milliseconds(count: repetitions) {
        try KeysealBenchHooks.deriveArgon2id(passcode: passcode, salt: salt, parameters: minimal)
    }
    let argon2Product = try milliseconds(count: productRepetitions) {
        try KeysealBenchHooks.deriveArgon2id(passcode: passcode, salt: salt, parameters: .standard)
    }
    results.add(
        Measurement(
            name: "Argon2id, product cost (64 MiB, t=3, p=1), p50", value: argon2Product.p50, unit: "ms",
            note: "the software part of every unlock, on every backend"))
    results.add(
        Measurement(name: "Argon2id, minimal cost (64 KiB, t=1), p50", value: argon2Minimal.p50, unit: "ms",
            note: "included in the hardware parts below"))

    var hostLookupP50: Double?
    for name in BenchBackend.names {
        let backend: BenchBackend
        do {
            backend = try BenchBackend.make(name, scratch: scratch)
        } catch {
            results.note("unlock on \(name) NOT measured: \(error)")
            continue
        }
        defer { backend.cleanup() }
        let directory = scratch.appendingPathComponent("unlock-\(name)")
        let configuration = KeychainStore.Configuration(argon2: minimal)

        let provisionStart = nanoseconds()
        var store = try KeychainStore.embedded(directory: directory, device: backend.device, configuration: configuration)
        let provisionMilliseconds = Double(nanoseconds() - provisionStart) / 1e6
        try store.setPasscode(passcode)
        try populate(store, count: 1_000)
        store.close()
        results.add(Measurement(name: "\(name): create and provision a store", value: provisionMilliseconds, unit: "ms"))

        let open = try milliseconds(count: repetitions) {
            let opened = try KeychainStore.embedded(
                directory: directory, device: backend.device, configuration: configuration)
            opened.close()
        }
        results.add(
            Measurement(
                name: "\(name): store open (reboot), p50", value: open.p50, unit: "ms",
                note: String(format: "max %.2f ms", open.max)))

        store = try KeychainStore.embedded(directory: directory, device: backend.device, configuration: configuration)
        try store.unlock(passcode: passcode)
        let hardware = try milliseconds(count: repetitions) {
            try store.lock()
            try store.unlock(passcode: passcode)
        }
        // The lock is part of each sample; time it alone and take it out.
        var lockSamples: [Double] = []
        for _ in 0..<repetitions {
            let t0 = nanoseconds()
            try store.lock()
            lockSamples.append(Double(nanoseconds() - t0) / 1e6)
            try store.unlock(passcode: passcode)
        }
        lockSamples.sort()
        let unlockHardware = hardware.p50 - lockSamples[lockSamples.count / 2]
        var floorNote = ""
        if let tcti = backend.tcti {
            // The raw ESAPI floor on the same stack, in the same run.
            let floor = try ESAPIFloor.measure(tcti: tcti, count: repetitions)
            results.add(
                Measurement(
                    name: "\(name): raw ESAPI Esys_Unseal, loaded object, password session, p50 (floor)",
                    value: floor.unseal.p50, unit: "ms", note: String(format: "max %.2f ms", floor.unseal.max)))
            results.add(
                Measurement(
                    name: "\(name): raw ESAPI Esys_CreatePrimary, storage primary ECC P-256, p50",
                    value: floor.createPrimary.p50, unit: "ms",
                    note: String(format: "max %.2f ms", floor.createPrimary.max)))
            floorNote = String(format: "; %.1f× the Esys_Unseal floor", unlockHardware / floor.unseal.p50)
        }
        results.add(
            atMost(
                "\(name): unlock, hardware part (Argon2id minimal), p50", unlockHardware, "ms", limit: 15,
                note: String(format: "lock excluded; max %.2f ms", hardware.max) + floorNote))

        _ = lookups(store, items: 1_000, count: 1_000)
        var lookup = lookups(store, items: 1_000, count: quick ? 5_000 : 20_000, name: "\(name) embedded")
        if let reference = hostLookupP50 {
            lookup.floor = "host-key lookups"
            lookup.fractionOfFloor = reference / lookup.p50Microseconds
            lookup.target = "unchanged by the backend (p50 within 25 %)"
            lookup.meetsTarget = lookup.p50Microseconds <= reference * 1.25
        } else {
            hostLookupP50 = lookup.p50Microseconds
        }
        results.add(lookup)
        store.close()

        // The whole unlock at the product's Argon2id cost: Argon2id plus the hardware part.
        // (A store of its own on a device of its own: a token holds one store's key.)
        let productBackend = try BenchBackend.make(
            name, scratch: scratch.appendingPathComponent("product"), second: true)
        defer { productBackend.cleanup() }
        let productDirectory = scratch.appendingPathComponent("unlock-\(name)-product")
        let product = try KeychainStore.embedded(directory: productDirectory, device: productBackend.device)
        try product.setPasscode(passcode)
        let total = try milliseconds(count: productRepetitions) {
            try product.lock()
            try product.unlock(passcode: passcode)
        }
        product.close()
        results.add(
            Measurement(
                name: "\(name): unlock, product Argon2id cost, p50", value: total.p50, unit: "ms",
                note: String(format: "≈ Argon2id %.1f ms + hardware %.1f ms", argon2Product.p50, unlockHardware)))
    }
}
