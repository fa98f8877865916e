import Foundation
import Keyseal
import KeysealTestSupport
import Testing

@Suite("Passcode and lock state")
struct PasscodeTests {
    @Test func newStoreIsUnlockedWithoutPasscode() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        #expect(fixture.store.lockState == .unlocked)
        #expect(try fixture.store.status().passcodeSet == false)
    }

    @Test func lockWithoutPasscodeChangesNothingAndSaysWhy() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let reason = try fixture.store.lock()
        #expect(reason?.contains("no passcode") == true)
        #expect(fixture.store.lockState == .unlocked)
    }

    @Test func setPasscodeLeavesStoreUnlockedAndReopenIsBeforeFirstUnlock() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        #expect(fixture.store.lockState == .unlocked)
        try fixture.reopen()
        #expect(fixture.store.lockState == .beforeFirstUnlock)
        try fixture.store.unlock(passcode: "pw")
        #expect(fixture.store.lockState == .unlocked)
    }

    @Test func settingASecondPasscodeIsAParamError() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        #expect(status { try fixture.store.setPasscode("other") } == KeychainStatus.param)
    }

    @Test func emptyPasscodeIsRefused() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        #expect(status { try fixture.store.setPasscode("") } == KeychainStatus.param)
    }

    @Test func wrongPasscodeIsAuthFailed() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("right")
        try fixture.store.lock()
        #expect(status { try fixture.store.unlock(passcode: "wrong") } == KeychainStatus.authFailed)
        #expect(fixture.store.lockState == .locked)
        try fixture.store.unlock(passcode: "right")
        #expect(fixture.store.lockState == .unlocked)
    }

    @Test func unlockWhenUnlockedStillChecksThePasscode() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("right")
        #expect(status { try fixture.store.unlock(passcode: "wrong") } == KeychainStatus.authFailed)
    }

    @Test func changePasscode() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("old")
        _ = try fixture.store.add(.password(account: "a", secret: "kept"))
        try fixture.store.changePasscode(from: "old", to: "new")
        try fixture.reopen()
        #expect(status { try fixture.store.unlock(passcode: "old") } == KeychainStatus.authFailed)
        try fixture.store.unlock(passcode: "new")
        #expect(
            try fixture.store.copyMatching(.password(account: "a", returns: .data)).first?.data == Data("kept".utf8)
        )
    }

    @Test func changeWithWrongOldPasscodeChangesNothing() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("old")
        #expect(status { try fixture.store.changePasscode(from: "bad", to: "new") } == KeychainStatus.authFailed)
        try fixture.reopen()
        try fixture.store.unlock(passcode: "old")
    }

    @Test func removingThePasscodeDeletesWhenPasscodeSetItemsAndKeepsOthers() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        _ = try fixture.store.add(.password(account: "akpu", accessibility: .whenPasscodeSetThisDeviceOnly))
        _ = try fixture.store.add(.password(account: "ak", secret: "stays"))
        try fixture.store.removePasscode("pw")
        #expect(
            status { _ = try fixture.store.copyMatching(.password(account: "akpu")) } == KeychainStatus.itemNotFound
        )
        #expect(
            try fixture.store.copyMatching(.password(account: "ak", returns: .data)).first?.data == Data("stays".utf8)
        )
        try fixture.reopen()
        #expect(fixture.store.lockState == .unlocked)
        #expect(try fixture.store.status().itemCounts[.whenPasscodeSetThisDeviceOnly] == nil)
    }

    @Test func whenPasscodeSetItemsNeedAPasscode() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let result = status {
            _ = try fixture.store.add(.password(account: "x", accessibility: .whenPasscodeSetThisDeviceOnly))
        }
        #expect(result == KeychainStatus.authFailed)
    }

    // MARK: Escalating delays (docs/OPERATIONS.md, "Passcode and delays")

    func failUnlock(_ store: KeychainStore) -> KeychainError? {
        do {
            try store.unlock(passcode: "wrong")
            return nil
        } catch let error as KeychainError {
            return error
        } catch {
            return nil
        }
    }

    @Test func firstFourFailuresHaveNoDelayAndTheFifthStartsOneMinute() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("right")
        for attempt in 1...4 {
            let error = try #require(failUnlock(fixture.store))
            #expect(error.status == KeychainStatus.authFailed)
            #expect(error.retryAfterSeconds == nil, "attempt \(attempt)")
        }
        let fifth = try #require(failUnlock(fixture.store))
        #expect(fifth.retryAfterSeconds == 60)
        // During the delay even the right passcode is refused, with the wait.
        let during = try #require(
            { () -> KeychainError? in
                do {
                    try fixture.store.unlock(passcode: "right")
                    return nil
                } catch let e as KeychainError { return e } catch { return nil }
            }()
        )
        #expect(during.status == KeychainStatus.authFailed)
        #expect(during.retryAfterSeconds == 60)
        #expect(during.message.contains("try again in 60 s"))
        fixture.clock.advance(by: 61)
        try fixture.store.unlock(passcode: "right")
        #expect(try fixture.store.status().failedAttempts == 0)
    }

    @Test func delaysEscalate() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("right")
        let expected = [0, 0, 0, 0, 60, 300, 900, 900, 3600, 3600]
        for (index, delay) in expected.enumerated() {
            let error = try #require(failUnlock(fixture.store))
            #expect((error.retryAfterSeconds ?? 0) == delay, "after failure \(index + 1)")
            fixture.clock.advance(by: TimeInterval(delay + 1))
        }
    }

    @Test func delaysSurviveReopening() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("right")
        for _ in 1...5 { _ = failUnlock(fixture.store) }
        try fixture.reopen()
        let status = try fixture.store.status()
        #expect(status.failedAttempts == 5)
        #expect(status.nextTryAt != nil)
        let error = try #require(failUnlock(fixture.store))
        #expect(error.retryAfterSeconds == 60)
        #expect(error.message.contains("try again"))
    }

    @Test func attemptIsRecordedBeforeTheHardwareCheck() throws {
        // A device whose passcode unseal reads the store file from outside first: the attempt must already be
        // counted on disk when the hardware is asked.
        let root = try TemporaryDirectory()
        defer { root.remove() }
        let storeDir = root.appending("store")
        let observed = ObservedCounts()
        let inner = root.appending("host.key")
        let device = DeviceKey(description: "observing host key") {
            ObservingDevice(
                inner: inner,
                databasePath: storeDir.appendingPathComponent("keyseal.db").path,
                observed: observed
            )
        }
        let configuration = KeychainStore.Configuration(argon2: testArgon2)
        let store = try KeychainStore.embedded(directory: storeDir, device: device, configuration: configuration)
        defer { store.close() }
        try store.setPasscode("right")
        _ = status { try store.unlock(passcode: "wrong") }
        _ = status { try store.unlock(passcode: "wrong") }
        #expect(observed.values == [1, 2])
    }
}

