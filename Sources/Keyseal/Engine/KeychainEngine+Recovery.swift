import FoundationEssentials
import KeysealCore
import KeysealStore
import KeysealTPM

#if canImport(Glibc)
import Glibc
#endif

/// What `keyseal recover` gives: the recovery key as typed, and the passcode when one is set.
struct RecoveryInput {
    var key: SecretBytes
    var passcode: SecretBytes?
}

/// The open found the store older than the TPM's anti-rollback counter.
struct RollbackFinding {
    /// Counted events the store does not know of (0 when the counter is behind the store: the index was replaced).
    var events: UInt64
    /// The counter's value at open.
    var counterValue: UInt64
    /// The index at the counter's handle is not the store's counter (its Name differs): its value means nothing, and
    /// `accept-rollback` defines a new counter.
    var replaced = false
    var message: String

    var error: KeychainError { KeychainError(KeychainStatus.rolledBack, message) }
}

/// Boot binding, the recovery key and the anti-rollback counter (docs/TPM.md, docs/OPERATIONS.md).
extension KeychainEngine {
    // MARK: Boot binding

    /// An existing TPM store keeps the PCRs its device object is bound to, and the key of a signed binding, whatever
    /// keyseald was started with (`--tpm-pcrs` and `--tpm-pcr-public-key` apply when a store is created; `keyseal tpm
    /// reseal --pcrs` changes the binding).
    static func adoptBinding(_ device: any DeviceKeyProvider, keybag: Keybag) throws {
        guard let tpm = device as? TPMDeviceKey else { return }
        try tpm.adoptBinding(ofBlob: keybag.sealedDeviceSecret)
    }

    static func describe(_ pcrs: [Int]) -> String {
        pcrs.isEmpty ? "none" : pcrs.map(String.init).joined(separator: ",")
    }

    /// Seals the device object (and the passcode object, with the passcode) again to the current values of the
    /// bound PCRs, or of `pcrs` when given (empty: unbound). Administrators, with the passcode when one is set.
    func resealDeviceObjects(passcode: SecretBytes?, pcrs: [Int]?) throws {
        try requireNotRolledBack()
        guard let tpm = device as? TPMDeviceKey else {
            throw KeychainError(KeychainStatus.unimplemented, "only a TPM store is bound to PCRs")
        }
        var passcodeSecret: SecretBytes?
        var passcodeKey: SecretBytes?
        if passcodeSet {
            guard let passcode else {
                throw KeychainError(KeychainStatus.param, "a passcode is set: re-sealing needs it")
            }
            let keys = try verifyPasscode(passcode) {
                passcodeSecret = $0
                passcodeKey = $1
            }
            classKeys.merge(keys) { _, new in new }
            unlockAfterVerification()
        }
        let binding = tpm.boundPCRs
        let signer = tpm.pcrPolicyKey
        if let pcrs {
            try tpm.bind(to: pcrs)
            if pcrs.isEmpty { tpm.bind(signedBy: nil) }
        }
        let saved = keybag
        do {
            try tpm.requireSignedPolicyForCurrentValues()
            keybag.sealedDeviceSecret = try tpm.seal(deviceSecret)
            if let passcodeSecret, let passcodeKey {
                keybag.passcode?.sealedSecret = try tpm.sealWithPasscode(passcodeSecret, authorization: passcodeKey)
            }
            try store.transaction { () throws(KeychainError) in try saveKeybag() }
        } catch {
            keybag = saved
            try? tpm.bind(to: binding)
            tpm.bind(signedBy: signer)
            throw error
        }
        try store.checkpoint()
    }

    // MARK: Recovery key

