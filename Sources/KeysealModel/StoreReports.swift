import FoundationEssentials

/// What `status` reports.
public struct StoreStatus: Sendable, Hashable {
    public var lockState: LockState
    public var passcodeSet: Bool
    public var device: DeviceKeyStatus
    public var failedAttempts: Int
    /// Tries left before a hardware lockout, where the hardware counts.
    public var triesLeft: Int?
    /// When the next passcode try is allowed, if a delay is running.
    public var nextTryAt: Date?
    /// Idle seconds before auto-lock; nil when disabled.
    public var autoLockSeconds: Int?
    public var itemCounts: [Accessibility: Int]
    /// What the open found of the generation ledger (embedded stores; through keyseald it is logged at start).
    public var ledger = LedgerStatus()
    /// Boot binding, recovery and anti-rollback (TPM backend); nil on other backends.
    public var boot: BootStatus?

    public init(
        lockState: LockState,
        passcodeSet: Bool,
        device: DeviceKeyStatus,
        failedAttempts: Int = 0,
        triesLeft: Int? = nil,
        nextTryAt: Date? = nil,
        autoLockSeconds: Int? = nil,
        itemCounts: [Accessibility: Int] = [:],
        ledger: LedgerStatus = LedgerStatus(),
        boot: BootStatus? = nil
    ) {
        self.lockState = lockState
        self.passcodeSet = passcodeSet
        self.device = device
        self.failedAttempts = failedAttempts
        self.triesLeft = triesLeft
        self.nextTryAt = nextTryAt
        self.autoLockSeconds = autoLockSeconds
        self.itemCounts = itemCounts
        self.ledger = ledger
        self.boot = boot
    }
}

/// What a device key says about itself for `status`.
public struct DeviceKeyStatus: Sendable, Hashable {
    /// Backend name as recorded in the store: `host-key`, `tpm`, `pkcs11`, `software`.
    public var backend: String
    /// Whether the device secret is held by hardware (a TPM or a token).
    public var hardwareBacked: Bool
    /// Whether the hardware itself limits passcode guessing (TPM dictionary-attack protection with a lockout
    /// authorization set). When false, only Argon2id and the store's escalating delays limit guessing.
    public var guessingHardwareLimited: Bool
    /// One sentence for people: why guessing is or is not hardware-limited, what backs the key.
    public var detail: String
    /// Passcode tries the hardware allows before it locks out, where the hardware counts.
    public var hardwareTriesLeft: Int?
    /// Seconds until the hardware accepts passcode tries again, when it is in lockout.
    public var lockoutRetrySeconds: Int?

    public init(
        backend: String,
        hardwareBacked: Bool,
        guessingHardwareLimited: Bool,
        detail: String,
        hardwareTriesLeft: Int? = nil,
        lockoutRetrySeconds: Int? = nil
    ) {
        self.backend = backend
        self.hardwareBacked = hardwareBacked
        self.guessingHardwareLimited = guessingHardwareLimited
        self.detail = detail
        self.hardwareTriesLeft = hardwareTriesLeft
        self.lockoutRetrySeconds = lockoutRetrySeconds
    }
}

/// Boot binding and anti-rollback as `status` shows them (docs/TPM.md).
public struct BootStatus: Sendable, Hashable {
    /// The PCRs (SHA-256 bank) the device and passcode objects are bound to; empty: unbound.
    public var pcrs: [Int]
    /// Whether those PCRs have the values the objects were sealed to now.
    public var pcrsMatch: Bool
    /// The PCRs changed: nothing that needs the device secret is served until `keyseal recover`.
    public var recoveryRequired: Bool
    /// Whether a recovery key exists.
    public var recoveryKeySet: Bool
    /// The store is older than the anti-rollback counter says; passcode classes are refused until an
    /// administrator decides.
    public var rolledBack: Bool
    /// The anti-rollback counter's NV index and value now, where there is one.
    public var counterIndex: UInt32?
    public var counterValue: UInt64?
    /// One sentence for people.
    public var detail: String

    public init(
        pcrs: [Int],
        pcrsMatch: Bool,
        recoveryRequired: Bool,
        recoveryKeySet: Bool,
        rolledBack: Bool,
        counterIndex: UInt32?,
        counterValue: UInt64?,
        detail: String
    ) {
        self.pcrs = pcrs
        self.pcrsMatch = pcrsMatch
        self.recoveryRequired = recoveryRequired
        self.recoveryKeySet = recoveryKeySet
        self.rolledBack = rolledBack
        self.counterIndex = counterIndex
        self.counterValue = counterValue
        self.detail = detail
    }
}

/// The generation ledger as verified when the store was opened (docs/SECURITY-MODEL.md, "Tampering").
public struct LedgerStatus: Sendable, Hashable {
    /// The ledger buckets (row id modulo 128) whose recomputed digest differs from the authenticated record: their
    /// items are refused with errSecDecode. Empty when the whole ledger verified.
    public var refusedBuckets: [Int]
    /// Entries the record counts that the file lacks (deleted items), over the refused buckets.
    public var missingEntries: Int
    /// Entries the file holds that the record does not count (items put back or added), over the refused buckets.
    public var unexpectedEntries: Int
    /// Why the record as a whole could not be used (missing or failed authentication): every bucket is refused.
    public var recordProblem: String?

    public init(
        refusedBuckets: [Int] = [],
        missingEntries: Int = 0,
        unexpectedEntries: Int = 0,
        recordProblem: String? = nil
    ) {
        self.refusedBuckets = refusedBuckets
        self.missingEntries = missingEntries
        self.unexpectedEntries = unexpectedEntries
        self.recordProblem = recordProblem
    }

    /// The ledger's buckets (KeysealCore's `LedgerDigest` digests each).
    public static let bucketCount = 128

    public var verified: Bool { refusedBuckets.isEmpty && recordProblem == nil }

    /// One sentence for logs and status output.
    public var summary: String {
        if verified { return "the generation ledger verified" }
        if let recordProblem { return "\(recordProblem): every item is refused (errSecDecode)" }
        var parts = ["\(refusedBuckets.count) of \(Self.bucketCount) ledger buckets failed verification"]
        if missingEntries > 0 { parts.append("\(missingEntries) item\(missingEntries == 1 ? "" : "s") missing") }
        if unexpectedEntries > 0 {
            parts.append("\(unexpectedEntries) unexpected item\(unexpectedEntries == 1 ? "" : "s")")
        }
        return parts.joined(separator: ", ") + "; the items of those buckets are refused (errSecDecode)"
    }
}
