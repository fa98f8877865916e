import CKeysealBenchFloors
import Foundation
import KeysealCore
import KeysealPKCS11
import KeysealTPM
import KeysealTestSupport

/// Hardware key signing next to its floors, measured in the same run, in alternating rounds:
/// - swtpm: the provider's `TPMDeviceKey.sign` (a kept key, its HMAC authorization computed by Keyseal) next to a
///   raw ESAPI `TPM2_Sign` loop in C on a loaded key with a password session. Each runs on a swtpm of its own (one
///   swtpm has three transient slots: the floor's primary and key and the provider's kept ones do not all fit).
/// - SoftHSM2: `PKCS11DeviceKey.sign` next to a raw `C_SignInit` + `C_Sign` loop in C on the same token.
///
/// Later figures hook in here: sign through the library (`Keyseal`'s hardware key type) and through keyseald, each
/// next to the same floors (targets: library ≥ 80 %, keyseald ≥ 70 % of the raw loop); see ``laterSignFigures``.
func keysSection(quick: Bool, results: Results) throws {
    let rounds = quick ? 3 : 5
    let perRound = quick ? 100 : 300
    let digest = [UInt8](repeating: 0x11, count: 32)
    let authorization = SecretBytes(copying: [UInt8](repeating: 0x5A, count: 32))

    do {
        let floorTPM = try SwtpmFixture(maxTries: 32)
        defer { floorTPM.stop() }
        let providerTPM = try SwtpmFixture(maxTries: 32)
        defer { providerTPM.stop() }
        let provider = TPMDeviceKey(tcti: providerTPM.tcti)
        defer { provider.close() }
        try provider.open(provisioning: true)
        let key = try provider.generateP256Key(authorization: authorization)
        let figures = try floorAndProvider(
            rounds: rounds, perRound: perRound, floorName: "swtpm: raw ESAPI TPM2_Sign loop (C, password session)",
            providerName: "swtpm: TPMDeviceKey.sign (kept key, HMAC session)",
            floor: { samples in keyseal_floor_tpm_sign(floorTPM.tcti, samples.baseAddress!, Int32(samples.count)) },
            provider: { _ = try provider.sign(digest: digest, keyBlob: key.blob, authorization: authorization) })
        for figure in figures { results.add(figure) }
    } catch {
        results.note("TPM sign NOT measured: \(error)")
    }

    do {
        let token = try SoftHSMFixture()
        defer { token.remove() }
        let provider = PKCS11DeviceKey(module: token.module, tokenLabel: token.tokenLabel, pinFile: token.pinFile)
        defer { provider.close() }
        try provider.open(provisioning: true)
        let key = try provider.generateP256Key(authorization: authorization)
        defer { try? provider.deleteKey(keyBlob: key.blob) }
        let figures = try floorAndProvider(
            rounds: rounds, perRound: perRound, floorName: "SoftHSM2: raw C_SignInit + C_Sign loop (C, CKM_ECDSA)",
            providerName: "SoftHSM2: PKCS11DeviceKey.sign",
            floor: { samples in
                keyseal_floor_pkcs11_sign(
                    token.module, token.tokenLabel, token.pin, samples.baseAddress!, Int32(samples.count))
            },
            provider: { _ = try provider.sign(digest: digest, keyBlob: key.blob, authorization: authorization) })
        for figure in figures { results.add(figure) }
    } catch {
        results.note("PKCS#11 sign NOT measured: \(error)")
    }

    for note in laterSignFigures() { results.note(note) }
}

/// Sign through the library and through keyseald: measured once the engine's hardware key items exist.
func laterSignFigures() -> [String] {
    ["sign through the library (target ≥ 80 % of the raw loop) and through keyseald (≥ 70 %): not measured yet "
        + "(the engine's hardware key items are not in this build)"]
}

/// Alternating rounds of the C floor (which fills its own samples) and of the provider; the provider's figure
/// carries its fraction of the floor (floor p50 / provider p50) against the 80 % target.
func floorAndProvider(
    rounds: Int, perRound: Int, floorName: String, providerName: String,
    floor: (UnsafeMutableBufferPointer<UInt64>) -> Int32, provider: () throws -> Void
) throws -> [Figure] {
    var floorSamples = Samples()
    var providerSamples = Samples()
    var floorSeconds = 0.0
    var providerSeconds = 0.0
    try provider()  // warm: the key is loaded and the session started once
    for _ in 0..<rounds {
        var buffer = [UInt64](repeating: 0, count: perRound)
        let rc = buffer.withUnsafeMutableBufferPointer { floor($0) }
        guard rc == 0 else { throw BenchError("the floor loop failed with 0x\(String(UInt32(bitPattern: rc), radix: 16))") }
        floorSamples.values += buffer
        floorSeconds += Double(buffer.reduce(0, +)) / 1e9
        for _ in 0..<perRound {
            let t0 = nanoseconds()
            try provider()
            let elapsed = nanoseconds() - t0
            providerSamples.values.append(elapsed)
            providerSeconds += Double(elapsed) / 1e9
        }
    }
    let floorFigure = figure(floorName, samples: floorSamples, seconds: floorSeconds)
    var providerFigure = figure(providerName, samples: providerSamples, seconds: providerSeconds)
    providerFigure.floor = floorName
    providerFigure.fractionOfFloor = floorFigure.p50Microseconds / providerFigure.p50Microseconds
    providerFigure.target = "≥ 80 % of the floor"
    providerFigure.meetsTarget = providerFigure.fractionOfFloor! >= 0.8
    return [floorFigure, providerFigure]
}
