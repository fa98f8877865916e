import FoundationEssentials

// The session family: passcodes, settings, failures, the store's status and recovery. Each payload's encoding
// (a `WireWriter` method) stands beside its decoding (the `WireReader` method of the same name).

// MARK: - changePasscode: the old passcode, then the new one

extension WireWriter {
    mutating func changePasscode(old: SecretBytes, new: SecretBytes) {
        secret(old)
        secret(new)
    }
}

extension WireReader {
    mutating func changePasscode() throws(KeychainError) -> WireRequest {
        let old = try secret()
        return .changePasscode(old: old, new: try secret())
    }
}

// MARK: - setSettings and settings: the optional auto-lock seconds

extension WireWriter {
    mutating func settings(_ settings: WireSettings) {
        optional(settings.autoLockSeconds) { $0.int($1) }
    }
}

extension WireReader {
    mutating func settings() throws(KeychainError) -> WireSettings {
        WireSettings(autoLockSeconds: try optional { r throws(KeychainError) in try r.int() })
    }
}

// MARK: - failure: the status, the message, the optional retry delay and tries left

extension WireWriter {
    mutating func failure(_ error: KeychainError) {
        u32(UInt32(bitPattern: error.status))
        string(error.message)
        optional(error.retryAfterSeconds) { $0.int($1) }
        optional(error.triesLeft) { $0.int($1) }
    }
}

extension WireReader {
    mutating func failure() throws(KeychainError) -> KeychainError {
        let status = Int32(bitPattern: try u32())
        let message = try string()
        let retry = try optional { r throws(KeychainError) in try r.int() }
        let tries = try optional { r throws(KeychainError) in try r.int() }
        return KeychainError(status: status, message: message, retryAfterSeconds: retry, triesLeft: tries)
    }
}

// MARK: - status: the lock state, the device key, the attempts, the item counts, the ledger and the boot

extension WireWriter {
    mutating func storeStatus(_ status: StoreStatus) {
        lockState(status.lockState)
        bool(status.passcodeSet)
        deviceKey(status.device)
        int(status.failedAttempts)
        optional(status.triesLeft) { $0.int($1) }
        optional(status.nextTryAt) { $0.double($1.timeIntervalSince1970) }
        optional(status.autoLockSeconds) { $0.int($1) }
        u16(UInt16(clamping: status.itemCounts.count))
        for (accessibility, count) in status.itemCounts.prefix(Int(UInt16.max)) {
            shortString(accessibility.rawValue)
            int(count)
        }
        // A verified ledger is sent as none (and so is a client's, which keyseald clears).
        optional(status.ledger.verified ? nil : status.ledger) { $0.ledger($1) }
        optional(status.boot) { $0.boot($1) }
    }
}

extension WireReader {
    mutating func storeStatus() throws(KeychainError) -> StoreStatus {
        let state = try lockState()
        let passcodeSet = try bool()
        let device = try deviceKey()
        let failed = try int()
        let tries = try optional { r throws(KeychainError) in try r.int() }
        let next = try optional { r throws(KeychainError) in try r.time() }
        let autoLock = try optional { r throws(KeychainError) in try r.int() }
        let countEntries = Int(try u16())
        var counts: [Accessibility: Int] = [:]
        for _ in 0..<countEntries {
            let code = try shortString()
            let count = try int()
            // A code this side does not know (a newer keyseald's) is left out of the counts.
            if let accessibility = Accessibility(rawValue: code) { counts[accessibility] = count }
        }
        let ledger = try optional { r throws(KeychainError) in try r.ledger() }
        let boot = try optional { r throws(KeychainError) in try r.boot() }
        return StoreStatus(
            lockState: state,
            passcodeSet: passcodeSet,
            device: device,
            failedAttempts: failed,
            triesLeft: tries,
            nextTryAt: next.map { Date(timeIntervalSince1970: $0) },
            autoLockSeconds: autoLock,
            itemCounts: counts,
            ledger: ledger ?? LedgerStatus(),
            boot: boot
        )
    }
}

// MARK: - The status's device key

extension WireWriter {
    mutating func deviceKey(_ device: DeviceKeyStatus) {
        shortString(device.backend)
        bool(device.hardwareBacked)
        bool(device.guessingHardwareLimited)
        string(device.detail)
        optional(device.hardwareTriesLeft) { $0.int($1) }
        optional(device.lockoutRetrySeconds) { $0.int($1) }
    }
}

