import Foundation
import Keyseal
import KeysealCore

/// The directory holding the built executables (next to the test bundle), or `KEYSEAL_BIN_DIR`.
public func builtProductsDirectory() throws -> URL {
    if let dir = ProcessInfo.processInfo.environment["KEYSEAL_BIN_DIR"], !dir.isEmpty {
        return URL(fileURLWithPath: dir)
    }
    var candidates: [URL] = []
    if let executable = Bundle.main.executableURL { candidates.append(executable.deletingLastPathComponent()) }
    let selfExe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    candidates.append(selfExe.deletingLastPathComponent())
    candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent())
    for candidate in candidates {
        // The test binary is `.build/debug/KeysealPackageTests.xctest` (a file on Linux, a bundle elsewhere).
        for directory in [candidate, candidate.deletingLastPathComponent()]
        where FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent("keyseald").path) {
            return directory
        }
    }
    throw FixtureError("keyseald is not built next to the tests; run swift build --build-tests")
}

/// A keyseald process on a temporary store, with its own socket. Stop with ``stop()``, remove with ``remove()``.
///
/// Test daemons run with the smallest Argon2id cost (`KEYSEAL_TESTING_ARGON2=minimal`, honoured only by debug
/// builds of keyseald) unless `productArgon2` is set, so that passcode calls take microseconds as they do in the
/// engine's suites.
public final class DaemonFixture: @unchecked Sendable {
    public enum Backend: String, CustomStringConvertible, CaseIterable, Sendable {
        case hostKey = "host-key"
        /// `--backend swtpm`: keyseald starts and supervises its own swtpm.
        case swtpm
        /// `--backend tpm --tcti swtpm:…`: a swtpm fixture of the tests' own (dictionary-attack limits set).
        case tpm
        case pkcs11
        /// `--backend tpm --tcti tabrmd:bus_type=session`: a TPM behind tpm2-abrmd on a private session bus
        /// (``ResourceManagerFixture``), the way many devices reach theirs.
        case tabrmd

        public var description: String { rawValue }
    }

    public let backend: Backend
    public let root: TemporaryDirectory
    public let softhsm: SoftHSMFixture?
    public let swtpm: SwtpmFixture?
    /// The tpm2-abrmd (and its swtpm) behind `.tabrmd`.
    public let broker: ResourceManagerFixture?
    public var extraArguments: [String]
    /// Variables added to keyseald's environment at its next start.
    public var extraEnvironment: [String: String] = [:]
    public var productArgon2: Bool
    public private(set) var process: Process?
    private var logHandle: FileHandle?

    public var storeDirectory: URL { root.appending("store") }
    public var socketPath: String { root.appending("run/keyseal.sock").path }
    public var logPath: String { root.appending("keyseald.log").path }
    public var hostKeyPath: String { root.appending("host.key").path }

    /// - Parameter tpmLimits: for `.tpm`, the swtpm's dictionary-attack limits (default: the fixture's 5 tries, 60 s,
    ///   2 s; swtpm's own defaults are 3, 1000, 1000).
    /// - Parameter endorsementCA: for `.tpm`, a TPM made with an EK certificate by this CA (``SwtpmFixture``).
    public init(
        _ backend: Backend = .hostKey,
        arguments: [String] = [],
        start: Bool = true,
        productArgon2: Bool = false,
        tpmLimits: (maxTries: Int, recoveryTime: Int, lockoutRecovery: Int)? = nil,
        endorsementCA: TemporaryDirectory? = nil
    ) throws {
        self.backend = backend
        root = try TemporaryDirectory(prefix: "keyseald")
        if backend == .swtpm { _ = try requireTool("swtpm", package: "swtpm") }
        softhsm = backend == .pkcs11 ? try SoftHSMFixture() : nil
        let limits = tpmLimits ?? (5, 60, 2)
        broker = backend == .tabrmd ? try ResourceManagerFixture(maxTries: limits.maxTries) : nil
        swtpm =
            backend == .tpm
            ? try SwtpmFixture(
                maxTries: limits.maxTries,
                recoveryTime: limits.recoveryTime,
                lockoutRecovery: limits.lockoutRecovery,
                endorsementCA: endorsementCA
            )
            : broker?.swtpm
        extraArguments = arguments
        self.productArgon2 = productArgon2
        if start { try self.start() }
    }

    /// The device key the daemon uses, for an embedded store on the same directory.
    public var device: DeviceKey {
        switch backend {
        case .hostKey: return .hostKey(file: URL(fileURLWithPath: hostKeyPath))
        case .swtpm: return .tpm(tcti: "swtpm:path=\(storeDirectory.appendingPathComponent("swtpm/swtpm.sock").path)")
        case .tpm: return .tpm(tcti: swtpm?.tcti ?? "")
        case .tabrmd: return .tpm(tcti: broker?.tcti ?? "")
        case .pkcs11:
            return .pkcs11(module: softhsm?.module ?? "", token: softhsm?.tokenLabel ?? "", pinFile: softhsm?.pinFile)
        }
    }

