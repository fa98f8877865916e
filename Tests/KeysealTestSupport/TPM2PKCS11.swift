import Foundation
import Glibc
import Synchronization

/// tpm2-abrmd, the TPM2 access broker and resource manager, on its own swtpm and a private D-Bus session bus: every
/// process is this fixture's own, and `remove()` stops them. TCTI `tabrmd:bus_type=session` with ``environment``.
public final class ResourceManagerFixture: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let swtpm: SwtpmFixture
    public var busAddress: String { "unix:path=\(directory.appending("bus").path)" }
    public let tcti = "tabrmd:bus_type=session"
    /// Who may call tpm2-abrmd on its bus.
    public enum BusPolicy: Sendable {
        /// A session bus's policy: every connection may call every service.
        case open
        /// The system bus's policy (everything denied unless allowed) with the rules tpm2-abrmd's Debian package
        /// installs (`/etc/dbus-1/system.d/tpm2-abrmd.conf`: users and groups `root` and `tss` only), on a bus
        /// socket every local user can reach: a caller outside those is refused with AccessDenied.
        case tss
    }
    public let busPolicy: BusPolicy
    private let maxConnections: Int?
    private var bus: Process?
    private var abrmd: Process?

    /// What a process that uses the TPM through this tabrmd needs (the bus; tpm2-tools' TCTI; quiet tpm2-tss).
    public var environment: [String: String] {
        var environment = fixtureEnvironment
        environment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
        environment["TPM2TOOLS_TCTI"] = tcti
        environment["TSS2_LOG"] = "all+NONE"
        return environment
    }

    /// - Parameters:
    ///   - maxTries: the TPM's TPM2_PT_MAX_AUTH_FAIL.
    ///   - maxConnections: tpm2-abrmd's `--max-connections` (its default is 27).
    ///   - busPolicy: who may call tpm2-abrmd.
    public init(maxTries: Int = 5, maxConnections: Int? = nil, busPolicy: BusPolicy = .open) throws {
        for (tool, package) in [("dbus-daemon", "dbus"), ("tpm2-abrmd", "tpm2-abrmd")] {
            _ = try requireTool(tool, package: package)
        }
        self.maxConnections = maxConnections
        self.busPolicy = busPolicy
        directory = try TemporaryDirectory(prefix: "keyseal-tabrmd")
        swtpm = try SwtpmFixture(maxTries: maxTries)
        do {
            try startBus()
            try startResourceManager()
        } catch {
            remove()
            throw error
        }
    }

    private func startBus() throws {
        // In the foreground, not --fork: a forked daemon would hold a pipe of ours open.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try requireTool("dbus-daemon", package: "dbus"))
        switch busPolicy {
        case .open:
            process.arguments = ["--session", "--nofork", "--nopidfile", "--address=\(busAddress)"]
        case .tss:
            let configuration = directory.appending("bus.conf")
            try SoftHSMFixture.writeFile(configuration, contents: Self.tssPolicy(address: busAddress))
            process.arguments = ["--config-file=\(configuration.path)", "--nofork", "--nopidfile"]
            // Other local users reach the bus socket (the configuration and the TPM's files stay unreadable).
            chmod(directory.path, 0o711)
        }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        bus = process
        let socket = directory.appending("bus").path
        let deadline = Date().addingTimeInterval(10)
        while !SwtpmFixture.accepts(socket) {
            guard Date() < deadline, process.isRunning else { throw FixtureError("dbus-daemon did not start") }
            usleep(10_000)
        }
    }

    /// A bus configuration with the system bus's default policy and tpm2-abrmd's own rules.
    private static func tssPolicy(address: String) -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>\(address)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow user="*"/>
            <deny own="*"/>
            <deny send_type="method_call"/>
            <allow send_type="signal"/>
            <allow send_requested_reply="true" send_type="method_return"/>
            <allow send_requested_reply="true" send_type="error"/>
            <allow receive_type="method_call"/>
            <allow receive_type="method_return"/>
            <allow receive_type="error"/>
            <allow receive_type="signal"/>
            <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
          </policy>
          <policy user="root"><allow own="com.intel.tss2.Tabrmd"/></policy>
          <policy user="tss"><allow own="com.intel.tss2.Tabrmd"/></policy>
          <policy user="root"><allow send_destination="com.intel.tss2.Tabrmd"/></policy>
          <policy group="root"><allow send_destination="com.intel.tss2.Tabrmd"/></policy>
          <policy user="tss"><allow send_destination="com.intel.tss2.Tabrmd"/></policy>
          <policy group="tss"><allow send_destination="com.intel.tss2.Tabrmd"/></policy>
        </busconfig>

        """
    }

    /// Starts tpm2-abrmd; one that exits while starting (seen under load: exit 74) is started again, twice at most.
    private func startResourceManager() throws {
        var attempt = 1
        while true {
            do {
                return try startResourceManagerOnce()
            } catch is FixtureError where attempt < 3 && abrmd?.isRunning == false {
                attempt += 1
                usleep(200_000)
            }
        }
    }

    private func startResourceManagerOnce() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try requireTool("tpm2-abrmd", package: "tpm2-abrmd"))
        process.arguments =
            ["--session", "--allow-root", "--tcti=\(swtpm.tcti)"]
            + (maxConnections.map { ["--max-connections=\($0)"] } ?? [])
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        abrmd = process
        // Ready once it owns its bus name: a TPM command through it succeeds.
        let getrandom = try requireTool("tpm2_getrandom", package: "tpm2-tools")
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            if (try? runProcess(getrandom, ["-T", tcti, "4"], environment: environment))?.status == 0 { return }
            guard process.isRunning else { throw FixtureError("tpm2-abrmd exited with \(process.terminationStatus)") }
            usleep(50_000)
        }
        throw FixtureError("tpm2-abrmd did not answer within 15 s")
    }

    /// Kills tpm2-abrmd and starts a new one on the same TPM, as a service restart would.
    public func restartResourceManager() throws {
        stop(abrmd)
        try startResourceManager()
    }

    private func stop(_ process: Process?) {
        // SIGKILL: tpm2-abrmd may sit in a D-Bus call and not act on SIGTERM.
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitForExit()
    }

    /// Stops tpm2-abrmd, the bus and swtpm, and removes every file.
    public func remove() {
        stop(abrmd)
        stop(bus)
        swtpm.stop()
        directory.remove()
    }
}

extension ResourceManagerFixture {
    /// The one tpm2-abrmd of this test process (`KEYSEAL_TEST_BACKEND=tabrmd`), started on first use and stopped
    /// when the process exits.
    ///
    /// tpm2-tss's tabrmd TCTI finds a session bus only through `DBUS_SESSION_BUS_ADDRESS` (and GLib keeps one session
    /// bus connection per process), so every embedded engine of a process shares one bus and one tpm2-abrmd:
    /// the variable is set (``publishEnvironment(_:)``) before the first tabrmd TCTI is loaded. Every store of the process is then
    /// on the same TPM and shares its dictionary-attack counter: the TPM allows 1,000 failures, so stores tested
    /// in parallel never reach its reserve through each other, and tpm2-abrmd takes 100 connections, its most (one per open
    /// store). A test that counts the TPM's failures needs a TPM of its own (``SwtpmFixture``).
    public static func shared() throws -> ResourceManagerFixture { try sharedInstance.get() }

    private static let sharedInstance: Result<ResourceManagerFixture, FixtureError> = {
        do {
            let broker = try ResourceManagerFixture(maxTries: 1000, maxConnections: 100)
            publishEnvironment(["DBUS_SESSION_BUS_ADDRESS": broker.busAddress])
            sharedForRemoval.withLock { $0 = broker }
            atexit { ResourceManagerFixture.sharedForRemoval.withLock { $0?.remove() } }
            return .success(broker)
        } catch let error as FixtureError {
            return .failure(error)
        } catch {
            return .failure(FixtureError("the shared tpm2-abrmd did not start: \(error)"))
        }
    }()

    private static let sharedForRemoval = Mutex<ResourceManagerFixture?>(nil)
}

/// A tpm2-pkcs11 token (a second PKCS#11 module besides SoftHSM2) behind a ``ResourceManagerFixture``.
///
/// tpm2-pkcs11 needs a resource manager (directly on swtpm `tpm2_ptool` fails with 0x902) and cannot generate keys
/// through PKCS#11; `withKeys` creates the device key's two HMAC keys with `tpm2_ptool addkey`, as an administrator
/// would. Missing packages are a failure, never a skip.
public final class TPM2PKCS11Fixture: @unchecked Sendable {
    public static let module = "/usr/lib/x86_64-linux-gnu/pkcs11/libtpm2_pkcs11.so"

    public let resourceManager: ResourceManagerFixture
    public var directory: TemporaryDirectory { resourceManager.directory }
    public let tokenLabel = "keyseal"
    public let pin = "user-pin-1234"
    public var pinFile: URL { directory.appending("token.pin") }

    /// The environment every process that uses the token needs (keyseald, tpm2_ptool).
    public var environment: [String: String] {
        var environment = resourceManager.environment
        environment["TPM2_PKCS11_TCTI"] = resourceManager.tcti
        environment["TPM2_PKCS11_STORE"] = directory.appending("tpm2-pkcs11").path
        environment["TPM2_PKCS11_LOG_LEVEL"] = "0"
        return environment
    }

    /// Starts a resource manager and initializes a token (`tpm2_ptool init` and `addtoken`); with `withKeys`, also
    /// the two HMAC keys `<keyLabel>.device` and `<keyLabel>.passcode`.
    public init(withKeys: Bool, keyLabel: String = "keyseal-device-key") throws {
        _ = try requireTool("tpm2_ptool", package: "libtpm2-pkcs11-tools")
        guard FileManager.default.fileExists(atPath: Self.module) else {
            throw FixtureError("\(Self.module) is missing (Debian package libtpm2-pkcs11-1); run Scripts/bootstrap.sh")
        }
        resourceManager = try ResourceManagerFixture()
        do {
            try FileManager.default.createDirectory(
                at: directory.appending("tpm2-pkcs11"),
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
            try ptool(["init"])
            try ptool(["addtoken", "--pid=1", "--sopin=so-pin-5678", "--userpin=\(pin)", "--label=\(tokenLabel)"])
            if withKeys {
                for role in ["device", "passcode"] {
                    try ptool([
                        "addkey", "--algorithm=hmac:sha256", "--label=\(tokenLabel)", "--userpin=\(pin)",
                        "--key-label=\(keyLabel).\(role)",
                    ])
                }
            }
            try SoftHSMFixture.writeFile(pinFile, contents: pin)
        } catch {
            remove()
            throw error
        }
    }

    /// Runs `tpm2_ptool` against this fixture's token store; a failure throws with its output.
    @discardableResult
    public func ptool(_ arguments: [String]) throws -> ProcessResult {
        let result = try runProcess(
            try requireTool("tpm2_ptool", package: "libtpm2-pkcs11-tools"),
            arguments,
            environment: environment
        )
        guard result.status == 0 else {
            throw FixtureError("tpm2_ptool \(arguments.first ?? "") failed: \(result.stderrText) \(result.stdoutText)")
        }
        return result
    }

    public func remove() { resourceManager.remove() }
}

/// Starts keyseald with `arguments` (its `--socket` is `socket`) and `environment` (with the testing Argon2id cost),
/// logging to `log`, and waits until `keyseal status` answers. For daemons on stacks `DaemonFixture` does not know.
public func startKeyseald(
    arguments: [String],
    socket: String,
    environment: [String: String],
    log: URL
) throws
    -> Process
{
    let process = Process()
    process.executableURL = try builtProductsDirectory().appendingPathComponent("keyseald")
    process.arguments = ["--socket", socket] + arguments
    var environment = environment
    environment["KEYSEAL_TESTING_ARGON2"] = "minimal"
    process.environment = environment
    if !FileManager.default.fileExists(atPath: log.path) {
        _ = FileManager.default.createFile(atPath: log.path, contents: nil, attributes: [.posixPermissions: 0o600])
    }
    let handle = try FileHandle(forWritingTo: log)
    handle.seekToEndOfFile()
    process.standardOutput = handle
    process.standardError = handle
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let keyseal = try builtProductsDirectory().appendingPathComponent("keyseal").path
    let deadline = Date().addingTimeInterval(30)
    while Date() < deadline, process.isRunning {
        if (try? runProcess(keyseal, ["--socket", socket, "status"]))?.status == 0 { return process }
        usleep(50_000)
    }
    if process.isRunning { process.terminate() }
    throw FixtureError("keyseald did not start: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
}

/// A PKCS#11 token a test opens a device key on: SoftHSM2's (``SoftHSMFixture``) or tpm2-pkcs11's
/// (``TPM2PKCS11Token``).
public protocol PKCS11TokenFixture: AnyObject, Sendable {
    /// The module's path.
    var module: String { get }
    var tokenLabel: String { get }
    /// The user PIN (a test secret).
    var pin: String { get }
    /// A 0600 file holding ``pin``.
    var pinFile: URL { get }
    /// What child processes need to see the token.
    var environment: [String: String] { get }
    func remove()
}

extension SoftHSMFixture: PKCS11TokenFixture {}

/// The PKCS#11 modules the token-generic tests run on.
public enum PKCS11Stack: String, CaseIterable, Sendable, CustomStringConvertible {
    case softhsm2 = "SoftHSM2"
    /// tpm2-pkcs11 behind the test process's tpm2-abrmd (``TPM2PKCS11Pool``).
    case tpm2pkcs11 = "tpm2-pkcs11"

    public var description: String { rawValue }

    /// A token with the device key's two HMAC keys (tpm2-pkcs11: made beforehand with `tpm2_ptool`, since it cannot
    /// generate keys through PKCS#11; SoftHSM2: made by the first provisioning open). `use` says whether the test
    /// may share the token with others (it only seals and unseals) or needs one of its own (it logs in with a wrong
    /// PIN, destroys a key, or needs a token without keys). Call `remove()` when done: on tpm2-pkcs11 that ends the
    /// test's turn (``TPM2PKCS11Pool``).
    public func token(_ use: TPM2PKCS11Pool.Use = .shared) throws -> PKCS11TokenFixture {
        switch self {
        case .softhsm2: return try SoftHSMFixture()
        case .tpm2pkcs11: return try TPM2PKCS11Pool.shared().token(use)
        }
    }
}

/// A token of the process-wide tpm2-pkcs11 store.
public final class TPM2PKCS11Token: PKCS11TokenFixture, @unchecked Sendable {
    public let module = TPM2PKCS11Fixture.module
    public let tokenLabel: String
    public let pin: String
    public let pinFile: URL
    public let environment: [String: String]

    init(label: String, pin: String, environment: [String: String], directory: TemporaryDirectory) throws {
        tokenLabel = label
        self.pin = pin
        self.environment = environment
        pinFile = directory.appending("\(label).pin")
        try SoftHSMFixture.writeFile(pinFile, contents: pin + "\n")
    }

    /// Nothing: the token (which tests may share) and its PIN file stay in the process's store until it exits.
    public func remove() {}
}

/// A test's turn on a tpm2-pkcs11 token: ``remove()`` ends it.
final class TPM2PKCS11Lease: PKCS11TokenFixture, @unchecked Sendable {
    let token: TPM2PKCS11Token
    private let turn: DispatchSemaphore?
    private let ended = Mutex(false)
    var module: String { token.module }
    var tokenLabel: String { token.tokenLabel }
    var pin: String { token.pin }
    var pinFile: URL { token.pinFile }
    var environment: [String: String] { token.environment }

    init(_ token: TPM2PKCS11Token, turn: DispatchSemaphore?) {
        self.token = token
        self.turn = turn
    }

    func remove() {
        let first = ended.withLock { ended in
            defer { ended = true }
            return !ended
        }
        if first { turn?.signal() }
    }
}

/// The process-wide tpm2-pkcs11 store, on the TPM behind ``ResourceManagerFixture/shared()``, with its tokens.
///
/// Tests take turns on a token shared between tests: with several sessions of one process at work on one token at
/// once, tpm2-pkcs11 1.9 answered CKR_OPERATION_ACTIVE to a new session's C_FindObjectsInit and
/// CKR_SESSION_HANDLE_INVALID to a live session's C_SignInit. A lease from ``token(_:)`` on `.shared` or `.second`
/// waits for that token's turn and its `remove()` hands the turn on (a test holding both takes `.shared` first);
/// `.own` and `.withoutKeys` tokens belong to one test.
///
/// tpm2-pkcs11 reads its store (`TPM2_PKCS11_STORE`) and TCTI (`TPM2_PKCS11_TCTI`) from the environment when a
/// process first initializes it, and lists the tokens it found then; its TCTI is tabrmd's, whose bus is the
/// process's. So, as for SoftHSM2 (``SoftHSMFixture``), one store per process with every token created up front
/// (`tpm2_ptool`, about 2 s a call): one token shared by the tests that only seal and unseal (several device keys
/// on one token share its login), a second one for tests that need two tokens, `KEYSEAL_TPM2_PKCS11_OWN` (default
/// 3) for tests that need a token of their own, and one without keys. Create the first before the module is loaded
/// in any other way.
public final class TPM2PKCS11Pool: @unchecked Sendable {
    public enum Use: Sendable {
        /// The token every test that only seals and unseals shares.
        case shared
        /// Another token with keys, for tests that need two.
        case second
        /// A token with keys for this test alone.
        case own
        /// A token without the device key's keys.
        case withoutKeys
    }

    public static let keyLabel = "keyseal-device-key"
    public let resourceManager: ResourceManagerFixture
    public let storeDirectory: TemporaryDirectory
    private let lock = NSLock()
    private var sharedToken: TPM2PKCS11Token
    private var secondToken: TPM2PKCS11Token
    private var own: [TPM2PKCS11Token]
    private var withoutKeys: TPM2PKCS11Token?

    public static func shared() throws -> TPM2PKCS11Pool { try instance.get() }

    private static let instance: Result<TPM2PKCS11Pool, FixtureError> = {
        do {
            return .success(try TPM2PKCS11Pool())
        } catch let error as FixtureError {
            return .failure(error)
        } catch {
            return .failure(FixtureError("the tpm2-pkcs11 store could not be set up: \(error)"))
        }
    }()

    /// The environment of processes that use the store (keyseald, `tpm2_ptool`).
    public var environment: [String: String] {
        var environment = resourceManager.environment
        environment["TPM2_PKCS11_TCTI"] = resourceManager.tcti
        environment["TPM2_PKCS11_STORE"] = storeDirectory.path
        environment["TPM2_PKCS11_LOG_LEVEL"] = "0"
        return environment
    }

    private init() throws {
        _ = try requireTool("tpm2_ptool", package: "libtpm2-pkcs11-tools")
        guard FileManager.default.fileExists(atPath: TPM2PKCS11Fixture.module) else {
            throw FixtureError(
                "\(TPM2PKCS11Fixture.module) is missing (Debian package libtpm2-pkcs11-1); run Scripts/bootstrap.sh"
            )
        }
        let broker = try ResourceManagerFixture.shared()
        resourceManager = broker
        let store = try TemporaryDirectory(prefix: "keyseal-tpm2-pkcs11")
        storeDirectory = store
        let environment = broker.environment.merging([
            "TPM2_PKCS11_TCTI": broker.tcti, "TPM2_PKCS11_STORE": store.path,
            "TPM2_PKCS11_LOG_LEVEL": "0",
        ]) { _, new in new }
        // This process's own loads of the module.
        publishEnvironment(
            ["TPM2_PKCS11_TCTI", "TPM2_PKCS11_STORE", "TPM2_PKCS11_LOG_LEVEL"].reduce(into: [:]) {
                $0[$1] = environment[$1]
            }
        )
        let ptool = try requireTool("tpm2_ptool", package: "libtpm2-pkcs11-tools")
        func run(_ arguments: [String]) throws {
            let result = try runProcess(ptool, arguments, environment: environment)
            guard result.status == 0 else {
                throw FixtureError(
                    "tpm2_ptool \(arguments.first ?? "") failed: \(result.stderrText) \(result.stdoutText)"
                )
            }
        }
        func token(_ name: String, keys: Bool) throws -> TPM2PKCS11Token {
            let label = "keyseal-\(name)"
            let pin = "pin-\(UInt32.random(in: 100_000...999_999))"
            try run([
                "addtoken", "--pid=1", "--sopin=so-\(UInt32.random(in: 100_000...999_999))", "--userpin=\(pin)",
                "--label=\(label)",
            ])
            if keys {
                for role in ["device", "passcode"] {
                    try run([
                        "addkey", "--algorithm=hmac:sha256", "--label=\(label)", "--userpin=\(pin)",
                        "--key-label=\(Self.keyLabel).\(role)",
                    ])
                }
            }
            return try TPM2PKCS11Token(label: label, pin: pin, environment: environment, directory: store)
        }
        try run(["init"])
        sharedToken = try token("shared", keys: true)
        secondToken = try token("second", keys: true)
        let ownCount = Int(ProcessInfo.processInfo.environment["KEYSEAL_TPM2_PKCS11_OWN"] ?? "") ?? 3
        own = try (0..<ownCount).map { try token("own-\($0)", keys: true) }
        withoutKeys = try token("without-keys", keys: false)
        let root = store.path
        Self.pendingRemoval.withLock { $0 = root }
        atexit { TPM2PKCS11Pool.pendingRemoval.withLock { $0.map { try? FileManager.default.removeItem(atPath: $0) } } }
    }

    private static let pendingRemoval = Mutex<String?>(nil)

    private let sharedTurn = DispatchSemaphore(value: 1)
    private let secondTurn = DispatchSemaphore(value: 1)

    /// A lease on a token for `use`, once it is this test's turn on it; `.own` and `.withoutKeys` tokens are handed
    /// out once. End it with `remove()`.
    public func token(_ use: Use) throws -> PKCS11TokenFixture {
        let token = try take(use)
        let turn: DispatchSemaphore? =
            switch use {
            case .shared: sharedTurn
            case .second: secondTurn
            case .own, .withoutKeys: nil
            }
        turn?.wait()
        return TPM2PKCS11Lease(token, turn: turn)
    }

    private func take(_ use: Use) throws -> TPM2PKCS11Token {
        try lock.withLock {
            switch use {
            case .shared: return sharedToken
            case .second: return secondToken
            case .own:
                guard !own.isEmpty else {
                    throw FixtureError(
                        "the tpm2-pkcs11 tokens of their own are used up; raise KEYSEAL_TPM2_PKCS11_OWN (tpm2-pkcs11 "
                            + "does not see tokens created after it was initialized in this process)"
                    )
                }
                return own.removeFirst()
            case .withoutKeys:
                guard let token = withoutKeys else { throw FixtureError("the tpm2-pkcs11 token without keys is taken") }
                withoutKeys = nil
                return token
            }
        }
    }
}