    /// Makes a new recovery key (replacing any earlier one) and returns its text, once. TPM stores only; with a
    /// passcode set, the passcode is needed (its secret is escrowed too).
    func createRecoveryKey(passcode: SecretBytes?) throws -> SecretBytes {
        try requireNotRolledBack()
        guard let tpm = device as? TPMDeviceKey else {
            throw KeychainError(KeychainStatus.unimplemented, "a recovery key needs the TPM backend")
        }
        var passcodeSecret: SecretBytes?
        if passcodeSet {
            guard let passcode else {
                throw KeychainError(KeychainStatus.param, "a passcode is set: creating a recovery key needs it")
            }
            let keys = try verifyPasscode(passcode) { secret, _ in passcodeSecret = secret }
            classKeys.merge(keys) { _, new in new }
            unlockAfterVerification()
        }
        let key = SecretBytes.random(count: RecoveryKey.byteCount)
        let escrow = RecoveryEscrow.makeKey()
        let record = RecoveryRecord(
            sealedKey: try tpm.sealUnbound(escrow.privateKey, authorization: key),
            publicKey: escrow.publicKey,
            deviceSecret: try RecoveryEscrow.seal(
                deviceSecret,
                to: escrow.publicKey,
                label: RecoveryEscrow.deviceLabel,
                storeID: storeID
            ),
            passcodeSecret: try passcodeSecret.map {
                try RecoveryEscrow.seal($0, to: escrow.publicKey, label: RecoveryEscrow.passcodeLabel, storeID: storeID)
            }
        )
        let saved = keybag
        keybag.recovery = record
        do {
            try store.transaction { () throws(KeychainError) in try saveKeybag() }
        } catch {
            keybag = saved
            throw error
        }
        try store.checkpoint()
        return RecoveryKey.text(key)
    }

    /// DS from the recovery object (the TPM counts a wrong recovery key as a failed authorization) and the escrow
    /// key, for ``completeRecovery(_:)``.
    static func openWithRecoveryKey(
        _ input: RecoveryInput,
        keybag: Keybag,
        device: any DeviceKeyProvider
    ) throws
        -> (SecretBytes, SecretBytes)
    {
        guard let record = keybag.recovery else {
            throw KeychainError(KeychainStatus.param, "this store has no recovery key")
        }
        let key = try RecoveryKey.parse(input.key)
        let escrowKey: SecretBytes
        do {
            escrowKey = try device.unsealWithPasscode(record.sealedKey, authorization: key)
        } catch let error as KeychainError where error.status == KeychainStatus.authFailed && !error.notTried {
            let tries = error.triesLeft.map {
                "; the TPM allows \($0) more \($0 == 1 ? "try" : "tries") before lockout"
            }
            throw KeychainError(
                KeychainStatus.authFailed,
                "wrong recovery key" + (tries ?? ""),
                retryAfterSeconds: error.retryAfterSeconds,
                triesLeft: error.triesLeft
            )
        }
        let ds = try RecoveryEscrow.open(
            record.deviceSecret,
            privateKey: escrowKey,
            label: RecoveryEscrow.deviceLabel,
            storeID: [UInt8](keybag.storeID)
        )
        return (ds, escrowKey)
    }

