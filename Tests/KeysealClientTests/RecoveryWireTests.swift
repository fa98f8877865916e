import Foundation
import Testing

@testable import KeysealClient

/// The messages of recovery, re-sealing, rollback, the attestation key's enrollment and the doctor commands, whose
/// encodings no other suite round-trips.
@Suite("Wire coding of recovery, boot, attestation and doctor messages")
struct RecoveryWireTests {
    static func roundTrip(_ request: WireRequest) throws -> WireRequest {
        try WireRequest.decode(payload: Array(try request.encodedFrame().dropFirst(4)))
    }

    static func roundTrip(_ response: WireResponse) throws -> WireResponse {
        try WireResponse.decode(payload: Array(response.encodedFrame().dropFirst(4)))
    }

    @Test("recovery and re-seal requests round-trip their recovery key, passcode and PCR selection")
    func recoveryRequests() throws {
        let passcode = SecretBytes(utf8: "pâsscode")
        let key = SecretBytes(utf8: "ABCD-EFGH-IJKL")
        guard case .createRecoveryKey(let created?) = try Self.roundTrip(.createRecoveryKey(passcode: passcode)),
            case .createRecoveryKey(nil) = try Self.roundTrip(.createRecoveryKey(passcode: nil)),
            case .recover(let recoveryKey, let recoverPasscode?) = try Self.roundTrip(
                .recover(key: key, passcode: passcode)
            ),
            case .recover(_, nil) = try Self.roundTrip(.recover(key: key, passcode: nil)),
            case .tpmReseal(let resealPasscode?, let pcrs?) = try Self.roundTrip(
                .tpmReseal(passcode: passcode, pcrs: [0, 7, 14])
            ),
            case .tpmReseal(nil, nil) = try Self.roundTrip(.tpmReseal(passcode: nil, pcrs: nil)),
            case .tpmReseal(nil, let noPCRs?) = try Self.roundTrip(.tpmReseal(passcode: nil, pcrs: [])),
            case .acceptRollback = try Self.roundTrip(.acceptRollback)
        else {
            Issue.record("a recovery request did not round-trip")
            return
        }
        #expect(created.utf8String == "pâsscode" && recoverPasscode.utf8String == "pâsscode")
        #expect(resealPasscode.utf8String == "pâsscode")
        #expect(recoveryKey.utf8String == "ABCD-EFGH-IJKL")
        #expect(pcrs == [0, 7, 14] && noPCRs.isEmpty)
    }

    @Test("a status with a boot state round-trips it")
    func bootStatus() throws {
        let boot = BootStatus(
            pcrs: [0, 2, 7],
            pcrsMatch: false,
            recoveryRequired: true,
            recoveryKeySet: true,
            rolledBack: false,
            counterIndex: 0x0150_0016,
            counterValue: 1 << 40,
            detail: "PCR 7 changed"
        )
        let status = StoreStatus(
            lockState: .beforeFirstUnlock,
            passcodeSet: true,
            device: DeviceKeyStatus(backend: "tpm", hardwareBacked: true, guessingHardwareLimited: true, detail: ""),
            boot: boot
        )
        let unbound = BootStatus(
            pcrs: [],
            pcrsMatch: true,
            recoveryRequired: false,
            recoveryKeySet: false,
            rolledBack: true,
            counterIndex: nil,
            counterValue: nil,
            detail: ""
        )
        var rolledBack = status
        rolledBack.boot = unbound
        #expect(try Self.roundTrip(.status(status)) == .status(status))
        #expect(try Self.roundTrip(.status(rolledBack)) == .status(rolledBack))
    }

    @Test("the attestation key's enrollment steps round-trip")
    func attestationSteps() throws {
        let steps: [WireAttestationStep] = [
            .enrollmentRequest,
            .activate(credentialBlob: Data([1, 2, 3]), secret: Data([0, 0xff])),
            .install(certificates: [Data([0x30, 0x82]), Data(), Data(repeating: 9, count: 700)]),
            .install(certificates: []),
        ]
        for step in steps {
            guard case .attestation(let decoded) = try Self.roundTrip(.attestation(step)) else {
                Issue.record("not an attestation step")
                continue
            }
            #expect(decoded == step)
        }
        let version = try WireRequest.ping.encodedFrame()[4]
        #expect(throws: KeychainError.self) { try WireRequest.decode(payload: [version, 60, 3]) }
    }

    @Test("the doctor's requests and its undecryptable rows round-trip")
    func doctor() throws {
        guard case .undecryptableItems = try Self.roundTrip(.undecryptableItems),
            case .deleteUndecryptable(nil) = try Self.roundTrip(.deleteUndecryptable(ids: nil)),
            case .deleteUndecryptable(let ids?) = try Self.roundTrip(.deleteUndecryptable(ids: ["00ff", "ab"])),
            case .deleteUndecryptable(let none?) = try Self.roundTrip(.deleteUndecryptable(ids: []))
        else {
            Issue.record("a doctor request did not round-trip")
            return
        }
        #expect(ids == ["00ff", "ab"] && none.isEmpty)
        let rows = [
            UndecryptableItem(
                id: "0011",
                itemClass: "genp",
                accessibility: "ak",
                accessGroup: "g",
                reason: .authentication,
                detail: "fails authentication"
            ),
            UndecryptableItem(
                id: "",
                itemClass: "keys",
                accessibility: "zz",
                accessGroup: "",
                reason: .unknownAccessibility,
                detail: ""
            ),
        ]
        #expect(try Self.roundTrip(.undecryptable(rows)) == .undecryptable(rows))
        #expect(try Self.roundTrip(.undecryptable([])) == .undecryptable([]))
    }
}
