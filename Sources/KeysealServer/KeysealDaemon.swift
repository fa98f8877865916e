import FoundationEssentials
import Glibc
import Keyseal
import KeysealCore
import KeysealTPM
import Logging
import NIOPosix
import ServiceLifecycle
import UnixSignals

/// What keyseald is started with (docs/COMMAND-LINE.md, "keyseald").
public struct DaemonOptions: Sendable {
    public enum Backend: Sendable {
        case tpm(tcti: String)
        /// A private swtpm, state in `DIR/swtpm` (development; not hardware-backed).
        case swtpm
        case pkcs11(module: String, token: String, pinFile: URL?)
        case hostKey(file: URL?)
    }

    public enum AutoLock: Sendable, Equatable {
        /// The store's setting.
        case stored
        case seconds(Int)
        case never
    }

    public var storeDirectory: URL
    public var socket: SocketConfiguration
    public var backend: Backend
    public var autoLock: AutoLock
    public var policyFile: URL?
    /// How long a connection may hold an incomplete frame before it is closed (`--frame-timeout`).
    public var frameTimeout: Duration
    /// Seconds after an unlock at which the store locks whatever the activity (`--max-unlocked`; nil: never).
    public var maxUnlocked: Int?
    /// What one local account may take of the daemon (`--max-connections`, `--quota-items`, …).
    public var limits: DaemonLimits
    /// Argon2id cost for a new passcode; nil: the product's (64 MiB, t=3). Only debug builds of keyseald let tests
    /// lower it.
    public var argon2: Argon2Parameters?
    /// `--tpm-pcrs`: the PCRs a new TPM store's device and passcode objects are bound to (empty: unbound).
    public var tpmPCRs: [Int] = []
    /// `--tpm-pcr-public-key`: a new TPM store is bound with `PolicyAuthorize` to PCR policies this key (a PEM file)
    /// signs (docs/TPM.md "Signed PCR policies").
    public var tpmPCRPublicKeyFile: URL?
    /// `--tpm-pcr-signatures`: where signed PCR policies are read (nil: /etc/keyseal/pcr-signatures); the store's own
    /// `pcr-signatures` directory is read after it.
    public var tpmPCRSignatureDirectory: URL?
    /// `--checkpoint-interval`: seconds between checkpoints of the item ledger on the anti-rollback counter.
    public var checkpointInterval: TimeInterval = KeychainStore.Configuration.defaultCheckpointInterval
    /// The time within which a key operation counts as fast, so that the key's next ones may run on the event loop
    /// (nil: 2 ms). Only debug builds of keyseald let tests change it.
    public var keyOperationBound: Duration?
    /// The delays after failed passcode tries (nil: the product's, ``PasscodePolicy/standard``). Only debug builds of
    /// keyseald let tests change it.
    public var passcodePolicy: PasscodePolicy?

    public init(
        storeDirectory: URL,
        socket: SocketConfiguration,
        backend: Backend,
        autoLock: AutoLock = .stored,
        policyFile: URL? = nil,
        frameTimeout: Duration = SocketServer.defaultFrameTimeout,
        maxUnlocked: Int? = nil,
        limits: DaemonLimits = DaemonLimits(),
        argon2: Argon2Parameters? = nil
    ) {
        self.maxUnlocked = maxUnlocked
        self.limits = limits
        self.storeDirectory = storeDirectory
        self.socket = socket
        self.backend = backend
        self.autoLock = autoLock
        self.policyFile = policyFile
        self.frameTimeout = frameTimeout
        self.argon2 = argon2
    }
}

/// The daemon: the store, its device, the socket server, auto-lock and (for `--backend swtpm`) a supervised
/// swtpm, as one `ServiceGroup` that shuts down gracefully on SIGTERM and SIGINT.
public final class KeysealDaemon: Sendable {
    public let options: DaemonOptions
    public let store: KeychainStore
    let swtpm: SwtpmProcess?
    let policy: AccessPolicy
    let logger: Logger

