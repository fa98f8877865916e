import CKeysealSys
import FoundationEssentials
import Glibc
import Keyseal
import KeysealClient
import KeysealCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Splits the byte stream into frames: a 4-byte big-endian length and that many bytes. A length over the frame
/// limit (or too short to hold a version and an opcode) is an error that closes the connection. A frame left
/// incomplete for `timeout` (a client that stalls mid-frame) is an error too, so that a half-sent frame never
/// holds its connection and buffer forever (a connection with no partial frame is left to the idle timeout).
/// The bytes of a partial frame are charged to the peer's uid (``ConnectionAccount``): over its limit, the
/// connection is closed with errSecAllocate.
struct FrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    let timeout: TimeAmount
    let account: ConnectionAccount

    init(timeout: TimeAmount, account: ConnectionAccount) {
        self.timeout = timeout
        self.account = account
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        // The handler has enough frames waiting: the rest stays in the buffer (nothing more is read meanwhile), so
        // that decoding a burst costs no more than the turns that answer it. Held bytes count as pending: whatever
        // keeps them there, they stay within the uid's limit.
        guard !account.holdFrames else {
            try account.setPending(buffer.readableBytes)
            return .needMoreData
        }
        let state = try decodeFrame(context: context, buffer: &buffer)
        try account.setPending(state == .needMoreData ? buffer.readableBytes : 0)
        return state
    }

    private mutating func decodeFrame(
        context: ChannelHandlerContext,
        buffer: inout ByteBuffer
    ) throws
        -> DecodingState
    {
        guard let header = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else {
            if buffer.readableBytes > 0 { arm(context) } else { disarm() }
            return .needMoreData
        }
        let length = Int(header)
        guard length <= Wire.maxFrame else {
            throw KeychainError(
                status: KeychainStatus.dataTooLarge,
                message: "frame of \(length) bytes exceeds the limit of \(Wire.maxFrame)"
            )
        }
        guard length >= 2 else {
            throw KeychainError(status: KeychainStatus.decode, message: "malformed frame: too short")
        }
        guard buffer.readableBytes >= 4 + length else {
            arm(context)
            return .needMoreData
        }
        buffer.moveReaderIndex(forwardBy: 4)
        guard let frame = buffer.readSlice(length: length) else { return .needMoreData }
        disarm()
        context.fireChannelRead(wrapInboundOut(frame))
        return .continue
    }

    mutating func decodeLast(
        context: ChannelHandlerContext,
        buffer: inout ByteBuffer,
        seenEOF: Bool
    ) throws
        -> DecodingState
    {
        // The peer has gone (keyseald does not keep half-closed connections): no reply could reach it, so what it
        // sent and was not yet decoded is dropped unread, as is a truncated last frame.
        buffer.moveReaderIndex(to: buffer.writerIndex)
        disarm()
        try? account.setPending(0)
        return .needMoreData
    }

    mutating func decoderRemoved(context: ChannelHandlerContext) {
        disarm()
        try? account.setPending(0)
    }

    /// Starts the stall timer once the buffer ends in part of a frame.
    private func arm(_ context: ChannelHandlerContext) {
        guard account.stall == nil else { return }
        Self.schedule(in: timeout, timeout: timeout, account: account, context: context)
    }

    /// The stall timer counts only time keyseald spent reading this connection: while it reads nothing from it
    /// (its requests ahead are on the pool, its turn is over, its frames are held, its replies wait to be read), the
    /// rest of the frame may be waiting in the socket, and that wait is keyseald's, not the client's. The frame has
    /// stalled once the connection has been read from for `timeout` without it completing.
    private static func schedule(
        in delay: TimeAmount,
        timeout: TimeAmount,
        account: ConnectionAccount,
        context: ChannelHandlerContext
    ) {
        account.stall = context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
            account.stall = nil
            let readFor = account.readingSince.map { NIODeadline.now() - $0 } ?? .zero
            guard readFor >= timeout else {
                schedule(in: timeout - readFor, timeout: timeout, account: account, context: context)
                return
            }
            let seconds = Double(timeout.nanoseconds) / 1e9
            context.fireErrorCaught(
                KeychainError(
                    status: KeychainStatus.io,
                    message: "an incomplete frame waited \(seconds) s for the rest of its bytes"
                )
            )
        }
    }

    private func disarm() {
        account.stall?.cancel()
        account.stall = nil
    }
}

/// Open connections, so that shutdown can close the idle ones at once and the busy ones after their reply.
final class ConnectionRegistry: Sendable {
    private struct Entry {
        var channel: any Channel
        var busy = false
    }

    private struct State {
        var shuttingDown = false
        /// The listening socket is closed: a connection it accepted before is not served.
        var listenerClosed = false
        var next = 0
        var entries: [Int: Entry] = [:]
        /// Waiting for the last connection to close.
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Registers a connection; nil when the server is shutting down or no longer listening.
    func register(_ channel: any Channel) -> Int? {
        state.withLock { state in
            guard !state.shuttingDown && !state.listenerClosed else { return nil }
            state.next += 1
            state.entries[state.next] = Entry(channel: channel)
            return state.next
        }
    }