    /// The rest of `keyseal recover`, once the store opened with DS from the recovery key: with a passcode set,
    /// PS from the escrow and the passcode (checked by unwrapping the passcode classes' keys; a wrong one is a
    /// counted failed attempt), then both objects sealed again to the PCRs' current values.
    func completeRecovery(_ input: RecoveryInput) throws {
        guard let escrowKey = recoveryEscrowKey else { return }
        defer { recoveryEscrowKey = nil }
        var passcodeSecret: SecretBytes?
        var passcodeKey: SecretBytes?
        if let record = keybag.passcode {
            guard let passcode = input.passcode else {
                throw KeychainError(
                    KeychainStatus.param,
                    "a passcode is set: give it on the line after the recovery key"
                )
            }
            guard let box = keybag.recovery?.passcodeSecret else {
                throw KeychainError(KeychainStatus.decode, "the recovery record holds no passcode secret")
            }
            try requireNoDelay()
            let secret = try RecoveryEscrow.open(
                box,
                privateKey: escrowKey,
                label: RecoveryEscrow.passcodeLabel,
                storeID: storeID
            )
            let key = try Argon2id.derive(passcode, salt: record.salt, parameters: record.argon2)
            let keys: [Accessibility: ClassKey]
            do {
                keys = try unwrapPasscodeClassKeys(passcodeSecret: secret, passcodeKey: key)
            } catch {
                keybag.failedAttempts += 1
                keybag.lastAttemptAt = configuration.clock().timeIntervalSince1970
                try commitCountedEvent()
                throw KeychainError(
                    KeychainStatus.authFailed,
                    "wrong passcode; \(keybag.failedAttempts) failed attempt\(keybag.failedAttempts == 1 ? "" : "s")"
                )
            }
            keybag.failedAttempts = 0
            keybag.lastAttemptAt = nil
            if rolledBack == nil { classKeys.merge(keys) { _, new in new } }
            passcodeSecret = secret
            passcodeKey = key
        }
        keybag.sealedDeviceSecret = try device.seal(deviceSecret)
        if let passcodeSecret, let passcodeKey {
            keybag.passcode?.sealedSecret = try device.sealWithPasscode(passcodeSecret, authorization: passcodeKey)
        }
        try store.transaction { () throws(KeychainError) in try saveKeybag() }
        try store.checkpoint()
        if passcodeSecret != nil && rolledBack == nil { unlockAfterVerification() }
    }

    private func requireNoDelay() throws {
        let wait = remainingDelay(now: configuration.clock())
        if wait > 0 {
            throw KeychainError(
                KeychainStatus.authFailed,
                "too many failed attempts (\(keybag.failedAttempts)); try again in \(wait) s",
                retryAfterSeconds: wait
            )
        }
    }

    // MARK: Anti-rollback counter

    /// The counter's authorization: HKDF(DS, "keyseal/nv-counter" ‖ store id). Only a holder of DS increments it.
    static func counterAuthorization(deviceSecret: SecretBytes, storeID: [UInt8]) -> SecretBytes {
        KeyDerivation.hkdf(deviceSecret, info: Array("keyseal/nv-counter".utf8) + storeID)
    }

    /// A new store's counter (TPM stores only).
    static func defineCounter(
        _ device: any DeviceKeyProvider,
        deviceSecret: SecretBytes,
        storeID: [UInt8]
    ) throws
        -> CounterRecord?
    {
        guard let tpm = device as? TPMDeviceKey else { return nil }
        let defined = try tpm.defineCounter(
            authorization: counterAuthorization(deviceSecret: deviceSecret, storeID: storeID)
        )
        return CounterRecord(index: defined.index, value: defined.value, name: defined.name)
    }

    /// The Name the store's counter must have: the one the keybag records, or (a keybag written before it was
    /// recorded) the Name of Keyseal's counter template at its index. Either way it is under the keybag's MAC.
    static func counterName(_ record: CounterRecord) -> Data {
        record.name ?? TPMDeviceKey.counterName(index: record.index)
    }

