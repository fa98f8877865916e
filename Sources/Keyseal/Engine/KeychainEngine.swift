import Crypto
import FoundationEssentials
import KeysealCore
import KeysealStore
import KeysealTPM

#if canImport(Glibc)
import Glibc
#endif

/// What a copy-matching on keyseald's event loop may step through
/// (``KeychainEngine/copyMatching(_:caller:resultLimit:within:)``).
package struct ScanBound: Sendable {
    /// Candidate rows, counted as the indexes select them, before any is opened.
    package var rows: Int
    /// Their sealed attributes and values, in bytes.
    package var bytes: Int
    /// SQLite's virtual-machine instructions for the search, rows it rejects itself included
    /// (``KeysealStore/Database/withWorkBound(instructions:_:)``).
    package var instructions: Int

    /// 20,000 instructions: a search of 8 candidates by three pairs runs a small fraction of them, and a few hundred
    /// microseconds of SQLite work on this machine.
    package init(rows: Int, bytes: Int, instructions: Int = 20_000) {
        self.rows = rows
        self.bytes = bytes
        self.instructions = instructions
    }
}

/// What an add that replaces by string attributes did (``KeychainEngine/addReplacingAttributes(_:caller:scan:)``).
package enum ReplacingAdd: Sendable, Equatable {
    case added
    case replaced(account: String)
    /// Its search went over the scan bound it was given: nothing was written.
    case overBound
}

/// Decides whether a write may grow an access group (keyseald's quotas). Called before anything is written, once for
/// each group the write adds items or bytes to, with the group's usage before the write and what the write adds to it
/// (items, and sealed attribute and value bytes, as the store's `group_usage` counts them); throws to refuse the whole
/// write.
package typealias GroupAdmission = (
    _ group: String, _ usage: (items: Int, bytes: Int), _ adds: (items: Int, bytes: Int)
)
    throws -> Void

/// The one implementation of the keychain semantics: SecItem calls over the encrypted store, guarded by the
/// lock-state manager. Not thread-safe: ``KeychainStore`` serializes every call.
final class KeychainEngine {
    let directory: URL
    let configuration: KeychainStore.Configuration
    let store: ItemStore
    let device: any DeviceKeyProvider
    private let lockDescriptor: Int32
    var keybag: Keybag
    let storeID: [UInt8]
    let deviceSecret: SecretBytes
    private let macKey: SecretBytes
    let indexKey: IndexKey
    /// The lock-state manager's keys: present exactly when the class is usable. A class whose key goes or is
    /// replaced takes its prepared keys with it.
    var classKeys: [Accessibility: ClassKey] = [:] {
        didSet {
            var gone: Set<Accessibility> = []
            for (accessibility, key) in oldValue where classKeys[accessibility] !== key { gone.insert(accessibility) }
            preparedKeys.remove(classes: gone)
            // What the hardware's library holds of the keys' authorizations goes with them.
            if !gone.isEmpty { device.hardwareKeys?.forgetKeyAuthorizations() }
        }
    }
    /// Stored private keys made ready for use (see ``PreparedKeys``).
    var preparedKeys = PreparedKeys()
    private(set) var lockState: LockState
    var groupCache = GroupCache()
    private var closed = false
    /// Why a sealed secret in an older hardware format could not be sealed again (shown by `status`).
    private(set) var resealProblem: String?
    /// What the open found of the generation ledger (``openLedger(key:)``).
    private(set) var ledger = LedgerStatus()
    /// Per ledger bucket, whether its items are refused (the bucket did not verify at open); empty when every
    /// bucket verified, so that a lookup pays one test.
    private var refusedBuckets: [Bool] = []
    /// Set when the open found the store older than the TPM's anti-rollback counter (KeychainEngine+Recovery.swift).
    var rolledBack: RollbackFinding?
    /// The escrow key while `keyseal recover` completes in the open; nil otherwise.
    var recoveryEscrowKey: SecretBytes?
    /// Why a TPM store has no anti-rollback counter (it could not be defined), for `status`.
    var counterProblem: String?
    /// The counter value the ledger record carried at open (nil: a record from before checkpoints, or none).
    var ledgerCheckpointAtOpen: UInt64?
    /// When the counter last reached the keybag's value in this process (nil: not since open): item writes make a
    /// checkpoint once this is older than the configuration's `checkpointInterval`.
    var lastCheckpoint: Date?
    /// Keys generated without being stored (`kSecAttrIsPermanent` false), by reference id.
    var transientKeys: [Data: TransientKey] = [:]
    /// Authentication tokens issued by ``authenticate(passcode:caller:)`` (KeychainEngine+Authentication.swift).
    var authenticationGrants = AuthenticationGrants()
    /// Clients' passcode checks, counted by uid in memory (ClientPasscodeTries.swift).
    var clientPasscodeTries = ClientPasscodeTries()

    static let persistentRefPrefix = Array("ksr1".utf8)

    // MARK: - Open, provision, close

    /// - Parameter recovery: open with the recovery key instead of the device object (`keyseal recover`), then
    ///   seal the device and passcode objects again to the PCRs' current values.
    init(
        directory: URL,
        device deviceKey: DeviceKey,
        configuration: KeychainStore.Configuration,
        recovery: RecoveryInput? = nil
    ) throws {
        self.directory = directory
        self.configuration = configuration
        try Self.prepareDirectory(directory)
        lockDescriptor = try Self.lockDirectory(directory)
        var cleanup: [() -> Void] = [{ [lockDescriptor] in Glibc.close(lockDescriptor) }]
        do {
            store = try ItemStore(directory: directory)
            cleanup.append { [store] in store.close() }
            device = try deviceKey.makeProvider()
            cleanup.append { [device] in device.close() }

            if let stored = try store.loadKeybag() {
                var parsed = try Keybag.parseUnverified(stored.body)
                guard parsed.backend == device.backendName else {
                    throw KeychainError(
                        KeychainStatus.param,
                        "this store was created with the \(parsed.backend) backend, not \(device.backendName)"
                    )
                }
                try device.open(provisioning: false)
                guard try device.acceptsIdentity(parsed.deviceIdentity) else {
                    throw KeychainError(KeychainStatus.decode, "this store was sealed by another device")
                }
                try Self.adoptBinding(device, keybag: parsed)
                var escrowKey: SecretBytes?
                let ds: SecretBytes
                if let recovery {
                    (ds, escrowKey) = try Self.openWithRecoveryKey(recovery, keybag: parsed, device: device)
                } else {
                    ds = try device.unseal(parsed.sealedDeviceSecret)
                }
                recoveryEscrowKey = escrowKey
                let storeID = [UInt8](parsed.storeID)
                let macKey = KeyDerivation.keybagMACKey(deviceSecret: ds, storeID: storeID)
                try Keybag.verify(body: stored.body, mac: stored.mac, macKey: macKey)
                // Fields re-read only after authentication.
                parsed = try Keybag.parseUnverified(stored.body)
                keybag = parsed
                self.storeID = storeID
                deviceSecret = ds
                self.macKey = macKey
                lockState = parsed.passcode == nil ? .unlocked : .beforeFirstUnlock
            } else {
                try device.open(provisioning: true)
                let identity = try device.deviceIdentity()
                let ds = SecretBytes.random(count: 32)
                let storeID = randomBytes(16)
                var fresh = Keybag(
                    storeID: Data(storeID),
                    backend: device.backendName,
                    deviceIdentity: identity,
                    sealedDeviceSecret: try device.seal(ds)
                )
                fresh.ledgerVersion = 1
                fresh.counter = try Self.defineCounter(device, deviceSecret: ds, storeID: storeID)
                for accessibility in Accessibility.allCases where accessibility != .whenPasscodeSetThisDeviceOnly {
                    let kek = KeyDerivation.deviceKEK(deviceSecret: ds, accessibility: accessibility, storeID: storeID)
                    fresh.classKeys[accessibility.rawValue] = try ClassKey.generate(accessibility).wrapped(
                        by: kek,
                        storeID: storeID
                    )
                }
                keybag = fresh
                self.storeID = storeID
                deviceSecret = ds
                macKey = KeyDerivation.keybagMACKey(deviceSecret: ds, storeID: storeID)
                lockState = .unlocked
                let encoded = fresh.encoded(macKey: macKey)
                let itemStore = store
                // The empty ledger's record goes with the keybag that says there is one, and its counter value.
                var emptyLedger = LedgerDigest()
                emptyLedger.checkpoint = fresh.counter?.value
                itemStore.attachLedger(
                    key: LedgerKey(KeyDerivation.ledgerKey(deviceSecret: ds, storeID: storeID)),
                    record: emptyLedger
                )
                try itemStore.transaction { () throws(KeychainError) in
                    try itemStore.saveKeybag(body: encoded.body, mac: encoded.mac)
                    try itemStore.writeLedgerRecord()
                }
            }
            indexKey = IndexKey(KeyDerivation.indexKey(deviceSecret: deviceSecret, storeID: storeID))
            // Classes wrapped by the device key are available at once; with no passcode, that is every class.
            for accessibility in Accessibility.allCases {
                guard let wrapped = keybag.classKeys[accessibility.rawValue],
                    keybag.passcode == nil || !accessibility.isPasscodeProtected
                else { continue }
                classKeys[accessibility] = try ClassKey.unwrap(
                    wrapped,
                    deviceSecret: deviceSecret,
                    accessibility: accessibility,
                    storeID: storeID
                )
            }
            try openLedger(key: ledgerKey())
            try resealDeviceSecretIfNeeded()
            try openCounter()
            if let recovery { try completeRecovery(recovery) }
        } catch {
            for undo in cleanup.reversed() { undo() }
            throw error
        }
    }

