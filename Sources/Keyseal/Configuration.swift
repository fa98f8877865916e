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
        /// How much of the store file SQLite reads through a memory map (default 256 MiB; 0: none, every page is
        /// read into SQLite's own 2 MiB cache). A map makes lookups in a large store about twice as fast, but
        /// the mapped pages count in the process's resident memory; keyseald turns it off.
        public var memoryMapBytes: Int

        public init(
            valueLimit: Int = 1 << 20, argon2: Argon2Parameters = .standard, passcodePolicy: PasscodePolicy = .standard,
            clock: @escaping @Sendable () -> Date = { Date() }, memoryMapBytes: Int = 256 << 20
        ) {
            self.valueLimit = valueLimit
            self.argon2 = argon2
            self.passcodePolicy = passcodePolicy
            self.clock = clock
            self.memoryMapBytes = memoryMapBytes
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
}