    /// Compares the keybag's counter value with the TPM's at open. Equal: fresh. The keybag ahead by one or two:
    /// a commit whose increment did not happen (a crash, a lost TPM) — the TPM counter is brought up to it.
    /// Behind: an older copy was put back — ``rolledBack`` is set, the failure count raised by the events the
    /// copy does not know of (each could have been a failed try) and the passcode classes refused.
    func openCounter() throws {
        guard let tpm = device as? TPMDeviceKey else { return }
        guard let record = keybag.counter else {
            // A store from before the counter gets one now (trusted once, as the ledger's upgrade is). A TPM that
            // cannot define it leaves the store as it was; `status` says so.
            let saved = keybag
            do {
                keybag.counter = try Self.defineCounter(tpm, deviceSecret: deviceSecret, storeID: storeID)
                try store.transaction { () throws(KeychainError) in try saveKeybag() }
            } catch let error as KeychainError {
                keybag = saved
                counterProblem = error.message
            }
            return
        }
        let now: UInt64
        do {
            now = try tpm.readCounter(index: record.index, name: Self.counterName(record))
        } catch let error as KeychainError where error.status == KeychainStatus.rolledBack {
            // Not the store's counter (root undefined it and defined another index there): its value vouches for
            // nothing, so neither fresh nor how many events the store missed can be told.
            rolledBack = RollbackFinding(
                events: 0,
                counterValue: 0,
                replaced: true,
                message: "rolled back: " + error.message + "; the passcode classes are refused until an administrator "
                    + "decides (`keyseal tpm accept-rollback` defines a new counter for this store)"
            )
            for accessibility in Accessibility.allCases where accessibility.isPasscodeProtected {
                classKeys[accessibility] = nil
            }
            return
        }
        // Recorded from now on (written with the keybag's next write), checked as it was.
        if record.name == nil { keybag.counter?.name = Self.counterName(record) }
        // The ledger record and the keybag are written with the same counter value in one transaction: a record
        // that carries another value comes from another copy of the store (items put back under a newer keybag, or
        // the other way round).
        let mixed = ledgerCheckpointAtOpen.map { $0 != record.value } ?? false
        if !mixed {
            if record.value == now { return }
            if record.value > now && record.value - now <= 2 {
                try advanceCounter()
                return
            }
        }
        let events = record.value < now ? now - record.value : 0
        let mixedMessage =
            "the ledger record (checkpoint \(ledgerCheckpointAtOpen ?? 0)) and the keybag (\(record.value)) come from "
            + "different copies of the store"
        var message =
            events == 0 && mixed
            ? "rolled back: " + mixedMessage + " (items older or newer than the keybag were put back); the passcode "
                + "classes are refused until an administrator decides (`keyseal tpm accept-rollback`, or put the newer "
                + "copy back)"
            : events > 0
                ? "rolled back: this store is \(events) counted event\(events == 1 ? "" : "s") older than the TPM's "
                    + "anti-rollback counter (an older copy was put back); the passcode classes are refused until an "
                    + "administrator decides (`keyseal tpm accept-rollback`, or put the newer copy back)"
                : "rolled back: the TPM's anti-rollback counter (\(now)) is behind this store (\(record.value)): the "
                    + "counter was replaced; the passcode classes are refused until an administrator decides "
                    + "(`keyseal tpm accept-rollback`)"
        if mixed && events > 0 { message += "; " + mixedMessage }
        rolledBack = RollbackFinding(events: events, counterValue: now, message: message)
        if events > 0 {
            keybag.failedAttempts += Int(clamping: events)
            keybag.lastAttemptAt = configuration.clock().timeIntervalSince1970
        }
        for accessibility in Accessibility.allCases where accessibility.isPasscodeProtected {
            classKeys[accessibility] = nil
        }
    }

    /// A counted event (a passcode try, set, change, remove): the keybag is committed with the counter's next
    /// value, then the TPM counter is incremented to it. A crash between the two leaves the keybag one ahead,
    /// which the next open completes; the event's effect (a passcode try) comes only after both.
    func commitCountedEvent() throws {
        let saved = keybag.counter
        if let saved { keybag.counter?.value = saved.value + 1 }
        do {
            try store.transaction { () throws(KeychainError) in try saveKeybag() }
        } catch {
            keybag.counter = saved
            throw error
        }
        try advanceCounter()
    }

    /// Increments the TPM counter until it reaches the keybag's value (at most twice).
    func advanceCounter() throws {
        guard keybag.counter != nil, device is TPMDeviceKey else { return }
        CrashPoint.reach("after-commit")
        try raiseCounter()
        CrashPoint.reach("after-increment")
    }

    private func raiseCounter() throws {
        guard let record = keybag.counter, let tpm = device as? TPMDeviceKey else { return }
        let authorization = Self.counterAuthorization(deviceSecret: deviceSecret, storeID: storeID)
        let name = Self.counterName(record)
        var now = try tpm.readCounter(index: record.index, name: name)
        var steps = 0
        while now < record.value && steps < 2 {
            now = try tpm.incrementCounter(index: record.index, name: name, authorization: authorization)
            steps += 1
        }
        if now == record.value { lastCheckpoint = configuration.clock() }
    }

