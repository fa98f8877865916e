import FoundationEssentials
import Glibc
import KeysealCore

extension KeychainStore {
    /// Tunables of an embedded store. The defaults are the product's; tests lower the Argon2id cost.
    public struct Configuration: Sendable {
        /// The largest secret an item may hold (default 1 MiB).
        public var valueLimit: Int
        /// Argon2id cost for a new passcode.
        public var argon2: Argon2Parameters
        /// Escalating delays after failed passcode attempts.
        public var passcodePolicy: PasscodePolicy
        /// The clock for delays and timestamps.
        public var clock: @Sendable () -> Date
        /// Seconds between checkpoints of the ledger on the anti-rollback counter (TPM stores): the first item write
        /// after a checkpoint older than this makes one (docs/TPM.md "Item-level freshness"). 0: every item write.
        public var checkpointInterval: TimeInterval

        public static let defaultCheckpointInterval: TimeInterval = 900

        public init(
            valueLimit: Int = 1 << 20, argon2: Argon2Parameters = .standard, passcodePolicy: PasscodePolicy = .standard,
            clock: @escaping @Sendable () -> Date = { Date() },
            checkpointInterval: TimeInterval = Configuration.defaultCheckpointInterval
        ) {
            self.valueLimit = valueLimit
            self.argon2 = argon2
            self.passcodePolicy = passcodePolicy
            self.clock = clock
            self.checkpointInterval = checkpointInterval
        }
    }
}

/// What `status` reports.
public struct StoreStatus: Sendable, Equatable {
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
}