    /// Opens (or creates and provisions) the store. Every failure is a KeychainError with a one-line message,
    /// and the store is left as it was.
    public init(options: DaemonOptions, logger: Logger) throws {
        self.options = options
        self.logger = logger
        policy = try options.policyFile.map { try AccessPolicy.load(file: $0) } ?? AccessPolicy()
        var swtpm: SwtpmProcess?
        let device: DeviceKey
        let pcrPolicyKey = try options.tpmPCRPublicKeyFile.map(Self.pcrPolicyKey)
        let signatureDirectories = [
            options.tpmPCRSignatureDirectory?.path ?? "/etc/keyseal/pcr-signatures",
            options.storeDirectory.appendingPathComponent("pcr-signatures").path,
        ]
        switch options.backend {
        case .tpm(let tcti):
            device = .tpm(
                tcti: tcti,
                pcrs: options.tpmPCRs,
                pcrPolicyKey: pcrPolicyKey,
                signatureDirectories: signatureDirectories
            )
        case .swtpm:
            let process = SwtpmProcess(
                stateDirectory: options.storeDirectory.appendingPathComponent("swtpm"),
                logger: logger
            )
            try Self.createStoreDirectory(options.storeDirectory)
            try process.start()
            swtpm = process
            device = .tpm(
                tcti: process.tcti,
                pcrs: options.tpmPCRs,
                pcrPolicyKey: pcrPolicyKey,
                signatureDirectories: signatureDirectories
            )
        case .pkcs11(let module, let token, let pinFile):
            device = .pkcs11(module: module, token: token, pinFile: pinFile)
        case .hostKey(let file): device = .hostKey(file: file ?? DeviceKey.defaultHostKeyFile)
        }
        do {
            var configuration = KeychainStore.Configuration()
            if let argon2 = options.argon2 { configuration.argon2 = argon2 }
            configuration.checkpointInterval = options.checkpointInterval
            if let policy = options.passcodePolicy { configuration.passcodePolicy = policy }
            store = try KeychainStore.embedded(
                directory: options.storeDirectory,
                device: device,
                configuration: configuration
            )
        } catch {
            swtpm?.stop()
            throw error
        }
        self.swtpm = swtpm
        if store.recoveryRequired {
            logger.warning(
                "recovery required: the TPM's PCRs no longer have the values this store was sealed to; nothing that needs the device secret is served until `keyseal recover`",
                metadata: ["store.path": "\(store.location)"]
            )
        }
        if let ledger = try? store.status().ledger, !ledger.verified {
            logger.warning(
                "the store's generation ledger failed verification",
                metadata: ["store.path": "\(store.location)", "ledger": "\(ledger.summary)"]
            )
        }
    }

    /// One event loop serves every connection: the engine answers one call at a time anyway, and a second loop
    /// only adds lock contention between the two (8 clients measured slower than one).
    static let connectionLoop = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    /// The public key of `--tpm-pcr-public-key` (PEM, RSA 2048 or P-256).
    private static func pcrPolicyKey(_ file: URL) throws -> PCRPolicyKey {
        guard let data = FileManager.default.contents(atPath: file.path), data.count < 65536 else {
            throw KeychainError(KeychainStatus.param, "cannot read the PCR policy public key \(file.path)")
        }
        return try PCRPolicyKey(pemRepresentation: String(decoding: data, as: UTF8.self))
    }

    private static func createStoreDirectory(_ directory: URL) throws {
        do {
            try FileManager.default.createDirectory(
                at: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw KeychainError(KeychainStatus.io, "cannot create the store directory \(directory.path)")
        }
    }

    /// `--tpm-protect-lockout`: sets a random TPM lockout authorization and returns it, once.
    public func protectHardwareLockout() throws -> SecretBytes { try store.protectHardwareLockout() }

    /// `--tpm-protect-lockout`: sets a random TPM lockout authorization once `keep` has put it somewhere durable.
    public func protectHardwareLockout(keeping keep: (SecretBytes) throws -> Void) throws {
        try store.protectHardwareLockout(keeping: keep)
    }

    /// Serves until SIGTERM or SIGINT: finishes in-flight requests, closes every connection, removes the socket,
    /// closes the store (zeroizing its keys) and stops a private swtpm.
    public func run(ready: @escaping @Sendable () -> Void = {}) async throws {
        defer {
            store.close()
            swtpm?.stop()
        }
        let autoLock: Int?
        switch options.autoLock {
        case .stored:
            // A store waiting for recovery has no verified setting yet: the default until it is recovered.
            autoLock = store.recoveryRequired ? 300 : try store.autoLockSeconds()
        case .seconds(let seconds): autoLock = seconds
        case .never: autoLock = nil
        }
        let isSoftwareTPM = if case .swtpm = options.backend { true } else { false }
        let service = KeychainService(
            store: store,
            autoLockSeconds: autoLock,
            maxUnlockedSeconds: options.maxUnlocked,
            limits: options.limits,
            softwareTPM: isSoftwareTPM,
            keyOperationBound: options.keyOperationBound,
            logger: logger
        )
        let server = SocketServer(
            socket: options.socket,
            service: service,
            policy: policy,
            logger: logger,
            group: Self.connectionLoop,
            frameTimeout: options.frameTimeout,
            ready: ready
        )
        // Services shut down in reverse order: the server first (in-flight requests finish), then the rest.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let swtpm { services.append(.init(service: swtpm.supervisor)) }
        services.append(.init(service: AutoLockService(service: service)))
        services.append(.init(service: server, successTerminationBehavior: .gracefullyShutdownGroup))
        var configuration = ServiceGroupConfiguration(
            services: services,
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        configuration.maximumGracefulShutdownDuration = .seconds(30)
        try await ServiceGroup(configuration: configuration).run()
        logger.info("stopped", metadata: ["store.path": "\(store.location)"])
    }
}
