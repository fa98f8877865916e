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

    /// A TPMDeviceKey that reaches `fixture` through a bus interposer.
    static func withInterposedTPM(_ body: (SwtpmFixture, TPMBusInterposer, TPMDeviceKey) throws -> Void) throws {
        let fixture = try SwtpmFixture()
        defer { fixture.stop() }
        let interposer = try TPMBusInterposer(upstream: fixture)
        defer { interposer.stop() }
        let key = TPMDeviceKey(tcti: interposer.tcti)
        defer { key.close() }
        try key.open(provisioning: true)
        try body(fixture, interposer, key)
    }

    static let nvRead: UInt32 = 0x0000_014E
    static let nvReadPublic: UInt32 = 0x0000_0169

    /// The parameter area of a response (after the parameterSize of a response with sessions) and its session area.
    static func split(_ response: [UInt8]) -> (parameters: [UInt8], sessions: [UInt8]) {
        guard response.count > 14, response[0..<2] == [0x80, 0x02] else { return (Array(response.dropFirst(10)), []) }
        let size = Int(response[10..<14].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        return (Array(response[14..<14 + size]), Array(response[(14 + size)...]))
    }

    /// `response` with `parameters` in place of its own (sizes fixed; its session area kept as it is).
    static func withParameters(_ response: [UInt8], _ parameters: [UInt8]) -> [UInt8] {
        let sessions = split(response).sessions
        let withSessions = response[0..<2] == [0x80, 0x02]
        let body = (withSessions ? bigEndian(UInt32(parameters.count)) : []) + parameters + sessions
        return Array(response[0..<2]) + bigEndian(UInt32(10 + body.count)) + Array(response[6..<10]) + body
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
    }

    @Test("a counter value changed on the bus between the TPM and Keyseal is refused, not read")
    func counterValueChangedOnTheBusIsRefused() throws {
        try Self.withInterposedTPM { _, interposer, key in
            let defined = try key.defineCounter(authorization: secret(6))
            let now = try key.incrementCounter(index: defined.index, name: defined.name, authorization: secret(6))
            #expect(try key.readCounter(index: defined.index, name: defined.name) == now)
            // The interposer answers NV_Read with the earlier value: what a rolled-back copy of the store recorded.
            let earlier = defined.value
            interposer.rewriteResponses(of: Self.nvRead) { response in
                var (parameters, _) = Self.split(response)
                guard parameters.count == 10 else { return response }
                for byte in 0..<8 { parameters[2 + byte] = UInt8(truncatingIfNeeded: earlier >> (56 - 8 * byte)) }
                return Self.withParameters(response, parameters)
            }
            let read = try? key.readCounter(index: defined.index, name: defined.name)
            #expect(read == nil, "read \(read.map(String.init) ?? "-") through a bus that changed the value")
        }
    }

    @Test("an index root defined in place of the counter, shown on the bus with the counter's public area, is refused")
    func replacedCounterHiddenOnTheBusIsRefused() throws {
        try Self.withInterposedTPM { fixture, interposer, key in
            let defined = try key.defineCounter(authorization: secret(6))
            #expect(try key.readCounter(index: defined.index, name: defined.name) == defined.value)
            let genuine = Self.split(try #require(interposer.lastResponse(of: Self.nvReadPublic))).parameters
            try fixture.replaceNVIndex(defined.index, with: .counterOtherAttributes, holding: defined.value)
            // The interposer answers NV_ReadPublic with the counter's own public area and Name.
            interposer.rewriteResponses(of: Self.nvReadPublic) { Self.withParameters($0, genuine) }
            let read = try? key.readCounter(index: defined.index, name: defined.name)
            #expect(read == nil, "read \(read.map(String.init) ?? "-") from an index that is not the counter")
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