    /// Refuses the connections the listening socket accepted but that are not registered yet.
    func listenerDidClose() { state.withLock { $0.listenerClosed = true } }

    /// Returns once no connection is registered.
    func allClosed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let closed = state.withLock { state -> Bool in
                guard !state.entries.isEmpty else { return true }
                state.waiters.append(continuation)
                return false
            }
            if closed { continuation.resume() }
        }
    }

    /// Marks a request as in flight; false when shutting down (the request is not started).
    func begin(_ id: Int) -> Bool {
        state.withLock { state in
            guard !state.shuttingDown else { return false }
            state.entries[id]?.busy = true
            return true
        }
    }

    /// Marks the request done; false when shutting down (the connection should close now).
    func end(_ id: Int) -> Bool {
        state.withLock { state in
            state.entries[id]?.busy = false
            return !state.shuttingDown
        }
    }

    func remove(_ id: Int) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.entries.removeValue(forKey: id)
            guard state.entries.isEmpty else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Stops new requests and closes every idle connection.
    func shutDown() {
        let idle = state.withLock { state -> [any Channel] in
            state.shuttingDown = true
            return state.entries.values.filter { !$0.busy }.map(\.channel)
        }
        for channel in idle { channel.close(promise: nil) }
    }

    /// Closes every connection, busy or not: the end of a shutdown whose busy connections did not finish in time.
    func closeAll() {
        let all = state.withLock { state -> [any Channel] in
            state.shuttingDown = true
            return state.entries.values.map(\.channel)
        }
        for channel in all { channel.close(promise: nil) }
    }

    var count: Int { state.withLock { $0.entries.count } }
}

/// The socket keyseald listens on and who may reach it.
public struct SocketConfiguration: Sendable {
    public var path: String
    /// Group of the socket and its directory (socket 0660, directory 0750); nil: 0600 and 0700.
    public var group: String?

    public init(path: String, group: String? = nil) {
        self.path = path
        self.group = group
    }
}

/// The Unix-socket server: each connection is served on its event loop by its own handler, which catches its own
/// errors. On graceful shutdown it stops accepting, lets in-flight requests finish, closes every connection and
/// removes the socket.
public final class SocketServer: Service {
    let socket: SocketConfiguration
    let service: KeychainService
    let policy: AccessPolicy
    let logger: Logger
    let registry = ConnectionRegistry()
    /// The thread that looks for a client's connection among its descriptors (``PeerIdentity/holdsConnection``):
    /// one, so that however long those lookups take, they hold up neither the event loop nor the engine's pool.
    let identification = NIOThreadPool(numberOfThreads: 1)
    let group: any EventLoopGroup
    /// How long a connection may hold an incomplete frame before it is closed.
    let frameTimeout: Duration
    /// 10 seconds: far beyond any honest client on a local socket, short enough that stalled clients do not pile up.
    public static let defaultFrameTimeout: Duration = .seconds(10)
    /// Connections and partly received bytes per uid.
    let peers: PeerLedger
    /// Clients' requests on the thread pool, per uid (``DaemonLimits/poolRequestsPerUID``).
    let poolShares: Allowance
    /// Bytes of lookup results gathered and not yet written, per uid and over all (`--response-memory-per-uid`,
    /// `--response-memory`).
    let responseMemory: Allowance
    /// Set once the socket accepts connections.
    public let ready: @Sendable () -> Void
    /// Each event loop's queue of connections waiting for their next turn (``TurnQueue``).
    private let turnQueues = Mutex<[ObjectIdentifier: TurnQueue]>([:])

    public init(
        socket: SocketConfiguration,
        service: KeychainService,
        policy: AccessPolicy,
        logger: Logger,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        frameTimeout: Duration = SocketServer.defaultFrameTimeout,
        ready: @escaping @Sendable () -> Void = {}
    ) {
        self.frameTimeout = frameTimeout
        self.peers = PeerLedger(limits: service.limits)
        self.poolShares = Allowance(perUID: service.limits.poolRequestsPerUID)
        self.responseMemory = Allowance(
            perUID: service.limits.responseMemoryPerUID,
            total: service.limits.responseMemory
        )
        self.socket = socket
        self.service = service
        self.policy = policy
        self.logger = logger
        self.group = group
        self.ready = ready
    }

