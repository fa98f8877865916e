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
    /// Seconds a connection without a lock-state subscription may go without a request, and a reply may wait for its
    /// client to read it (`--idle-timeout`; nil: never closed for either).
    public var idleTimeout: Duration?
    /// Stored bytes one lookup may return (`--max-response`); beyond it errSecDataTooLarge.
    public var responseBytes: Int
    /// Keys in the device key's hardware (the TPM or the token, `kSecAttrTokenIDSecureEnclave`) a non-administrator
    /// may keep in its access groups together (`--quota-hardware-keys`): a token's objects are shared by every user.
    public var hardwareKeysPerUID: Int
    /// Bytes of lookup results one uid's connections may hold in keyseald, gathered and not yet written
    /// (`--response-memory-per-uid`); a lookup waits for room, and one over it is refused with errSecAllocate.
    public var responseMemoryPerUID: Int
    /// The same over every uid (`--response-memory`).
    public var responseMemory: Int
    /// Requests of one uid on the thread pool at a time; the uid's further long requests wait, unread, for their turn.
    /// Administrators are not held to it: root and keyseald's own uid are many system services, not one user, and
    /// one service's long request would hold up the others'.
    public var poolRequestsPerUID: Int

    public static let defaultConnectionsPerUID = 64
    public static let defaultPendingBytesPerUID = 16 << 20
    public static let defaultItemsPerGroup = 10_000
    public static let defaultBytesPerGroup = 64 << 20
    public static let defaultIdleTimeout: Duration = .seconds(60)
    public static let defaultResponseBytes = 64 << 20
    public static let defaultHardwareKeysPerUID = 64
    public static let defaultResponseMemoryPerUID = 64 << 20
    /// With the units' `MemoryMax=512M`: two and a half uids' shares, beside an unlock's Argon2id (64 MiB), the
    /// pending request bytes and keyseald's own 30–40 MB.
    public static let defaultResponseMemory = 160 << 20
    /// One: the pool has a thread per core, so on two cores one uid's long requests (RSA key generations, large
    /// lookups) leave the other thread to everyone else.
    public static let defaultPoolRequestsPerUID = 1

    public init(
        connectionsPerUID: Int = defaultConnectionsPerUID,
        pendingBytesPerUID: Int = defaultPendingBytesPerUID,
        itemsPerGroup: Int = defaultItemsPerGroup,
        bytesPerGroup: Int = defaultBytesPerGroup,
        idleTimeout: Duration? = defaultIdleTimeout,
        responseBytes: Int = defaultResponseBytes,
        hardwareKeysPerUID: Int = defaultHardwareKeysPerUID,
        responseMemoryPerUID: Int = defaultResponseMemoryPerUID,
        responseMemory: Int = defaultResponseMemory,
        poolRequestsPerUID: Int = defaultPoolRequestsPerUID
    ) {
        self.hardwareKeysPerUID = hardwareKeysPerUID
        self.responseMemoryPerUID = responseMemoryPerUID
        self.responseMemory = responseMemory
        self.poolRequestsPerUID = poolRequestsPerUID
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
                    message: "uid \(uid) already has \(current.connections) connections to keyseald (the limit)"
                )
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
                + "the quota is \(limits.hardwareKeysPerUID): delete keys you no longer need"
        )
    }

    /// Refuses a write that would take `group`, holding `usage`, over a quota. Compared without overflow: a count
    /// near `Int.max` (a store file edited by root) refuses the write rather than trapping.
    func check(group: String, usage: (items: Int, bytes: Int), items: Int, bytes: Int) throws {
        if items > 0 && usage.items > limits.itemsPerGroup - items {
            throw KeychainError(
                KeychainStatus.allocate,
                "the access group \(group) holds \(usage.items) items; the quota is \(limits.itemsPerGroup)"
            )
        }
        if usage.bytes > limits.bytesPerGroup - bytes {
            throw KeychainError(
                KeychainStatus.allocate,
                "the access group \(group) holds \(usage.bytes) bytes; adding \(bytes) would pass the quota of \(limits.bytesPerGroup)"
            )
        }
    }
}

