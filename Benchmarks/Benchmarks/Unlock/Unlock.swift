// Unlock and store open per stack (host key; swtpm's socket; tpm2-abrmd on a private bus; tpm2-pkcs11 behind that
// tpm2-abrmd; SoftHSM2), with Argon2id at the smallest cost libargon2 accepts so that an unlock is its hardware part
// (plus HKDF and unwrapping the class keys); Argon2id at the product's cost shown apart (libargon2, as an unlock
// derives); lookups per stack (class keys are unwrapped once per unlock: lookups must not depend on the stack); and
// on the TPM stacks a raw ESAPI Esys_Unseal and Esys_CreatePrimary in C, the floor of the hardware part.
import Benchmark
import CKeysealBenchFloors
import Foundation
import Keyseal
import KeysealBenchSupport
import KeysealSecurity
import KeysealTestSupport

func argon2id(_ parameters: Argon2Parameters) {
    let passcodeBytes = Array(benchPasscode.utf8)
    let salt = [UInt8](repeating: 7, count: 16)
    var out = [UInt8](repeating: 0, count: 32)
    let rc = keyseal_argon2id(
        passcodeBytes,
        passcodeBytes.count,
        salt,
        salt.count,
        UInt32(parameters.memoryKiB),
        UInt32(parameters.iterations),
        UInt32(parameters.parallelism),
        &out
    )
    guard rc == 0 else { fatalError("argon2id failed: \(rc)") }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark(
        "Argon2id, product cost (64 MiB, t=3, p=1)",
        configuration: benchConfiguration(maxIterations: 10, seconds: 10, warmup: 1)
    ) { benchmark in
        for _ in benchmark.scaledIterations { argon2id(.standard) }
    }
    Benchmark("Argon2id, minimal cost (64 KiB, t=1)", configuration: benchConfiguration(maxIterations: 200)) {
        benchmark in
        for _ in benchmark.scaledIterations { argon2id(minimalArgon2) }
    }

    for name in BenchBackend.names {
        let shared = Shared<BackendStore>()
        // One unlock per iteration; the lock before it is the preamble, outside the measurement.
        let unlockOnce: @Sendable (Benchmark) -> Void = { benchmark in
            let store = shared.value.store!
            _ = orFail("lock") { try store.lock() }
            benchmark.startMeasurement()
            orFail("unlock") { try store.unlock(passcode: benchPasscode) }
        }
        Benchmark(
            "\(name): store open (reboot)",
            configuration: benchConfiguration(maxIterations: 30, seconds: 10, warmup: 2),
            closure: { benchmark in
                for _ in benchmark.scaledIterations { orFail("open") { try shared.value.open().close() } }
            },
            setup: {
                shared.value = try BackendStore(name, argon2: minimalArgon2)
                shared.value.store?.close()
                shared.value.store = nil
            },
            teardown: { shared.value.close() }
        )

        Benchmark(
            "\(name): unlock, hardware part (Argon2id minimal)",
            configuration: benchConfiguration(maxIterations: 30, seconds: 10, warmup: 2),
            closure: unlockOnce,
            setup: { shared.value = try BackendStore(name, argon2: minimalArgon2) },
            teardown: { shared.value.close() }
        )

        Benchmark(
            "\(name): embedded SecItemCopyMatching return data (1000 items)",
            configuration: benchConfiguration(maxIterations: 10_000),
            closure: lookupIterations(items: 1_000),
            setup: {
                shared.value = try BackendStore(name, argon2: minimalArgon2)
                try shared.value.store!.unlock(passcode: benchPasscode)
                KeychainStore.default = shared.value.store!
            },
            teardown: { shared.value.close() }
        )

        // The whole unlock at the product's Argon2id cost: Argon2id plus the hardware part.
        Benchmark(
            "\(name): unlock, product Argon2id cost",
            configuration: benchConfiguration(maxIterations: 5, seconds: 10, warmup: 1),
            closure: unlockOnce,
            setup: { shared.value = try BackendStore(name, argon2: .standard, items: 10) },
            teardown: { shared.value.close() }
        )

        guard name == "swtpm" || name == "tabrmd" else { continue }
        // The raw ESAPI floor on the same stack.
        let floor = Shared<OpaquePointer>()
        let backend = Shared<BenchBackend>()
        for (operation, call) in [
            ("Esys_Unseal, loaded object, password session", keyseal_tpm_floor_unseal),
            ("Esys_CreatePrimary, storage primary ECC P-256", keyseal_tpm_floor_create_primary),
        ] {
            Benchmark(
                "\(name): floor: raw ESAPI \(operation) (C)",
                configuration: benchConfiguration(
                    maxIterations: operation.hasPrefix("Esys_Unseal") ? 2_000 : 100,
                    seconds: 10
                ),
                closure: { benchmark in
                    for _ in benchmark.scaledIterations {
                        guard call(floor.value) == 0 else { fatalError("\(operation) failed") }
                    }
                },
                setup: {
                    let directory = try BenchEnvironment.privateDirectory("esapi-\(name)")
                    backend.value = try BenchBackend.make(name, directory: directory)
                    guard
                        let opened = keyseal_tpm_floor_open(
                            backend.value.tcti!,
                            operation.hasPrefix("Esys_Unseal") ? 1 : 0
                        )
                    else {
                        throw BenchError("the ESAPI floor did not open on \(name)")
                    }
                    floor.value = opened
                },
                teardown: {
                    keyseal_tpm_floor_close(floor.value)
                    backend.value.cleanup()
                }
            )
        }
    }
}
