// Key signing next to its floors:
// - swtpm: a raw ESAPI TPM2_Sign in C on a loaded key over a password session (the floor); the provider's
//   TPMDeviceKey.sign (a kept key, its HMAC authorization computed by Keyseal); HardwareP256Key.signature(for:)
//   through the library on an embedded store; and a hardware key's sign through keyseald. Each on a swtpm of its own.
// - SoftHSM2: a raw C_SignInit + C_Sign in C (the floor); PKCS11DeviceKey.sign; the library; keyseald.
// - software P-256: a stored software key's sign through the library next to swift-crypto's own P256.Signing.
import Benchmark
import CKeysealBenchFloors
import Crypto
import Foundation
import Keyseal
import KeysealBenchSupport
import KeysealCore
import KeysealPKCS11
import KeysealTPM
import KeysealTestSupport

let digest = [UInt8](repeating: 0x11, count: 32)
let authorization = SecretBytes(copying: [UInt8](repeating: 0x5A, count: 32))
let digestAlgorithm = "algid:sign:ECDSA:digest-X962:SHA256"
let messageAlgorithm = "algid:sign:ECDSA:message-X962:SHA256"

/// A device of one stack, for one benchmark.
struct SignDevice {
    var device: DeviceKey
    /// keyseald's backend options and environment for this device.
    var daemonArguments: [String]
    var environment: [String: String]
    var floor: () -> OpaquePointer?
    /// The device's provider with a P-256 key of its own: (sign the digest once, close).
    var provider: () throws -> (sign: () throws -> Void, close: () -> Void)
    var cleanup: () -> Void

    static func make(_ stack: String) throws -> SignDevice {
        if stack == "swtpm" {
            let tpm = try SwtpmFixture(maxTries: 32)
            return SignDevice(
                device: .tpm(tcti: tpm.tcti),
                daemonArguments: ["--backend", "tpm", "--tcti", tpm.tcti],
                environment: [:],
                floor: { keyseal_tpm_floor_open(tpm.tcti, 1) },
                provider: {
                    let key = TPMDeviceKey(tcti: tpm.tcti)
                    try key.open(provisioning: true)
                    let blob = try key.generateP256Key(authorization: authorization).blob
                    return (
                        { _ = try key.sign(digest: digest, keyBlob: blob, authorization: authorization) },
                        { key.close() }
                    )
                },
                cleanup: { tpm.stop() }
            )
        }
        let token = try SoftHSMFixture()
        return SignDevice(
            device: .pkcs11(module: token.module, token: token.tokenLabel, pinFile: token.pinFile),
            daemonArguments: [
                "--backend", "pkcs11", "--pkcs11-module", token.module, "--pkcs11-token", token.tokenLabel,
                "--pkcs11-pin-file", token.pinFile.path,
            ],
            environment: token.environment,
            floor: { keyseal_pkcs11_floor_open(token.module, token.tokenLabel, token.pin) },
            provider: {
                let key = PKCS11DeviceKey(module: token.module, tokenLabel: token.tokenLabel, pinFile: token.pinFile)
                try key.open(provisioning: true)
                let blob = try key.generateP256Key(authorization: authorization).blob
                return (
                    { _ = try key.sign(digest: digest, keyBlob: blob, authorization: authorization) },
                    {
                        try? key.deleteKey(keyBlob: blob)
                        key.close()
                    }
                )
            },
            cleanup: { token.remove() }
        )
    }
}

