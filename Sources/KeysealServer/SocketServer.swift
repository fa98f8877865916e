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
