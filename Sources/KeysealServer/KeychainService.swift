import FoundationEssentials
import Glibc
import Keyseal
import KeysealClient
import KeysealCore
import KeysealX509
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The lock state's subscribers: every change is sent to each of them at once.
final class LockStateBroadcaster: Sendable {
    private struct State {
        var last: LockState?
        /// When the state last became unlocked (nil while not unlocked), for the maximum unlocked time.
        var unlockedSince: ContinuousClock.Instant?
        var next = 0
        var subscribers: [Int: AsyncStream<LockState>.Continuation] = [:]
    }

    private let state = Mutex(State())

    func subscribe() -> (id: Int, stream: AsyncStream<LockState>) {
        let (stream, continuation) = AsyncStream<LockState>.makeStream(bufferingPolicy: .bufferingNewest(8))
        let id = state.withLock { state in
            state.next += 1
            state.subscribers[state.next] = continuation
            return state.next
        }
        return (id, stream)
    }

    func unsubscribe(_ id: Int) {
        let continuation = state.withLock { $0.subscribers.removeValue(forKey: id) }
        continuation?.finish()
    }

    /// Sends `lockState` to every subscriber if it differs from the last state published.
    func publish(_ lockState: LockState) {
        let targets = state.withLock { state -> [AsyncStream<LockState>.Continuation] in
            guard state.last != lockState else { return [] }
            state.last = lockState
            state.unlockedSince = lockState == .unlocked ? .now : nil
            return Array(state.subscribers.values)
        }
        for continuation in targets { continuation.yield(lockState) }
    }

    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// How long the store has been unlocked, as published (nil when it is not unlocked).
    var unlockedFor: Duration? { state.withLock { $0.unlockedSince.map { ContinuousClock.now - $0 } } }

    /// Starts the unlocked time again (an auto-lock that could not lock: no passcode is set).
    func restartUnlockedTime() {
        state.withLock { state in
            if state.unlockedSince != nil { state.unlockedSince = .now }
        }
    }
}

/// A connection's import in progress. Used only by its connection's task, one request at a time.
final class BackupImportSession: @unchecked Sendable {
    var backupImport: BackupImport?
    var replace = false

    /// Abandons the import (nothing was written to the store).
    func discard() {
        backupImport?.cancel()
        backupImport = nil
    }
}

/// The time of the last activity that holds off auto-lock: an administrator's item request or unlock
/// (``WireRequest/holdsOffAutoLock``).
final class ActivityClock: Sendable {
    private let last = Mutex(ContinuousClock.now)
    func touch() { last.withLock { $0 = .now } }
    var idle: Duration { ContinuousClock.now - last.withLock { $0 } }
}

/// Serves wire requests on the store: roles, the engine calls (short ones and key operations measured fast on the
/// connection's event loop, the rest on a thread pool), lock-state publication and the auto-lock setting.
public final class KeychainService: Sendable {
    public let store: KeychainStore
    let pool: NIOThreadPool
    let broadcaster = LockStateBroadcaster()
    let activity = ActivityClock()
    /// Idle seconds before auto-lock in force (nil: never).
    let autoLock: Mutex<Int?>
    /// Seconds after an unlock at which the store locks whatever the activity (nil: never).
    let maxUnlocked: Int?
    let limits: DaemonLimits
    let quotas: QuotaLedger
    /// Serializes non-administrators' writes, so that a quota check and the write it admits are one step.
    private let quotaWrites = Mutex(())
    /// Whether a thread that waits for `quotaWrites` (a pool thread) holds it (``EngineWait``).
    private let quotaWritesHeldByWaiter = Atomic(false)
    /// Reported as not hardware-backed whatever the device says (a development swtpm).
    let softwareTPM: Bool
    /// Where key operations run: the event loop while measured fast, else the pool.
    let keyOperations: KeyOperationPlacement
    let logger: Logger

