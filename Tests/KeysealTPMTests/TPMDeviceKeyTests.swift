import Foundation
import KeysealCore
import KeysealTPM
import KeysealTestSupport
import Testing

/// Starts a private swtpm with the given dictionary-attack parameters, opens a key on it, runs `body`, and closes
/// and removes both on every path.
func withTPM<Result>(
    maxTries: Int = 5,
    recoveryTime: Int = 60,
    lockoutRecovery: Int = 2,
    _ body: (SwtpmFixture, TPMDeviceKey) throws -> Result
) throws -> Result {
    let fixture = try SwtpmFixture(maxTries: maxTries, recoveryTime: recoveryTime, lockoutRecovery: lockoutRecovery)
    defer { fixture.stop() }
    let key = TPMDeviceKey(tcti: fixture.tcti)
    defer { key.close() }
    try key.open(provisioning: true)
    return try body(fixture, key)
}

/// 32 secret bytes, all `byte`.
func secret(_ byte: UInt8) -> SecretBytes { SecretBytes(copying: [UInt8](repeating: byte, count: 32)) }

func bytes(_ secret: SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

@Suite("TPM device key on swtpm")
struct TPMDeviceKeyTests {
    @Test("a sealed secret unseals to the same bytes")
    func sealUnsealRoundTrip() throws {
        try withTPM { _, key in
            let sealed = try key.seal(secret(0xA5))
            #expect(bytes(try key.unseal(sealed)) == bytes(secret(0xA5)))
        }
    }

    @Test("the identity is the same after re-opening and after a TPM restart")
    func identityIsStable() throws {
        try withTPM { fixture, key in
            let first = try key.deviceIdentity()
            key.close()
            try fixture.restart()
            let again = TPMDeviceKey(tcti: fixture.tcti)
            defer { again.close() }
            try again.open(provisioning: false)
            #expect(try again.deviceIdentity() == first)
            #expect(first.count == 34)  // SHA-256 nameAlg (2 bytes) ‖ digest (32)
        }
    }

    @Test("another TPM has another identity")
    func identityDiffersOnAnotherTPM() throws {
        let first = try withTPM { _, key in try key.deviceIdentity() }
        let second = try withTPM { _, key in try key.deviceIdentity() }
        #expect(first != second)
    }

    @Test("a blob from another TPM is refused with errSecDecode before any counted try")
    func blobFromAnotherTPMIsRefused() throws {
        let blob = try withTPM { _, key in try key.sealWithPasscode(secret(1), authorization: secret(2)) }
        try withTPM { fixture, key in
            let error = #expect(throws: KeychainError.decode) {
                try key.unsealWithPasscode(blob, authorization: secret(2))
            }
            #expect(error?.message == "this store was sealed by another device")
            key.close()
            let counter = try fixture.lockoutCounter()
            #expect(counter == 0)
        }
    }

    @Test("a blob is unsealed only by the call that matches how it was sealed")
    func blobKindsDoNotMix() throws {
        try withTPM { fixture, key in
            let device = try key.seal(secret(1))
            let passcode = try key.sealWithPasscode(secret(2), authorization: secret(3))
            #expect(throws: KeychainError.decode) { try key.unseal(passcode) }
            #expect(throws: KeychainError.decode) { try key.unsealWithPasscode(device, authorization: secret(3)) }
            key.close()
            let counter = try fixture.lockoutCounter()
            #expect(counter == 0)
        }
    }

    @Test("the right passcode authorization unseals a passcode object")
    func rightPasscodeUnseals() throws {
        try withTPM { _, key in
            let blob = try key.sealWithPasscode(secret(7), authorization: secret(8))
            #expect(bytes(try key.unsealWithPasscode(blob, authorization: secret(8))) == bytes(secret(7)))
        }
    }

    @Test("a wrong passcode is errSecAuthFailed with the tries Keyseal will still spend")
    func wrongPasscodeReportsTriesLeft() throws {
        try withTPM(maxTries: 5) { _, key in
            let blob = try key.sealWithPasscode(secret(7), authorization: secret(8))
            let error = #expect(throws: KeychainError.authFailed) {
                try key.unsealWithPasscode(blob, authorization: secret(9))
            }
            // 5 TPM tries, 1 spent, 1 kept in reserve.
            #expect(error?.triesLeft == 3)
            #expect(error?.message == "wrong passcode; the TPM allows 3 more tries before lockout")
        }
    }

    @Test("counted failures survive a TPM power loss, which itself counts one more")
    func failuresSurviveRestart() throws {
        try withTPM(maxTries: 5) { fixture, key in
            let blob = try key.sealWithPasscode(secret(7), authorization: secret(8))
            _ = try? key.unsealWithPasscode(blob, authorization: secret(9))
            _ = try? key.unsealWithPasscode(blob, authorization: secret(9))
            fixture.kill()
            try fixture.restart()
            // A TPM that was not shut down orderly counts one more failure at startup (TPM 2.0 Part 1, §19.8.6),
            // so that cutting the power during a try never saves the attacker a count.
            let counter = try fixture.lockoutCounter()
            #expect(counter == 3)
            let status = try key.status()
            #expect(status.hardwareTriesLeft == 1)  // 5 − 3 counted − 1 in reserve
        }
    }

    @Test("the TPM's last try is never spent, and the refusal says it is the reserve, not a lockout")
    func lastTryIsNeverSpent() throws {
        try withTPM(maxTries: 3, recoveryTime: 60) { fixture, key in
            let blob = try key.sealWithPasscode(secret(7), authorization: secret(8))
            let first = #expect(throws: KeychainError.authFailed) {
                try key.unsealWithPasscode(blob, authorization: secret(9))
            }
            #expect(first?.triesLeft == 1)
            let second = #expect(throws: KeychainError.authFailed) {
                try key.unsealWithPasscode(blob, authorization: secret(9))
            }
            #expect(second?.triesLeft == 0)
            #expect(second?.retryAfterSeconds == 60)
            // Even the right passcode is not tried now: it would be the TPM's last try.
            let refused = #expect(throws: KeychainError.authFailed) {
                try key.unsealWithPasscode(blob, authorization: secret(8))
            }
            #expect(refused?.triesLeft == 0)
            #expect(refused?.retryAfterSeconds == 60)
            #expect(refused?.notTried == true)
            #expect(
                refused?.message
                    == "no passcode try was made: Keyseal keeps the TPM's last try in reserve, and it is the only one "
                    + "left (the TPM allows 3 passcode tries and forgets one failure every 60 s; 2 counted); try again "
                    + "in 60 s, or reset the TPM's counter now with `tpm2_dictionarylockout -c`"
            )
            #expect(second?.notTried == false)
            let status = try key.status()
            #expect(status.hardwareTriesLeft == 0)
            #expect(status.lockoutRetrySeconds == 60)
            key.close()
            #expect(try fixture.lockoutCounter() == 2)
        }
    }

    @Test("in TPM lockout a passcode try is refused with retryAfterSeconds, without calling the TPM")
    func lockoutReportsRetryAfter() throws {
        let fixture = try SwtpmFixture(maxTries: 3, recoveryTime: 30)
        defer { fixture.stop() }
        let blob = try withKey(fixture) { try $0.sealWithPasscode(secret(7), authorization: secret(8)) }
        try fixture.spendAuthorizationFailures(3)
        try withKey(fixture) { key in
            let error = #expect(throws: KeychainError.authFailed) {
                try key.unsealWithPasscode(blob, authorization: secret(8))
            }
            #expect(error?.triesLeft == 0)
            #expect(error?.notTried == true)
            #expect(error?.message.hasPrefix("the TPM is in dictionary-attack lockout; try again in 60 s") == true)
            #expect(error?.retryAfterSeconds == 60)  // two intervals: one try must stay in reserve
            let status = try key.status()
            #expect(status.lockoutRetrySeconds == 60)
        }
        #expect(try fixture.lockoutCounter() == 3)
    }

    @Test("a noDA device object unseals while the TPM is in lockout")
    func deviceObjectUnsealsDuringLockout() throws {
        let fixture = try SwtpmFixture(maxTries: 3, recoveryTime: 30)
        defer { fixture.stop() }
        let blob = try withKey(fixture) { try $0.seal(secret(3)) }
        try fixture.spendAuthorizationFailures(3)
        let counter = try fixture.lockoutCounter()
        try #require(counter == 3, "the TPM is not in lockout")
        try withKey(fixture) { key in
            let unsealed = try key.unseal(blob)
            #expect(bytes(unsealed) == bytes(secret(3)))
        }
    }

    @Test("after every operation, failed ones included, the TPM holds only the kept primary and session of ours")
    func noHandlesLeftBehind() throws {
        try withTPM { fixture, key in
            // Asks the TPM twice: through our own connection, and through tpm2-tools (the swtpm TCTI connects for
            // each command, so the tools can talk to swtpm while our key is open).
            func expectClean(_ step: String) throws {
                try expectOnlyKept(key, fixture, step)
            }
            _ = try key.deviceIdentity()
            try expectClean("deviceIdentity")
            let sealed = try key.seal(secret(1))
            try expectClean("seal")
            _ = try key.unseal(sealed)
            try expectClean("unseal")
            let passcode = try key.sealWithPasscode(secret(1), authorization: secret(2))
            try expectClean("sealWithPasscode")
            _ = try key.unsealWithPasscode(passcode, authorization: secret(2))
            try expectClean("unsealWithPasscode")
            _ = try? key.unsealWithPasscode(passcode, authorization: secret(3))
            try expectClean("unsealWithPasscode with a wrong authorization")
            _ = try? key.unseal(edited(sealed, at: sealed.count - 1))
            try expectClean("unseal of an edited blob")
            _ = try? key.unseal(edited(sealed, at: 20))
            try expectClean("unseal of a blob from another primary")
            _ = try key.status()
            try expectClean("status")
            key.close()
            #expect(try fixture.handlesInUse() == [])
        }
    }

    @Test(
        "opened on a TPM reached directly, the key flushes what a dead client left: all three object slots, a session"
    )
    func deadClientsLeftoversAreFlushed() throws {
        let fixture = try SwtpmFixture()
        defer { fixture.stop() }
        // A client that exits without flushing (tpm2-tools without a resource manager leaves what it loads).
        let dir = fixture.stateDirectory
        for slot in 0..<3 {
            try fixture.tool("tpm2_createprimary", ["-Q", "-C", "o", "-c", "\(dir)/dead-\(slot).ctx"])
        }
        try fixture.tool("tpm2_startauthsession", ["-S", "\(dir)/dead.session"])
        #expect(try fixture.handlesInUse().count == 4)
        let key = TPMDeviceKey(tcti: fixture.tcti)
        defer { key.close() }
        try key.open(provisioning: true)
        let sealed = try key.seal(secret(1))
        #expect(bytes(try key.unseal(sealed)) == bytes(secret(1)))
        try expectOnlyKept(key, fixture, "open after a dead client")
    }

    @Test("behind tpm2-abrmd, opening a key leaves another client's session alone")
    func sharedTPMIsLeftAlone() throws {
        // The process's one broker (tpm2-tss finds the bus through the process's environment); other tests may use it.
        let broker = try ResourceManagerFixture.shared()
        let tools = try requireTool("tpm2_startauthsession", package: "tpm2-tools")
        let getcap = try requireTool("tpm2_getcap", package: "tpm2-tools")
        func savedSessions() throws -> Set<String> {
            Set(
                try runProcess(getcap, ["-T", broker.tcti, "handles-saved-session"], environment: broker.environment)
                    .stdoutText.split(separator: "\n").map(String.init).filter { $0.hasPrefix("- ") }
            )
        }
        let earlier = try savedSessions()
        // Another client starts a session and exits: the broker keeps it, abandoned, for a later claim.
        let file = broker.directory.appending("other-\(UUID().uuidString).session").path
        let started = try runProcess(tools, ["-T", broker.tcti, "-S", file], environment: broker.environment)
        #expect(started.status == 0, "\(started.stderrText)")
        let others = try savedSessions().subtracting(earlier)
        #expect(others.count == 1, "\(others)")
        let key = TPMDeviceKey(tcti: broker.tcti)
        try key.open(provisioning: true)
        _ = try key.unseal(try key.seal(secret(2)))
        key.close()
        #expect(try savedSessions().isSuperset(of: others))
    }

    @Test(
        "which TCTIs reach a TPM directly (its leftovers are flushed at open) and which go through a resource manager"
    )
    func directTCTIs() {
        for tcti in [
            "swtpm:path=/run/swtpm.sock", "mssim:host=localhost,port=2321", "device:/dev/tpm0",
            "libtss2-tcti-device.so.0:/dev/tpm0",
        ] {
            #expect(TPMDeviceKey.reachesTPMDirectly(tcti), "\(tcti)")
        }
        for tcti in ["device:/dev/tpmrm0", "tabrmd:bus_type=session", "tabrmd", "device", "device:", "cmd:tpm2-tool"] {
            #expect(!TPMDeviceKey.reachesTPMDirectly(tcti), "\(tcti)")
        }
    }

    @Test("the kept primary is loaded afresh when the TPM lost it, and the call succeeds")
    func keptPrimaryLostIsReloaded() throws {
        try withTPM { fixture, key in
            let sealed = try key.seal(secret(5))
            try fixture.tool("tpm2_flushcontext", ["-t"])
            try fixture.tool("tpm2_flushcontext", ["-l"])
            #expect(try fixture.handlesInUse() == [])
            #expect(bytes(try key.unseal(sealed)) == bytes(secret(5)))
            _ = try key.seal(secret(6))
            try expectOnlyKept(key, fixture, "reload")
        }
    }

    @Test("with an empty lockout authorization, status says guessing is not hardware-limited")
    func statusWithEmptyLockoutAuthorization() throws {
        try withTPM(maxTries: 5) { _, key in
            let status = try key.status()
            #expect(status.backend == "tpm")
            #expect(status.hardwareBacked)
            #expect(!status.guessingHardwareLimited)
            #expect(
                status.detail
                    == "passcode guessing is not hardware-limited (TPM lockout authorization is empty); the TPM allows "
                    + "5 passcode tries and forgets one failure every 60 s; Keyseal keeps the TPM's last try in reserve"
            )
            #expect(status.hardwareTriesLeft == 4)
            #expect(status.lockoutRetrySeconds == nil)
        }
    }

    @Test("protectLockout returns a value once; status then says guessing is hardware-limited")
    func protectLockoutOnce() throws {
        try withTPM(maxTries: 5, recoveryTime: 60) { _, key in
            let value = try key.protectLockout()
            #expect(value.count == 32)
            #expect(bytes(value).allSatisfy { Array("0123456789abcdef".utf8).contains($0) })
            #expect(throws: KeychainError.param) { try key.protectLockout() }
            let status = try key.status()
            #expect(status.guessingHardwareLimited)
            #expect(
                status.detail
                    == "passcode guessing is limited by the TPM: the TPM allows 5 passcode tries and forgets one failure "
                    + "every 60 s; Keyseal keeps the TPM's last try in reserve"
            )
        }
    }

    @Test("status reads the TPM's own limits and says ahead of time how many tries remain before the reserve")
    func statusShowsLimitsAndReserve() throws {
        // swtpm's defaults: 3 tries, one failure forgotten every 1000 s.
        try withTPM(maxTries: 3, recoveryTime: 1000, lockoutRecovery: 1000) { _, key in
            let blob = try key.sealWithPasscode(secret(7), authorization: secret(8))
            #expect(try key.status().hardwareTriesLeft == 2)
            #expect(
                try key.status().detail.contains("the TPM allows 3 passcode tries and forgets one failure every 1000 s")
            )
            _ = try? key.unsealWithPasscode(blob, authorization: secret(9))
            _ = try? key.unsealWithPasscode(blob, authorization: secret(9))
            let status = try key.status()
            #expect(status.hardwareTriesLeft == 0)
            #expect(status.lockoutRetrySeconds == 1000)
            #expect(
                status.detail.hasSuffix("and it is the only one left: no passcode try until the TPM forgets a failure")
            )
        }
    }

    @Test("sealing under a primary other than the one the key was opened with is errSecDecode, nothing sealed")
    func sealChecksThePrimary() throws {
        try withTPM { fixture, key in
            let identity = try key.deviceIdentity()
            _ = try key.seal(secret(1))
            // TPM2_Clear (lockout hierarchy, empty authorization) replaces the owner seed: another storage primary.
            try fixture.tool("tpm2_clear", ["-c", "l"])
            #expect(try key.deviceIdentity() != identity)
            let error = #expect(throws: KeychainError.decode) { try key.seal(secret(1)) }
            #expect(error?.message.contains("not the one this store was opened with") == true)
            #expect(throws: KeychainError.decode) {
                try key.sealWithPasscode(secret(1), authorization: secret(2))
            }
        }
    }

    @Test("after protectLockout, resetting the DA counter needs the returned value")
    func protectLockoutGuardsReset() throws {
        try withTPM(lockoutRecovery: 1) { fixture, key in
            let value = String(decoding: bytes(try key.protectLockout()), as: UTF8.self)
            key.close()
            let without = try fixture.tool("tpm2_dictionarylockout", ["-c"], check: false)
            #expect(without.status != 0)
            // The wrong lockout authorization blocks the lockout hierarchy for lockoutRecovery (1 s).
            var with = try fixture.tool("tpm2_dictionarylockout", ["-c", "-p", value], check: false)
            let deadline = Date().addingTimeInterval(10)
            while with.status != 0, Date() < deadline {
                usleep(250_000)
                with = try fixture.tool("tpm2_dictionarylockout", ["-c", "-p", value], check: false)
            }
            #expect(with.status == 0, "\(with.stderrText)")
        }
    }

    @Test("a TCTI with nothing behind it is errSecNotAvailable, quickly", arguments: ["swtpm:path=", "device:"])
    func unreachableTCTI(kind: String) throws {
        let directory = try TemporaryDirectory(prefix: "keyseal-notpm")
        defer { directory.remove() }
        let tcti = kind + directory.path + (kind == "device:" ? "/tpmrm0" : "/swtpm.sock")
        let key = TPMDeviceKey(tcti: tcti)
        defer { key.close() }
        let start = ContinuousClock.now
        let error = #expect(throws: KeychainError.notAvailable) { try key.open(provisioning: false) }
        #expect(ContinuousClock.now - start < .seconds(2))
        #expect(error?.message.hasPrefix("no TPM reachable at TCTI \(tcti)") == true)
        #expect(throws: KeychainError.notAvailable) { try key.seal(secret(1)) }
    }

    @Test("a TPM that goes away after open is errSecNotAvailable, and is used again when it is back")
    func tpmGoneIsNotAvailable() throws {
        let fixture = try SwtpmFixture()
        defer { fixture.stop() }
        let key = TPMDeviceKey(tcti: fixture.tcti)
        defer { key.close() }
        try key.open(provisioning: false)
        let blob = try key.seal(secret(1))
        fixture.kill()
        let error = #expect(throws: KeychainError.notAvailable) { try key.unseal(blob) }
        #expect(error?.message.contains(fixture.tcti) == true)
        try fixture.restart()
        let unsealed = try key.unseal(blob)
        #expect(bytes(unsealed) == bytes(secret(1)))
    }

    @Test("close is idempotent, leaves nothing in the TPM, and later calls fail with errSecNotAvailable")
    func closeIsFinal() throws {
        try withTPM { fixture, key in
            _ = try key.seal(secret(1))
            key.close()
            key.close()
            #expect(throws: KeychainError.notAvailable) { try key.deviceIdentity() }
            #expect(throws: KeychainError.notAvailable) { try key.open(provisioning: false) }
            let handles = try fixture.handlesInUse()
            #expect(handles == [])
        }
    }

    enum Edit: String, CaseIterable, Sendable {
        case kind, primaryName, publicArea, privateArea, truncated, appended
    }

    @Test("an edited blob is errSecDecode", arguments: Edit.allCases)
    func editedBlobIsDecodeError(edit: Edit) throws {
        try withTPM { _, key in
            let blob = try key.seal(secret(4))
            let damaged: Data
            switch edit {
            case .kind: damaged = edited(blob, at: 5)
            case .primaryName: damaged = edited(blob, at: 20)
            case .publicArea: damaged = edited(blob, at: 70)  // inside the object's unique digest
            case .privateArea: damaged = edited(blob, at: blob.count - 1)
            case .truncated: damaged = blob.dropLast(3)
            case .appended: damaged = blob + Data([0])
            }
            #expect(throws: KeychainError.decode) { try key.unseal(damaged) }
            #expect(try key.handlesInUse().filter { $0 >> 24 == 0x80 }.count == 1)  // the kept primary only
        }
    }

    @Test("timings on swtpm (medians, printed)")
    func timings() throws {
        try withTPM(maxTries: 32) { _, key in
            func median(_ runs: Int, _ body: () throws -> Void) rethrows -> Duration {
                var samples: [Duration] = []
                for _ in 0..<runs {
                    let start = ContinuousClock.now
                    try body()
                    samples.append(ContinuousClock.now - start)
                }
                return samples.sorted()[runs / 2]
            }
            let sealed = try key.seal(secret(1))
            let passcode = try key.sealWithPasscode(secret(1), authorization: secret(2))
            let seal = try median(21) { _ = try key.seal(secret(1)) }
            let unseal = try median(21) { _ = try key.unseal(sealed) }
            let unsealPasscode = try median(21) { _ = try key.unsealWithPasscode(passcode, authorization: secret(2)) }
            let identity = try median(21) { _ = try key.deviceIdentity() }
            let made = try key.generateP256Key(authorization: secret(3))
            let digest = [UInt8](repeating: 7, count: 32)
            let peer = Data([4] + [UInt8](try key.generateP256Key(authorization: secret(4)).publicKey.dropFirst()))
            let sign = try median(21) { _ = try key.sign(digest: digest, keyBlob: made.blob, authorization: secret(3)) }
            let exchange = try median(21) {
                _ = try key.keyExchange(peerPublicKey: peer, keyBlob: made.blob, authorization: secret(3))
            }
            let generate = try median(5) { _ = try key.generateP256Key(authorization: secret(3)) }
            func ms(_ duration: Duration) -> String {
                let (seconds, attoseconds) = duration.components
                let value = Double(seconds) * 1000 + Double(attoseconds) / 1e15
                return String(format: "%.2f ms", value)
            }
            print(
                "TPM timings (swtpm, median of 21): seal \(ms(seal)), unseal \(ms(unseal)), "
                    + "unsealWithPasscode \(ms(unsealPasscode)), deviceIdentity \(ms(identity)), "
                    + "sign \(ms(sign)), keyExchange \(ms(exchange)), generateP256Key \(ms(generate))"
            )
        }
    }
}