    // MARK: Item-level freshness

    /// Whether the next item write makes a checkpoint: a TPM store with a counter, not rolled back, whose counter
    /// last reached the keybag's value `checkpointInterval` or more ago (or not since open).
    private var checkpointDue: Bool {
        guard keybag.counter != nil, device is TPMDeviceKey, rolledBack == nil else { return false }
        guard let lastCheckpoint else { return true }
        return configuration.clock().timeIntervalSince(lastCheckpoint) >= configuration.checkpointInterval
    }

    /// Runs an item write in one transaction. When a checkpoint is due, the same transaction commits the keybag and
    /// the ledger record with the counter's next value, and the TPM counter is incremented to it after the commit
    /// (the commit-then-increment of counted events). The write stands whatever the increment does: a failed one
    /// leaves the keybag one ahead, which the next checkpoint completes before it moves on (no checkpoint is made
    /// while the counter cannot be brought up), or the next open.
    func itemTransaction<T>(_ body: () throws(KeychainError) -> T) throws(KeychainError) -> T {
        guard checkpointDue else { return try store.transaction(body) }
        do {
            try raiseCounter()
        } catch {
            return try store.transaction(body)
        }
        let saved = keybag
        if let counter = keybag.counter { keybag.counter?.value = counter.value + 1 }
        let result: T
        do {
            result = try store.transaction { () throws(KeychainError) -> T in
                let result = try body()
                try saveKeybag()
                return result
            }
        } catch {
            keybag = saved
            throw error
        }
        do {
            try advanceCounter()
        } catch {
            // Completed by the next checkpoint or open; the write itself is committed.
            lastCheckpoint = nil
        }
        return result
    }

    func requireNotRolledBack() throws(KeychainError) {
        if let rolledBack { throw rolledBack.error }
    }

    /// `keyseal tpm accept-rollback`: the administrator keeps the store as it is. The keybag takes the counter's
    /// value and the raised failure count (or, when the index was not the store's counter, a new counter); the
    /// passcode classes are served again (after an unlock when a passcode is set).
    func acceptRollback() throws {
        guard let finding = rolledBack, let record = keybag.counter else {
            throw KeychainError(KeychainStatus.param, "the store is not rolled back")
        }
        let saved = keybag
        do {
            keybag.counter =
                finding.replaced
                ? try Self.defineCounter(device, deviceSecret: deviceSecret, storeID: storeID)
                : CounterRecord(index: record.index, value: finding.counterValue, name: record.name)
            try store.transaction { () throws(KeychainError) in try saveKeybag() }
        } catch {
            keybag = saved
            throw error
        }
        rolledBack = nil
        guard keybag.passcode == nil else { return }
        for accessibility in Accessibility.allCases where accessibility.isPasscodeProtected {
            guard let wrapped = keybag.classKeys[accessibility.rawValue] else { continue }
            classKeys[accessibility] = try ClassKey.unwrap(
                wrapped,
                deviceSecret: deviceSecret,
                accessibility: accessibility,
                storeID: storeID
            )
        }
    }

    // MARK: Status