    public init(
        store: KeychainStore,
        autoLockSeconds: Int?,
        maxUnlockedSeconds: Int? = nil,
        limits: DaemonLimits = DaemonLimits(),
        softwareTPM: Bool = false,
        pool: NIOThreadPool = .singleton,
        keyOperationBound: Duration? = nil,
        logger: Logger
    ) {
        self.store = store
        self.autoLock = Mutex(autoLockSeconds)
        self.maxUnlocked = maxUnlockedSeconds
        self.limits = limits
        self.quotas = QuotaLedger(limits: limits)
        self.softwareTPM = softwareTPM
        self.pool = pool
        self.keyOperations = KeyOperationPlacement(bound: keyOperationBound ?? KeyOperationPlacement.defaultBound)
        self.logger = logger
        broadcaster.publish(store.lockState)
    }

    /// Runs `body` on the thread pool.
    func offload<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.runIfActive(body)
    }

    /// The response to `request` when it is answered on the connection's event loop, else nil (the thread pool answers
    /// it): a short request (``isShort(_:)``); a copy-matching while the rows the store's indexes select for `caller`
    /// stay within ``smallQuery`` (a Secret Service search by attributes is one), tried on the loop and given up after
    /// that bounded work when they do not; an add that replaces by string attributes (a Secret Service store) under
    /// the same bound for its search; a key operation of little input work while its key has been measured fast
    /// (``KeyOperationPlacement``). Never throws: every failure is a `.failure` response. Nothing here waits for the
    /// engine or the quota lock: where another request holds one (on the pool), the request gives up having done
    /// nothing and goes to the pool too (``EngineWait``), so that the loop goes on serving its other connections.
    func answerOnEventLoop(_ request: WireRequest, caller: Caller, peer: PeerCredentials) -> WireResponse? {
        EngineWait.withoutWaiting { answerWithoutWaiting(request, caller: caller, peer: peer) } ?? nil
    }

    private func answerWithoutWaiting(_ request: WireRequest, caller: Caller, peer: PeerCredentials) -> WireResponse? {
        if Self.isShort(request) { return answerNow(request, caller: caller, peer: peer) }
        if case .copyMatching(let query) = request {
            if let refusal = admit(request, caller: caller, peer: peer) { return refusal }
            do {
                guard
                    let records = try store.copyMatching(
                        query,
                        caller: caller,
                        resultLimit: limits.responseBytes,
                        within: Self.smallQuery
                    )
                else { return nil }
                return .records(records)
            } catch {
                return Self.failure(error)
            }
        }
        if case .addReplacingAttributes(let new) = request {
            // A Secret Service store: its search for the item to replace is bounded as a copy-matching's.
            if let refusal = admit(request, caller: caller, peer: peer) { return refusal }
            do {
                return try replacingAdd(new, caller: caller, within: Self.smallQuery)
            } catch {
                return Self.failure(error)
            }
        }
        guard let reference = Self.keyOperationReference(request), KeyOperationPlacement.isLight(request),
            keyOperations.runsOnEventLoop(reference)
        else { return nil }
        return answerNow(request, caller: caller, peer: peer)
    }

    /// An add that replaces by string attributes, admitted as an add: the group must have room for one more item and
    /// the sealed item, whether it adds or replaces. nil when its search went over `bound` (nothing written).
    private func replacingAdd(_ new: NewItem, caller: Caller, within bound: ScanBound?) throws -> WireResponse? {
        try RequestValidation.validate(new, valueLimit: store.valueLimit)
        let outcome = try EngineWait.lock(quotaWrites, heldByWaiter: quotaWritesHeldByWaiter) { _ -> ReplacingAdd in
            let admit = try admission(group: new.accessGroup, caller: caller)
            guard let bound else {
                return try store.addReplacingAttributes(new, caller: caller, admit: admit).map {
                    .replaced(account: $0)
                }
                    ?? .added
            }
            return try store.addReplacingAttributes(new, caller: caller, within: bound, admit: admit)
        }
        switch outcome {
        case .added: return .records([])
        case .replaced(let account): return .records([Wire.replacedRecord(account: account)])
        case .overBound: return nil
        }
    }

    /// A copy-matching of at most this many candidate rows and sealed bytes costs about as much as a few lookups, and
    /// is answered on the event loop.
    static let smallQuery = ScanBound(rows: 8, bytes: 64 << 10)

    /// Answers a request on the calling thread. Never throws: every failure is a `.failure` response.
    private func answerNow(_ request: WireRequest, caller: Caller, peer: PeerCredentials) -> WireResponse {
        if let refusal = admit(request, caller: caller, peer: peer) { return refusal }
        return measured(request, caller: caller)
    }

    /// Answers a long request on the thread pool, never on an event loop; the future completes on `eventLoop`.
    /// `gathering`: the bytes a lookup's result may take, what its connection holds of its uid's response memory
    /// (``responseReservation(_:largest:)``). nil when the result is over a first part: its connection asks again
    /// with the whole.
    func answerOnPool(
        _ request: WireRequest,
        caller: Caller,
        peer: PeerCredentials,
        gathering: Gathering? = nil,
        eventLoop: any EventLoop
    ) -> EventLoopFuture<WireResponse?> {
        if let refusal = admit(request, caller: caller, peer: peer) {
            return eventLoop.makeSucceededFuture(Optional(refusal))
        }
        return pool.runIfActive(eventLoop: eventLoop) { [self] () -> WireResponse? in
            defer { if request.isPasscodeChange { Memory.returnFreedPages() } }
            guard let gathering, gathering.isPart else {
                return measured(request, caller: caller, gathering: gathering)
            }
            // A lookup (never a key operation, whose time `measured` records) on its first part.
            do {
                return try respond(request, caller: caller, gathering: gathering)
            } catch is OverPart {
                return nil
            } catch {
                return Self.failure(error)
            }
        }
    }

    /// What a lookup on the pool may gather: the bytes its connection holds of its uid's response memory, and the most
    /// it may hold (`--max-response`, within what one uid may hold). A lookup first holds a part of that; a result
    /// over the part is gathered again once the whole is held.
    struct Gathering: Sendable, Equatable {
        var bytes: Int
        var whole: Int
        var isPart: Bool { bytes < whole }
        var asWhole: Gathering { Gathering(bytes: whole, whole: whole) }
    }

    /// A result over the first part of its reservation (``Gathering``).
    private struct OverPart: Error {}

    /// The first part of the response memory a client's lookup holds: most results (a password, a few keys) are far
    /// smaller, and another account's unread results must not keep them waiting for room they do not need.
    static let firstPart = 1 << 20

    /// The response memory a request answered on the pool holds while its result is gathered: for a lookup, first
    /// ``firstPart`` of its limit (`--max-response`, within what one uid may hold), then the whole limit if its result
    /// is over that part; nil for any other request. Once the result is known, its connection keeps only what the
    /// result takes, until it is written.
    func responseReservation(_ request: WireRequest, largest: Int) -> Gathering? {
        switch request {
        case .copyMatching, .certificates:
            let whole = min(limits.responseBytes, largest)
            return Gathering(bytes: min(Self.firstPart, whole), whole: whole)
        default: return nil
        }
    }

    /// Runs a lookup that may gather `held` bytes (nil: `--max-response`). A result over a first part throws
    /// ``OverPart``; over a hold smaller than `--max-response`, which could never be held for the uid, errSecAllocate,
    /// naming the limit.
    private func gathering<T>(_ held: Gathering?, _ body: (Int) throws -> T) throws -> T {
        let limit = held?.bytes ?? limits.responseBytes
        do {
            return try body(limit)
        } catch let error as KeychainError
            where error.status == KeychainStatus.dataTooLarge && limit < limits.responseBytes
        {
            if held?.isPart == true { throw OverPart() }
            throw KeychainError(
                KeychainStatus.allocate,
                "the result is over the \(limit) bytes of lookup results one uid may hold in keyseald "
                    + "(--response-memory-per-uid, --response-memory)"
            )
        }
    }

    /// The response, a failure as a `.failure`; a key operation's time is recorded for its placement wherever it ran.
    private func measured(_ request: WireRequest, caller: Caller, gathering: Gathering? = nil) -> WireResponse {
        guard let reference = Self.keyOperationReference(request) else {
            do {
                return try respond(request, caller: caller, gathering: gathering)
            } catch {
                return Self.failure(error)
            }
        }
        let start = ContinuousClock.now
        let response: WireResponse
        do {
            response = try respond(request, caller: caller)
        } catch {
            response = Self.failure(error)
        }
        let succeeded = if case .failure = response { false } else { true }
        if KeyOperationPlacement.isLight(request) {
            keyOperations.record(reference, elapsed: ContinuousClock.now - start, succeeded: succeeded)
        }
        return response
    }

    /// The key a private-key operation (sign, decrypt, key exchange) uses; nil for any other request.
    static func keyOperationReference(_ request: WireRequest) -> Data? {
        guard case .keyOperation(let operation) = request, operation.kind != .describe else { return nil }
        return operation.reference
    }

    /// Refuses a management request from a client; otherwise records an administrator's item request or unlock as
    /// activity for auto-lock (a client's requests, status and subscriptions never count).
    private func admit(_ request: WireRequest, caller: Caller, peer: PeerCredentials) -> WireResponse? {
        if request.isManagement && !caller.isAdministrator {
            logger.info("refused", metadata: ["request.name": "\(request.name)", "peer.uid": "\(peer.uid)"])
            return .failure(
                KeychainError(
                    status: KeychainStatus.missingEntitlement,
                    message: "only an administrator may use \(request.name) (uid \(peer.uid) is a client)"
                )
            )
        }
        if caller.isAdministrator && request.holdsOffAutoLock { activity.touch() }
        return nil
    }

    private static func failure(_ error: any Error) -> WireResponse {
        if let error = error as? KeychainError { return .failure(error) }
        return .failure(KeychainError(status: KeychainStatus.internalComponent, message: "\(error)"))
    }

    /// Forgets the keys keyseald held for a connection that closed (PKCS#11 session keys), on the thread pool: a
    /// hardware key's object is removed from the hardware, which the event loop must not wait for.
    func releaseSessionKeys(_ references: Set<Data>) {
        let store = self.store
        pool.submit { _ in
            for reference in references where WireMapping.isSessionReference(reference) {
                store.releaseKey(WireMapping.reference(reference))
            }
        }
    }

    /// Requests that cost about one lookup: at most one item, no key derivation.
    static func isShort(_ request: WireRequest) -> Bool {
        switch request {
        case .ping, .lockState, .status, .lock, .getSettings, .add: return true
        default: return false
        }
    }

    /// The synchronous part. `held`: the bytes a lookup may gather (nil: `--max-response`).
    private func respond(
        _ request: WireRequest,
        caller: Caller,
        gathering held: Gathering? = nil
    ) throws -> WireResponse {
        switch request {
        case .ping: return .ok
        case .lockState: return .lockState(store.lockState)
        case .status:
            var status = try store.status(itemCounts: caller.isAdministrator)
            if !caller.isAdministrator {
                // Item counts and the ledger's findings are for administrators only.
                status.itemCounts = [:]
                status.ledger = LedgerStatus()
            }
            if softwareTPM {
                status.device.hardwareBacked = false
                status.device.detail = "a software TPM (swtpm) started by keyseald for development: not hardware-backed"
            } else if !caller.isAdministrator && status.device.backend == "host-key" {
                // Where the host key lives is for administrators only.
                status.device.detail =
                    "not hardware-backed: the device key is a file on this host; passcode guessing is limited by "
                    + "Argon2id and the store's escalating delays only"
            }
            status.autoLockSeconds = autoLock.withLock { $0 }
            return .status(status)
        case .lock:
            let message = try store.lock()
            broadcaster.publish(store.lockState)
            return .message(message)
        case .unlock(let passcode):
            defer { broadcaster.publish(store.lockState) }
            try store.unlock(passcode: try Self.passcode(passcode))
            return .ok
        case .setPasscode(let passcode):
            defer { broadcaster.publish(store.lockState) }
            try store.setPasscode(try Self.passcode(passcode))
            return .ok
        case .changePasscode(let old, let new):
            defer { broadcaster.publish(store.lockState) }
            try store.changePasscode(from: try Self.passcode(old), to: try Self.passcode(new))
            return .ok
        case .removePasscode(let passcode):
            defer { broadcaster.publish(store.lockState) }
            try store.removePasscode(try Self.passcode(passcode))
            return .ok
        case .getSettings: return .settings(WireSettings(autoLockSeconds: autoLock.withLock { $0 }))
        case .setSettings(let settings):
            try store.setAutoLock(seconds: settings.autoLockSeconds)
            autoLock.withLock { $0 = settings.autoLockSeconds }
            return .ok
        case .subscribeLockState:
            return .lockStateChanged(store.lockState)
        // Every item request is checked whole (class, attribute keys, types, sizes) before it reads or writes anything:
        // adds and updates here, before their quota checks; lookups and deletes by the engine's own first statement
        // (the same RequestValidation), so that the hot path checks once.
        case .add(let new):
            try RequestValidation.validate(new, valueLimit: store.valueLimit)
            let record = try EngineWait.lock(quotaWrites, heldByWaiter: quotaWritesHeldByWaiter) { _ in
                try store.add(new, caller: caller, admit: try admission(group: new.accessGroup, caller: caller))
            }
            return .records(record.map { [$0] } ?? [])
        case .addReplacingAttributes(let new):
            // Unbounded here (the thread pool): never over a bound.
            return try replacingAdd(new, caller: caller, within: nil)
                ?? .failure(
                    KeychainError(KeychainStatus.internalComponent, "an unbounded replacing add gave up")
                )
        case .copyMatching(let query):
            return .records(try gathering(held) { try store.copyMatching(query, caller: caller, resultLimit: $0) })
        case .update(let query, let changes):
            let parsed = (query: query, changes: changes)
            try RequestValidation.validate(parsed.query)
            try RequestValidation.validate(
                parsed.changes,
                itemClass: parsed.query.itemClass,
                valueLimit: store.valueLimit
            )
            try EngineWait.lock(quotaWrites, heldByWaiter: quotaWritesHeldByWaiter) { _ in
                guard !caller.isAdministrator else {
                    return try store.update(parsed.query, with: parsed.changes, caller: caller)
                }
                // Each group the update grows is charged what it adds, counted from the rows the update matched and
                // the rows it would write (only groups the caller holds: its own items, and a target group the
                // engine has checked), before anything is written.
                try store.update(parsed.query, with: parsed.changes, caller: caller, admit: quotaAdmission)
            }
            return .ok
        case .delete(let query):
            // A key held for the connection (its connection has checked that it made it): forgotten, and a hardware
            // key's object removed from the hardware.
            if let reference = query.persistentRef, case .transient = WireMapping.reference(reference) {
                store.releaseKey(WireMapping.reference(reference))
                return .ok
            }
            try store.delete(query, caller: caller)
            return .ok
        case .undecryptableItems:
            return .undecryptable(try store.undecryptableItems())
        case .deleteUndecryptable(let ids):
            let deleted = try store.deleteUndecryptable(ids: ids)
            logger.info("deleted undecryptable items", metadata: ["items.deleted": "\(deleted.count)"])
            return .undecryptable(deleted)
        // Keys: generated and used here; a client gets public keys and results, never private material. The item
        // lookups behind them apply the caller's groups and the lock state as any lookup does.
        case .generateKey(let request) where !request.isPermanent:
            // A key held for the connection and never stored (a PKCS#11 session key): no item, so no group's quota;
            // its connection counts what it holds (``ConnectionHandler``), gated at each use by its class as a stored
            // key is, and forgotten when the connection closes.
            return .key(try WireMapping.wire(try store.generateKey(request, caller: caller)))
        case .generateKey(let request):
            // A group the caller does not hold, or without room for one more item, is refused before a key is
            // generated; the key item's bytes are charged exactly before it is written.
            let group = request.accessGroup ?? caller.defaultGroup
            if try admission(group: request.accessGroup, caller: caller) != nil {
                try quotas.check(group: group, items: 1, bytes: 0, store: store)
            }
            // A software key is generated before any lock is taken (an RSA key takes up to seconds): neither the
            // engine, which every other client's requests need, nor the quota lock waits for it. A hardware key is
            // generated by the device, which serves one operation at a time anyway.
            let software = request.inHardware || !request.isPermanent ? nil : try SoftwareKey.generate(request.keyType)
            let key = try EngineWait.lock(quotaWrites, heldByWaiter: quotaWritesHeldByWaiter) { _ in
                guard let admit = try admission(group: request.accessGroup, caller: caller) else {
                    return try store.generateKey(request, caller: caller, software: software)
                }
                try quotas.check(group: group, items: 1, bytes: 0, store: store)
                // The token's objects are shared by every user: a non-administrator's hardware keys are counted over
                // its groups, under the same lock as the generation.
                if request.inHardware {
                    try quotas.checkHardwareKeys(count: try store.hardwareKeyCount(caller: caller))
                }
                return try store.generateKey(request, caller: caller, admit: admit, software: software)
            }
            return .key(try WireMapping.wire(key))
        case .keyOperation(let operation):
            let reference = WireMapping.reference(operation.reference)
            switch operation.kind {
            case .describe: return .key(try WireMapping.wire(try store.describeKey(reference, caller: caller)))
            case .sign:
                return .keyResult(
                    try store.sign(reference, algorithm: operation.algorithm, data: operation.data, caller: caller)
                )
            case .decrypt:
                return .keyResult(
                    try store.decrypt(reference, algorithm: operation.algorithm, data: operation.data, caller: caller)
                )
            case .keyExchange:
                return .keyResult(
                    try store.keyExchange(
                        reference,
                        algorithm: operation.algorithm,
                        peer: operation.data,
                        requestedSize: operation.requestedSize,
                        sharedInfo: operation.sharedInfo,
                        caller: caller
                    )
                )
            case .attest:
                return .keyResult(
                    try store.attest(reference, challenge: operation.data, format: operation.algorithm, caller: caller)
                )
            }
        case .attestation(let step):
            switch step {
            case .enrollmentRequest: return .keyResult(try store.attestationEnrollmentRequest())
            case .activate(let blob, let secret):
                return .keyResult(try store.activateAttestationCredential(credentialBlob: blob, secret: secret))
            case .install(let certificates):
                try store.installAttestationCertificates(certificates)
                return .ok
            }
        // Certificates and identities described for the command line: the engine parses and hashes the DER, so the
        // client links no X.509 code.
        case .certificates(let certificateQuery):
            var query = certificateQuery
            guard query.itemClass == .certificate || query.itemClass == .identity else {
                throw KeychainError(KeychainStatus.param, "a certificate description is for certificates or identities")
            }
            query.returns = [.attributes, .data, .persistentRef]
            var records: [ItemRecord]
            do {
                records = try gathering(held) { try store.copyMatching(query, caller: caller, resultLimit: $0) }
            } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
                records = []
            }
            return .certificates(
                try records.map { record throws(KeychainError) in try WireMapping.certificate(record) }
            )
        case .createCSR(let reference, let subject):
            return .keyResult(
                try SigningRequest.create(store: store, reference: .item(reference), subject: subject, caller: caller)
            )
        case .createRecoveryKey(let passcode):
            let key = try store.createRecoveryKey(passcode: try passcode.map(Self.passcode))
            broadcaster.publish(store.lockState)
            logger.notice("a new recovery key was created")
            return .secret(key)
        case .recover(let key, let passcode):
            defer { broadcaster.publish(store.lockState) }
            try store.recover(
                recoveryKey: key,
                passcode: try passcode.map(Self.passcode)
            )
            logger.notice("the store was recovered with its recovery key and sealed to the current PCR values")
            return .ok
        case .tpmReseal(let passcode, let pcrs):
            defer { broadcaster.publish(store.lockState) }
            try store.resealTPM(passcode: try passcode.map(Self.passcode), pcrs: pcrs)
            logger.notice("the device objects were sealed again to the current PCR values")
            return .ok
        case .acceptRollback:
            try store.acceptRollback()
            logger.notice("an administrator accepted the store's rollback")
            return .ok
        case .exportBackup, .importBegin, .importChunk, .importEnd:
            // Served by exportBackup(…) and handleImport(…), which stream.
            throw KeychainError(KeychainStatus.internalComponent, "\(request.name) is a streamed request")
        case .onBehalf:
            // Unwrapped by the connection, which decides whom the inner request acts for.
            throw KeychainError(KeychainStatus.internalComponent, "an on-behalf request reached the service wrapped")
        case .authenticate(let passcode):
            return .secret(try authenticate(passcode: passcode, caller: caller))
        case .revokeAuthentication(let token):
            if try store.revokeAuthentication(token, caller: caller) {
                logger.info("authentication revoked", metadata: ["peer.uid": "\(caller.uid.map(String.init) ?? "-")"])
            }
            return .ok
        case .authenticated:
            // Unwrapped by the connection, which binds the authentication to the peer's uid.
            throw KeychainError(
                KeychainStatus.internalComponent,
                "an authenticated request reached the service wrapped"
            )
        }
    }

    // MARK: - Quotas

    /// The quota admission of a non-administrator's add into `group` (nil: the caller's default group), which the
    /// engine asks with the sealed item's exact size; nil for an administrator, whose writes are not counted. A group
    /// the caller does not hold is refused here, before its usage is looked at: a quota answer would tell how full
    /// another group is.
    private func admission(group: String?, caller: Caller) throws -> GroupAdmission? {
        guard !caller.isAdministrator else { return nil }
        let group = group ?? caller.defaultGroup
        guard caller.holds(group) else { throw KeychainError.missingEntitlement(group) }
        return quotaAdmission
    }

    /// The quotas, asked by the engine for each group a write grows, with what the write adds to it.
    private var quotaAdmission: GroupAdmission {
        { [quotas] group, usage, adds in
            try quotas.check(group: group, usage: usage, items: adds.items, bytes: adds.bytes)
        }
    }

    // MARK: - Backup

    private func refusal(_ request: WireRequest, peer: PeerCredentials) -> WireResponse {
        logger.info("refused", metadata: ["request.name": "\(request.name)", "peer.uid": "\(peer.uid)"])
        return .failure(
            KeychainError(
                status: KeychainStatus.missingEntitlement,
                message: "only an administrator may use \(request.name) (uid \(peer.uid) is a client)"
            )
        )
    }

    /// An export for an administrator: `.backupChunk` responses as the engine writes them (the engine runs on the
    /// pool, holding the store only for its own work), then `.exportReport`, or a `.failure`.
    func exportBackup(
        passphrase: SecretBytes,
        availableOnly: Bool,
        caller: Caller,
        peer: PeerCredentials
    )
        -> AsyncStream<WireResponse>
    {
        let (stream, continuation) = AsyncStream.makeStream(of: WireResponse.self)
        guard caller.isAdministrator else {
            continuation.yield(refusal(.exportBackup(passphrase: passphrase, availableOnly: availableOnly), peer: peer))
            continuation.finish()
            return stream
        }
        activity.touch()
        let secret = passphrase
        Task { [self] in
            do {
                let report = try await offload { [store] in
                    var progress = (done: 0, total: 0)
                    return try store.exportEmbedded(
                        passphrase: secret,
                        availableOnly: availableOnly,
                        sink: { bytes in
                            continuation.yield(.backupChunk(bytes: bytes, done: progress.done, total: progress.total))
                        },
                        progress: { progress = ($0, $1) }
                    )
                }
                logger.info(
                    "exported",
                    metadata: ["peer.uid": "\(peer.uid)", "backup.items": "\(report.exportedCount)"]
                )
                continuation.yield(.exportReport(report))
            } catch {
                logger.info("export failed", metadata: ["peer.uid": "\(peer.uid)", "error": "\(error)"])
                continuation.yield(Self.failure(error))
            }
            continuation.finish()
        }
        return stream
    }

    /// One step of an import on a connection: begin (passphrase), chunks (read and authenticated on the pool as
    /// they arrive, Argon2id once when the header is complete; the items read are sealed meanwhile), end
    /// (checked, then restored in one transaction). Any failure ends the session; the store is unchanged unless the
    /// end step succeeds.
    func handleImport(
        _ request: WireRequest,
        session: BackupImportSession,
        caller: Caller,
        peer: PeerCredentials
    )
        async -> [WireResponse]
    {
        guard caller.isAdministrator else {
            session.discard()
            return [refusal(request, peer: peer)]
        }
        activity.touch()
        do {
            switch request {
            case .importBegin(let passphrase, let replace):
                let secret = passphrase
                guard !secret.isEmpty else {
                    throw KeychainError(KeychainStatus.param, "the backup passphrase is empty")
                }
                session.discard()
                session.backupImport = try store.beginBackupImport(passphrase: secret)
                session.replace = replace
                return [.importProgress(done: 0, total: 0)]
            case .importChunk(let bytes):
                guard let backupImport = session.backupImport else {
                    throw KeychainError(KeychainStatus.param, "no import is in progress on this connection")
                }
                try await offload { try backupImport.feed(bytes) }
                return [.importProgress(done: backupImport.done, total: backupImport.total ?? 0)]
            case .importEnd:
                guard let backupImport = session.backupImport else {
                    throw KeychainError(KeychainStatus.param, "no import is in progress on this connection")
                }
                let replace = session.replace
                session.backupImport = nil
                let report = try await offload { try backupImport.finish(replace: replace) }
                logger.info(
                    "imported",
                    metadata: [
                        "peer.uid": "\(peer.uid)", "backup.restored": "\(report.restoredCount)",
                        "backup.skipped": "\(report.skipped.count)", "backup.replaced": "\(report.replaced)",
                    ]
                )
                var summary = report
                summary.skipped = []
                return Self.skippedFrames(report.skipped) + [.importReport(summary)]
            default:
                throw KeychainError(KeychainStatus.internalComponent, "not an import request")
            }
        } catch {
            session.discard()
            logger.info("import failed", metadata: ["peer.uid": "\(peer.uid)", "error": "\(error)"])
            return [Self.failure(error)]
        }
    }

    /// The skipped items in responses of about half a megabyte each (every frame stays under the limit).
    static func skippedFrames(_ skipped: [ImportReport.SkippedItem]) -> [WireResponse] {
        var frames: [WireResponse] = []
        var batch: [ImportReport.SkippedItem] = []
        var size = 0
        for entry in skipped {
            let entrySize =
                64 + entry.accessGroup.utf8.count + (entry.service?.utf8.count ?? 0)
                + (entry.account?.utf8.count ?? 0) + entry.detail.utf8.count
            if size + entrySize > (512 << 10) && !batch.isEmpty {
                frames.append(.importSkipped(batch))
                batch = []
                size = 0
            }
            batch.append(entry)
            size += entrySize
        }
        if !batch.isEmpty { frames.append(.importSkipped(batch)) }
        return frames
    }

    /// The passcode's bytes in the zeroizing type, checked to be UTF-8 without making a String of them.
    private static func passcode(_ secret: SecretBytes) throws -> SecretBytes {
        guard secret.isValidUTF8 else { throw KeychainError(KeychainStatus.param, "the passcode is not valid UTF-8") }
        return secret
    }

    /// Locks if the store has been idle for the auto-lock timeout, or unlocked for the maximum unlocked time.
    /// Returns whether it locked.
    func autoLockIfIdle() async -> Bool {
        let timeout = autoLock.withLock { $0 }
        let idle = timeout.map { activity.idle >= .seconds($0) } ?? false
        let overdue = maxUnlocked.map { limit in (broadcaster.unlockedFor ?? .zero) >= .seconds(limit) } ?? false
        guard idle || overdue else { return false }
        let locked =
            (try? await offload { [store] in
                guard store.lockState == .unlocked, (try? store.status().passcodeSet) == true else { return false }
                return (try? store.lock()) == .some(nil)
            }) ?? false
        activity.touch()
        if locked {
            if idle {
                logger.info("auto-locked", metadata: ["autolock.seconds": "\(timeout ?? 0)"])
            } else {
                logger.info(
                    "locked after the maximum unlocked time",
                    metadata: ["autolock.max-unlocked": "\(maxUnlocked ?? 0)"]
                )
            }
            broadcaster.publish(.locked)
        } else if overdue {
            broadcaster.restartUnlockedTime()
        }
        return locked
    }

    /// How long until ``autoLockIfIdle()`` may lock (nil: no timer is set).
    var untilAutoLock: Duration? {
        var wait: Duration?
        if let timeout = autoLock.withLock({ $0 }) { wait = .seconds(timeout) - activity.idle }
        if let maxUnlocked, let unlockedFor = broadcaster.unlockedFor {
            let left = .seconds(maxUnlocked) - unlockedFor
            wait = min(wait ?? left, left)
        }
        return wait
    }
}

extension WireRequest {
    /// An item request or an unlock: what holds off auto-lock when an administrator sends it.
    var holdsOffAutoLock: Bool {
        switch self {
        case .add, .addReplacingAttributes, .copyMatching, .update, .delete, .unlock, .setPasscode, .changePasscode:
            return true
        case .certificates, .createCSR: return true
        case .exportBackup, .importBegin, .importChunk, .importEnd: return true
        default: return false
        }
    }
}