/// What requests hold while they are served — requests on the thread pool, bytes of lookup results gathered and not
/// yet written — within a limit per uid and one over every uid. A request that would pass either waits, in the order
/// the requests asked, until others release what they hold (its connection reads nothing meanwhile); a waiter held
/// back by its own uid's limit only does not hold up other uids.
final class Allowance: Sendable {
    private struct Waiter {
        var uid: UInt32
        var amount: Int
        var promise: EventLoopPromise<Void>
    }

    private struct State {
        var held: [UInt32: Int] = [:]
        var total = 0
        var waiting: [Waiter] = []

        func fitsUID(_ amount: Int, _ uid: UInt32, limit: Int) -> Bool { held[uid, default: 0] <= limit - amount }

        mutating func grant(_ amount: Int, _ uid: UInt32) {
            held[uid, default: 0] += amount
            total += amount
        }
    }

    let perUID: Int
    let total: Int
    private let state = Mutex(State())

    init(perUID: Int, total: Int = .max) {
        self.perUID = max(1, perUID)
        self.total = max(1, total)
    }

    /// The most one request may ask for: what one uid may hold, within the total.
    var largest: Int { min(perUID, total) }

    /// Succeeds `promise` once `uid` holds `amount` more (at once when it fits and no request waits ahead of it for
    /// room over every uid). `amount` is at most ``largest``.
    func acquire(_ amount: Int, uid: UInt32, promise: EventLoopPromise<Void>) {
        precondition(amount > 0 && amount <= largest, "an allowance request over its limits")
        let granted = state.withLock { state -> Bool in
            let waitingForTotal = state.waiting.contains { state.fitsUID($0.amount, $0.uid, limit: perUID) }
            guard !waitingForTotal, state.fitsUID(amount, uid, limit: perUID), state.total <= total - amount else {
                state.waiting.append(Waiter(uid: uid, amount: amount, promise: promise))
                return false
            }
            state.grant(amount, uid)
            return true
        }
        if granted { promise.succeed() }
    }

    /// Gives back what `uid` held, and grants the waiters that now fit, in order.
    func release(_ amount: Int, uid: UInt32) {
        guard amount > 0 else { return }
        let woken = state.withLock { state -> [EventLoopPromise<Void>] in
            state.held[uid, default: 0] -= amount
            if state.held[uid] ?? 0 <= 0 { state.held[uid] = nil }
            state.total -= amount
            return grantWaiters(&state)
        }
        for promise in woken { promise.succeed() }
    }

    /// Grants the waiters that fit, in order; returns their promises.
    private func grantWaiters(_ state: inout State) -> [EventLoopPromise<Void>] {
        var woken: [EventLoopPromise<Void>] = []
        var index = 0
        while index < state.waiting.count {
            let waiter = state.waiting[index]
            guard state.fitsUID(waiter.amount, waiter.uid, limit: perUID) else {
                index += 1
                continue
            }
            // The first waiter held back by the total: the ones behind it wait for it.
            guard state.total <= total - waiter.amount else { break }
            state.grant(waiter.amount, waiter.uid)
            state.waiting.remove(at: index)
            woken.append(waiter.promise)
        }
        return woken
    }

    /// Withdraws a request still waiting (its connection closed): its promise fails. Nothing if it was granted.
    func cancel(_ promise: EventLoopPromise<Void>) {
        let (removed, woken) = state.withLock { state -> (Bool, [EventLoopPromise<Void>]) in
            guard let index = state.waiting.firstIndex(where: { $0.promise.futureResult === promise.futureResult })
            else { return (false, []) }
            state.waiting.remove(at: index)
            return (true, grantWaiters(&state))
        }
        if removed { promise.fail(ChannelError.ioOnClosedChannel) }
        for promise in woken { promise.succeed() }
    }

    /// What `uid` holds (tests, diagnostics).
    func held(_ uid: UInt32) -> Int { state.withLock { $0.held[uid] ?? 0 } }
}