/// Opens a key on `fixture`, runs `body`, closes it.
func withKey<Result>(_ fixture: SwtpmFixture, _ body: (TPMDeviceKey) throws -> Result) throws -> Result {
    let key = TPMDeviceKey(tcti: fixture.tcti)
    defer { key.close() }
    try key.open(provisioning: false)
    return try body(key)
}

/// Checks that between operations the TPM holds exactly one transient object of ours (the kept storage primary)
/// and at most one session (the kept one; dropped after a failure), asking through `key` and through tpm2_getcap.
func expectOnlyKept(_ key: TPMDeviceKey, _ fixture: SwtpmFixture, _ step: String) throws {
    let handles = try key.handlesInUse()
    #expect(handles.filter { $0 >> 24 == 0x80 }.count == 1, "transient objects after \(step)")
    #expect(handles.filter { $0 >> 24 != 0x80 }.count <= 1, "sessions after \(step)")
    let listed = try fixture.handlesInUse()
    #expect(listed.filter { $0.hasPrefix("- 0x80") }.count == 1, "transient objects after \(step) (tpm2_getcap)")
    #expect(listed.filter { !$0.hasPrefix("- 0x80") }.count <= 1, "sessions after \(step) (tpm2_getcap)")
}

/// `blob` with the byte at `offset` flipped.
func edited(_ blob: Data, at offset: Int) -> Data {
    var copy = blob
    copy[copy.startIndex + offset] ^= 0xFF
    return copy
}
