import Foundation
import Keyseal
import KeysealCore
import KeysealServer
import KeysealTestSupport
import Testing

/// `keyseald --config FILE`: `key = value` lines named as the long options (docs/OPERATIONS.md).
@Suite("Daemon configuration file")
struct DaemonConfigFileTests {
    /// The message of the KeychainError `body` throws, or nil.
    static func message(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let error as KeychainError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    @Test("keys, values, comments and blank lines are read")
    func parsesKeysAndComments() throws {
        let config = try DaemonConfigFile.parse(
            """
            # keyseald for the kiosk
            store = /var/lib/keyseal   # the store
            backend=host-key

            auto-lock = 60
            no-auto-lock = false
            """
        )
        #expect(config["store"] == "/var/lib/keyseal")
        #expect(config["backend"] == "host-key")
        #expect(config["auto-lock"] == "60")
        #expect(config.flags["no-auto-lock"] == false)
    }

    @Test("the boot-binding and checkpoint settings are configuration keys")
    func bootBindingKeys() throws {
        let config = try DaemonConfigFile.parse("tpm-pcrs = 7,14\ncheckpoint-interval = 0\n")
        #expect(config["tpm-pcrs"] == "7,14")
        #expect(config["checkpoint-interval"] == "0")
    }

    @Test("an unknown key is an error naming the file and line")
    func unknownKey() {
        let message = Self.message { _ = try DaemonConfigFile.parse("store = /s\nstroe = /t\n", source: "k.conf") }
        #expect(message == "k.conf:2: unknown key stroe")
    }

    @Test("a relative path is refused")
    func relativePath() {
        let message = Self.message { _ = try DaemonConfigFile.parse("policy = policy.conf") }
        #expect(message?.contains("must be an absolute path") == true)
    }

    @Test("a key given twice is refused")
    func duplicateKey() {
        #expect(Self.message { _ = try DaemonConfigFile.parse("socket = /a\nsocket = /b") }?.contains("twice") == true)
    }

    @Test("tpm-protect-lockout and config are command-line only")
    func commandLineOnlyKeys() {
        for key in ["tpm-protect-lockout = true", "config = /etc/other.conf"] {
            #expect(
                Self.message { _ = try DaemonConfigFile.parse(key) }?.contains("only be given on the command line")
                    == true
            )
        }
    }

    @Test("a switch takes only true or false")
    func switchValues() {
        #expect(Self.message { _ = try DaemonConfigFile.parse("no-auto-lock = maybe") } != nil)
    }

    @Test("a file writable by others is refused")
    func writableByOthers() throws {
        let directory = try TemporaryDirectory(prefix: "keyseald-config")
        defer { directory.remove() }
        let file = directory.appending("keyseald.conf")
        try SoftHSMFixture.writeFile(file, contents: "store = /tmp/x\n", mode: 0o666)
        #expect(
            Self.message { _ = try DaemonConfigFile.load(file: file) }?.contains("writable by group or others") == true
        )
    }
}

/// keyseald started from a configuration file, as a process.
@Suite("Daemon started from a configuration file", .serialized)
struct DaemonConfigProcessTests {
    /// A daemon fixture (not started) and a configuration file for its store, host key and `socket`.
    static func configured(socket: String, extra: String = "") throws -> (DaemonFixture, URL) {
        let daemon = try DaemonFixture(.hostKey, start: false)
        let file = daemon.root.appending("keyseald.conf")
        try SoftHSMFixture.writeFile(
            file,
            contents: """
                store = \(daemon.storeDirectory.path)
                backend = host-key
                host-key = \(daemon.hostKeyPath)
                socket = \(socket)
                \(extra)
                """
        )
        return (daemon, file)
    }

    /// Starts keyseald with `arguments`, waits for `socket`, runs `body`, then stops it with SIGTERM.
    static func running(_ arguments: [String], socket: String, _ body: (KeychainStore) throws -> Void) throws {
        let process = Process()
        process.executableURL = try builtProductsDirectory().appendingPathComponent("keyseald")
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            kill(process.processIdentifier, SIGTERM)
            process.waitForExit()
        }
        let store = try KeychainStore.daemon(socket: socket)
        let deadline = Date().addingTimeInterval(30)
        while (try? store.status()) == nil {
            guard process.isRunning, Date() < deadline else {
                throw FixtureError("keyseald did not listen on \(socket)")
            }
            usleep(10_000)
        }
        try body(store)
    }

    @Test("store, backend, host key and socket come from the file")
    func startsFromTheFile() throws {
        let socketPath = FileManager.default.temporaryDirectory.appendingPathComponent("ks-\(UUID().uuidString).sock")
            .path
        let (daemon, file) = try Self.configured(socket: socketPath, extra: "auto-lock = 42")
        defer { daemon.remove() }
        try Self.running(["--config", file.path], socket: socketPath) { store in
            let status = try store.status()
            #expect(status.device.backend == "host-key")
            #expect(status.autoLockSeconds == 42)
        }
        #expect(FileManager.default.fileExists(atPath: daemon.storeDirectory.appendingPathComponent("keyseal.db").path))
    }

    @Test("an option on the command line wins over the file")
    func commandLineWins() throws {
        let (daemon, file) = try Self.configured(socket: "/nonexistent-keyseal/never.sock", extra: "auto-lock = 42")
        defer { daemon.remove() }
        try Self.running(
            ["--config", file.path, "--socket", daemon.socketPath, "--auto-lock", "7"],
            socket: daemon.socketPath
        ) { store in
            let seconds = try store.autoLockSeconds()
            #expect(seconds == 7)
        }
    }

    @Test("a bad configuration file is a one-line error naming the line, and nothing is created")
    func badFileIsAnError() throws {
        let (daemon, file) = try Self.configured(socket: "/tmp/unused.sock", extra: "colour = blue")
        defer { daemon.remove() }
        let result = try DaemonFixture.runToCompletion(["--config", file.path])
        #expect(result.status != 0)
        #expect(result.stderrText == "keyseald: \(file.path):5: unknown key colour\n")
        #expect(!FileManager.default.fileExists(atPath: daemon.storeDirectory.path))
    }

    @Test("a missing configuration file is an error")
    func missingFileIsAnError() throws {
        let result = try DaemonFixture.runToCompletion(["--config", "/nonexistent-keyseal/keyseald.conf"])
        #expect(result.status != 0)
        #expect(result.stderrText.hasPrefix("keyseald: cannot read the configuration file"))
    }

    @Test("without --store on the command line or in the file keyseald refuses to start")
    func storeIsRequired() throws {
        let result = try DaemonFixture.runToCompletion(["--backend", "host-key"])
        #expect(result.status != 0)
        #expect(result.stderrText.contains("--store is required"))
    }
}