    public func run() async throws {
        identification.start()
        defer { identification.shutdownGracefully { _ in } }
        let gid = try SocketFiles.prepareDirectory(for: socket)
        try SocketFiles.removeStaleSocket(socket.path)
        let timeout = TimeAmount.nanoseconds(
            frameTimeout.components.seconds * 1_000_000_000 + frameTimeout.components.attoseconds / 1_000_000_000
        )
        // Each accepted connection is set up on its event loop and served by its ConnectionHandler there: no task
        // and no thread hop per connection (ConnectionRegistry keeps them for shutdown).
        let server = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.allocator, value: WipingAllocator.allocator)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let account = ConnectionAccount(ledger: peers)
                    try channel.pipeline.syncOperations.addHandler(ReceiveScrubber())
                    try channel.pipeline.syncOperations.addHandler(
                        ByteToMessageHandler(FrameDecoder(timeout: timeout, account: account))
                    )
                    try channel.pipeline.syncOperations.addHandler(ConnectionHandler(server: self, account: account))
                }
            }
            .bind(unixDomainSocketPath: socket.path).get()
        defer { SocketFiles.remove(socket.path) }
        try SocketFiles.setPermissions(socket.path, gid: gid)
        logger.info("listening", metadata: ["socket.path": "\(socket.path)"])
        ready()

        let registry = self.registry
        await withGracefulShutdownHandler {
            // Until the listening socket closes (at shutdown, or on an error), then until every connection has.
            do {
                try await server.closeFuture.get()
            } catch {
                logger.error("accepting stopped", metadata: ["error": "\(error)"])
            }
            registry.listenerDidClose()
            await registry.allClosed()
        } onGracefulShutdown: { [group] in
            server.close(promise: nil)
            registry.shutDown()
            // A busy connection whose client stopped reading (a streamed result it never reads) would hold the
            // shutdown forever: after the frame timeout, every connection still open is closed.
            group.next().scheduleTask(in: timeout) { registry.closeAll() }
        }
        logger.info("stopped accepting; every connection closed")
    }

    /// The queue of connections waiting for a turn on `eventLoop`.
    func turnQueue(_ eventLoop: any EventLoop) -> TurnQueue {
        turnQueues.withLock { queues in
            if let queue = queues[ObjectIdentifier(eventLoop)] { return queue }
            let queue = TurnQueue(eventLoop: eventLoop)
            queues[ObjectIdentifier(eventLoop)] = queue
            return queue
        }
    }

    /// The peer's uid, gid and pid (`SO_PEERCRED`); on the channel's event loop the future is already complete.
    static func peerCredentials(_ channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(
                KeychainError(KeychainStatus.internalComponent, "no socket options on this channel")
            )
        }
        let credentials: EventLoopFuture<keyseal_peer_credentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET),
            name: SocketOptionName(keyseal_so_peercred)
        )
        return credentials.map { PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid) }
    }

    /// The socket's `SO_COOKIE`, on the channel's event loop.
    static func cookie(_ channel: any Channel) -> UInt64? { socketOption(channel, keyseal_so_cookie) }

    /// The peer's pidfd from `SO_PEERPIDFD`, nil where the kernel has no such option.
    static func peerPidfd(_ channel: any Channel) -> Int32? { socketOption(channel, keyseal_so_peerpidfd) }

    /// A `SOL_SOCKET` option of the channel's socket, read on its event loop (where the future is already complete);
    /// nil when the socket has no such option.
    private static func socketOption<Value: Sendable>(_ channel: any Channel, _ name: Int32) -> Value? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let option: EventLoopFuture<Value> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET),
            name: SocketOptionName(name)
        )
        var result: Value?
        option.assumeIsolated().whenSuccess { result = $0 }
        return result
    }
}

/// The connections of one event loop that gave up their turn (``ConnectionHandler/turnBudget`` of answers, or a key
/// operation), served one turn at a time in the order they gave it up, with a poll of every socket between two
/// turns. SwiftNIO runs every task that is due before it polls again, so a task per waiting connection would let
/// connections that pipeline on several sockets pass the turn among themselves while the others' requests wait
/// unread; one task at a time, each scheduled a moment after the previous turn ended, lets the loop poll first.
/// Used only on its event loop.
final class TurnQueue: @unchecked Sendable {
    private let eventLoop: any EventLoop
    private var waiting = CircularBuffer<() -> Void>()
    private var scheduled = false

    init(eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    /// Runs `turn` after the turns already waiting, each after the loop has polled its sockets again.
    func enqueue(_ turn: @escaping () -> Void) {
        eventLoop.preconditionInEventLoop()
        waiting.append(turn)
        scheduleNext()
    }

    private func scheduleNext() {
        guard !scheduled, !waiting.isEmpty else { return }
        scheduled = true
        // Due a moment after now, which is after the turn that just ended: not due when the loop next looks for due
        // tasks, so it polls its sockets first.
        eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: .microseconds(50)) {
            self.scheduled = false
            self.waiting.popFirst()?()
            self.scheduleNext()
        }
    }
}

