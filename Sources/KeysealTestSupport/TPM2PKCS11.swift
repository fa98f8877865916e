import Foundation
import Glibc

/// tpm2-abrmd, the TPM2 access broker and resource manager, on its own swtpm and a private D-Bus session bus: every
/// process is this fixture's own, and `remove()` stops them. TCTI `tabrmd:bus_type=session` with ``environment``.
public final class ResourceManagerFixture: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let swtpm: SwtpmFixture
    public var busAddress: String { "unix:path=\(directory.appending("bus").path)" }
    public let tcti = "tabrmd:bus_type=session"
    private var bus: Process?
    private var abrmd: Process?

    /// What a process that uses the TPM through this tabrmd needs (the bus; tpm2-tools' TCTI; quiet tpm2-tss).
    public var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
        environment["TPM2TOOLS_TCTI"] = tcti
        environment["TSS2_LOG"] = "all+NONE"
        return environment
    }

    public init(maxTries: Int = 5) throws {
        for (tool, package) in [("dbus-daemon", "dbus"), ("tpm2-abrmd", "tpm2-abrmd")] {
            _ = try requireTool(tool, package: package)
        }
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
        process.arguments = ["--session", "--nofork", "--nopidfile", "--address=\(busAddress)"]
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
        process.arguments = ["--session", "--allow-root", "--tcti=\(swtpm.tcti)"]
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
        process.waitUntilExit()
    }

    /// Stops tpm2-abrmd, the bus and swtpm, and removes every file.
    public func remove() {
        stop(abrmd)
        stop(bus)
        swtpm.stop()
        directory.remove()
    }
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
                at: directory.appending("tpm2-pkcs11"), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
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
            try requireTool("tpm2_ptool", package: "libtpm2-pkcs11-tools"), arguments, environment: environment)
        guard result.status == 0 else {
            throw FixtureError("tpm2_ptool \(arguments.first ?? "") failed: \(result.stderrText) \(result.stdoutText)")
        }
        return result
    }

    public func remove() { resourceManager.remove() }
}

/// Starts keyseald with `arguments` (its `--socket` is `socket`) and `environment` (with the testing Argon2id cost),
/// logging to `log`, and waits until `keyseal status` answers. For daemons on stacks `DaemonFixture` does not know.
public func startKeyseald(arguments: [String], socket: String, environment: [String: String], log: URL) throws
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
