import Keyseal
import KeysealClient
import KeysealCore
import NIOCore
import Synchronization

/// What one local account may take of keyseald (docs/OPERATIONS.md, "Limits"). The defaults are far above what a
/// normal user's programs use; they exist so that another account cannot exhaust the daemon's memory or disk.
public struct DaemonLimits: Sendable, Equatable {
    /// Open connections per uid (`--max-connections`); a connection over it gets one errSecAllocate frame.
    public var connectionsPerUID: Int
    /// Bytes of request frames read and not yet decoded per uid (partly received frames, and frames held back while
    /// their connection waits for its turn), summed over its connections (`--max-pending-bytes`).
    public var pendingBytesPerUID: Int
    /// Items a non-administrator may keep in one access group (`--quota-items`).
    public var itemsPerGroup: Int
    /// Stored bytes (sealed attributes and values) a non-administrator may keep in one access group
    /// (`--quota-bytes`).
    public var bytesPerGroup: Int
    /// Seconds a connection without a lock-state subscription may go without a request (`--idle-timeout`; nil:
    /// never closed for idleness).
    public var idleTimeout: Duration?
    /// Stored bytes one lookup may return (`--max-response`); beyond it errSecDataTooLarge.
    public var responseBytes: Int
    /// Keys in the device key's hardware (the TPM or the token, `kSecAttrTokenIDSecureEnclave`) a non-administrator
    /// may keep in its access groups together (`--quota-hardware-keys`): a token's objects are shared by every user.
    public var hardwareKeysPerUID: Int

    public static let defaultConnectionsPerUID = 64
    public static let defaultPendingBytesPerUID = 16 << 20
    public static let defaultItemsPerGroup = 10_000
    public static let defaultBytesPerGroup = 64 << 20
    public static let defaultIdleTimeout: Duration = .seconds(60)
    public static let defaultResponseBytes = 64 << 20
    public static let defaultHardwareKeysPerUID = 64

    public init(
        connectionsPerUID: Int = defaultConnectionsPerUID, pendingBytesPerUID: Int = defaultPendingBytesPerUID,
        itemsPerGroup: Int = defaultItemsPerGroup, bytesPerGroup: Int = defaultBytesPerGroup,
        idleTimeout: Duration? = defaultIdleTimeout, responseBytes: Int = defaultResponseBytes,
        hardwareKeysPerUID: Int = defaultHardwareKeysPerUID
    ) {
        self.hardwareKeysPerUID = hardwareKeysPerUID
        self.connectionsPerUID = connectionsPerUID
        self.pendingBytesPerUID = pendingBytesPerUID
        self.itemsPerGroup = itemsPerGroup
        self.bytesPerGroup = bytesPerGroup
        self.idleTimeout = idleTimeout
        self.responseBytes = responseBytes
    }
}

/// Connections and partly received bytes per uid, across every connection.
final class PeerLedger: Sendable {
    private struct Usage {
        var connections = 0
        var pending = 0
    }

    private let usage = Mutex([UInt32: Usage]())
    let limits: DaemonLimits

    init(limits: DaemonLimits) { self.limits = limits }

    /// Counts a new connection of `uid`; nil when that is over the limit (then nothing is counted).
    func open(_ uid: UInt32) -> KeychainError? {
        usage.withLock { usage in
            let current = usage[uid, default: Usage()]
            guard current.connections < limits.connectionsPerUID else {
                return KeychainError(
                    status: KeychainStatus.allocate,
                    message: "uid \(uid) already has \(current.connections) connections to keyseald (the limit)")
            }
            usage[uid, default: Usage()].connections += 1
            return nil
        }
    }

    func close(_ uid: UInt32) {
        usage.withLock { usage in
            usage[uid, default: Usage()].connections -= 1
            if let entry = usage[uid], entry.connections <= 0, entry.pending <= 0 { usage[uid] = nil }
        }
    }

    /// Moves `uid`'s pending total by `delta`; an error when an increase takes it over the limit.
    func changePending(_ uid: UInt32, by delta: Int) -> KeychainError? {
        usage.withLock { usage in
            usage[uid, default: Usage()].pending += delta
            let pending = usage[uid]?.pending ?? 0
            guard delta <= 0 || pending <= limits.pendingBytesPerUID else {
                return KeychainError(
                    status: KeychainStatus.allocate,
                    message:
                        "uid \(uid) has \(pending) bytes of requests read and not yet decoded (the limit is \(limits.pendingBytesPerUID))"
                )
            }
            return nil
        }
    }

    func pending(_ uid: UInt32) -> Int { usage.withLock { $0[uid]?.pending ?? 0 } }
}

/// What a connection's frame decoder charges to its peer: set once the peer is known (before any read).
final class ConnectionAccount: @unchecked Sendable {
    // Used only on the connection's event loop.
    let ledger: PeerLedger
    var uid: UInt32?
    private(set) var pending = 0
    /// Set by the connection's handler while it holds ``ConnectionHandler/heldFrameLimit`` decoded frames: the decoder
    /// then leaves the rest of what was read undecoded until the handler asks for more.
    var holdFrames = false
    /// Since when keyseald reads from the connection (its `autoRead` is on); nil while it does not.
    var readingSince: NIODeadline? = .now()
    /// The stall timer, armed while the connection's buffer ends in part of a frame.
    var stall: Scheduled<Void>?

    init(ledger: PeerLedger) { self.ledger = ledger }

    /// Records that `bytes` of an incomplete frame are buffered; throws when the peer's total is over its limit.
    func setPending(_ bytes: Int) throws {
        guard let uid, bytes != pending else { return }
        let delta = bytes - pending
        pending = bytes
        if let error = ledger.changePending(uid, by: delta) { throw error }
    }
}

/// The per-group quotas of non-administrators, checked against the store's own count of the group (one lookup in its
/// `group_usage` table, which the store keeps exact through every write), so that nothing is remembered here.
final class QuotaLedger: Sendable {
    let limits: DaemonLimits

    init(limits: DaemonLimits) { self.limits = limits }

    /// Refuses a write that would take `group` over a quota: `items` more items, `bytes` more bytes.
    func check(group: String, items: Int, bytes: Int, store: KeychainStore) throws {
        try check(group: group, usage: try store.usage(accessGroup: group), items: items, bytes: bytes)
    }

    /// Refuses one more hardware key to a caller whose access groups hold `count` (rows that cannot be told apart
    /// counted as hardware keys).
    func checkHardwareKeys(count: Int) throws {
        guard count >= limits.hardwareKeysPerUID else { return }
        throw KeychainError(
            KeychainStatus.allocate,
            "your access groups hold \(count) keys in the device key's hardware (keys of a locked class count as such); "
                + "the quota is \(limits.hardwareKeysPerUID): delete keys you no longer need")
    }

    /// Refuses a write that would take `group`, holding `usage`, over a quota. Compared without overflow: a count
    /// near `Int.max` (a store file edited by root) refuses the write rather than trapping.
    func check(group: String, usage: (items: Int, bytes: Int), items: Int, bytes: Int) throws {
        if items > 0 && usage.items > limits.itemsPerGroup - items {
            throw KeychainError(
                KeychainStatus.allocate,
                "the access group \(group) holds \(usage.items) items; the quota is \(limits.itemsPerGroup)")
        }
        if usage.bytes > limits.bytesPerGroup - bytes {
            throw KeychainError(
                KeychainStatus.allocate,
                "the access group \(group) holds \(usage.bytes) bytes; adding \(bytes) would pass the quota of \(limits.bytesPerGroup)"
            )
        }
    }
}
