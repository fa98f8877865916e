import Crypto
import FoundationEssentials
import Glibc

/// Argon2id cost of the passcode key P.
public struct Argon2Parameters: Codable, Sendable, Equatable {
    public var memoryKiB: UInt32
    public var iterations: UInt32
    public var parallelism: UInt32

    public init(memoryKiB: UInt32, iterations: UInt32, parallelism: UInt32) {
        self.memoryKiB = memoryKiB
        self.iterations = iterations
        self.parallelism = parallelism
    }

    /// 64 MiB, 3 passes, one lane: ≈200 ms on the reference machine.
    public static let standard = Argon2Parameters(memoryKiB: 64 * 1024, iterations: 3, parallelism: 1)

    /// The most a stored header may ask for (protects against a header that asks for all memory).
    public static let maximum = Argon2Parameters(memoryKiB: 4 * 1024 * 1024, iterations: 64, parallelism: 16)

    public var isWithinLimits: Bool {
        memoryKiB >= 8 && memoryKiB <= Self.maximum.memoryKiB && iterations >= 1
            && iterations <= Self.maximum.iterations && parallelism >= 1 && parallelism <= Self.maximum.parallelism
    }
}

/// The passcode part of the keybag.
public struct PasscodeRecord: Codable, Sendable, Equatable {
    public var salt: Data
    public var argon2: Argon2Parameters
    /// PS sealed with the passcode authorization.
    public var sealedSecret: Data

    public init(salt: Data, argon2: Argon2Parameters, sealedSecret: Data) {
        self.salt = salt
        self.argon2 = argon2
        self.sealedSecret = sealedSecret
    }
}

/// The keybag header: everything needed to recover the class keys, authenticated with a key derived from DS.
///
/// Fields are readable before the check (the backend, the device identity and the sealed DS are needed to
/// get DS), but nothing in it is used for a passcode-protected hardware call before the MAC verifies.
public struct Keybag: Codable, Sendable, Equatable {
    public var version: Int
    public var storeID: Data
    public var backend: String
    public var deviceIdentity: Data
    public var sealedDeviceSecret: Data
    public var passcode: PasscodeRecord?
    /// Wrapped class keys by accessibility code.
    public var classKeys: [String: Data]
    /// Failed passcode attempts since the last success; recorded before each check.
    public var failedAttempts: Int
    /// When the last counted attempt started (seconds since 1970).
    public var lastAttemptAt: Double?
    /// Idle seconds before auto-lock; nil disables it.
    public var autoLockSeconds: Int?
    /// Incremented on every write of the keybag.
    public var generation: Int64
    /// Set (to 1) once the store keeps an authenticated ledger record (LedgerDigest): from then on a missing or
    /// failing record is tampering, not an older store to upgrade. Absent in keybags written before it existed.
    public var ledgerVersion: Int?
    /// The recovery key's record (docs/TPM.md "Recovery key"); nil until one is created.
    public var recovery: RecoveryRecord?
    /// The TPM's anti-rollback counter and the value this keybag was written with (docs/TPM.md "Anti-rollback
    /// counter"); nil on other backends.
    public var counter: CounterRecord?

    public static let currentVersion = 1

    public init(storeID: Data, backend: String, deviceIdentity: Data, sealedDeviceSecret: Data) {
        self.version = Self.currentVersion
        self.storeID = storeID
        self.backend = backend
        self.deviceIdentity = deviceIdentity
        self.sealedDeviceSecret = sealedDeviceSecret
        self.passcode = nil
        self.classKeys = [:]
        self.failedAttempts = 0
        self.lastAttemptAt = nil
        self.autoLockSeconds = 300
        self.generation = 0
        self.ledgerVersion = nil
    }

    /// The stored form: a JSON body and its MAC.
    public func encoded(macKey: SecretBytes) -> (body: Data, mac: Data) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let body = try! encoder.encode(self)  // A Codable struct of plain values always encodes.
        return (body, Self.mac(body, key: macKey))
    }

    /// Parses a stored body without checking it (to learn what unseals DS).
    public static func parseUnverified(_ body: Data) throws(KeychainError) -> Keybag {
        let keybag: Keybag
        do {
            keybag = try JSONDecoder().decode(Keybag.self, from: body)
        } catch {
            throw KeychainError(KeychainStatus.decode, "the keybag header is corrupt")
        }
        guard keybag.version == currentVersion else {
            throw KeychainError(KeychainStatus.decode, "unknown keybag version \(keybag.version)")
        }
        return keybag
    }

    /// Checks a stored body against its MAC.
    public static func verify(body: Data, mac: Data, macKey: SecretBytes) throws(KeychainError) {
        let expected = Self.mac(body, key: macKey)
        guard expected.count == mac.count,
            zip(expected, mac).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0
        else {
            throw KeychainError(KeychainStatus.decode, "the keybag header failed authentication (edited or corrupt)")
        }
    }

    static func mac(_ body: Data, key: SecretBytes) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: body, using: SymmetricKey(data: key)))
    }
}

/// What the recovery key opens: a P-256 escrow key whose private half is sealed in the TPM (no PCR policy,
/// dictionary-attack protected) with the recovery key as its authorization, and the device and passcode secrets
/// encrypted to its public half. Nothing here is secret without that TPM and the recovery key.
public struct RecoveryRecord: Codable, Sendable, Equatable {
    /// The TPM object holding the escrow private key, authorized by the recovery key.
    public var sealedKey: Data
    /// The escrow public key (X9.63).
    public var publicKey: Data
    /// DS encrypted to the escrow key.
    public var deviceSecret: Data
    /// PS encrypted to the escrow key, while a passcode is set.
    public var passcodeSecret: Data?

    public init(sealedKey: Data, publicKey: Data, deviceSecret: Data, passcodeSecret: Data?) {
        self.sealedKey = sealedKey
        self.publicKey = publicKey
        self.deviceSecret = deviceSecret
        self.passcodeSecret = passcodeSecret
    }
}

/// A TPM NV counter index and the value the keybag was written with: the keybag is fresh when the counter has
/// that value (or one less: the increment that follows a commit had not happened yet).
public struct CounterRecord: Codable, Sendable, Equatable {
    public var index: UInt32
    public var value: UInt64
    /// The index's Name (nameAlg ‖ digest of its type, attributes, authPolicy and size) as the TPM reported it after
    /// the counter was defined: an index at `index` with another Name is not this store's counter. Nil in keybags
    /// written before it was recorded (their counter has the Name of Keyseal's one counter template).
    public var name: Data?

    public init(index: UInt32, value: UInt64, name: Data?) {
        self.index = index
        self.value = value
        self.name = name
    }
}

/// Escalating delays after failed passcode attempts (docs/OPERATIONS.md, "Passcode and delays").
public struct PasscodePolicy: Sendable, Equatable {
    /// Seconds to wait after `failures` consecutive failed attempts.
    public var delay: @Sendable (Int) -> Int

    public init(delay: @escaping @Sendable (Int) -> Int) { self.delay = delay }

    /// Attempts 1–4: none; after the 5th: 1 min, 6th: 5 min, 7th–8th: 15 min, 9th and later: 1 h.
    public static let standard = PasscodePolicy { failures in
        switch failures {
        case ..<5: 0
        case 5: 60
        case 6: 300
        case 7, 8: 900
        default: 3600
        }
    }

    public static func == (lhs: PasscodePolicy, rhs: PasscodePolicy) -> Bool {
        (0...12).allSatisfy { lhs.delay($0) == rhs.delay($0) }
    }
}
