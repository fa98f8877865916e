import Foundation
import KeysealCore
import KeysealTestSupport
import Testing

@testable import KeysealPKCS11

/// The median of `samples`, in milliseconds.
private func medianMilliseconds(_ samples: [Duration]) -> Double {
    let sorted = samples.sorted()
    let middle = sorted[sorted.count / 2]
    return Double(middle.components.seconds) * 1000 + Double(middle.components.attoseconds) / 1e15
}

/// Times `body` `count` times.
private func measure(_ count: Int, _ body: () throws -> Void) rethrows -> [Duration] {
    let clock = ContinuousClock()
    var samples: [Duration] = []
    samples.reserveCapacity(count)
    for _ in 0..<count { samples.append(try clock.measure(body)) }
    return samples
}

/// SoftHSM2 only: its limits are those of a software token; tpm2-pkcs11 behind tpm2-abrmd is timed per unlock in
/// the Unlock benchmark suite (Benchmarks/, Scripts/bench.sh).
@Suite("PKCS#11 timings on SoftHSM2")
struct PKCS11TimingTests {
    /// Run alone (`swift test --filter PKCS11TimingTests`, with `KEYSEAL_SOFTHSM_TOKENS=1` for a one-token
    /// SoftHSM2) to measure a cold module load: with other tests running, p11-kit shares an initialized SoftHSM2.
    @Test("opening, sealing and unsealing are fast enough for once-per-unlock use")
    func timings() throws {
        let fixture = try SoftHSMFixture()
        defer { fixture.remove() }
        try openDeviceKey(fixture, provisioning: true).close()

        let loads = try measure(20) { try PKCS11Module(path: fixture.module).finalize() }
        let opens = try measure(20) { try openDeviceKey(fixture, provisioning: false).close() }
        let key = try openDeviceKey(fixture, provisioning: false)
        defer { key.close() }
        let secret = SecretBytes.random(count: 32)
        let blob = try key.seal(secret)
        let seals = try measure(200) { _ = try key.seal(secret) }
        let unseals = try measure(200) { _ = try key.unseal(blob) }

        let load = medianMilliseconds(loads)
        let open = medianMilliseconds(opens)
        let seal = medianMilliseconds(seals)
        let unseal = medianMilliseconds(unseals)
        print(
            "PKCS#11 SoftHSM2 medians: module load + initialize + finalize \(String(format: "%.3f", load)) ms, "
                + "open (load + initialize + session + login + find key + close) "
                + "\(String(format: "%.3f", open)) ms, seal 32 B \(String(format: "%.3f", seal)) ms, "
                + "unseal 32 B \(String(format: "%.3f", unseal)) ms"
        )
        #expect(open < 500)
        #expect(seal < 50)
        #expect(unseal < 50)
    }
}
