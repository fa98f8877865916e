import Foundation
import Glibc

/// A tpm2-pkcs11 token (a second PKCS#11 module besides SoftHSM2) on its own swtpm, reached through a tpm2-abrmd
/// on a private D-Bus session bus: every process of it is this fixture's own, and `remove()` stops them.
///
/// tpm2-pkcs11 needs a resource manager (directly on swtpm `tpm2_ptool` fails with 0x902) and cannot generate keys
/// through PKCS#11; `withKeys` creates the device key's two HMAC keys with `tpm2_ptool addkey`, as an administrator
/// would. Missing packages are a failure, never a skip.
public final class TPM2PKCS11Fixture: @unchecked Sendable {
    public static let module = "/usr/lib/x86_64-linux-gnu/pkcs11/libtpm2_pkcs11.so"
    public static let packages = "tpm2-abrmd libtss2-tcti-tabrmd0 dbus libtpm2-pkcs11-1 libtpm2-pkcs11-tools"

    public let directory: TemporaryDirectory
    public let swtpm: SwtpmFixture
    public let tokenLabel = "keyseal"
    public let pin = "user-pin-1234"
    public var pinFile: URL { directory.appending("token.pin") }
    public var busAddress: String { "unix:path=\(directory.appending("bus").path)" }
    private var bus: Process?
    private var abrmd: Process?

    /// The environment every process that uses the token needs (keyseald, tpm2_ptool).
    public var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
        environment["TPM2_PKCS11_TCTI"] = "tabrmd:bus_type=session"
        environment["TPM2TOOLS_TCTI"] = "tabrmd:bus_type=session"
        environment["TPM2_PKCS11_STORE"] = directory.appending("tpm2-pkcs11").path
        environment["TPM2_PKCS11_LOG_LEVEL"] = "0"
        environment["TSS2_LOG"] = "all+NONE"
        return environment
    }

    /// Starts swtpm, a session bus and tpm2-abrmd, and initializes a token (`tpm2_ptool init` and `addtoken`); with
    /// `withKeys`, also the two HMAC keys `<keyLabel>.device` and `<keyLabel>.passcode`.
    public init(withKeys: Bool, keyLabel: String = "keyseal-device-key") throws {
        for (tool, package) in [
            ("dbus-daemon", "dbus"), ("tpm2-abrmd", "tpm2-abrmd"), ("tpm2_ptool", "libtpm2-pkcs11-tools"),
        ] {
            _ = try requireTool(tool, package: package)
        }
        guard FileManager.default.fileExists(atPath: Self.module) else {
            throw FixtureError("\(Self.module) is missing (Debian package libtpm2-pkcs11-1); run Scripts/bootstrap.sh")
        }
        directory = try TemporaryDirectory(prefix: "keyseal-tpm2-pkcs11")
        swtpm = try SwtpmFixture()
        do {
            try startBus()
            try startResourceManager()
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
        while !FileManager.default.fileExists(atPath: socket) {
            guard Date() < deadline, process.isRunning else { throw FixtureError("dbus-daemon did not start") }
            usleep(10_000)
        }
    }

    private func startResourceManager() throws {
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
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            if (try? runProcess(
                try requireTool("tpm2_getrandom", package: "tpm2-tools"), ["-T", "tabrmd:bus_type=session", "4"],
                environment: environment))?.status == 0
            {
                return
            }
            guard process.isRunning else { throw FixtureError("tpm2-abrmd exited with \(process.terminationStatus)") }
            usleep(50_000)
        }
        throw FixtureError("tpm2-abrmd did not answer within 15 s")
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

    /// Stops tpm2-abrmd, the bus and swtpm, and removes every file.
    public func remove() {
        // SIGKILL: tpm2-abrmd may sit in a D-Bus call and not act on SIGTERM.
        for process in [abrmd, bus].compactMap({ $0 }) where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        swtpm.stop()
        directory.remove()
    }
}