    public var arguments: [String] {
        var arguments = ["--store", storeDirectory.path, "--socket", socketPath]
        switch backend {
        case .hostKey: arguments += ["--backend", "host-key", "--host-key", hostKeyPath]
        case .swtpm: arguments += ["--backend", "swtpm"]
        case .tpm: arguments += ["--backend", "tpm", "--tcti", swtpm?.tcti ?? ""]
        case .tabrmd: arguments += ["--backend", "tpm", "--tcti", broker?.tcti ?? ""]
        case .pkcs11:
            guard let softhsm else { break }
            arguments += [
                "--backend", "pkcs11", "--pkcs11-module", softhsm.module, "--pkcs11-token", softhsm.tokenLabel,
                "--pkcs11-pin-file", softhsm.pinFile.path,
            ]
        }
        return arguments + ["--log-level", "info"] + extraArguments
    }

    /// The environment keyseald runs with: SoftHSM2's configuration and the testing Argon2id cost.
    public var environment: [String: String] {
        var environment = fixtureEnvironment.merging(softhsm?.environment ?? [:]) { _, new in new }
        environment.merge(broker?.environment ?? [:]) { _, new in new }
        environment["KEYSEAL_TESTING_ARGON2"] = productArgon2 ? nil : "minimal"
        environment.merge(extraEnvironment) { _, new in new }
        return environment
    }

    /// Starts keyseald and waits until its socket accepts connections.
    public func start() throws {
        let process = Process()
        process.executableURL = try builtProductsDirectory().appendingPathComponent("keyseald")
        process.arguments = arguments
        process.environment = environment
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(
                atPath: logPath,
                contents: nil,
                attributes: [.posixPermissions: 0o600]
            )
        }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process = process
        logHandle = log
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if !process.isRunning {
                throw FixtureError("keyseald exited with \(process.terminationStatus): \(log_())")
            }
            if (try? probeConnect()) == true { return }
            usleep(5_000)
        }
        throw FixtureError("keyseald did not listen on \(socketPath) within 30 s: \(log_())")
    }

    public func log_() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    private func probeConnect() throws -> Bool {
        let store = try KeychainStore.daemon(socket: socketPath)
        defer { store.close() }
        _ = try store.status()
        return true
    }

    /// A daemon-mode store on this daemon's socket.
    public func client() throws -> KeychainStore { try KeychainStore.daemon(socket: socketPath) }

    /// Sends `signal` and waits for the exit; returns the exit status.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM) -> Int32 {
        guard let process else { return 0 }
        if process.isRunning { kill(process.processIdentifier, signal) }
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning && Date() < deadline { usleep(2_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitForExit()
        }
        self.process = nil
        try? logHandle?.close()
        logHandle = nil
        return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    }

    public func restart() throws {
        stop()
        try start()
    }

    public func remove() {
        stop()
        swtpm?.stop()
        broker?.remove()
        softhsm?.remove()
        root.remove()
    }

    /// Runs keyseald with `arguments` to completion (for start-up errors).
    public static func runToCompletion(
        _ arguments: [String],
        environment: [String: String]? = nil
    ) throws
        -> ProcessResult
    {
        try runProcess(
            try builtProductsDirectory().appendingPathComponent("keyseald").path,
            arguments,
            environment: environment
        )
    }
}

extension DaemonFixture {
    /// A started daemon that uid 65534 can reach: socket group 65534 and a traversable root.
    public static func sharedWithNobody(
        _ arguments: [String] = [],
        backend: Backend = .hostKey,
        environment: [String: String] = [:],
        tpmLimits: (maxTries: Int, recoveryTime: Int, lockoutRecovery: Int)? = nil
    ) throws -> DaemonFixture {
        let daemon = try DaemonFixture(
            backend,
            arguments: ["--socket-group", "65534"] + arguments,
            start: false,
            tpmLimits: tpmLimits
        )
        daemon.extraEnvironment = environment
        chmod(daemon.root.path, 0o711)
        try daemon.start()
        return daemon
    }

    /// Runs `keyseal-wire-probe` on this daemon's socket as uid 65534 (needs root) and returns its one line.
    public func probeAsNobody(_ arguments: [String]) throws -> String { try probe(asUID: 65534, arguments) }

    /// Runs `keyseal-wire-probe` on this daemon's socket as `uid` in group 65534, the socket's group of
    /// ``sharedWithNobody(_:backend:)`` (needs root), and returns its one line.
    public func probe(asUID uid: UInt32, _ arguments: [String]) throws -> String {
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let probe = try builtProductsDirectory().appendingPathComponent("keyseal-wire-probe").path
        return try runProcess(
            setpriv,
            ["--reuid", "\(uid)", "--regid", "65534", "--clear-groups", probe, socketPath] + arguments
        ).stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
