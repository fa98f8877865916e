import Foundation
import KeysealCore
import KeysealTPM
import KeysealTestSupport
import Testing

/// PCR-bound objects and the anti-rollback counter of ``TPMDeviceKey`` on swtpm (docs/TPM.md).
@Suite("TPM boot binding and counter on swtpm")
struct TPMBindingTests {
    static func extend(_ fixture: SwtpmFixture, pcr: Int = 7) throws {
        try fixture.tool("tpm2_pcrextend", ["\(pcr):sha256=" + String(repeating: "cd", count: 32)])
    }

    @Test(
        "a PCR-bound device object unseals while PCR 7 matches; after an extend it is recovery required, nothing tried"
    )
    func boundDeviceObject() throws {
        try withTPM { fixture, key in
            try key.bind(to: [7])
            let blob = try key.seal(secret(1))
            #expect(try TPMDeviceKey.boundPCRs(ofBlob: blob) == [7])
            #expect(try key.pcrsMatch(deviceBlob: blob))
            #expect(bytes(try key.unseal(blob)) == bytes(secret(1)))
            try Self.extend(fixture)
            #expect(try !key.pcrsMatch(deviceBlob: blob))
            let error = try #require(throws: KeychainError.self) { try key.unseal(blob) }
            #expect(error.status == KeychainStatus.recoveryRequired && error.notTried)
            // Another PCR does not matter.
            let other = try key.seal(secret(2))
            try Self.extend(fixture, pcr: 8)
            #expect(bytes(try key.unseal(other)) == bytes(secret(2)))
        }
    }

    @Test("a bound passcode object needs the PCRs and the authorization; refused after an extend without a counted try")
    func boundPasscodeObject() throws {
        try withTPM(maxTries: 10) { fixture, key in
            try key.bind(to: [7])
            let blob = try key.sealWithPasscode(secret(1), authorization: secret(9))
            #expect(bytes(try key.unsealWithPasscode(blob, authorization: secret(9))) == bytes(secret(1)))
            #expect(throws: KeychainError.authFailed) { try key.unsealWithPasscode(blob, authorization: secret(8)) }
            #expect(try fixture.lockoutCounter() == 1)
            try Self.extend(fixture)
            let error = try #require(throws: KeychainError.self) {
                try key.unsealWithPasscode(blob, authorization: secret(9))
            }
            #expect(error.status == KeychainStatus.recoveryRequired)
            #expect(try fixture.lockoutCounter() == 1)
        }
    }

    @Test("an unbound recovery object opens whatever the PCRs; a wrong authorization is counted")
    func recoveryObjectIsUnbound() throws {
        try withTPM(maxTries: 10) { fixture, key in
            try key.bind(to: [7])
            let blob = try key.sealUnbound(secret(3), authorization: secret(4))
            #expect(try TPMDeviceKey.boundPCRs(ofBlob: blob).isEmpty)
            try Self.extend(fixture)
            #expect(bytes(try key.unsealWithPasscode(blob, authorization: secret(4))) == bytes(secret(3)))
            #expect(throws: KeychainError.authFailed) { try key.unsealWithPasscode(blob, authorization: secret(5)) }
            #expect(try fixture.lockoutCounter() == 1)
        }
    }

    @Test("the counter: defined once, read by anyone, moved only with its authorization, never back")
    func counter() throws {
        try withTPM { fixture, key in
            let defined = try key.defineCounter(authorization: secret(6))
            let (index, name) = (defined.index, defined.name)
            #expect(try key.readCounter(index: index, name: name) == defined.value)
            #expect(try key.incrementCounter(index: index, name: name, authorization: secret(6)) == defined.value + 1)
            #expect(throws: KeychainError.self) {
                try key.incrementCounter(index: index, name: name, authorization: secret(7))
            }
            #expect(try key.readCounter(index: index, name: name) == defined.value + 1)
            // A second store on the same TPM gets the next free index.
            let second = try key.defineCounter(authorization: secret(8))
            #expect(second.index == index + 1)
            // The counter survives a power cut (not ORDERLY: every increment is in NV at once).
            try fixture.restart()
            #expect(try key.readCounter(index: index, name: name) == defined.value + 1)
            try fixture.tool("tpm2_nvundefine", ["0x" + String(index, radix: 16), "-C", "o"])
            #expect(throws: KeychainError.decode) { try key.readCounter(index: index, name: name) }
        }
    }

    @Test("the counter's Name, as the TPM reports it, is the Name of Keyseal's counter template at its index")
    func counterNameIsTheTemplateName() throws {
        try withTPM { _, key in
            let defined = try key.defineCounter(authorization: secret(6))
            #expect(defined.name.count == 34)
            #expect(defined.name == TPMDeviceKey.counterName(index: defined.index))
            #expect(defined.name != TPMDeviceKey.counterName(index: defined.index + 1))
        }
    }

    @Test(
        "an index defined by root in place of the counter is refused with errKeysealRolledBack, read or increment",
        arguments: NVIndexReplacement.allCases
    )
    func replacedCounterIsRefused(replacement: NVIndexReplacement) throws {
        try withTPM { fixture, key in
            let defined = try key.defineCounter(authorization: secret(6))
            try fixture.replaceNVIndex(defined.index, with: replacement, holding: defined.value)
            for attempt in ["read", "increment"] {
                let error = try #require(throws: KeychainError.self, "\(attempt)") {
                    attempt == "read"
                        ? try key.readCounter(index: defined.index, name: defined.name)
                        : try key.incrementCounter(index: defined.index, name: defined.name, authorization: secret(6))
                }
                #expect(error.status == KeychainStatus.rolledBack)
                #expect(error.message.contains("is not this store's anti-rollback counter"))
            }
        }
    }

    @Test("timings on swtpm: bound seal and unseal, counter read and increment (medians of 21, printed)")
    func timings() throws {
        try withTPM(maxTries: 32) { _, key in
            func median(_ body: () throws -> Void) rethrows -> String {
                var samples: [Duration] = []
                for _ in 0..<21 {
                    let start = ContinuousClock.now
                    try body()
                    samples.append(ContinuousClock.now - start)
                }
                let (seconds, attoseconds) = samples.sorted()[10].components
                return String(format: "%.2f ms", Double(seconds) * 1000 + Double(attoseconds) / 1e15)
            }
            try key.bind(to: [7])
            let blob = try key.seal(secret(1))
            let passcode = try key.sealWithPasscode(secret(1), authorization: secret(2))
            let counter = try key.defineCounter(authorization: secret(3))
            let seal = try median { _ = try key.seal(secret(1)) }
            let unseal = try median { _ = try key.unseal(blob) }
            let unsealPasscode = try median { _ = try key.unsealWithPasscode(passcode, authorization: secret(2)) }
            let match = try median { _ = try key.pcrsMatch(deviceBlob: blob) }
            let read = try median { _ = try key.readCounter(index: counter.index, name: counter.name) }
            let increment = try median {
                _ = try key.incrementCounter(index: counter.index, name: counter.name, authorization: secret(3))
            }
            print(
                "TPM binding timings (swtpm, median of 21): bound seal \(seal), bound unseal \(unseal), bound "
                    + "unsealWithPasscode \(unsealPasscode), pcrsMatch \(match), counter read \(read), counter "
                    + "increment \(increment)"
            )
        }
    }
}