    /// A device secret sealed in an older hardware format (docs/PKCS11.md) is sealed again at open, in one
    /// transaction, and the old blob wiped from the file. If the hardware cannot (it cannot create the newer keys),
    /// the store opens as before and `status` says why.
    private func resealDeviceSecretIfNeeded() throws {
        guard device.needsReseal(keybag.sealedDeviceSecret) else { return }
        let saved = keybag
        do {
            keybag.sealedDeviceSecret = try device.seal(deviceSecret)
            try store.transaction { () throws(KeychainError) in try saveKeybag() }
        } catch let error as KeychainError where error.status == KeychainStatus.notAvailable {
            keybag = saved
            resealProblem = error.message
            return
        }
        try store.checkpoint()
    }

    /// Verifies the generation ledger: one scan recomputes each bucket's digest, which must equal the record's
    /// (authenticated under K_L). A bucket that differs has its items refused with errSecDecode; a record that is
    /// missing or fails authentication (while the keybag says there is one) refuses every bucket. Nothing is
    /// deleted or rewritten: ``ledger`` says what failed. A store from before the record (the keybag does not mark
    /// one) gets it now, computed from the file, with the keybag marking it, in one transaction.
    private func openLedger(key: LedgerKey) throws {
        let actual = try store.computeLedgerDigest(key: key)
        guard keybag.ledgerVersion != nil else {
            let saved = keybag
            keybag.ledgerVersion = 1
            store.attachLedger(key: key, record: actual)
            do {
                try store.transaction { () throws(KeychainError) in
                    try store.writeLedgerRecord()
                    try saveKeybag()
                }
            } catch {
                keybag = saved
                throw error
            }
            return
        }
        let record: LedgerDigest
        do {
            guard let stored = try store.loadLedgerRecord() else {
                throw KeychainError(KeychainStatus.decode, "the ledger record is missing")
            }
            record = try LedgerDigest.decode(body: stored.body, mac: stored.mac, key: key)
        } catch let error as KeychainError where error.status == KeychainStatus.decode {
            ledger = LedgerStatus(
                refusedBuckets: Array(0..<LedgerDigest.bucketCount),
                recordProblem: error.message
            )
            refusedBuckets = Array(repeating: true, count: LedgerDigest.bucketCount)
            store.refusedBuckets = Set(0..<LedgerDigest.bucketCount)
            return
        }
        store.attachLedger(key: key, record: record)
        ledgerCheckpointAtOpen = record.checkpoint
        compareLedger(record: record, actual: actual)
    }

    /// Refuses the buckets whose digest in `actual` (recomputed from the file) differs from the record's, and no
    /// others; the store places no new row in a refused bucket.
    func compareLedger(record: LedgerDigest, actual: LedgerDigest) {
        let differing = record.differingBuckets(from: actual)
        store.refusedBuckets = Set(differing)
        guard !differing.isEmpty else {
            ledger = LedgerStatus()
            refusedBuckets = []
            return
        }
        var status = LedgerStatus(refusedBuckets: differing)
        refusedBuckets = Array(repeating: false, count: LedgerDigest.bucketCount)
        for bucket in differing {
            refusedBuckets[bucket] = true
            let recorded = Int(record.counts[bucket])
            let found = Int(actual.counts[bucket])
            status.missingEntries += max(0, recorded - found)
            status.unexpectedEntries += max(0, found - recorded)
        }
        ledger = status
    }

    /// K_L for this store.
    func ledgerKey() -> LedgerKey { LedgerKey(KeyDerivation.ledgerKey(deviceSecret: deviceSecret, storeID: storeID)) }

