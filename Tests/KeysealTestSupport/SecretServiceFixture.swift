import Foundation

/// A private session bus (dbus-daemon in the foreground) with `keyseal-secret-service` on it, in front of a
/// keyseald (``DaemonFixture``), for clients of the freedesktop Secret Service run as real processes.
public final class SecretServiceFixture: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let daemon: DaemonFixture
    public private(set) var bus: Process?
    public private(set) var bridge: Process?
    /// A headless gnome-keyring serving this bus instead of the bridge (``startGnomeKeyring()``).
    public private(set) var gnomeKeyring: Process?
    public var busAddress: String { "unix:path=" + directory.appending("bus").path }
    public var bridgeLogPath: String { directory.appending("bridge.log").path }
    /// The passcode file the test askpass program prints (an Unlock prompt's answer).
    public var askpassFile: URL { directory.appending("passcode") }
    public var askpassProgram: URL { directory.appending("askpass.sh") }

    /// The environment of a client on this bus.
    public var environment: [String: String] {
        var environment = fixtureEnvironment
        environment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
        environment["KEYSEAL_SOCKET"] = daemon.socketPath
        // No desktop: GLib must not look for another bus or a display.
        environment["DISPLAY"] = nil
        environment["WAYLAND_DISPLAY"] = nil
        environment["NO_AT_BRIDGE"] = "1"
        environment["GSETTINGS_BACKEND"] = "memory"
        return environment
    }

    /// Starts a bus; with `bridgeArguments` (nil: none) the bridge on it for `daemon` (a new host-key keyseald
    /// when nil).
    public init(daemon: DaemonFixture? = nil, startBridge: Bool = true, bridgeArguments: [String] = []) throws {
        _ = try requireTool("dbus-daemon", package: "dbus")
        directory = try TemporaryDirectory(prefix: "keyseal-secrets")
        do {
            self.daemon = try daemon ?? DaemonFixture()
        } catch {
            directory.remove()
            throw error
        }
        do {
            try "#!/bin/sh\ncat '\(askpassFile.path)'\n".write(to: askpassProgram, atomically: true, encoding: .utf8)
            chmod(askpassProgram.path, 0o700)
            try startBus()
            if startBridge { try self.startBridge(bridgeArguments) }
        } catch {
            remove()
            throw error
        }
    }

    private func startBus() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try requireTool("dbus-daemon", package: "dbus"))
        process.arguments = ["--session", "--nofork", "--nopidfile", "--address=\(busAddress)"]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        bus = process
        let deadline = Date().addingTimeInterval(10)
        while !SwtpmFixture.accepts(directory.appending("bus").path) {
            guard Date() < deadline, process.isRunning else { throw FixtureError("dbus-daemon did not start") }
            usleep(10_000)
        }
    }

    /// The bridge's executable.
    public static func bridgeExecutable() throws -> String {
        try builtProductsDirectory().appendingPathComponent("keyseal-secret-service").path
    }

    /// Starts keyseal-secret-service and waits until it says it serves the name.
    public func startBridge(_ arguments: [String] = []) throws {
        let process = try Self.launchBridge(
            arguments: ["--socket", daemon.socketPath] + arguments,
            environment: environment,
            log: bridgeLogPath
        )
        bridge = process
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if bridgeLog().contains("serving org.freedesktop.secrets") { return }
            guard process.isRunning else {
                throw FixtureError("keyseal-secret-service exited with \(process.terminationStatus): \(bridgeLog())")
            }
            usleep(10_000)
        }
        throw FixtureError("keyseal-secret-service did not start within 20 s: \(bridgeLog())")
    }

    /// A bridge process writing to `log` (not waited for).
    public static func launchBridge(
        arguments: [String],
        environment: [String: String],
        log: String,
        prefix: [String] = []
    ) throws -> Process {
        if !FileManager.default.fileExists(atPath: log) {
            _ = FileManager.default.createFile(atPath: log, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        handle.seekToEndOfFile()
        let process = Process()
        if prefix.isEmpty {
            process.executableURL = URL(fileURLWithPath: try bridgeExecutable())
            process.arguments = arguments
        } else {
            process.executableURL = URL(fileURLWithPath: prefix[0])
            process.arguments = Array(prefix.dropFirst()) + [try bridgeExecutable()] + arguments
        }
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        try? handle.close()
        return process
    }

    public func bridgeLog() -> String { (try? String(contentsOfFile: bridgeLogPath, encoding: .utf8)) ?? "" }

    /// Runs a client program on this bus.
    public func run(_ executable: String, _ arguments: [String], input: Data? = nil) throws -> ProcessResult {
        try runProcess(executable, arguments, environment: environment, input: input)
    }

    /// Runs `secret-tool` (libsecret-tools) on this bus.
    public func secretTool(_ arguments: [String], input: String? = nil) throws -> ProcessResult {
        try run(
            try requireTool("secret-tool", package: "libsecret-tools"),
            arguments,
            input: input.map { Data($0.utf8) }
        )
    }

    /// Starts gnome-keyring-daemon headless on this bus (its secrets component, its login keyring created and
    /// unlocked from standard input, in a HOME of its own, as Scripts/bench-secret-service.sh runs it), for a test
    /// that compares the bridge's answers with gnome-keyring's; the fixture must have no bridge.
    public func startGnomeKeyring() throws {
        let daemon = try requireTool("gnome-keyring-daemon", package: "gnome-keyring")
        let home = directory.appending("gnome-home")
        try FileManager.default.createDirectory(
            at: home,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        var environment = self.environment
        environment["HOME"] = home.path
        environment["XDG_DATA_HOME"] = home.appendingPathComponent(".local/share").path
        environment["XDG_RUNTIME_DIR"] = home.path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: daemon)
        process.arguments = ["--foreground", "--components=secrets", "--unlock"]
        process.environment = environment
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        gnomeKeyring = process
        input.fileHandleForWriting.write(Data("comparison-password".utf8))
        try? input.fileHandleForWriting.close()
        let dbusSend = try requireTool("dbus-send", package: "dbus-bin")
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let owner = try run(
                dbusSend,
                [
                    "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                    "org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.secrets",
                ]
            )
            if owner.stdoutText.contains("boolean true") { return }
            guard process.isRunning else {
                throw FixtureError("gnome-keyring-daemon exited with \(process.terminationStatus)")
            }
            usleep(20_000)
        }
        throw FixtureError("gnome-keyring-daemon did not own org.freedesktop.secrets within 20 s")
    }

    public func stopBridge() {
        guard let bridge else { return }
        if bridge.isRunning {
            kill(bridge.processIdentifier, SIGTERM)
            let deadline = Date().addingTimeInterval(10)
            while bridge.isRunning && Date() < deadline { usleep(5_000) }
            if bridge.isRunning { kill(bridge.processIdentifier, SIGKILL) }
            bridge.waitForExit()
        }
        self.bridge = nil
    }

    public func remove() {
        stopBridge()
        if let gnomeKeyring, gnomeKeyring.isRunning {
            kill(gnomeKeyring.processIdentifier, SIGKILL)
            gnomeKeyring.waitForExit()
        }
        if let bus, bus.isRunning {
            kill(bus.processIdentifier, SIGKILL)
            bus.waitForExit()
        }
        daemon.remove()
        directory.remove()
    }
}