final class ObservedCounts: @unchecked Sendable {
    private let lock = NSLock()
    private var _values: [Int] = []
    var values: [Int] { lock.withLock { _values } }
    func append(_ value: Int) { lock.withLock { _values.append(value) } }
}

/// Wraps the host-key device and, before each passcode unseal, reads `failedAttempts` from the keybag on disk
/// through a separate sqlite3 process, from a copy of the files on disk.
final class ObservingDevice: DeviceKeyProvider {
    let inner: any DeviceKeyProvider
    let databasePath: String
    let observed: ObservedCounts

    init(inner file: URL, databasePath: String, observed: ObservedCounts) {
        self.inner = try! KeychainStoreTestHooks.hostKeyProvider(file: file)
        self.databasePath = databasePath
        self.observed = observed
    }

    var backendName: String { inner.backendName }
    func open(provisioning: Bool) throws { try inner.open(provisioning: provisioning) }
    func deviceIdentity() throws -> Data { try inner.deviceIdentity() }
    func seal(_ secret: SecretBytes) throws -> Data { try inner.seal(secret) }
    func unseal(_ blob: Data) throws -> SecretBytes { try inner.unseal(blob) }
    func sealWithPasscode(_ secret: SecretBytes, authorization: SecretBytes) throws -> Data {
        try inner.sealWithPasscode(secret, authorization: authorization)
    }
    func unsealWithPasscode(_ blob: Data, authorization: SecretBytes) throws -> SecretBytes {
        let count = try StoreFixture.sqlOnDisk(
            databasePath: databasePath,
            "SELECT json_extract(CAST(body AS TEXT), '$.failedAttempts') FROM keybag"
        )
        observed.append(Int(count) ?? -1)
        return try inner.unsealWithPasscode(blob, authorization: authorization)
    }
    func status() throws -> DeviceKeyStatus { try inner.status() }
    func close() { inner.close() }
}