extension WireReader {
    mutating func deviceKey() throws(KeychainError) -> DeviceKeyStatus {
        let backend = try shortString()
        let hardwareBacked = try bool()
        let limited = try bool()
        let detail = try string()
        let hardwareTries = try optional { r throws(KeychainError) in try r.int() }
        return DeviceKeyStatus(
            backend: backend,
            hardwareBacked: hardwareBacked,
            guessingHardwareLimited: limited,
            detail: detail,
            hardwareTriesLeft: hardwareTries,
            lockoutRetrySeconds: try optional { r throws(KeychainError) in try r.int() }
        )
    }
}

// MARK: - The status's ledger: refused buckets, missing and unexpected entries, the record problem, the summary

extension WireWriter {
    mutating func ledger(_ ledger: LedgerStatus) {
        u16(UInt16(clamping: ledger.refusedBuckets.count))
        for bucket in ledger.refusedBuckets.prefix(Int(UInt16.max)) { u16(UInt16(clamping: bucket)) }
        int(ledger.missingEntries)
        int(ledger.unexpectedEntries)
        optional(ledger.recordProblem) { $0.string($1) }
        string(ledger.summary)
    }
}

extension WireReader {
    mutating func ledger() throws(KeychainError) -> LedgerStatus {
        var buckets: [Int] = []
        for _ in 0..<Int(try u16()) { buckets.append(Int(try u16())) }
        let missing = try int()
        let unexpected = try int()
        let problem = try optional { r throws(KeychainError) in try r.string() }
        // The sender's summary: this side words it from the same counts.
        _ = try string()
        return LedgerStatus(
            refusedBuckets: buckets,
            missingEntries: missing,
            unexpectedEntries: unexpected,
            recordProblem: problem
        )
    }
}

// MARK: - The status's boot state

extension WireWriter {
    mutating func boot(_ boot: BootStatus) {
        pcrs(boot.pcrs)
        bool(boot.pcrsMatch)
        bool(boot.recoveryRequired)
        bool(boot.recoveryKeySet)
        bool(boot.rolledBack)
        optional(boot.counterIndex) { $0.u32($1) }
        optional(boot.counterValue) { $0.u64($1) }
        string(boot.detail)
    }
}

extension WireReader {
    mutating func boot() throws(KeychainError) -> BootStatus {
        let pcrs = try self.pcrs()
        let match = try bool()
        let recoveryRequired = try bool()
        let recoveryKeySet = try bool()
        let rolledBack = try bool()
        let index = try optional { r throws(KeychainError) in try r.u32() }
        let value = try optional { r throws(KeychainError) in try r.u64() }
        return BootStatus(
            pcrs: pcrs,
            pcrsMatch: match,
            recoveryRequired: recoveryRequired,
            recoveryKeySet: recoveryKeySet,
            rolledBack: rolledBack,
            counterIndex: index,
            counterValue: value,
            detail: try string()
        )
    }
}

// MARK: - A PCR selection (the boot state's, tpmReseal's): a u8 count and a byte a PCR index

extension WireWriter {
    mutating func pcrs(_ pcrs: [Int]) {
        u8(UInt8(clamping: pcrs.count))
        for pcr in pcrs.prefix(255) { u8(UInt8(clamping: pcr)) }
    }
}

extension WireReader {
    mutating func pcrs() throws(KeychainError) -> [Int] {
        var pcrs: [Int] = []
        for _ in 0..<Int(try u8()) { pcrs.append(Int(try u8())) }
        return pcrs
    }
}

// MARK: - recover: the recovery key, then the optional passcode

extension WireWriter {
    mutating func recover(key: SecretBytes, passcode: SecretBytes?) {
        secret(key)
        optional(passcode) { $0.secret($1) }
    }
}

extension WireReader {
    mutating func recover() throws(KeychainError) -> WireRequest {
        let key = try secret()
        return .recover(key: key, passcode: try optional { r throws(KeychainError) in try r.secret() })
    }
}

// MARK: - tpmReseal: the optional passcode, then the optional PCR selection

extension WireWriter {
    mutating func tpmReseal(passcode: SecretBytes?, pcrs: [Int]?) {
        optional(passcode) { $0.secret($1) }
        optional(pcrs) { $0.pcrs($1) }
    }
}

extension WireReader {
    mutating func tpmReseal() throws(KeychainError) -> WireRequest {
        let passcode = try optional { r throws(KeychainError) in try r.secret() }
        return .tpmReseal(passcode: passcode, pcrs: try optional { r throws(KeychainError) in try r.pcrs() })
    }
}