    func bootStatus() throws -> BootStatus? {
        guard let tpm = device as? TPMDeviceKey else { return nil }
        let pcrs = try TPMDeviceKey.boundPCRs(ofBlob: keybag.sealedDeviceSecret)
        let match = try tpm.pcrsMatch(deviceBlob: keybag.sealedDeviceSecret)
        let value =
            rolledBack?.replaced == true
            ? nil : try keybag.counter.map { try tpm.readCounter(index: $0.index, name: Self.counterName($0)) }
        var detail = pcrs.isEmpty ? "not bound to PCRs" : "bound to PCR \(Self.describe(pcrs))"
        if let signer = TPMDeviceKey.pcrPolicyKeyFingerprint(ofBlob: keybag.sealedDeviceSecret) {
            detail += " through policies signed by the key \(signer)"
        }
        if let counterProblem { detail += "; no anti-rollback counter (\(counterProblem))" }
        if !pcrs.isEmpty { detail += match ? " (they match)" : " (they no longer match)" }
        detail += keybag.recovery == nil ? "; no recovery key" : "; a recovery key exists"
        if let rolledBack { detail += "; " + rolledBack.message }
        return BootStatus(
            pcrs: pcrs,
            pcrsMatch: match,
            recoveryRequired: false,
            recoveryKeySet: keybag.recovery != nil,
            rolledBack: rolledBack != nil,
            counterIndex: keybag.counter?.index,
            counterValue: value,
            detail: detail
        )
    }

    /// What `status` says while the store waits for `keyseal recover` (no engine is open). The failure count and
    /// the next try are the keybag's as stored: they cannot be authenticated without DS, and `recover` checks its
    /// passcode against the same count once the keybag is.
    static func recoveryStatus(
        directory: URL,
        device deviceKey: DeviceKey,
        configuration: KeychainStore.Configuration,
        reason: KeychainError
    ) -> StoreStatus {
        var passcodeSet = false
        var pcrs: [Int] = []
        var signed = false
        var recoveryKeySet = false
        var failedAttempts = 0
        var wait = 0
        var deviceStatus = DeviceKeyStatus(
            backend: "tpm",
            hardwareBacked: true,
            guessingHardwareLimited: false,
            detail: reason.message
        )
        if let store = try? ItemStore(directory: directory) {
            defer { store.close() }
            if let stored = try? store.loadKeybag(), let keybag = try? Keybag.parseUnverified(stored.body) {
                passcodeSet = keybag.passcode != nil
                pcrs = (try? TPMDeviceKey.boundPCRs(ofBlob: keybag.sealedDeviceSecret)) ?? []
                signed = TPMDeviceKey.pcrPolicyKeyFingerprint(ofBlob: keybag.sealedDeviceSecret) != nil
                recoveryKeySet = keybag.recovery != nil
                failedAttempts = keybag.failedAttempts
                wait = remainingDelay(keybag, policy: configuration.passcodePolicy, now: configuration.clock())
            }
        }
        if let device = try? deviceKey.makeProvider() {
            defer { device.close() }
            if (try? device.open(provisioning: false)) != nil, let status = try? device.status() {
                deviceStatus = status
            }
        }
        // A signed binding: the reason names the key and what was found in the signature directories.
        let detail =
            (signed
                ? reason.message
                : "recovery required: PCR \(describe(pcrs)) no longer match; nothing that needs the device secret is "
                    + "served until `keyseal recover`") + (recoveryKeySet ? "" : " (this store has no recovery key)")
        return StoreStatus(
            lockState: .beforeFirstUnlock,
            passcodeSet: passcodeSet,
            device: deviceStatus,
            failedAttempts: failedAttempts,
            triesLeft: deviceStatus.hardwareTriesLeft,
            nextTryAt: wait > 0 ? configuration.clock().addingTimeInterval(TimeInterval(wait)) : nil,
            autoLockSeconds: nil,
            itemCounts: [:],
            boot: BootStatus(
                pcrs: pcrs,
                pcrsMatch: false,
                recoveryRequired: true,
                recoveryKeySet: recoveryKeySet,
                rolledBack: false,
                counterIndex: nil,
                counterValue: nil,
                detail: detail
            )
        )
    }
}

/// Crash points for the anti-rollback tests: a debug build run with `KEYSEAL_TEST_CRASH_AT=<name>` kills itself
/// (SIGKILL) when it reaches that point. Compiled out of release builds.
enum CrashPoint {
    static func reach(_ name: String) {
        #if DEBUG
        if let wanted = getenv("KEYSEAL_TEST_CRASH_AT"), String(cString: wanted) == name { raise(SIGKILL) }
        #endif
    }
}
