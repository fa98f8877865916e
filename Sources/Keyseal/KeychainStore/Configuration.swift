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
            valueLimit: Int = 1 << 20,
            argon2: Argon2Parameters = .standard,
            passcodePolicy: PasscodePolicy = .standard,
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