let benchmarks: @Sendable () -> Void = {
    let signConfiguration = benchConfiguration(maxIterations: 2_000, seconds: 6, warmup: 20)
    for stack in ["swtpm", "SoftHSM2"] {
        let device = Shared<SignDevice>()
        let floor = Shared<OpaquePointer>()
        let floorName =
            stack == "swtpm" ? "raw ESAPI TPM2_Sign (C, password session)" : "raw C_SignInit + C_Sign (C, CKM_ECDSA)"
        Benchmark(
            "\(stack): floor: \(floorName)",
            configuration: signConfiguration,
            closure: { benchmark in
                for _ in benchmark.scaledIterations {
                    let rc =
                        stack == "swtpm" ? keyseal_tpm_floor_sign(floor.value) : keyseal_pkcs11_floor_sign(floor.value)
                    guard rc == 0 else { fatalError("the sign floor failed: \(rc)") }
                }
            },
            setup: {
                device.value = try SignDevice.make(stack)
                guard let opened = device.value.floor() else {
                    throw BenchError("the \(stack) sign floor did not open")
                }
                floor.value = opened
            },
            teardown: {
                if stack == "swtpm" {
                    keyseal_tpm_floor_close(floor.value)
                } else {
                    keyseal_pkcs11_floor_close(floor.value)
                }
                device.value.cleanup()
            }
        )

        // The provider alone, as the engine calls it.
        let provider = Shared<(sign: () throws -> Void, close: () -> Void)>()
        Benchmark(
            "\(stack): provider \(stack == "swtpm" ? "TPMDeviceKey.sign (kept key, HMAC session)" : "PKCS11DeviceKey.sign")",
            configuration: signConfiguration,
            closure: { benchmark in
                for _ in benchmark.scaledIterations { orFail("sign") { try provider.value.sign() } }
            },
            setup: {
                device.value = try SignDevice.make(stack)
                provider.value = try device.value.provider()
            },
            teardown: {
                provider.value.close()
                device.value.cleanup()
            }
        )

        // Through the library on an embedded store: a hardware key generated by the library, signing a digest.
        let libraryStore = Shared<KeychainStore>()
        let libraryKey = Shared<HardwareP256Key>()
        let libraryDirectory = Shared<URL>()
        let sha = SHA256.hash(data: Data("keyseal-bench".utf8))
        Benchmark(
            "\(stack): library HardwareP256Key.signature(for: digest)",
            configuration: signConfiguration,
            closure: { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(orFail("sign") { try libraryKey.value.signature(for: sha) })
                }
            },
            setup: {
                device.value = try SignDevice.make(stack)
                libraryDirectory.value = try BenchEnvironment.privateDirectory("keys-\(stack)")
                libraryStore.value = try KeychainStore.embedded(
                    directory: libraryDirectory.value.appendingPathComponent("store"),
                    device: device.value.device
                )
                libraryKey.value = try libraryStore.value.generateHardwareP256Key(tag: Data("bench".utf8))
            },
            teardown: {
                libraryStore.value.close()
                device.value.cleanup()
                try? FileManager.default.removeItem(at: libraryDirectory.value)
            }
        )

        // Through keyseald: the daemon holds the device; the client sends the digest and gets the signature.
        let daemon = Shared<DaemonProcess>()
        let client = Shared<KeychainStore>()
        let reference = Shared<KeyReference>()
        Benchmark(
            "\(stack): through keyseald, hardware key sign (digest)",
            configuration: signConfiguration,
            closure: { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(
                        orFail("sign") {
                            try client.value.sign(reference.value, algorithm: digestAlgorithm, data: Data(digest))
                        }
                    )
                }
            },
            setup: {
                device.value = try SignDevice.make(stack)
                let directory = try BenchEnvironment.privateDirectory("keys-daemon-\(stack)")
                daemon.value = try DaemonProcess(
                    arguments: ["--store", directory.appendingPathComponent("store").path, "--no-auto-lock"]
                        + device.value.daemonArguments,
                    environment: device.value.environment
                )
                client.value = try KeychainStore.daemon(socket: daemon.value.socket)
                reference.value = try client.value.generateKey(KeyGenerationRequest(keyType: .p256, inHardware: true))
                    .reference
            },
            teardown: {
                client.value.close()
                daemon.value.stop()
                device.value.cleanup()
            }
        )
    }

    // Software P-256: a stored key's sign through the library (embedded, host key) next to swift-crypto's own.
    let message = Data(repeating: 0x42, count: 64)
    let softwareKey = P256.Signing.PrivateKey()
    Benchmark(
        "software P-256: floor: swift-crypto P256.Signing sign (message, SHA-256)",
        configuration: benchConfiguration()
    ) {
        benchmark in
        for _ in benchmark.scaledIterations { blackHole(orFail("sign") { try softwareKey.signature(for: message) }) }
    }
    let softwareStore = Shared<KeychainStore>()
    let softwareReference = Shared<KeyReference>()
    let softwareDirectory = Shared<URL>()
    Benchmark(
        "software P-256: library KeychainStore.sign (message, SHA-256, stored key)",
        configuration: benchConfiguration(),
        closure: { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(
                    orFail("sign") {
                        try softwareStore.value.sign(
                            softwareReference.value,
                            algorithm: messageAlgorithm,
                            data: message
                        )
                    }
                )
            }
        },
        setup: {
            softwareDirectory.value = try BenchEnvironment.privateDirectory("keys-software")
            softwareStore.value = try KeychainStore.embedded(
                directory: softwareDirectory.value.appendingPathComponent("store"),
                device: .hostKey(file: softwareDirectory.value.appendingPathComponent("host.key"))
            )
            softwareReference.value = try softwareStore.value.generateKey(KeyGenerationRequest(keyType: .p256))
                .reference
        },
        teardown: {
            softwareStore.value.close()
            try? FileManager.default.removeItem(at: softwareDirectory.value)
        }
    )
}
