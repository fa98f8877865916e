import Foundation
import Keyseal
import KeysealTestSupport
import Testing

/// The engine on real hardware device keys: swtpm for the TPM, SoftHSM2 for PKCS#11.
@Suite("Hardware backends")
struct HardwareBackendTests {
    func failure(_ body: () throws -> Void) -> KeychainError? {
        do {
            try body()
            return nil
        } catch let error as KeychainError {
            return error
        } catch {
            return nil
        }
    }

    @Test(arguments: [TestBackend.tpm, .pkcs11])
    func statusSaysHardwareBackedAndWhetherGuessingIsHardwareLimited(backend: TestBackend) throws {
        let fixture = try StoreFixture(backend)
        defer { fixture.remove() }
        let status = try fixture.store.status()
        #expect(status.device.backend == backend.rawValue)
        #expect(status.device.hardwareBacked)
        #expect(status.device.guessingHardwareLimited == false)
        switch backend {
        case .tpm: #expect(status.device.detail.contains("not hardware-limited (TPM lockout authorization is empty)"))
        default: #expect(status.device.detail.contains("Argon2id"))
        }
    }

    @Test func hostKeyIsReportedAsNotHardwareBacked() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        let status = try fixture.store.status()
        #expect(status.device.hardwareBacked == false)
        #expect(status.device.detail.contains("not hardware-backed"))
    }

    @Test(arguments: TestBackend.allCases)
    func rebootKeepsAlwaysClassesAndNeedsUnlockForTheOthers(backend: TestBackend) throws {
        let fixture = try StoreFixture(backend)
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        _ = try fixture.store.add(.password(account: "dk", secret: "d", accessibility: .always))
        _ = try fixture.store.add(.password(account: "ck", secret: "c", accessibility: .afterFirstUnlock))
        try fixture.reopen()
        #expect(try fixture.store.copyMatching(.password(account: "dk", returns: .data)).first?.data == Data("d".utf8))
        #expect(
            status { _ = try fixture.store.copyMatching(.password(account: "ck")) }
                == KeychainStatus.interactionNotAllowed
        )
        try fixture.store.unlock(passcode: "pw")
        try fixture.store.lock()
        #expect(try fixture.store.copyMatching(.password(account: "ck", returns: .data)).first?.data == Data("c".utf8))
    }

    @Test func wrongPasscodesOnTheTPMSayHowManyTriesAreLeftThenThatItIsLockedOut() throws {
        let fixture = try StoreFixture(.tpm)
        defer { fixture.remove() }
        let tpm = try #require(fixture.swtpm)
        try fixture.store.setPasscode("right")
        _ = try fixture.store.add(.password(account: "always", secret: "a", accessibility: .always))
        _ = try fixture.store.add(.password(account: "afu", secret: "c", accessibility: .afterFirstUnlock))
        try fixture.store.lock()
        // The fixture's TPM allows 5 failures; Keyseal keeps the last one in reserve, so 4 are spent.
        var triesSeen: [Int] = []
        for _ in 0..<4 {
            let error = try #require(failure { try fixture.store.unlock(passcode: "wrong") })
            #expect(error.status == KeychainStatus.authFailed)
            #expect(error.message.contains("before lockout"), "\(error.message)")
            triesSeen.append(error.triesLeft ?? -1)
            fixture.clock.advance(by: 4000)  // past the store's own delays
        }
        #expect(triesSeen == [3, 2, 1, 0])
        #expect(try tpm.lockoutCounter() == 4)
        let lockout = try #require(failure { try fixture.store.unlock(passcode: "right") })
        #expect(lockout.status == KeychainStatus.authFailed)
        #expect(lockout.message.contains("lockout"))
        #expect((lockout.retryAfterSeconds ?? 0) > 0)
        // The TPM did not spend its last try.
        #expect(try tpm.lockoutCounter() == 4)
        // The always and after-first-unlock classes stay available during the lockout.
        #expect(
            try fixture.store.copyMatching(.password(account: "always", returns: .data)).first?.data == Data("a".utf8)
        )
        #expect(try fixture.store.copyMatching(.password(account: "afu", returns: .data)).first?.data == Data("c".utf8))
        // After a reboot too: the device object is noDA.
        try fixture.reopen()
        #expect(
            try fixture.store.copyMatching(.password(account: "always", returns: .data)).first?.data == Data("a".utf8)
        )
    }

    @Test func protectingTheLockoutMakesGuessingHardwareLimited() throws {
        let fixture = try StoreFixture(.tpm)
        defer { fixture.remove() }
        let tpm = try #require(fixture.swtpm)
        let secret = try fixture.store.protectHardwareLockout()
        let value = secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        #expect(value.count == 32)
        let status = try fixture.store.status()
        #expect(status.device.guessingHardwareLimited)
        #expect(throws: KeychainError.param) { _ = try fixture.store.protectHardwareLockout() }
        let plainReset = try tpm.tool("tpm2_dictionarylockout", ["-c"], check: false)
        #expect(plainReset.status != 0)
    }

    @Test func aStoreOpenedOnAnotherTPMIsRefusedAtOnceAndUnchanged() throws {
        let fixture = try StoreFixture(.tpm)
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        _ = try fixture.store.add(.password(account: "a"))
        fixture.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: fixture.databasePath))
        let other = try SwtpmFixture()
        defer { other.stop() }
        let error = try #require(
            failure {
                _ = try KeychainStore.embedded(
                    directory: fixture.storeDirectory,
                    device: .tpm(tcti: other.tcti),
                    configuration: fixture.configuration
                )
            }
        )
        #expect(error.status == KeychainStatus.decode)
        #expect(error.message.contains("sealed by another device"))
        #expect(try other.lockoutCounter() == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.databasePath)) == before)
        // The right TPM still opens it.
        try fixture.reopen()
        try fixture.store.unlock(passcode: "pw")
    }

    @Test func aStoreOpenedWithAnotherBackendIsRefused() throws {
        let fixture = try StoreFixture(.tpm)
        defer { fixture.remove() }
        fixture.close()
        let error = try #require(
            failure {
                _ = try KeychainStore.embedded(
                    directory: fixture.storeDirectory,
                    device: .hostKey(file: fixture.root.appending("x.key")),
                    configuration: fixture.configuration
                )
            }
        )
        #expect(error.status == KeychainStatus.param)
        #expect(error.message.contains("tpm"))
    }

    @Test func wrongPasscodeOnATokenIsAuthFailed() throws {
        let fixture = try StoreFixture(.pkcs11)
        defer { fixture.remove() }
        try fixture.store.setPasscode("right")
        try fixture.store.lock()
        #expect(status { try fixture.store.unlock(passcode: "wrong") } == KeychainStatus.authFailed)
        try fixture.store.unlock(passcode: "right")
    }

    @Test func aTokenWhoseKeyWasRemovedCannotOpenTheStore() throws {
        let fixture = try StoreFixture(.pkcs11)
        defer { fixture.remove() }
        let token = try #require(fixture.softhsm)
        fixture.close()
        func listed() throws -> Bool {
            // Whole labels only: "keyseal-PID-1" is a prefix of "keyseal-PID-10".
            try token.softhsmUtil(["--show-slots"]).stdoutText.split(separator: "\n").contains { line in
                let fields = line.split(separator: ":", maxSplits: 1)
                return fields.count == 2 && fields[0].trimmingCharacters(in: .whitespaces) == "Label"
                    && fields[1].trimmingCharacters(in: .whitespaces) == token.tokenLabel
            }
        }
        #expect(try listed())
        let removed = try token.softhsmUtil(["--delete-token", "--token", token.tokenLabel])
        if removed.status != 0 {
            // SoftHSM2 stays loaded in this process for other tests' tokens and may recreate a lock file in the
            // token's directory while softhsm2-util removes it: then only the final rmdir fails. What matters is
            // that the token is gone.
            #expect(try !listed(), "\(removed.stderrText)")
        }
        #expect(try !listed())
        let error = try #require(failure { try fixture.reopen() })
        #expect(error.status == KeychainStatus.notAvailable)
    }
}
