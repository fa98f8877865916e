import Crypto
import Foundation
import Keyseal
import KeysealCore

/// Signatures: a stored software P-256 key through the library against swift-crypto's own signing of the same
/// message, and a hardware key (swtpm) through the library against its provider's sign on the already-resolved key.
func keysSection(scratch: URL, quick: Bool, results: Results) throws {
    let message = Data(repeating: 0x5a, count: 32)
    let store = try KeychainStore.embedded(
        directory: scratch.appendingPathComponent("store-keys"),
        device: .hostKey(file: scratch.appendingPathComponent("keys-host.key")))
    defer { store.close() }
    let stored = try store.generateKey(KeyGenerationRequest(keyType: .p256))
    let swiftCrypto = P256.Signing.PrivateKey()
    let software = try interleaved(
        rounds: 10, perRound: quick ? 100 : 400,
        [
            ("P-256 sign, swift-crypto", { _ in _ = try swiftCrypto.signature(for: message) }),
            ("P-256 sign, stored software key through the library", { _ in
                _ = try store.sign(stored.reference, algorithm: "algid:sign:ECDSA:message-X962:SHA256", data: message)
            }),
        ])
    results.add(software[0])
    results.add(withFloor(software[1], floor: software[0], target: 0.8))

    let tpm = try BenchBackend.make("swtpm", scratch: scratch)
    defer { tpm.cleanup() }
    let tpmStore = try KeychainStore.embedded(directory: scratch.appendingPathComponent("store-keys-tpm"), device: tpm.device)
    defer { tpmStore.close() }
    let key = try tpmStore.generateHardwareP256Key(tag: Data("bench".utf8))
    let raw = try KeysealBenchHooks.hardwareSigner(tpmStore, key.reference)
    let digest = Array(SHA256.hash(data: message))
    let hardware = try interleaved(
        rounds: 5, perRound: quick ? 20 : 100,
        [
            ("P-256 sign in swtpm, provider on a resolved key", { _ in _ = try raw(digest) }),
            ("P-256 sign in swtpm, through the library", { _ in _ = try key.signature(for: message) }),
        ])
    results.add(hardware[0])
    results.add(withFloor(hardware[1], floor: hardware[0], target: 0.8))
}

private func withFloor(_ figure: Figure, floor: Figure, target: Double) -> Figure {
    var figure = figure
    figure.floor = floor.name
    figure.fractionOfFloor = figure.opsPerSecond / floor.opsPerSecond
    figure.target = String(format: "≥ %.0f %%", target * 100)
    figure.meetsTarget = figure.fractionOfFloor! >= target
    return figure
}
