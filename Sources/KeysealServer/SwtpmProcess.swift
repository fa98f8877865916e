import Foundation
import Keyseal
import KeysealCore
import Logging
import ServiceLifecycle
import Synchronization

/// A private swtpm for `--backend swtpm` (development): state in `DIR/swtpm`, reached over a Unix socket there,
/// started before the store opens, restarted if it dies, stopped after the store is closed.
public final class SwtpmProcess: Sendable {
    public let stateDirectory: URL
    private let process = Mutex<Process?>(nil)
    private let stopping = Atomic<Bool>(false)
    let logger: Logger

    public init(stateDirectory: URL, logger: Logger) {
        self.stateDirectory = stateDirectory
        self.logger = logger
    }

    public var socketPath: String { stateDirectory.appendingPathComponent("swtpm.sock").path }
    /// The TCTI for the device key (the control socket is `<path>.ctrl`).
    public var tcti: String { "swtpm:path=\(socketPath)" }

    static func findSwtpm() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin"] {
            let candidate = folder + "/swtpm"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Starts swtpm and waits until its socket exists.
    public func start() throws {
        guard let swtpm = Self.findSwtpm() else {
            throw KeychainError(KeychainStatus.notAvailable, "swtpm is not installed (Debian package swtpm)")
        }
        let manager = FileManager.default
        do {
            try manager.createDirectory(
                at: stateDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw KeychainError(KeychainStatus.io, "cannot create \(stateDirectory.path)")
        }
        for leftover in [socketPath, socketPath + ".ctrl"] { unlink(leftover) }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: swtpm)
        let directory = stateDirectory.path
        child.arguments = [
            "socket", "--tpm2", "--tpmstate", "dir=\(directory)",
            "--server", "type=unixio,path=\(socketPath)", "--ctrl", "type=unixio,path=\(socketPath).ctrl",
            "--flags", "not-need-init,startup-clear", "--log", "file=\(directory)/swtpm.log",
        ]
        child.standardInput = FileHandle.nullDevice
        child.standardOutput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        do {
            try child.run()
        } catch {
            throw KeychainError(KeychainStatus.notAvailable, "cannot start swtpm: \(error)")
        }
        process.withLock { $0 = child }
        for _ in 0..<500 {
            if manager.fileExists(atPath: socketPath) && manager.fileExists(atPath: socketPath + ".ctrl") { return }
            guard child.isRunning else { break }
            usleep(10_000)
        }
        stop()
        throw KeychainError(KeychainStatus.notAvailable, "swtpm did not start; see \(directory)/swtpm.log")
    }

    public var isRunning: Bool { process.withLock { $0?.isRunning ?? false } }

    /// Stops swtpm (SIGTERM, then SIGKILL after two seconds).
    public func stop() {
        stopping.store(true, ordering: .relaxed)
        guard let child = process.withLock({ current -> Process? in defer { current = nil }; return current }) else {
            return
        }
        if child.isRunning {
            child.terminate()
            for _ in 0..<200 where child.isRunning { usleep(10_000) }
            if child.isRunning { kill(child.processIdentifier, SIGKILL) }
            child.waitUntilExit()
        }
    }

    /// A service that restarts swtpm when it exits unexpectedly.
    public var supervisor: some Service { Supervisor(swtpm: self) }

    struct Supervisor: Service {
        let swtpm: SwtpmProcess

        func run() async throws {
            while !Task.isShuttingDownGracefully && !Task.isCancelled {
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(500)) }
                } catch {
                    return
                }
                if !swtpm.stopping.load(ordering: .relaxed) && !swtpm.isRunning {
                    swtpm.logger.warning("swtpm exited; restarting it")
                    do { try swtpm.start() } catch { swtpm.logger.error("swtpm restart failed", metadata: ["error": "\(error)"]) }
                }
            }
        }
    }
}