    private static func prepareDirectory(_ directory: URL) throws {
        let manager = FileManager.default
        var isDirectory = false
        if manager.fileExists(atPath: directory.path, isDirectory: &isDirectory) {
            guard isDirectory else {
                throw KeychainError(KeychainStatus.param, "\(directory.path) is not a directory")
            }
        } else {
            do {
                try manager.createDirectory(
                    at: directory,
                    withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700]
                )
            } catch {
                throw KeychainError(KeychainStatus.io, "cannot create the store directory \(directory.path)")
            }
        }
        _ = chmod(directory.path, 0o700)
    }

    /// One process at a time: an exclusive, non-blocking lock on `DIR/.lock`.
    private static func lockDirectory(_ directory: URL) throws -> Int32 {
        let path = directory.appendingPathComponent(".lock").path
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw KeychainError(KeychainStatus.io, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        // A short grace period: a process that is spawning a child shares the lock's file description until the
        // child's exec closes it, so a store closed a moment ago may still look held.
        var locked = false
        for _ in 0..<25 {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                locked = true
                break
            }
            guard errno == EWOULDBLOCK else { break }
            usleep(10_000)
        }
        guard locked else {
            Glibc.close(fd)
            throw KeychainError(
                KeychainStatus.notAvailable,
                "the store \(directory.path) is already open in another process"
            )
        }
        return fd
    }

    /// Drops every key (zeroized as they go) and releases the store, the device and the directory lock.
    func close() {
        guard !closed else { return }
        closed = true
        for id in Array(transientKeys.keys) { releaseTransientKey(id) }
        preparedKeys.removeAll()
        classKeys.removeAll()
        store.close()
        device.close()
        Glibc.close(lockDescriptor)
    }

    // MARK: - Lock state

    var passcodeSet: Bool { keybag.passcode != nil }

    private func classKey(_ accessibility: Accessibility) -> ClassKey? { classKeys[accessibility] }

    func requireClassKey(_ accessibility: Accessibility) throws(KeychainError) -> ClassKey {
        guard let key = classKeys[accessibility] else {
            if let rolledBack, accessibility.isPasscodeProtected { throw rolledBack.error }
            if accessibility == .whenPasscodeSetThisDeviceOnly && !passcodeSet {
                throw KeychainError(
                    KeychainStatus.authFailed,
                    "when-passcode-set-this-device-only items need a passcode"
                )
            }
            throw KeychainError(
                KeychainStatus.interactionNotAllowed,
                "the keychain is \(lockState.rawValue): \(accessibility.name) items are not available"
            )
        }
        return key
    }

    /// Locks: drops the when-unlocked class keys. With no passcode nothing changes; the result says why.
    @discardableResult
    func lock() -> String? {
        guard passcodeSet else { return "no passcode is set, so the keychain is always unlocked" }
        guard lockState == .unlocked else { return "the keychain is already \(lockState.rawValue)" }
        for accessibility in Accessibility.allCases where !accessibility.isAvailableWhenLocked {
            classKeys[accessibility] = nil
        }
        lockState = .locked
        return nil
    }

    func unlock(passcode: SecretBytes) throws {
        guard passcodeSet else { throw KeychainError(KeychainStatus.param, "no passcode is set") }
        try requireNotRolledBack()
        let keys = try verifyPasscode(passcode)
        classKeys.merge(keys) { _, new in new }
        lockState = .unlocked
    }

    /// The passcode was verified by another path than ``unlock(passcode:)`` (recovery, re-seal): unlocked.
    func unlockAfterVerification() { lockState = .unlocked }

    /// Writes the keybag (inside a transaction); the ledger record takes the keybag's counter value in the same
    /// transaction, so that the two always carry the same one.
    func saveKeybag() throws(KeychainError) {
        store.setLedgerCheckpoint(keybag.counter?.value)
        keybag.generation += 1
        let encoded = keybag.encoded(macKey: macKey)
        try store.saveKeybag(body: encoded.body, mac: encoded.mac)
    }

    /// Seconds until the next passcode try is allowed.
    func remainingDelay(now: Date) -> Int {
        Self.remainingDelay(keybag, policy: configuration.passcodePolicy, now: now)
    }

    /// Seconds until `keybag`'s failure count allows the next passcode try under `policy` (0: now).
    static func remainingDelay(_ keybag: Keybag, policy: PasscodePolicy, now: Date) -> Int {
        guard keybag.failedAttempts > 0, let last = keybag.lastAttemptAt else { return 0 }
        let delay = policy.delay(keybag.failedAttempts)
        let elapsed = now.timeIntervalSince1970 - last
        return max(0, Int((Double(delay) - elapsed).rounded(.up)))
    }

    /// The keys of the passcode classes the keybag holds, each unwrapped under its passcode KEK (the device secret,
    /// `passcodeSecret` and `passcodeKey`); the first that does not unwrap (a wrong passcode) is thrown.
    func unwrapPasscodeClassKeys(
        passcodeSecret: SecretBytes,
        passcodeKey: SecretBytes
    ) throws(KeychainError) -> [Accessibility: ClassKey] {
        var keys: [Accessibility: ClassKey] = [:]
        for accessibility in Accessibility.allCases where accessibility.isPasscodeProtected {
            guard let wrapped = keybag.classKeys[accessibility.rawValue] else { continue }
            let kek = KeyDerivation.passcodeKEK(
                deviceSecret: deviceSecret,
                passcodeSecret: passcodeSecret,
                passcodeKey: passcodeKey,
                accessibility: accessibility,
                storeID: storeID
            )
            keys[accessibility] = try ClassKey.unwrap(wrapped, by: kek, accessibility: accessibility, storeID: storeID)
        }
        return keys
    }

    /// Checks a passcode through the hardware and returns the passcode classes' keys. The attempt is recorded
    /// durably before the check (a counted event: the anti-rollback counter moves first) and cleared on success;
    /// delays are enforced before anything else. `keep` receives PS and P on success.
    func verifyPasscode(
        _ secret: SecretBytes,
        keep: ((_ passcodeSecret: SecretBytes, _ passcodeKey: SecretBytes) -> Void)? = nil
    ) throws -> [Accessibility: ClassKey] {
        guard let record = keybag.passcode else { throw KeychainError(KeychainStatus.param, "no passcode is set") }
        let now = configuration.clock()
        let wait = remainingDelay(now: now)
        if wait > 0 {
            // A hardware lockout may last longer than the store's own delay: the later of the two is the answer.
            let status = try? device.status()
            let lockout = status?.lockoutRetrySeconds ?? 0
            let retry = max(wait, lockout)
            throw KeychainError(
                KeychainStatus.authFailed,
                "too many failed attempts (\(keybag.failedAttempts)); try again in \(retry) s"
                    + (lockout > wait ? " (the hardware is in dictionary-attack lockout)" : ""),
                retryAfterSeconds: retry,
                triesLeft: status?.hardwareTriesLeft
            )
        }
        let before = (keybag.failedAttempts, keybag.lastAttemptAt)
        keybag.failedAttempts += 1
        keybag.lastAttemptAt = now.timeIntervalSince1970
        try commitCountedEvent()

        let passcodeKey = try Argon2id.derive(secret, salt: record.salt, parameters: record.argon2)
        let passcodeSecret: SecretBytes
        do {
            passcodeSecret = try device.unsealWithPasscode(record.sealedSecret, authorization: passcodeKey)
        } catch let error as KeychainError where error.notTried {
            // The hardware refused before trying (its lockout, or the TPM's last try kept in reserve): no try was
            // spent, so the attempt recorded above is taken back and the refusal is passed on as it is.
            (keybag.failedAttempts, keybag.lastAttemptAt) = before
            try store.transaction { () throws(KeychainError) in try saveKeybag() }
            throw error
        } catch let error as KeychainError where error.status == KeychainStatus.authFailed {
            throw failedAttemptError(error)
        }
        let keys: [Accessibility: ClassKey]
        do {
            keys = try unwrapPasscodeClassKeys(passcodeSecret: passcodeSecret, passcodeKey: passcodeKey)
        } catch {
            throw failedAttemptError(KeychainError(KeychainStatus.authFailed, "wrong passcode"))
        }
        keep?(passcodeSecret, passcodeKey)
        keybag.failedAttempts = 0
        keybag.lastAttemptAt = nil
        clientPasscodeTries.reset()
        // A passcode secret sealed in an older hardware format is sealed again now, the only time the engine holds
        // it, in the same transaction that records the success (docs/PKCS11.md).
        var resealed = false
        if device.needsReseal(record.sealedSecret) {
            do {
                keybag.passcode?.sealedSecret = try device.sealWithPasscode(passcodeSecret, authorization: passcodeKey)
                resealed = true
                if !device.needsReseal(keybag.sealedDeviceSecret) { resealProblem = nil }
            } catch {
                // The unlock itself succeeded: it stands, and `status` says what is left to do.
                resealProblem = (error as? KeychainError)?.message ?? "\(error)"
            }
        }
        do {
            try store.transaction { () throws(KeychainError) in try saveKeybag() }
        } catch {
            if resealed { keybag.passcode = record }
            throw error
        }
        if resealed { try store.checkpoint() }
        return keys
    }

    private func hardwareTriesLeft() -> Int? { (try? device.status())?.hardwareTriesLeft }

    private func failedAttemptError(_ cause: KeychainError) -> KeychainError {
        let delay = configuration.passcodePolicy.delay(keybag.failedAttempts)
        var message =
            cause.message.hasPrefix("wrong passcode") || cause.retryAfterSeconds != nil
            ? cause.message : "wrong passcode (\(cause.message))"
        message += "; \(keybag.failedAttempts) failed attempt\(keybag.failedAttempts == 1 ? "" : "s")"
        if delay > 0 { message += "; next try in \(delay) s" }
        return KeychainError(
            KeychainStatus.authFailed,
            message,
            retryAfterSeconds: cause.retryAfterSeconds ?? (delay > 0 ? delay : nil),
            triesLeft: cause.triesLeft ?? hardwareTriesLeft()
        )
    }

    // MARK: - Passcode changes

    func setPasscode(_ passcode: SecretBytes) throws {
        try requireNotRolledBack()
        guard !passcodeSet else {
            throw KeychainError(KeychainStatus.param, "a passcode is already set; change or remove it instead")
        }
        try rekey(newPasscode: passcode)
    }

    func changePasscode(from old: SecretBytes, to new: SecretBytes) throws {
        guard passcodeSet else { throw KeychainError(KeychainStatus.param, "no passcode is set") }
        try requireNotRolledBack()
        let keys = try verifyPasscode(old)
        classKeys.merge(keys) { _, new in new }
        lockState = .unlocked
        try rekey(newPasscode: new)
    }

    func removePasscode(_ passcode: SecretBytes) throws {
        guard passcodeSet else { throw KeychainError(KeychainStatus.param, "no passcode is set") }
        try requireNotRolledBack()
        let keys = try verifyPasscode(passcode)
        classKeys.merge(keys) { _, new in new }
        lockState = .unlocked
        try rekey(newPasscode: nil)
    }

    /// Fresh class keys for the passcode classes, every item of those classes re-encrypted under new item keys,
    /// the keybag rewritten — one transaction — then the old material wiped from the file.
    private func rekey(newPasscode: SecretBytes?) throws {
        if let newPasscode, newPasscode.isEmpty {
            throw KeychainError(KeychainStatus.param, "the passcode must not be empty")
        }
        let passcodeClasses = Accessibility.allCases.filter(\.isPasscodeProtected)
        for accessibility in passcodeClasses where keybag.classKeys[accessibility.rawValue] != nil {
            _ = try requireClassKey(accessibility)
        }
        var newKeybag = keybag
        var newKeys: [Accessibility: ClassKey] = [:]
        var kek: (Accessibility) -> SecretBytes
        if let newPasscode {
            let salt = Data(randomBytes(16))
            let passcodeKey = try Argon2id.derive(newPasscode, salt: salt, parameters: configuration.argon2)
            let passcodeSecret = SecretBytes.random(count: 32)
            newKeybag.passcode = PasscodeRecord(
                salt: salt,
                argon2: configuration.argon2,
                sealedSecret: try device.sealWithPasscode(passcodeSecret, authorization: passcodeKey)
            )
            if let recovery = newKeybag.recovery {
                newKeybag.recovery?.passcodeSecret = try RecoveryEscrow.seal(
                    passcodeSecret,
                    to: recovery.publicKey,
                    label: RecoveryEscrow.passcodeLabel,
                    storeID: storeID
                )
            }
            kek = { [deviceSecret, storeID] in
                KeyDerivation.passcodeKEK(
                    deviceSecret: deviceSecret,
                    passcodeSecret: passcodeSecret,
                    passcodeKey: passcodeKey,
                    accessibility: $0,
                    storeID: storeID
                )
            }
        } else {
            newKeybag.passcode = nil
            newKeybag.recovery?.passcodeSecret = nil
            kek = { [deviceSecret, storeID] in
                KeyDerivation.deviceKEK(deviceSecret: deviceSecret, accessibility: $0, storeID: storeID)
            }
        }
        for accessibility in passcodeClasses {
            if accessibility == .whenPasscodeSetThisDeviceOnly && newPasscode == nil {
                newKeybag.classKeys[accessibility.rawValue] = nil
                continue
            }
            let key = ClassKey.generate(accessibility)
            newKeys[accessibility] = key
            newKeybag.classKeys[accessibility.rawValue] = try key.wrapped(by: kek(accessibility), storeID: storeID)
        }
        newKeybag.failedAttempts = 0
        newKeybag.lastAttemptAt = nil
        // A counted event: committed with the counter's next value, which the TPM counter reaches just after.
        if let counter = newKeybag.counter { newKeybag.counter?.value = counter.value + 1 }

        // Every row of a passcode class, of every item class. A row that cannot be decrypted would be stranded for
        // good under the new keys: the change is refused, naming how many, and nothing is written.
        let rows = try store.rows(accessibility: passcodeClasses.map(\.rawValue))
        var stranded = 0
        try store.transaction { () throws(KeychainError) in
            for row in rows {
                let accessibility = try Self.accessibility(of: row)
                guard let newKey = newKeys[accessibility] else {
                    try store.delete(row)  // when-passcode-set items go with the passcode
                    continue
                }
                guard let oldKey = classKeys[accessibility] else {
                    stranded += 1
                    continue
                }
                let aad = row.header(storeID: storeID).encoded()
                let attributes: Data
                let value: Data
                do throws(KeychainError) {
                    try checkLedger(row)
                    attributes = try ItemEnvelope.openAttributes(
                        row.sealed,
                        aad: aad,
                        itemID: row.itemID,
                        classKey: oldKey
                    )
                    value = try ItemEnvelope.openValue(row.sealed, aad: aad, classKey: oldKey)
                } catch {
                    stranded += 1
                    continue
                }
                guard stranded == 0 else { continue }
                var updated = row
                updated.generation += 1
                updated.sealed = try ItemEnvelope.seal(
                    attributes: [UInt8](attributes),
                    secret: value,
                    aad: updated.header(storeID: storeID).encoded(),
                    itemID: row.itemID,
                    classKey: newKey
                )
                try store.update(updated)
            }
            guard stranded == 0 else {
                throw KeychainError(
                    KeychainStatus.decode,
                    "\(stranded) item\(stranded == 1 ? "" : "s") of the passcode classes cannot be decrypted, so the "
                        + "passcode was not changed (re-keying would strand \(stranded == 1 ? "it" : "them") for good); "
                        + "list them with `keyseal doctor` and delete them with `keyseal doctor --delete-undecryptable`"
                )
            }
            let saved = keybag
            keybag = newKeybag
            do throws(KeychainError) {
                try saveKeybag()
            } catch {
                keybag = saved
                throw error
            }
        }
        try store.checkpoint()
        for accessibility in passcodeClasses { classKeys[accessibility] = newKeys[accessibility] }
        lockState = .unlocked
        try advanceCounter()
    }

    /// Sets a random TPM lockout authorization, so that the TPM limits passcode guessing; returns it once.
    func protectHardwareLockout() throws -> SecretBytes {
        guard let tpm = device as? TPMDeviceKey else {
            throw KeychainError(KeychainStatus.param, "only a TPM has a lockout authorization to set")
        }
        return try tpm.protectLockout()
    }

    /// Sets a random TPM lockout authorization after `keep` has put it somewhere durable.
    func protectHardwareLockout(keeping keep: (SecretBytes) throws -> Void) throws {
        guard let tpm = device as? TPMDeviceKey else {
            throw KeychainError(KeychainStatus.param, "only a TPM has a lockout authorization to set")
        }
        try tpm.protectLockout(keeping: keep)
    }

    // MARK: - Settings and status

    var autoLockSeconds: Int? { keybag.autoLockSeconds }

    func setAutoLock(seconds: Int?) throws {
        try requireNotRolledBack()
        if let seconds, seconds <= 0 {
            throw KeychainError(KeychainStatus.param, "the auto-lock timeout must be positive")
        }
        let saved = keybag
        keybag.autoLockSeconds = seconds
        do {
            try store.transaction { () throws(KeychainError) in try saveKeybag() }
        } catch {
            keybag = saved
            throw error
        }
    }

    func usage(accessGroup group: String) throws -> (items: Int, bytes: Int) { try store.usage(accessGroup: group) }

    func status(itemCounts: Bool = true) throws -> StoreStatus {
        var device = try self.device.status()
        if let resealProblem {
            device.detail +=
                "; the sealed secrets still use the older format, which the token's PIN holder can attack "
                + "offline, because sealing them again failed: \(resealProblem)"
        }
        var counts: [Accessibility: Int] = [:]
        for (code, count) in itemCounts ? try store.countsByAccessibility() : [:] {
            if let accessibility = Accessibility(rawValue: code) { counts[accessibility] = count }
        }
        let wait = remainingDelay(now: configuration.clock())
        return StoreStatus(
            lockState: lockState,
            passcodeSet: passcodeSet,
            device: device,
            failedAttempts: keybag.failedAttempts,
            triesLeft: device.hardwareTriesLeft,
            nextTryAt: wait > 0 ? configuration.clock().addingTimeInterval(TimeInterval(wait)) : nil,
            autoLockSeconds: keybag.autoLockSeconds,
            itemCounts: counts,
            ledger: ledger,
            boot: try bootStatus()
        )
    }

    // MARK: - SecItem

    /// `trusted`: attributes the engine itself sets (a generated key's token), past the caller's checks.
    /// `admit`: keyseald's quotas, asked with the sealed row's exact size before it is written.
    func add(
        _ item: NewItem,
        caller: Caller,
        trusted: [String: AttributeValue] = [:],
        admit: GroupAdmission? = nil
    ) throws -> ItemRecord? {
        let (row, attributes, group) = try prepare(item, caller: caller, now: configuration.clock(), trusted: trusted)
        if let admit { try admitAdding(row, admit: admit) }
        var stored = row
        stored.id = try itemTransaction { () throws(KeychainError) in try store.insert(row) }
        groupCache.insert(group, for: item.itemClass)
        guard !item.returns.effective.isEmpty else { return nil }
        return record(
            stored,
            attributes: attributes,
            data: item.returns.contains(.data) ? item.data : nil,
            returns: item.returns
        )
    }

    /// Checks an add against the limits, the caller's groups and the lock state, and seals its row.
    private func prepare(
        _ item: NewItem,
        caller: Caller,
        now: Date,
        trusted: [String: AttributeValue] = [:]
    ) throws
        -> (ItemRow, [String: AttributeValue], String)
    {
        try RequestValidation.validate(item, valueLimit: configuration.valueLimit)
        let group = item.accessGroup ?? caller.defaultGroup
        guard caller.holds(group) else { throw KeychainError.missingEntitlement(group) }
        let classKey = try requireClassKey(item.accessibility)
        var attributes = item.attributes
        attributes.merge(trusted) { _, engine in engine }
        try Self.completeAttributes(&attributes, itemClass: item.itemClass, data: item.data)
        for key in AttributeKey.primaryKey(for: item.itemClass) where attributes[key] == nil {
            attributes[key] = AttributeKey.defaultValue(key)
        }
        attributes[AttributeKey.synchronizable] = .bool(item.synchronizable)
        attributes[AttributeKey.creationDate] = .date(now)
        attributes[AttributeKey.modificationDate] = .date(now)
        if let flags = item.accessControlFlags { attributes[AttributeKey.accessControl] = .int(Int64(flags)) }
        let row = try seal(
            itemID: randomBytes(16),
            itemClass: item.itemClass,
            group: group,
            accessibility: item.accessibility,
            generation: 1,
            attributes: attributes,
            secret: item.data,
            classKey: classKey
        )
        return (row, attributes, group)
    }

    /// Adds many items in one transaction: all or nothing (import, benchmarks).
    func addBatch(_ items: [NewItem], caller: Caller) throws {
        let now = configuration.clock()
        let rows = try items.map { item in (try prepare(item, caller: caller, now: now), item.itemClass) }
        try itemTransaction { () throws(KeychainError) in
            for ((row, _, _), _) in rows { try store.insert(row) }
        }
        for ((_, _, group), itemClass) in rows { groupCache.insert(group, for: itemClass) }
    }

    func copyMatching(_ query: ItemQuery, caller: Caller, resultLimit: Int? = nil) throws -> [ItemRecord] {
        try copyMatching(query, caller: caller, resultLimit: resultLimit, scan: nil)
    }

    /// ``copyMatching(_:caller:resultLimit:)`` where the work must stay small (keyseald's event loop): nil once the rows
    /// the store's indexes select for `query` are over `bound`, found by stepping through at most `bound.rows + 1`
    /// rows and opening at most `bound.rows` of them. An identity (a key joined with its certificates) has no such
    /// bound: nil. A query the engine refuses throws, as ``copyMatching(_:caller:resultLimit:)`` does.
    func copyMatching(
        _ query: ItemQuery,
        caller: Caller,
        resultLimit: Int?,
        within bound: ScanBound
    ) throws
        -> [ItemRecord]?
    {
        guard query.itemClass != .identity else { return nil }
        do {
            return try copyMatching(query, caller: caller, resultLimit: resultLimit, scan: bound)
        } catch is OverScanBound {
            return nil
        }
    }

    private func copyMatching(
        _ query: ItemQuery,
        caller: Caller,
        resultLimit: Int?,
        scan: ScanBound?
    ) throws
        -> [ItemRecord]
    {
        switch query.itemClass {
        case .identity:
            try RequestValidation.validate(query)
            return try identities(query, caller: caller)
        case .key where query.returns.contains(.data):
            // The attributes tell whether a key's material may leave: they are read even when not asked for.
            var withAttributes = query
            withAttributes.returns.insert(.attributes)
            var records = try findItems(withAttributes, caller: caller, resultLimit: resultLimit, scan: scan)
            try checkKeyData(records)
            records = try authorized(records, caller: caller, keepAttributes: true, limit: nil)
            if !query.returns.contains(.attributes) {
                for index in records.indices { records[index].attributes = [:] }
            }
            return records
        default:
            guard Self.needsAuthorization(query, caller: caller) else {
                return try findItems(query, caller: caller, resultLimit: resultLimit, scan: scan)
            }
            let skipping = AuthenticationCheck(caller: caller).authentication?.ui == .skip
            if !skipping, let records = try authorizedValues(query, caller: caller) { return records }
            // The access control is an attribute: read even when not asked for (KeychainEngine+Authentication.swift).
            var withAttributes = query
            withAttributes.returns.insert(.attributes)
            if skipping { withAttributes.limit = .all }
            let records = try findItems(withAttributes, caller: caller, resultLimit: resultLimit, scan: scan)
            return try authorized(
                records,
                caller: caller,
                keepAttributes: query.returns.contains(.attributes),
                limit: skipping ? query.limit.bound : nil
            )
        }
    }

    /// The lookup of stored items, as `SecItemCopyMatching` does it for the password classes. `scan`: see
    /// ``copyMatching(_:caller:resultLimit:within:)``; over it, ``OverScanBound`` is thrown.
    func findItems(
        _ query: ItemQuery,
        caller: Caller,
        resultLimit: Int? = nil,
        scan: ScanBound? = nil
    ) throws
        -> [ItemRecord]
    {
        try RequestValidation.validate(query)
        // A request for the value alone, found by digests only, needs no attribute decryption: opening the value
        // authenticates the header, and the header carries the digests the rows were found by (docs/ARCHITECTURE.md,
        // "Key hierarchy" and "Store and search digests").
        let valueProvesMatch = query.returns.contains(.data) && !query.returns.contains(.attributes)
        let (filter, decidesQuery) = try rowFilter(query, caller: caller)
        if valueProvesMatch, decidesQuery, query.returns == .data, query.limit.bound == 1,
            let digest = filter.primaryKeyDigest
        {
            var unchecked: AuthenticationCheck? = nil
            let records = try values(query, caller: caller, primaryKeyDigest: digest, authorization: &unchecked)
            guard !records.isEmpty else { throw KeychainError.itemNotFound }
            return records
        }
        var matches = try match(
            query,
            caller: caller,
            filter: (filter, decidesQuery),
            bound: query.limit.bound,
            valueProvesMatch: valueProvesMatch,
            byteLimit: resultLimit,
            scan: scan
        )
        guard !matches.isEmpty else { throw KeychainError.itemNotFound }
        // Each row's ciphertext is let go once its record is made, so that a large result is not held twice.
        var records: [ItemRecord] = []
        records.reserveCapacity(matches.count)
        for index in matches.indices {
            let match = matches[index]
            matches[index].row.sealed = SealedItem(attributes: Data(), wrappedKey: Data(), value: Data())
            let data: Data? =
                query.returns.contains(.data)
                ? try ItemEnvelope.openValue(
                    match.row.sealed,
                    aad: match.aad,
                    classKey: try requireClassKey(Self.accessibility(of: match.row))
                )
                : nil
            records.append(record(match.row, attributes: match.attributes, data: data, returns: query.returns))
        }
        return records
    }

    func update(_ query: ItemQuery, changes: ItemChanges, caller: Caller, admit: GroupAdmission? = nil) throws {
        try RequestValidation.validate(query)
        try RequestValidation.validate(changes, itemClass: query.itemClass, valueLimit: configuration.valueLimit)
        guard !changes.isEmpty else { throw KeychainError(KeychainStatus.param, "nothing to update") }
        if let group = changes.accessGroup, !caller.holds(group) { throw KeychainError.missingEntitlement(group) }
        if let accessibility = changes.accessibility { _ = try requireClassKey(accessibility) }

        let matches = try match(query, caller: caller, bound: nil)
        guard !matches.isEmpty else {
            if try wouldCollide(query: query, changes: changes, caller: caller) { throw KeychainError.duplicateItem }
            throw KeychainError.itemNotFound
        }
        let now = configuration.clock()
        var updatedRows: [ItemRow] = []
        var authentication = AuthenticationCheck(caller: caller)
        for match in matches {
            let (row, attributes, aad) = (match.row, match.attributes, match.aad)
            let oldAccessibility = try Self.accessibility(of: row)
            let oldKey = try requireClassKey(oldAccessibility)
            let newAccessibility = changes.accessibility ?? oldAccessibility
            let newKey = try requireClassKey(newAccessibility)
            var newAttributes = attributes
            for (key, value) in changes.attributes { newAttributes[key] = value }
            if let sync = changes.synchronizable { newAttributes[AttributeKey.synchronizable] = .bool(sync) }
            if let flags = changes.accessControlFlags {
                newAttributes[AttributeKey.accessControl] = .int(Int64(flags))
            } else if changes.accessibility != nil {
                newAttributes[AttributeKey.accessControl] = Self.keptAccessControl(attributes)
            }
            guard try authentication.check(flags: Self.accessControlFlags(attributes), engine: self) == .allowed else {
                continue
            }
            newAttributes[AttributeKey.modificationDate] = .date(now)
            let secret =
                try changes.data
                ?? ItemEnvelope.openValue(row.sealed, aad: aad, classKey: oldKey)
            guard let itemClass = ItemClass(rawValue: row.itemClass) else { throw KeychainError.decode }
            var updated = try seal(
                itemID: row.itemID,
                itemClass: itemClass,
                group: changes.accessGroup ?? row.accessGroup,
                accessibility: newAccessibility,
                generation: row.generation + 1,
                attributes: newAttributes,
                secret: secret,
                classKey: newKey
            )
            updated.id = row.id
            updatedRows.append(updated)
        }
        if let admit { try Self.admit(from: matches.map(\.row), to: updatedRows, admit: admit, usage: store.usage) }
        try itemTransaction { () throws(KeychainError) in
            for row in updatedRows { try store.update(row) }
        }
        if let group = changes.accessGroup,
            let itemClass = matches.first.flatMap({ ItemClass(rawValue: $0.row.itemClass) })
        {
            groupCache.insert(group, for: itemClass)
        }
    }

    /// Calls `admit` for the group `row` would be added to, with one item and its sealed size.
    private func admitAdding(_ row: ItemRow, admit: GroupAdmission) throws {
        try admit(row.accessGroup, try store.usage(accessGroup: row.accessGroup), (1, Self.storedSize(row)))
    }

    /// What a row adds to its group's usage: its sealed attributes and value, as `group_usage` counts them.
    static func storedSize(_ row: ItemRow) -> Int { row.sealed.attributes.count + row.sealed.value.count }

    /// Calls `admit` for each group that rows going from `old` to `new` (the same items, in order) grow, with what
    /// they add to it: an update that grows values or moves items is charged exactly, however many items it matched.
    static func admit(
        from old: [ItemRow],
        to new: [ItemRow],
        admit: GroupAdmission,
        usage: (String) throws(KeychainError) -> (items: Int, bytes: Int)
    ) throws {
        var adds: [String: (items: Int, bytes: Int)] = [:]
        for (before, after) in zip(old, new) {
            adds[before.accessGroup, default: (0, 0)].items -= 1
            adds[before.accessGroup, default: (0, 0)].bytes -= storedSize(before)
            adds[after.accessGroup, default: (0, 0)].items += 1
            adds[after.accessGroup, default: (0, 0)].bytes += storedSize(after)
        }
        for (group, added) in adds.sorted(by: { $0.key < $1.key }) where added.items > 0 || added.bytes > 0 {
            try admit(group, try usage(group), (max(added.items, 0), max(added.bytes, 0)))
        }
    }

    /// Adds `item`, or, when an item of its class, access group and service already carries exactly its string
    /// attributes (``AttributeKey/stringAttributes``, compared as decoded pair sets), gives that item `item`'s label,
    /// description and value instead: it keeps its account, accessibility and creation date. The Secret Service's
    /// `CreateItem` with `replace`. The search and the write are one item transaction under the engine's lock, so
    /// that two callers storing the same attributes leave one item. Of several such items, the lowest row is
    /// replaced. Returns nil when it added, else the replaced item's account.
    ///
    /// Every check of an add applies (validation, the value limit, the caller's group, the class key); an item
    /// without string attributes is errSecParam; while a class key the search needs is unavailable nothing is
    /// written (errSecInteractionNotAllowed).
    func addReplacingAttributes(_ item: NewItem, caller: Caller, admit: GroupAdmission? = nil) throws -> String? {
        switch try addReplacingAttributes(item, caller: caller, scan: nil, admit: admit) {
        case .added, .overBound: return nil
        case .replaced(let account): return account
        }
    }

    /// ``addReplacingAttributes(_:caller:)`` where the work must stay small (keyseald's event loop): `.overBound`,
    /// with nothing written, once the rows the search steps through are over `scan` (as
    /// ``copyMatching(_:caller:resultLimit:within:)`` counts them).
    /// `admit` (keyseald's quotas) is asked as for an add, whether it adds or replaces: one more item and the sealed
    /// row's size.
    func addReplacingAttributes(
        _ item: NewItem,
        caller: Caller,
        scan: ScanBound?,
        admit: GroupAdmission? = nil
    ) throws -> ReplacingAdd {
        let now = configuration.clock()
        let (row, _, group) = try prepare(item, caller: caller, now: now)
        guard item.itemClass == .genericPassword, let encoded = item.attributes[AttributeKey.stringAttributes] else {
            throw KeychainError(
                KeychainStatus.param,
                "an add that replaces by string attributes needs a generic password carrying \(AttributeKey.stringAttributes)"
            )
        }
        if let admit { try admitAdding(row, admit: admit) }
        let pairs = try StringAttributes.pairs(encoded)
        let service = item.attributes[AttributeKey.service] ?? AttributeKey.defaultValue(AttributeKey.service)
        var query = ItemQuery(
            itemClass: .genericPassword,
            attributes: [AttributeKey.stringAttributes: encoded],
            accessGroup: group,
            limit: .all,
            returns: .attributes
        )
        query.attributes[AttributeKey.service] = service
        let outcome = try itemTransaction { () throws(KeychainError) -> ReplacingAdd in
            let matches: [Match]
            do {
                matches = try match(query, caller: caller, bound: nil, scan: scan)
            } catch let error as KeychainError {
                throw error
            } catch is OverScanBound {
                // Nothing is written yet: the transaction ends empty.
                return .overBound
            } catch {
                throw KeychainError(KeychainStatus.internalComponent, "\(error)")
            }
            // Only an item that carries string attributes is replaced: one without (a plain add's item) has no pairs to
            // be equal to, even to an empty set.
            let equal = matches.filter { match in
                guard let stored = match.attributes[AttributeKey.stringAttributes] else { return false }
                return (try? StringAttributes.pairs(stored)) == pairs
            }
            guard let target = equal.min(by: { $0.row.id < $1.row.id }) else {
                _ = try store.insert(row)
                return .added
            }
            let accessibility = try Self.accessibility(of: target.row)
            var attributes = target.attributes
            attributes[AttributeKey.label] = item.attributes[AttributeKey.label]
            attributes[AttributeKey.description] = item.attributes[AttributeKey.description]
            attributes[AttributeKey.modificationDate] = .date(now)
            var updated = try seal(
                itemID: target.row.itemID,
                itemClass: .genericPassword,
                group: target.row.accessGroup,
                accessibility: accessibility,
                generation: target.row.generation + 1,
                attributes: attributes,
                secret: item.data,
                classKey: try requireClassKey(accessibility)
            )
            updated.id = target.row.id
            try store.update(updated)
            guard case .string(let account)? = attributes[AttributeKey.account] else { return .replaced(account: "") }
            return .replaced(account: account)
        }
        if case .added = outcome { groupCache.insert(group, for: .genericPassword) }
        return outcome
    }

    func delete(_ query: ItemQuery, caller: Caller) throws {
        try RequestValidation.validate(query)
        if query.limitGiven && query.limit != .all {
            throw KeychainError(KeychainStatus.param, "delete removes every match: only m_LimitAll may be given")
        }
        if query.itemClass == .identity { return try deleteIdentities(query, caller: caller) }
        let matches = try match(query, caller: caller, bound: nil)
        guard !matches.isEmpty else { throw KeychainError.itemNotFound }
        let blobs = try hardwareBlobs(matches)
        try itemTransaction { () throws(KeychainError) in
            for match in matches { try store.delete(match.row) }
        }
        // What the hardware holds for a deleted key goes after its row (a failure leaves an object no item names,
        // never an item whose key is gone).
        if !blobs.isEmpty, let provider = device.hardwareKeys {
            for blob in blobs { try? provider.deleteKey(keyBlob: blob) }
        }
    }

    // MARK: - Matching

    /// The rows that match `query`, with their decrypted attributes, in insertion order, up to `bound`.
    /// A candidate whose class key is unavailable fails the whole call with `errSecInteractionNotAllowed`: a
    /// digest never decides on its own, and nothing is returned or changed.
    /// Each match carries its encoded header (the envelope's associated data), computed once.
    /// The rows that match `query`, each with its decrypted attributes and encoded header.
    ///
    /// `valueProvesMatch`: the caller opens every matched row's value before answering. When the row filter then
    /// decides every queried attribute by digest (`decidesQuery` of ``rowFilter(_:caller:)``), the attribute ciphertext is not
    /// opened and `attributes` is empty: the value's authentication covers the header, whose digests are the ones
    /// the row was found by, and the attribute ciphertext through its SHA-256. The class key is still required.
    private func match(
        _ query: ItemQuery,
        caller: Caller,
        filter given: (RowFilter, decidesQuery: Bool)? = nil,
        bound: Int?,
        valueProvesMatch: Bool = false,
        byteLimit: Int? = nil,
        scan: ScanBound? = nil
    ) throws -> [Match] {
        let (filter, decidesQuery) = try given ?? rowFilter(query, caller: caller)
        let skipAttributes = valueProvesMatch && decidesQuery
        let withValues = query.returns.contains(.data)
        var matches: [Match] = []
        var bytes = 0
        var scanned = (rows: 0, bytes: 0)
        var overScanBound = false
        let visit = { [self] (row: ItemRow) throws(KeychainError) -> Bool in
            if let scan {
                // Counted before anything is opened: every candidate row, whether or not it matches.
                scanned.rows += 1
                scanned.bytes += row.sealed.attributes.count + row.sealed.value.count
                guard scanned.rows <= scan.rows && scanned.bytes <= scan.bytes else {
                    overScanBound = true
                    return false
                }
            }
            let accessibility = try Self.accessibility(of: row)
            let key = try requireClassKey(accessibility)
            let aad = row.header(storeID: storeID).encoded()
            let attributes: [String: AttributeValue]
            if skipAttributes {
                try checkLedger(row)
                attributes = [:]
            } else {
                attributes = try decryptAttributes(row, aad: aad, classKey: key)
            }
            // The authenticated columns must agree with what the digests promised.
            guard row.itemClass == query.itemClass.rawValue, caller.holds(row.accessGroup),
                query.accessGroup == nil || query.accessGroup == row.accessGroup,
                skipAttributes || Self.attributes(attributes, match: query)
            else { return true }
            if let byteLimit {
                bytes += row.sealed.attributes.count + (withValues ? row.sealed.value.count : 0)
                guard bytes <= byteLimit else {
                    throw KeychainError(
                        KeychainStatus.dataTooLarge,
                        "the result is over \(byteLimit) bytes; ask for fewer items, or for attributes without data"
                    )
                }
            }
            matches.append(Match(row: row, attributes: attributes, aad: aad))
            if let bound { return matches.count < bound }
            return true
        }
        if let scan {
            // SQLite's own work is bounded too: rows its terms reject (another pair's probe, a digest that differs)
            // never reach `visit`.
            let finished: Void? = try store.database.withWorkBound(instructions: scan.instructions) {
                () throws(KeychainError) in try store.forEachRow(filter, visit)
            }
            if finished == nil { overScanBound = true }
        } else {
            try store.forEachRow(filter, visit)
        }
        if overScanBound { throw OverScanBound() }
        return matches
    }

    /// A scan gave up at its ``ScanBound``; never leaves the engine.
    struct OverScanBound: Error {}

    /// A row that matched, its decrypted attributes (empty when the value alone proves the match) and its encoded
    /// header, the envelope's associated data.
    struct Match {
        var row: ItemRow
        var attributes: [String: AttributeValue]
        var aad: [UInt8]
    }

    /// The value-only lookup of one item by one primary-key digest, the common `SecItemCopyMatching`:
    /// ``match(_:caller:filter:bound:valueProvesMatch:)`` with the value alone proving the match and a bound of one,
    /// then that value opened, with each row read in place (no row is copied out of SQLite). The same checks in the
    /// same order: per row the class key, the ledger, the stored class and group against the query; then the first
    /// row that passes has its value opened, whose authentication covers the header the row was found by.
    /// `authorization`, when given, checks each row's access control before its value is opened (its attributes
    /// opened in place; a row to skip is passed over as a row of another group is).
    private func values(
        _ query: ItemQuery,
        caller: Caller,
        primaryKeyDigest digest: Data,
        authorization: inout AuthenticationCheck?
    ) throws -> [ItemRecord] {
        precondition(query.limit.bound == 1, "the in-place lookup answers limit one only")
        var records: [ItemRecord] = []
        try store.forEachRowInPlace(primaryKeyDigest: digest) { row throws(KeychainError) -> Bool in
            let key = try requireClassKey(Self.accessibility(code: row.accessibility))
            try checkLedger(rowID: row.id, generation: row.generation, ledgerGeneration: row.ledgerGeneration)
            let group = row.accessGroup
            guard row.itemClass == query.itemClass.rawValue, caller.holds(group),
                query.accessGroup == nil || query.accessGroup == group
            else { return true }
            if authorization != nil {
                let plain = try row.withHeaderColumns { header throws(KeychainError) in
                    try ItemEnvelope.openAttributes(
                        storeID: storeID,
                        header: header,
                        attributesBox: row.attributes,
                        classKey: key
                    )
                }
                let flags = Self.accessControlFlags(try AttributeCodec.decode(plain))
                guard try authorization?.check(flags: flags, engine: self) == .allowed else { return true }
            }
            let data = try row.withHeaderColumns { header throws(KeychainError) in
                try ItemEnvelope.openValue(
                    storeID: storeID,
                    header: header,
                    attributesBox: row.attributes,
                    wrappedKey: row.wrappedKey,
                    value: row.value,
                    classKey: key
                )
            }
            records.append(ItemRecord(itemClass: query.itemClass, attributes: [:], data: data, persistentRef: nil))
            return false
        }
        return records
    }

    /// The value-only lookup of one item by primary key (``values(_:caller:primaryKeyDigest:authorization:)``) with
    /// the item's access control checked; nil where the query is not one that lookup answers.
    func authorizedValues(_ query: ItemQuery, caller: Caller) throws -> [ItemRecord]? {
        guard query.returns == .data, query.limit.bound == 1 else { return nil }
        try RequestValidation.validate(query)
        let (filter, decidesQuery) = try rowFilter(query, caller: caller)
        guard decidesQuery, let digest = filter.primaryKeyDigest else { return nil }
        var check: AuthenticationCheck? = AuthenticationCheck(caller: caller)
        let records = try values(query, caller: caller, primaryKeyDigest: digest, authorization: &check)
        guard !records.isEmpty else { throw KeychainError.itemNotFound }
        return records
    }

    private func decryptAttributes(
        _ row: ItemRow,
        aad: [UInt8],
        classKey: ClassKey
    ) throws(KeychainError) -> [String: AttributeValue] {
        try checkLedger(row)
        let plain = try ItemEnvelope.openAttributes(row.sealed, aad: aad, itemID: row.itemID, classKey: classKey)
        return try AttributeCodec.decode(plain)
    }

    /// An older copy of a row put back in place carries an older generation than the ledger records; a row whose
    /// ledger bucket did not verify at open is refused whatever it carries.
    func checkLedger(_ row: ItemRow) throws(KeychainError) {
        try checkLedger(rowID: row.id, generation: row.generation, ledgerGeneration: row.ledgerGeneration)
    }

    func checkLedger(rowID: Int64, generation: Int64, ledgerGeneration: Int64?) throws(KeychainError) {
        guard ledgerGeneration == generation else {
            throw KeychainError(KeychainStatus.decode, "an item failed its generation check (rolled back or edited)")
        }
        if !refusedBuckets.isEmpty, refusedBuckets[LedgerDigest.bucket(rowID: rowID)] {
            throw KeychainError(
                KeychainStatus.decode,
                "an item is in a part of the generation ledger that failed verification at open (an item was rolled "
                    + "back, deleted or edited in the file)"
            )
        }
    }

    private static func attributes(_ stored: [String: AttributeValue], match query: ItemQuery) -> Bool {
        for (key, wanted) in query.attributes {
            if key == AttributeKey.stringAttributes {
                guard let stored = try? StringAttributes.pairs(stored[key]),
                    let wanted = try? StringAttributes.pairs(wanted), StringAttributes.contains(stored, wanted)
                else { return false }
                continue
            }
            let value =
                stored[key]
                ?? (AttributeKey.primaryKey(for: query.itemClass).contains(key)
                    ? AttributeKey.defaultValue(key) : nil)
            guard let value, value.matches(wanted) else { return false }
        }
        let sync: Bool
        if case .bool(let flag)? = stored[AttributeKey.synchronizable] { sync = flag } else { sync = false }
        switch query.synchronizable {
        case .any: return true
        case .yes: return sync
        case .no: return !sync
        }
    }

    /// The row filter for `query`, and whether its digests decide every queried attribute and the synchronizable
    /// condition (so that an authenticated header alone proves a row matches).
    private func rowFilter(_ query: ItemQuery, caller: Caller) throws -> (RowFilter, decidesQuery: Bool) {
        var itemID: [UInt8]?
        if let reference = query.persistentRef {
            let bytes = [UInt8](reference)
            guard bytes.count == 20, Array(bytes.prefix(4)) == Self.persistentRefPrefix else {
                throw KeychainError(KeychainStatus.param, "not a Keyseal persistent reference")
            }
            itemID = Array(bytes.suffix(16))
        }
        let groups: [String]?
        if let group = query.accessGroup {
            guard caller.holds(group) else { throw KeychainError.missingEntitlement(group) }
            groups = [group]
        } else {
            groups = caller.accessGroups
        }
        let primaryKey = AttributeKey.primaryKey(for: query.itemClass)
        // Primary-key attributes with a digest column of their class (a key's dates have none).
        let digestKeys = primaryKey.filter {
            query.attributes[$0] != nil && AttributeKey.digestColumn(for: $0, itemClass: query.itemClass) != nil
        }
        // String attribute pairs: each a term of the pair index (the sealed attributes decide; validated above).
        let pairs = try StringAttributes.pairs(query.attributes[AttributeKey.stringAttributes])
        let useDigests = !digestKeys.isEmpty || query.synchronizable != .any || !pairs.isEmpty
        guard useDigests else {
            let filter = RowFilter(
                itemClass: query.itemClass.rawValue,
                groups: groups.map { $0.map { RowFilter.GroupTerm(group: $0) } },
                accessibility: query.accessibility?.rawValue,
                itemID: itemID
            )
            return (filter, false)
        }
        let candidates = try groups ?? knownGroups(query.itemClass)
        let wholeKey =
            primaryKey.allSatisfy { query.attributes[$0] != nil } && query.synchronizable != .any && pairs.isEmpty
        let terms = candidates.map { group -> RowFilter.GroupTerm in
            if wholeKey {
                return RowFilter.GroupTerm(
                    group: group,
                    primaryKeyDigest: indexKey.primaryKeyDigest(
                        group: group,
                        itemClass: query.itemClass,
                        attributes: query.attributes,
                        synchronizable: query.synchronizable == .yes
                    )
                )
            }
            var digests = digestKeys.map { key in
                (
                    AttributeKey.digestColumn(for: key, itemClass: query.itemClass)!,
                    indexKey.attributeDigest(
                        group: group,
                        itemClass: query.itemClass,
                        key: key,
                        value: query.attributes[key]!
                    )
                )
            }
            if query.synchronizable != .any {
                digests.append(
                    (
                        AttributeKey.synchronizable,
                        indexKey.attributeDigest(
                            group: group,
                            itemClass: query.itemClass,
                            key: AttributeKey.synchronizable,
                            value: .bool(query.synchronizable == .yes)
                        )
                    )
                )
            }
            let pairDigests = pairs.map {
                indexKey.pairDigest(group: group, itemClass: query.itemClass, name: $0.key, value: $0.value)
            }
            return RowFilter.GroupTerm(group: group, digests: digests, pairDigests: pairDigests)
        }
        let filter = RowFilter(
            itemClass: query.itemClass.rawValue,
            groups: terms,
            accessibility: query.accessibility?.rawValue,
            itemID: itemID
        )
        // Every queried attribute is a primary-key attribute with a digest term (or all of them are, in the whole
        // key's digest); synchronizable is either a term or `.any`.
        return (
            filter,
            digestKeys.count == query.attributes.count || (wholeKey && primaryKey.count == query.attributes.count)
        )
    }

    private func knownGroups(_ itemClass: ItemClass) throws -> [String] {
        if let cached = groupCache.groups(itemClass) { return cached }
        let groups = try store.accessGroups(itemClass: itemClass.rawValue)
        groupCache.set(groups, for: itemClass)
        return groupCache.groups(itemClass) ?? []
    }

    /// For an update that matched nothing: would the query's item, changed as asked, collide with an existing
    /// item? (A collision wins over not found.)
    private func wouldCollide(query: ItemQuery, changes: ItemChanges, caller: Caller) throws -> Bool {
        let primaryKey = AttributeKey.primaryKey(for: query.itemClass)
        guard primaryKey.contains(where: { changes.attributes[$0] != nil }) else { return false }
        var attributes = query.attributes
        for (key, value) in changes.attributes { attributes[key] = value }
        let sync: Bool
        if let changed = changes.synchronizable { sync = changed } else { sync = query.synchronizable == .yes }
        guard
            let group = changes.accessGroup ?? query.accessGroup ?? caller.accessGroups?.first
                ?? Optional(caller.defaultGroup)
        else { return false }
        let digest = indexKey.primaryKeyDigest(
            group: group,
            itemClass: query.itemClass,
            attributes: attributes,
            synchronizable: sync
        )
        return try store.primaryKeyExists(
            itemClass: query.itemClass.rawValue,
            group: group,
            digest: digest,
            excludingID: nil
        )
    }

    // MARK: - Rows

    func seal(
        itemID: [UInt8],
        itemClass: ItemClass,
        group: String,
        accessibility: Accessibility,
        generation: Int64,
        attributes: [String: AttributeValue],
        secret: Data,
        classKey: ClassKey,
        random: RandomPool? = nil
    ) throws(KeychainError) -> ItemRow {
        try Self.seal(
            indexKey: indexKey,
            storeID: storeID,
            itemID: itemID,
            itemClass: itemClass,
            group: group,
            accessibility: accessibility,
            generation: generation,
            attributes: attributes,
            secret: secret,
            classKey: classKey,
            random: random
        )
    }

    /// Seals a row from immutable inputs only (so that bulk work may seal on another thread). `encodedAttributes`,
    /// when given, is `AttributeCodec.encode(attributes)` already at hand.
    static func seal(
        indexKey: IndexKey,
        storeID: [UInt8],
        itemID: [UInt8],
        itemClass: ItemClass,
        group: String,
        accessibility: Accessibility,
        generation: Int64,
        attributes: [String: AttributeValue],
        secret: Data,
        classKey: ClassKey,
        random: RandomPool? = nil,
        encodedAttributes: [UInt8]? = nil
    ) throws(KeychainError) -> ItemRow {
        let sync: Bool
        if case .bool(let flag)? = attributes[AttributeKey.synchronizable] { sync = flag } else { sync = false }
        let digests: [Data?] = AttributeKey.digestSlots(for: itemClass).map { key in
            guard let key else { return nil }
            if key == AttributeKey.synchronizable {
                return indexKey.attributeDigest(group: group, itemClass: itemClass, key: key, value: .bool(sync))
            }
            return indexKey.attributeDigest(
                group: group,
                itemClass: itemClass,
                key: key,
                value: attributes[key] ?? AttributeKey.defaultValue(key)
            )
        }
        var row = ItemRow(
            itemID: itemID,
            itemClass: itemClass.rawValue,
            accessGroup: group,
            accessibility: accessibility.rawValue,
            generation: generation,
            primaryKeyDigest: indexKey.primaryKeyDigest(
                group: group,
                itemClass: itemClass,
                attributes: attributes,
                synchronizable: sync
            ),
            digests: digests,
            sealed: SealedItem(attributes: Data(), wrappedKey: Data(), value: Data()),
            ledgerGeneration: generation
        )
        row.pairDigests = indexKey.pairDigests(group: group, itemClass: itemClass, attributes: attributes)
        row.sealed = try ItemEnvelope.seal(
            attributes: encodedAttributes ?? AttributeCodec.encode(attributes),
            secret: secret,
            aad: row.header(storeID: storeID).encoded(),
            itemID: itemID,
            classKey: classKey,
            random: random
        )
        return row
    }

    private func record(
        _ row: ItemRow,
        attributes: [String: AttributeValue],
        data: Data?,
        returns: ReturnOptions
    )
        -> ItemRecord
    {
        // Attributes only when they were asked for: a lookup for the value alone copies no dictionary.
        var all: [String: AttributeValue] = [:]
        if returns.contains(.attributes) {
            all = attributes
            all[AttributeKey.accessGroup] = .string(row.accessGroup)
            all[AttributeKey.accessible] = .string(row.accessibility)
        }
        return ItemRecord(
            itemClass: ItemClass(rawValue: row.itemClass) ?? .genericPassword,
            attributes: all,
            data: data,
            persistentRef: returns.contains(.persistentRef) ? Data(Self.persistentRefPrefix + row.itemID) : nil
        )
    }

    static func accessibility(of row: ItemRow) throws(KeychainError) -> Accessibility {
        try accessibility(code: row.accessibility)
    }

    static func accessibility(code: String) throws(KeychainError) -> Accessibility {
        guard let accessibility = Accessibility(rawValue: code) else {
            throw KeychainError(KeychainStatus.decode, "an item has an unknown accessibility class")
        }
        return accessibility
    }

}
