import FoundationEssentials
import Glibc
import Keyseal
import KeysealClient
import KeysealCore
import Logging
import NIOCore
import NIOPosix

/// Serves one connection on its event loop: decodes each frame, answers short requests at once (a lookup, an add,
/// status) and long ones (unlock, passcode changes, many matches) on the thread pool, one request at a time and
/// in order; a subscription then only receives lock-state events. A malformed, oversized or stalled frame gets
/// one failure response and closes this connection only. A connection over its uid's limit gets one errSecAllocate
/// response and is closed; one that holds no subscription is closed after the idle timeout without a request, and one
/// that leaves a reply unread for the idle timeout is closed too.
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
    /// Identifying, answering, busy, waiting for the reader, yielding its turn or closing, and the changes between.
    private var state = ConnectionStateMachine()
    /// When this connection's current turn of answers on the event loop began.
    private var turnStart: NIODeadline?
    private var subscription: (id: Int, task: Task<Void, Never>)?
    /// The allowance this connection's request waits for (pool share, response memory), withdrawn if it closes.
    private var waitingFor: (allowance: Allowance, promise: EventLoopPromise<Void>)?
    /// The response memory the reply being written holds, given back once it is written (or cannot be).
    private var heldForReply: (bytes: Int, uid: UInt32)?
    /// Armed while a reply waits for its client to read it: it holds response memory, or what waits to be sent is over
    /// the high water mark. At the idle timeout the connection is closed, and what its reply held is given back.
    private var writeDeadline: Scheduled<Void>?
    /// The backup import in progress on this connection, if any.
    private let backupImport = BackupImportSession()
    /// The keys keyseald holds for this connection and never stores (PKCS#11 session keys, by their wire reference):
    /// only this connection may use or release them, and they are released when it closes.
    private var sessionKeys = Set<Data>()
    /// The most keys one connection may hold (each may be an object in the token or TPM's memory).
    static let sessionKeyLimit = 64

    init(server: SocketServer, account: ConnectionAccount) {
        self.server = server
        self.account = account
    }

    /// Turns reading from this connection on or off (`autoRead`) as a change of state asks, noting since when it
    /// reads for the stall timer.
    private func perform(_ action: ConnectionStateMachine.ReadingAction, context: ChannelHandlerContext) {
        let on: Bool
        switch action {
        case .startReading: on = true
        case .stopReading: on = false
        case .none: return
        }
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
        perform(state.identified(), context: context)
    }

    /// Serves this connection again as a change of state asks: reads again if it stopped, answers its pending frames
    /// and arms the idle timer.
    private func perform(_ action: ConnectionStateMachine.ServeAction, context: ChannelHandlerContext) {
        switch action {
        case .startReading: perform(ConnectionStateMachine.ReadingAction.startReading, context: context)
        case .serve: break
        case .none: return
        }
        drain(context: context)
        armIdleTimer(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Frames the client sent before it went are not answered: a queued turn of this connection does nothing.
        state.close()
        pending.removeAll()
        if let waitingFor { waitingFor.allowance.cancel(waitingFor.promise) }
        backupImport.discard()
        if !sessionKeys.isEmpty { server.service.releaseSessionKeys(sessionKeys) }
        sessionKeys = []
        if let id { server.registry.remove(id) }
        id = nil
        idleTimer?.cancel()
        idleTimer = nil
        writeDeadline?.cancel()
        writeDeadline = nil
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
        guard subscription == nil, !state.isClosing else { return }  // a subscriber's input is left unread
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
        guard state.isIdle, subscription == nil, idleTimer == nil else { return }
        let nanoseconds = timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
        idleTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: lastActivity + .nanoseconds(nanoseconds))
        {
            self.idleTimer = nil
            guard self.state.isIdle, self.subscription == nil else { return }
            guard NIODeadline.now() >= self.lastActivity + .nanoseconds(nanoseconds) else {
                self.armIdleTimer(context: context, activity: false)
                return
            }
            self.server.logger.debug(
                "closing an idle connection",
                metadata: ["peer": "\(self.peer.map { "\($0)" } ?? "?")"]
            )
            self.state.close()
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
        guard state.close() else { return }
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
        while state.mayAnswer, subscription == nil, let frame = pending.popFirst() {
            let start = turnStart ?? .now()
            turnStart = start
            answer(frame, context: context)
            if state.mayAnswer, NIODeadline.now() - start > Self.turnBudget { yieldTurn(context: context) }
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
        guard account.holdFrames, pending.isEmpty, state.mayAnswer, subscription == nil else { return }
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
        let action = state.turnEnded()
        guard action != .none else { return }  // closing: no turn to wait for
        perform(action, context: context)
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
            state.close()
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
        if let refusal = sessionKeyRefusal(request) {
            reply(.failure(refusal), context: context)
            return
        }
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
    /// (a first part of the most it may gather, ``KeychainService/firstPart``), then its request for its uid's share of
    /// the pool (``DaemonLimits/poolRequestsPerUID``); an administrator's takes neither. The pool's share is given back
    /// when the answer is ready, and of the response memory the connection keeps what the answer takes until it is
    /// written. A result over the first part is gathered again once the connection holds the whole.
    private func answerOnPool(
        _ request: WireRequest,
        caller: Caller,
        peer: PeerCredentials,
        context: ChannelHandlerContext
    ) {
        perform(state.workStarted(), context: context)
        // Administrators are held to neither: root and keyseald's own uid are the system's services, which other
        // accounts' unread replies must not be able to stall.
        let gathering =
            caller.isAdministrator
            ? nil : server.service.responseReservation(request, largest: server.responseMemory.largest)
        runOnPool(request, caller: caller, peer: peer, gathering: gathering, context: context)
    }

    private func runOnPool(
        _ request: WireRequest,
        caller: Caller,
        peer: PeerCredentials,
        gathering: KeychainService.Gathering?,
        context: ChannelHandlerContext
    ) {
        let server = self.server
        let uid = peer.uid
        let reserved = gathering?.bytes ?? 0
        let share = caller.isAdministrator ? 0 : 1
        wait(for: reserved, of: server.responseMemory, uid: uid, context: context) {
            self.wait(for: share, of: server.poolShares, uid: uid, context: context) {
                server.service.answerOnPool(
                    request,
                    caller: caller,
                    peer: peer,
                    gathering: gathering,
                    eventLoop: context.eventLoop
                ).assumeIsolated().whenComplete { result in
                    server.poolShares.release(share, uid: uid)
                    if case .success(nil) = result, let gathering {
                        // Over its first part: the part is given back, and the lookup waits for the whole.
                        server.responseMemory.release(reserved, uid: uid)
                        self.runOnPool(
                            request,
                            caller: caller,
                            peer: peer,
                            gathering: gathering.asWhole,
                            context: context
                        )
                        return
                    }
                    self.turnStart = nil
                    self.perform(self.state.workFinished(), context: context)
                    switch result {
                    case .success(let response):
                        self.reply(
                            response
                                ?? .failure(
                                    KeychainError(
                                        status: KeychainStatus.internalComponent,
                                        message: "a lookup over its whole reservation"
                                    )
                                ),
                            context: context,
                            holding: (reserved, uid)
                        )
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
            guard !self.state.isClosing else { return allowance.release(amount, uid: uid) }
            body()
        }
        allowance.acquire(amount, uid: uid, promise: promise)
    }

    /// Begins this connection's next turn: it is read from again unless a request went to the pool or its replies
    /// wait for it to read them.
    private func resume(context: ChannelHandlerContext) {
        turnStart = nil
        perform(state.turnBegan(), context: context)
    }

    /// A backup transfer step, off the event loop: an export streams its chunks and then its report as the engine
    /// produces them; an import step answers with progress, or with the skipped items and the report. Nothing more
    /// is read from this client meanwhile, and no other reply can come between the frames of one step.
    private func transfer(_ request: WireRequest, caller: Caller, peer: PeerCredentials, context: ChannelHandlerContext)
    {
        perform(state.workStarted(), context: context)
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
            self.perform(self.state.workFinished(), context: context)
            guard self.requestEnded(context: context) else { return }
            self.drain(context: context)
            self.armIdleTimer(context: context)
        }
    }

    /// Refuses a request that would use or release a key held for another connection (or none), and a new one over
    /// ``sessionKeyLimit``; a release is taken off this connection's keys here.
    private func sessionKeyRefusal(_ request: WireRequest) -> KeychainError? {
        switch request {
        case .authenticated(_, let inner), .onBehalf(_, let inner):
            return sessionKeyRefusal(inner)
        case .generateKey(let generation) where !generation.isPermanent:
            guard sessionKeys.count < Self.sessionKeyLimit else {
                return KeychainError(
                    status: KeychainStatus.allocate,
                    message: "a connection may hold at most \(Self.sessionKeyLimit) keys that are not stored"
                )
            }
        case .keyOperation(let operation) where WireMapping.isSessionReference(operation.reference):
            guard sessionKeys.contains(operation.reference) else { return KeychainError.itemNotFound }
        case .createCSR(let reference, _) where WireMapping.isSessionReference(reference):
            return KeychainError.itemNotFound
        case .delete(let query):
            guard let reference = query.persistentRef, WireMapping.isSessionReference(reference) else { return nil }
            guard sessionKeys.remove(reference) != nil else { return KeychainError.itemNotFound }
        default:
            break
        }
        return nil
    }

    /// Writes the response: one frame, or several for a response over the frame limit (many or large records).
    /// `holding`: the response memory reserved for gathering it; the reply keeps what it takes (its records' size,
    /// or its frames') until written, and gives the rest back now.
    private func reply(
        _ response: WireResponse,
        context: ChannelHandlerContext,
        holding reserved: (bytes: Int, uid: UInt32)? = nil
    ) {
        // A key made for this connection is its own from now on; one made for a connection that closed meanwhile is
        // released at once.
        if case .key(let key) = response, WireMapping.isSessionReference(key.reference) {
            if id == nil || state.isClosing {
                server.service.releaseSessionKeys([key.reference])
            } else {
                sessionKeys.insert(key.reference)
            }
        }
        func hold(_ bytes: Int) {
            guard let reserved, reserved.bytes > 0 else { return }
            let kept = min(bytes, reserved.bytes)
            server.responseMemory.release(reserved.bytes - kept, uid: reserved.uid)
            heldForReply = (kept, reserved.uid)
            updateWriteDeadline(context: context)
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
            written?.futureResult.assumeIsolated().whenComplete { _ in self.releaseReplyMemory(context: context) }
        }
        context.flush()
        updateWriteDeadline(context: context)
        // Shutting down: this connection closes after its reply.
        guard requestEnded(context: context) else { return }
        // A client that sends without reading its replies: once what waits to be sent is over the high water mark,
        // nothing more is read or answered until it has read enough, so queued replies cost about one reply.
        perform(state.replied(writable: context.channel.isWritable), context: context)
    }

    /// Tells the registry that the request in flight has ended; when the server is shutting down, closes this
    /// connection and returns false.
    private func requestEnded(context: ChannelHandlerContext) -> Bool {
        guard let id, !server.registry.end(id) else { return true }
        state.close()
        context.close(promise: nil)
        return false
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        updateWriteDeadline(context: context)
        perform(state.writabilityChanged(writable: context.channel.isWritable), context: context)
        context.fireChannelWritabilityChanged()
    }

    /// A large result, frame by frame: each frame is encoded once the one before it is written, so that a client
    /// that reads slowly holds about one frame of the daemon's memory, not the whole encoded result. Nothing more
    /// is read from this client meanwhile.
    private func stream(_ frames: RecordFrames, context: ChannelHandlerContext) {
        perform(state.workStarted(), context: context)
        guard var frame = frames.next() else {
            finishStream(context: context)
            return
        }
        let buffer = WipingAllocator.buffer(consuming: &frame)
        context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated().whenComplete { result in
            switch result {
            case .success: self.stream(frames, context: context)
            case .failure:
                self.state.close()
                context.close(promise: nil)
                self.finishStream(context: context)
            }
        }
    }

    /// Gives back the response memory of the reply just written.
    private func releaseReplyMemory(context: ChannelHandlerContext) {
        guard let held = heldForReply else { return }
        heldForReply = nil
        server.responseMemory.release(held.bytes, uid: held.uid)
        updateWriteDeadline(context: context)
    }

    /// Arms the write deadline while a reply waits for its reader (``writeDeadline``), and disarms it once none does.
    /// A client that never reads its replies would otherwise keep the memory they hold (its uid's, and a part of every
    /// uid's) for as long as it keeps the connection open: the idle timeout closes only connections with nothing in
    /// flight.
    private func updateWriteDeadline(context: ChannelHandlerContext) {
        guard heldForReply != nil || !context.channel.isWritable, !state.isClosing else {
            writeDeadline?.cancel()
            writeDeadline = nil
            return
        }
        guard writeDeadline == nil, let timeout = server.service.limits.idleTimeout else { return }
        let nanoseconds = timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
        writeDeadline = context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(nanoseconds)) {
            self.writeDeadline = nil
            guard self.heldForReply != nil || !context.channel.isWritable, self.state.close() else { return }
            self.server.logger.info(
                "closing a connection that does not read its reply",
                metadata: ["peer": "\(self.peer.map { "\($0)" } ?? "?")"]
            )
            context.close(promise: nil)
        }
    }

    private func finishStream(context: ChannelHandlerContext) {
        releaseReplyMemory(context: context)
        perform(state.workFinished(), context: context)
        guard requestEnded(context: context) else { return }
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