/// One user's desktop session, run as `uid` (with gid 65534, the group a ``DaemonFixture/sharedWithNobody(_:)``
/// daemon's socket admits) through setpriv: a session bus of that user's own and a Secret Service bridge on it.
/// Needs root.
public final class UserSecretSession: @unchecked Sendable {
    public let uid: UInt32
    public let directory: URL
    private let setpriv: String
    private var processes: [Process] = []
    public var busAddress: String { "unix:path=" + directory.appendingPathComponent("bus").path }
    public var environment: [String: String] {
        var environment = fixtureEnvironment
        environment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
        environment["HOME"] = directory.path
        environment["XDG_RUNTIME_DIR"] = directory.path
        environment["NO_AT_BRIDGE"] = "1"
        environment["GSETTINGS_BACKEND"] = "memory"
        return environment
    }

    public init(uid: UInt32, daemon: DaemonFixture) throws {
        self.uid = uid
        setpriv = try requireTool("setpriv", package: "util-linux")
        directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(
            "keyseal-user-\(uid)-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        chown(directory.path, uid, 65534)
        chmod(directory.path, 0o700)
        do {
            let bus = Process()
            bus.executableURL = URL(fileURLWithPath: setpriv)
            bus.arguments =
                asUser + [
                    try requireTool("dbus-daemon", package: "dbus"), "--session", "--nofork", "--nopidfile",
                    "--address=\(busAddress)",
                ]
            bus.environment = environment
            bus.standardInput = FileHandle.nullDevice
            bus.standardOutput = FileHandle.nullDevice
            bus.standardError = FileHandle.nullDevice
            try bus.run()
            processes.append(bus)
            let deadline = Date().addingTimeInterval(10)
            while !SwtpmFixture.accepts(directory.appendingPathComponent("bus").path) {
                guard Date() < deadline, bus.isRunning else {
                    throw FixtureError("dbus-daemon as \(uid) did not start")
                }
                usleep(10_000)
            }
            let log = directory.appendingPathComponent("bridge.log").path
            let bridge = try SecretServiceFixture.launchBridge(
                arguments: ["--socket", daemon.socketPath],
                environment: environment,
                log: log,
                prefix: [setpriv] + asUser
            )
            processes.append(bridge)
            let started = Date().addingTimeInterval(20)
            while !((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("serving") {
                guard Date() < started, bridge.isRunning else {
                    throw FixtureError(
                        "the bridge as \(uid) did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")"
                    )
                }
                usleep(10_000)
            }
        } catch {
            remove()
            throw error
        }
    }

    private var asUser: [String] { ["--reuid", "\(uid)", "--regid", "65534", "--clear-groups"] }

    /// Runs `secret-tool` as this user on this user's bus.
    public func secretTool(_ arguments: [String], input: String? = nil) throws -> ProcessResult {
        try run(try requireTool("secret-tool", package: "libsecret-tools"), arguments, input: input)
    }

    /// Runs a client program as this user on this user's bus.
    public func run(_ executable: String, _ arguments: [String], input: String? = nil) throws -> ProcessResult {
        try runProcess(
            setpriv,
            asUser + [executable] + arguments,
            environment: environment,
            input: input.map { Data($0.utf8) }
        )
    }

    /// A copy of `file` in this user's directory, owned by the user, for a program run as the user: the checkout
    /// the original lives in may be closed to other users (a CI clone under a private temporary directory).
    public func readableCopy(of file: String) throws -> String {
        let copy = directory.appendingPathComponent(URL(fileURLWithPath: file).lastPathComponent)
        try? FileManager.default.removeItem(at: copy)
        try FileManager.default.copyItem(at: URL(fileURLWithPath: file), to: copy)
        guard chown(copy.path, uid, 65534) == 0, chmod(copy.path, 0o600) == 0 else {
            throw FixtureError("cannot hand \(copy.path) to uid \(uid): \(String(cString: strerror(errno)))")
        }
        return copy.path
    }

    public func remove() {
        for process in processes.reversed() where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitForExit()
        }
        processes = []
        try? FileManager.default.removeItem(at: directory)
    }
}
