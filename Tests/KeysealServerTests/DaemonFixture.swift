import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport

/// The directory holding the built executables (next to the test bundle), or `KEYSEAL_BIN_DIR`.
func builtProductsDirectory() throws -> URL {
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
final class DaemonFixture: @unchecked Sendable {
    enum Backend: String, CustomStringConvertible, CaseIterable {
        case hostKey = "host-key"
        case swtpm
        case pkcs11

        var description: String { rawValue }
    }

    let backend: Backend
    let root: TemporaryDirectory
    let softhsm: SoftHSMFixture?
    var extraArguments: [String]
    private(set) var process: Process?
    private var logHandle: FileHandle?

    var storeDirectory: URL { root.appending("store") }
    var socketPath: String { root.appending("run/keyseal.sock").path }
    var logPath: String { root.appending("keyseald.log").path }
    var hostKeyPath: String { root.appending("host.key").path }

    init(_ backend: Backend = .hostKey, arguments: [String] = [], start: Bool = true) throws {
        self.backend = backend
        root = try TemporaryDirectory(prefix: "keyseald")
        if backend == .swtpm { _ = try requireTool("swtpm", package: "swtpm") }
        softhsm = backend == .pkcs11 ? try SoftHSMFixture() : nil
        extraArguments = arguments
        if start { try self.start() }
    }

    var arguments: [String] {
        var arguments = ["--store", storeDirectory.path, "--socket", socketPath, "--backend", backend.rawValue]
        switch backend {
        case .hostKey: arguments += ["--host-key", hostKeyPath]
        case .swtpm: break
        case .pkcs11:
            guard let softhsm else { break }
            arguments += [
                "--pkcs11-module", softhsm.module, "--pkcs11-token", softhsm.tokenLabel,
                "--pkcs11-pin-file", softhsm.pinFile.path,
            ]
        }
        return arguments + ["--log-level", "info"] + extraArguments
    }

    /// Starts keyseald and waits until its socket accepts connections.
    func start() throws {
        let process = Process()
        process.executableURL = try builtProductsDirectory().appendingPathComponent("keyseald")
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(softhsm?.environment ?? [:]) { _, new in new }
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
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
            usleep(20_000)
        }
        throw FixtureError("keyseald did not listen on \(socketPath) within 30 s: \(log_())")
    }

    func log_() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    private func probeConnect() throws -> Bool {
        let store = try KeychainStore.daemon(socket: socketPath)
        defer { store.close() }
        _ = try store.status()
        return true
    }

    /// A daemon-mode store on this daemon's socket.
    func client() throws -> KeychainStore { try KeychainStore.daemon(socket: socketPath) }

    /// Sends `signal` and waits for the exit; returns the exit status.
    @discardableResult
    func stop(signal: Int32 = SIGTERM) -> Int32 {
        guard let process else { return 0 }
        if process.isRunning { kill(process.processIdentifier, signal) }
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        self.process = nil
        try? logHandle?.close()
        logHandle = nil
        return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    }

    func restart() throws {
        stop()
        try start()
    }

    func remove() {
        stop()
        softhsm?.remove()
        root.remove()
    }

    /// Runs keyseald with `arguments` to completion (for start-up errors).
    static func runToCompletion(_ arguments: [String], environment: [String: String]? = nil) throws -> ProcessResult {
        try runProcess(try builtProductsDirectory().appendingPathComponent("keyseald").path, arguments, environment: environment)
    }
}