/// Serves one connection on its event loop: decodes each frame, answers short requests at once (a lookup, an add,
/// status) and long ones (unlock, passcode changes, many matches) on the thread pool, one request at a time and
/// in order; a subscription then only receives lock-state events. A malformed, oversized or stalled frame gets
/// one failure response and closes this connection only. A connection over its uid's limit gets one errSecAllocate
/// response and is closed; one that holds no subscription is closed after the idle timeout without a request.
final class ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let server: SocketServer
    private let account: ConnectionAccount
    /// Armed while no request is in flight and no subscription is held.
    private var idleTimer: Scheduled<Void>?
    /// When the last request arrived or was answered: the idle timeout counts from there.
    private var lastActivity = NIODeadline.now()
    private var id: Int?
    private var peer: PeerCredentials?
    private var identity = PeerIdentity.unknown
    private var caller: Caller?
    /// Frames that arrived while a request was in flight or before the peer was identified.
    private var pending = CircularBuffer<ByteBuffer>()
    private var busy = true
    /// Replies wait to be read (the channel is over its high water mark): nothing more is answered meanwhile.
    private var waitingForReader = false
    /// This connection has had its turn on the event loop (a key operation, or ``turnBudget`` of answers): its next
    /// frame waits for the loop's next turn and nothing more is read from it meanwhile, so that a client pipelining
    /// requests holds up the other connections for one turn at most.
    private var yielding = false
    /// When this connection's current turn of answers on the event loop began.
    private var turnStart: NIODeadline?
    private var closing = false
    private var subscription: (id: Int, task: Task<Void, Never>)?
    /// The allowance this connection's request waits for (pool share, response memory), withdrawn if it closes.
    private var waitingFor: (allowance: Allowance, promise: EventLoopPromise<Void>)?
    /// The response memory the reply being written holds, given back once it is written (or cannot be).
    private var heldForReply: (bytes: Int, uid: UInt32)?
    /// The backup import in progress on this connection, if any.
    private let backupImport = BackupImportSession()

    init(server: SocketServer, account: ConnectionAccount) {
        self.server = server
        self.account = account
    }

    /// Turns reading from this connection on or off (`autoRead`), noting since when it reads for the stall timer.
    private func reading(_ on: Bool, context: ChannelHandlerContext) {
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: on)
        if !on {
            account.readingSince = nil
        } else if account.readingSince == nil {
            account.readingSince = .now()
        }
    }

    func channelActive(context: ChannelHandlerContext) {
        guard let id = server.registry.register(context.channel) else {
            context.close(promise: nil)
            return
        }
        self.id = id
        let policy = server.policy
        SocketServer.peerCredentials(context.channel).assumeIsolated().whenComplete { result in
            switch result {
            case .success(let peer):
                self.peer = peer
                if let refusal = self.server.peers.open(peer.uid) {
                    self.fail(context: context, refusal)
                    return
                }
                self.account.uid = peer.uid
                // What the peer runs matters only to a policy that names executables or units.
                guard policy.identifiesPeers else { return self.identified(peer, .unknown, nil, context: context) }
                let pidfd = SocketServer.peerPidfd(context.channel)
                // A client's executable counts only for the connection its program made, not one it inherited across
                // an exec (an administrator's gives it nothing but a default group). Looking for the connection among
                // the peer's descriptors costs more as the system holds more sockets, so it runs on a thread of its
                // own, never on the event loop; the connection reads nothing meanwhile.
                guard policy.namesExecutables, !policy.isAdministrator(peer) else {
                    let (identity, source) = PeerIdentity.resolve(peer: peer, peerPidfd: pidfd)
                    return self.identified(peer, identity, source, context: context)
                }
                let connection = (cookie: SocketServer.cookie(context.channel) ?? 0, matters: policy.names(executable:))
                let accepted = PeerIdentity.bootTicks()
                self.server.identification.runIfActive(eventLoop: context.eventLoop) {
                    PeerIdentity.resolve(peer: peer, peerPidfd: pidfd, acceptedTicks: accepted, connection: connection)
                }.assumeIsolated().whenComplete { result in
                    guard case .success(let (identity, source)) = result else {
                        // The thread is stopping (shutdown): the pidfd was not handed over.
                        if let pidfd { close(pidfd) }
                        return context.close(promise: nil)
                    }
                    self.identified(peer, identity, source, context: context)
                }
            case .failure(let error):
                self.server.logger.debug("no peer credentials", metadata: ["error": "\(error)"])
                context.close(promise: nil)
            }
        }
        context.fireChannelActive()
    }

    /// Sets what the peer runs and the caller it acts as, and begins serving it.
    private func identified(
        _ peer: PeerCredentials,
        _ identity: PeerIdentity,
        _ source: PeerIdentity.Source?,
        context: ChannelHandlerContext
    ) {
        self.identity = identity
        caller = server.policy.caller(for: peer, identity: identity)
        server.logger.debug(
            "peer identified",
            metadata: ["peer": "\(peer)", "identity": "\(identity)", "pidfd": "\(source?.rawValue ?? "none")"]
        )
        guard !closing else { return }
        busy = false
        drain(context: context)
        armIdleTimer(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Frames the client sent before it went are not answered: a queued turn of this connection does nothing.
        closing = true
        pending.removeAll()
        if let waitingFor { waitingFor.allowance.cancel(waitingFor.promise) }
        backupImport.discard()
        if let id { server.registry.remove(id) }
        id = nil
        idleTimer?.cancel()
        idleTimer = nil
        try? account.setPending(0)
        if let uid = account.uid { server.peers.close(uid) }
        account.uid = nil
        if let subscription {
            subscription.task.cancel()
            server.service.broadcaster.unsubscribe(subscription.id)
        }
        subscription = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard subscription == nil, !closing else { return }  // a subscriber's input is left unread
        pending.append(unwrapInboundIn(data))
        drain(context: context)
        // Frames wait (a request on the pool, the end of a turn): past this many, the rest of a burst stays undecoded.
        if pending.count >= Self.heldFrameLimit { account.holdFrames = true }
        armIdleTimer(context: context)
    }

    /// Closes the connection after the idle timeout unless a request arrives, one is in flight or it subscribes.
    /// No frame is sent: the client's library sees the closed connection and opens a new one for its next request.
    /// Called after each request: the timer is not moved at every request (a timer task each time) but, when it
    /// fires early, set again for the rest of the timeout counted from the last request.
    private func armIdleTimer(context: ChannelHandlerContext, activity: Bool = true) {
        guard let timeout = server.service.limits.idleTimeout else { return }
        if activity { lastActivity = .now() }
        guard !busy, !closing, subscription == nil, idleTimer == nil else { return }
        let nanoseconds = timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
        idleTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: lastActivity + .nanoseconds(nanoseconds))
        {
            self.idleTimer = nil
            guard !self.busy, !self.closing, self.subscription == nil else { return }
            guard NIODeadline.now() >= self.lastActivity + .nanoseconds(nanoseconds) else {
                self.armIdleTimer(context: context, activity: false)
                return
            }
            self.server.logger.debug(
                "closing an idle connection",
                metadata: ["peer": "\(self.peer.map { "\($0)" } ?? "?")"]
            )
            self.closing = true
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? KeychainError {
            // A malformed, oversized or stalled frame: say why, then close this connection only.
            fail(context: context, error)
        } else {
            server.logger.debug("connection ended", metadata: ["error": "\(error)"])
            context.close(promise: nil)
        }
    }

    private func fail(context: ChannelHandlerContext, _ error: KeychainError) {
        guard !closing else { return }
        closing = true
        server.logger.info(
            "closing a connection",
            metadata: ["peer": "\(peer.map { "\($0)" } ?? "?")", "error": "\(error)"]
        )
        var bytes = WireResponse.failure(error).encodedFrame()
        let frame = WipingAllocator.buffer(consuming: &bytes)
        context.writeAndFlush(wrapOutboundOut(frame)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    /// How long one connection's answers may hold the event loop before the other connections are served: a client
    /// pipelining requests answered on the loop (each bounded by ``KeychainService/smallQuery``) gets this much at a
    /// time, and a request of another client waits at most about this long behind it.
    static let turnBudget = TimeAmount.microseconds(500)

    /// Answers pending frames in order until one goes to the pool, a key operation ran on the event loop or this
    /// connection's turn is over.
    private func drain(context: ChannelHandlerContext) {
        while !busy, !yielding, !closing, subscription == nil, let frame = pending.popFirst() {
            let start = turnStart ?? .now()
            turnStart = start
            answer(frame, context: context)
            if !busy, !yielding, !closing, NIODeadline.now() - start > Self.turnBudget { yieldTurn(context: context) }
        }
        decodeHeldFrames(context: context)
    }

    /// How many decoded frames a connection holds before the decoder leaves the rest of what was read in its buffer.
    /// A client that pipelines a burst and closes (or keeps waiting for a turn) costs the loop the decoding of about
    /// this many frames per turn, not of everything one read brought in.
    static let heldFrameLimit = 64

    /// Once every decoded frame is answered and this connection may answer more: decodes what the decoder held back
    /// (an empty read through the pipeline runs its decoding loop again).
    private func decodeHeldFrames(context: ChannelHandlerContext) {
        guard account.holdFrames, pending.isEmpty, !busy, !yielding, !closing, subscription == nil else { return }
        account.holdFrames = false
        context.channel.pipeline.syncOperations.fireChannelRead(NIOAny(ByteBuffer()))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // The loop goes on to the other connections' reads: the next reads from this one begin a new turn.
        turnStart = nil
        context.fireChannelReadComplete()
    }

    /// Ends this connection's turn: nothing more is read from it, and its pending frames wait in its event loop's
    /// ``TurnQueue`` behind the other connections that gave up their turn, with a poll of every socket between turns.
    private func yieldTurn(context: ChannelHandlerContext) {
        yielding = true
        reading(false, context: context)
        // Once the loop's current reads are handled: with no frame pending (a key operation's client waits for its
        // answer), the connection is read from again at once, in the loop's next poll.
        context.eventLoop.assumeIsolated().execute {
            guard !self.pending.isEmpty || self.account.holdFrames else { return self.resume(context: context) }
            self.server.turnQueue(context.eventLoop).enqueue {
                self.resume(context: context)
                self.drain(context: context)
            }
        }
    }

    private func answer(_ frame: ByteBuffer, context: ChannelHandlerContext) {
        guard let id, var caller, var peer, server.registry.begin(id) else {
            closing = true
            context.close(promise: nil)
            return
        }
        var request: WireRequest
        do {
            request = try frame.withUnsafeReadableBytes { raw in try WireRequest.decode(payload: raw) }
        } catch {
            let failure = error as? KeychainError ?? KeychainError(status: KeychainStatus.decode, message: "\(error)")
            guard failure.status == KeychainStatus.decode else {
                // A well-formed frame naming what the engine does not know (an item class, an accessibility): refused
                // with the engine's status, and the connection stays open as for any refused request.
                reply(.failure(failure), context: context)
                return
            }
            _ = server.registry.end(id)
            fail(context: context, failure)
            return
        }
        if case .subscribeLockState = request {
            _ = server.registry.end(id)
            subscribe(context: context)
            return
        }
        if case .onBehalf(let pid, let inner) = request {
            // A vouching client (the Secret Service bridge) acts for a process of its own uid: keyseald reads that
            // process's executable and unit itself; the client only names its pid.
            guard server.policy.vouches(for: peer, identity: identity) else {
                reply(
                    .failure(
                        KeychainError(
                            status: KeychainStatus.missingEntitlement,
                            message: "this client may not act for another process: it is not vouching in the policy"
                        )
                    ),
                    context: context
                )
                return
            }
            let vouched = PeerCredentials(pid: pid, uid: peer.uid, gid: peer.gid)
            let vouchedIdentity = PeerIdentity.resolve(peer: vouched, peerPidfd: nil).identity
            caller = server.policy.caller(for: vouched, identity: vouchedIdentity)
            peer = vouched
            request = inner
        }
        // The uid an authentication token is issued to and checked against (KeysealServer/Authentication.swift).
        (caller, request) = Self.authenticating(request, caller: caller, peer: peer)
        switch request {
        case .exportBackup, .importBegin, .importChunk, .importEnd:
            transfer(request, caller: caller, peer: peer, context: context)
            return
        default: break
        }
        if let response = server.service.answerOnEventLoop(request, caller: caller, peer: peer) {
            server.logger.trace("answered on the event loop", metadata: ["request.name": "\(request.name)"])
            reply(response, context: context)
            if KeychainService.keyOperationReference(request) != nil { yieldTurn(context: context) }
            return
        }
        server.logger.trace("answered on the thread pool", metadata: ["request.name": "\(request.name)"])
        answerOnPool(request, caller: caller, peer: peer, context: context)
    }

    /// A request for the thread pool. While it waits and while the pool works, nothing more is read from this client:
    /// what it pipelines waits in the socket. A client's lookup first waits for its uid's room in the response memory
    /// (the most it may gather), then its request for its uid's share of the pool (``DaemonLimits/poolRequestsPerUID``);
    /// an administrator's takes neither. The pool's share is given back when the answer is ready, and of the response
    /// memory the connection keeps what the answer takes until it is written.
    private func answerOnPool(
        _ request: WireRequest,
        caller: Caller,
        peer: PeerCredentials,
        context: ChannelHandlerContext
    ) {
        busy = true
        reading(false, context: context)
        let server = self.server
        let uid = peer.uid
        // Administrators are held to neither: root and keyseald's own uid are the system's services, which other
        // accounts' unread replies must not be able to stall.
        let reserved =
            caller.isAdministrator
            ? 0 : server.service.responseReservation(request, largest: server.responseMemory.largest)
        let share = caller.isAdministrator ? 0 : 1
        wait(for: reserved, of: server.responseMemory, uid: uid, context: context) {
            self.wait(for: share, of: server.poolShares, uid: uid, context: context) {
                server.service.answerOnPool(
                    request,
                    caller: caller,
                    peer: peer,
                    gathering: reserved > 0 ? reserved : nil,
                    eventLoop: context.eventLoop
                ).assumeIsolated().whenComplete { result in
                    server.poolShares.release(share, uid: uid)
                    self.busy = false
                    self.turnStart = nil
                    self.reading(true, context: context)
                    switch result {
                    case .success(let response): self.reply(response, context: context, holding: (reserved, uid))
                    case .failure(let error):  // the pool is shutting down
                        server.responseMemory.release(reserved, uid: uid)
                        self.reply(
                            .failure(
                                KeychainError(
                                    status: KeychainStatus.notAvailable,
                                    message: "keyseald is stopping: \(error)"
                                )
                            ),
                            context: context
                        )
                    }
                    self.drain(context: context)
                    self.armIdleTimer(context: context)
                }
            }
        }
    }

    /// Runs `then` once `uid` holds `amount` more of `allowance` (at once for 0). A connection that closes meanwhile
    /// withdraws its request, or gives back what was granted to it.
    private func wait(
        for amount: Int,
        of allowance: Allowance,
        uid: UInt32,
        context: ChannelHandlerContext,
        then body: @escaping () -> Void
    ) {
        guard amount > 0 else { return body() }
        let promise = context.eventLoop.makePromise(of: Void.self)
        waitingFor = (allowance, promise)
        promise.futureResult.assumeIsolated().whenComplete { result in
            self.waitingFor = nil
            guard case .success = result else { return }
            guard !self.closing else { return allowance.release(amount, uid: uid) }
            body()
        }
        allowance.acquire(amount, uid: uid, promise: promise)
    }

    /// Begins this connection's next turn: it is read from again unless a request went to the pool or its replies
    /// wait for it to read them.
    private func resume(context: ChannelHandlerContext) {
        yielding = false
        turnStart = nil
        guard !busy, !closing else { return }
        reading(true, context: context)
    }

    /// A backup transfer step, off the event loop: an export streams its chunks and then its report as the engine
    /// produces them; an import step answers with progress, or with the skipped items and the report. Nothing more
    /// is read from this client meanwhile, and no other reply can come between the frames of one step.
    private func transfer(_ request: WireRequest, caller: Caller, peer: PeerCredentials, context: ChannelHandlerContext)
    {
        busy = true
        reading(false, context: context)
        let service = server.service
        let channel = context.channel
        let session = backupImport
        let done = context.eventLoop.makePromise(of: Void.self)
        Task {
            if case .exportBackup(let passphrase, let availableOnly) = request {
                for await response in service.exportBackup(
                    passphrase: passphrase,
                    availableOnly: availableOnly,
                    caller: caller,
                    peer: peer
                ) {
                    var bytes = response.encodedFrame()
                    try? await channel.writeAndFlush(WipingAllocator.buffer(consuming: &bytes))
                }
            } else {
                for response in await service.handleImport(request, session: session, caller: caller, peer: peer) {
                    var bytes = response.encodedFrame()
                    try? await channel.writeAndFlush(WipingAllocator.buffer(consuming: &bytes))
                }
            }
            done.succeed()
        }
        done.futureResult.assumeIsolated().whenComplete { _ in
            self.busy = false
            self.reading(true, context: context)
            if let id = self.id, !self.server.registry.end(id) {
                self.closing = true
                context.close(promise: nil)
                return
            }
            self.drain(context: context)
            self.armIdleTimer(context: context)
        }
    }

    /// Writes the response: one frame, or several for a response over the frame limit (many or large records).
    /// `holding`: the response memory reserved for gathering it; the reply keeps what it takes (its records' size,
    /// or its frames') until written, and gives the rest back now.
    private func reply(
        _ response: WireResponse,
        context: ChannelHandlerContext,
        holding reserved: (bytes: Int, uid: UInt32)? = nil
    ) {
        func hold(_ bytes: Int) {
            guard let reserved, reserved.bytes > 0 else { return }
            let kept = min(bytes, reserved.bytes)
            server.responseMemory.release(reserved.bytes - kept, uid: reserved.uid)
            heldForReply = (kept, reserved.uid)
        }
        if case .records(let records) = response, response.sizeBound > Wire.maxFrame {
            hold(response.sizeBound)
            stream(RecordFrames(records), context: context)
            return
        }
        var frames = response.encodedFrames()
        // A response in parts is joined from each part's payload after its version and kind bytes.
        if frames.count > 1 && frames.reduce(0, { $0 + $1.count - 6 }) > Wire.maxResponse {
            // More than a client joins: say so instead of sending what it would refuse.
            for index in frames.indices { zeroize(&frames[index]) }
            frames = WireResponse.failure(
                KeychainError(
                    status: KeychainStatus.dataTooLarge,
                    message: "the result is over \(Wire.maxResponse) bytes; ask for fewer items or no data"
                )
            ).encodedFrames()
        }
        hold(frames.reduce(0) { $0 + $1.count })
        // Each frame is consumed in place (its array is referenced once), so wiping it reaches its bytes.
        for index in frames.indices {
            let written =
                heldForReply != nil && index == frames.count - 1 ? context.eventLoop.makePromise(of: Void.self) : nil
            context.write(wrapOutboundOut(WipingAllocator.buffer(consuming: &frames[index])), promise: written)
            written?.futureResult.assumeIsolated().whenComplete { _ in self.releaseReplyMemory() }
        }
        context.flush()
        if let id, !server.registry.end(id) {
            // Shutting down: this connection closes after its reply.
            closing = true
            context.close(promise: nil)
            return
        }
        // A client that sends without reading its replies: once what waits to be sent is over the high water mark,
        // nothing more is read or answered until it has read enough, so queued replies cost about one reply.
        if !context.channel.isWritable {
            waitingForReader = true
            busy = true
            reading(false, context: context)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if waitingForReader && context.channel.isWritable {
            waitingForReader = false
            busy = false
            reading(true, context: context)
            drain(context: context)
            armIdleTimer(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    /// A large result, frame by frame: each frame is encoded once the one before it is written, so that a client
    /// that reads slowly holds about one frame of the daemon's memory, not the whole encoded result. Nothing more
    /// is read from this client meanwhile.
    private func stream(_ frames: RecordFrames, context: ChannelHandlerContext) {
        busy = true
        reading(false, context: context)
        guard var frame = frames.next() else {
            finishStream(context: context)
            return
        }
        let buffer = WipingAllocator.buffer(consuming: &frame)
        context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated().whenComplete { result in
            switch result {
            case .success: self.stream(frames, context: context)
            case .failure:
                self.closing = true
                context.close(promise: nil)
                self.finishStream(context: context)
            }
        }
    }

    /// Gives back the response memory of the reply just written.
    private func releaseReplyMemory() {
        guard let held = heldForReply else { return }
        heldForReply = nil
        server.responseMemory.release(held.bytes, uid: held.uid)
    }

    private func finishStream(context: ChannelHandlerContext) {
        releaseReplyMemory()
        busy = false
        reading(true, context: context)
        if let id, !server.registry.end(id) {
            closing = true
            context.close(promise: nil)
            return
        }
        drain(context: context)
        armIdleTimer(context: context)
    }

    /// The subscription: the current lock state, then every change, until the peer closes or shutdown.
    private func subscribe(context: ChannelHandlerContext) {
        let broadcaster = server.service.broadcaster
        let (subscriber, stream) = broadcaster.subscribe()
        let current = server.service.store.lockState
        context.writeAndFlush(
            wrapOutboundOut(ByteBuffer(bytes: WireResponse.lockStateChanged(current).encodedFrame())),
            promise: nil
        )
        let channel = context.channel
        let task = Task {
            for await state in stream {
                let frame = ByteBuffer(bytes: WireResponse.lockStateChanged(state).encodedFrame())
                do {
                    try await channel.writeAndFlush(frame)
                } catch {
                    break
                }
            }
        }
        subscription = (subscriber, task)
        // A subscriber's input is left unread: what it had pipelined is dropped, and nothing more is held back.
        pending.removeAll()
        account.holdFrames = false
    }
}

/// The frames of a `.records` response, encoded one at a time; each record is let go once it is encoded.
/// Used only on its connection's event loop.
final class RecordFrames {
    private var records: [ItemRecord]
    private var index = 0
    private var encoder: WireRecordsEncoder
    /// The last frames, in reverse order, once every record is encoded.
    private var tail: [[UInt8]]?

    init(_ records: [ItemRecord]) {
        self.records = records
        encoder = WireRecordsEncoder(count: records.count)
    }

    /// The next frame; nil after the last.
    func next() -> [UInt8]? {
        while true {
            if tail != nil { return tail?.popLast() }
            if let part = encoder.nextPart() { return part }
            if index < records.count {
                encoder.append(records[index])
                records[index] = ItemRecord(itemClass: .genericPassword, attributes: [:])
                index += 1
            } else {
                tail = encoder.finish().reversed()
            }
        }
    }
}

/// The socket file and its directory.
enum SocketFiles {
    /// Creates the socket's directory if missing (0700, or 0750 owned by GROUP) and returns the group's gid.
    static func prepareDirectory(for socket: SocketConfiguration) throws -> gid_t? {
        var gid: gid_t?
        if let name = socket.group {
            guard let found = AccessPolicy.systemGroupID(name) ?? UInt32(name) else {
                throw KeychainError(KeychainStatus.param, "unknown socket group \(name)")
            }
            gid = found
        }
        // The path's directory part ("/" for a socket at the root, "" for a bare name).
        let directory =
            socket.path.lastIndex(of: "/").map { $0 == socket.path.startIndex ? "/" : String(socket.path[..<$0]) } ?? ""
        guard !directory.isEmpty else { return gid }
        var mode: UInt32 = 0
        if keyseal_file_mode(directory, 1, &mode) != 0 {
            guard mkdir(directory, gid == nil ? 0o700 : 0o750) == 0 || errno == EEXIST else {
                throw KeychainError(
                    KeychainStatus.io,
                    "cannot create the socket directory \(directory): \(String(cString: strerror(errno)))"
                )
            }
            if let gid {
                guard chown(directory, getuid(), gid) == 0, chmod(directory, 0o750) == 0 else {
                    throw KeychainError(
                        KeychainStatus.io,
                        "cannot give \(directory) to group \(socket.group ?? ""): \(String(cString: strerror(errno)))"
                    )
                }
            } else {
                _ = chmod(directory, 0o700)
            }
        }
        return gid
    }

    /// Removes a socket file left by a daemon that is gone; refuses when a daemon still answers on it.
    static func removeStaleSocket(_ path: String) throws {
        var mode: UInt32 = 0
        guard keyseal_file_mode(path, 0, &mode) == 0 else { return }
        guard mode & S_IFMT == S_IFSOCK else {
            throw KeychainError(KeychainStatus.param, "\(path) exists and is not a socket")
        }
        let probe = KeysealConnection(socketPath: path)
        if (try? probe.connect()) != nil {
            probe.disconnect()
            throw KeychainError(KeychainStatus.notAvailable, "another keyseald is already listening on \(path)")
        }
        unlink(path)
    }

    static func setPermissions(_ path: String, gid: gid_t?) throws {
        if let gid {
            guard chown(path, getuid(), gid) == 0, chmod(path, 0o660) == 0 else {
                throw KeychainError(
                    KeychainStatus.io,
                    "cannot set the socket's group: \(String(cString: strerror(errno)))"
                )
            }
        } else {
            guard chmod(path, 0o600) == 0 else {
                throw KeychainError(
                    KeychainStatus.io,
                    "cannot set the socket's mode: \(String(cString: strerror(errno)))"
                )
            }
        }
    }

    static func remove(_ path: String) { unlink(path) }
}
