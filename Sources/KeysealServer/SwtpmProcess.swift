import FoundationEssentials
import Glibc
import Keyseal
import KeysealCore
import Logging
import ServiceLifecycle
import Synchronization

/// A private swtpm for `--backend swtpm` (development): state in `DIR/swtpm`, reached over a Unix socket there,
/// started before the store opens, restarted if it dies, stopped after the store is closed.
public final class SwtpmProcess: Sendable {
    public let stateDirectory: URL
    private let process = Mutex<ChildProcess?>(nil)
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
                at: stateDirectory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw KeychainError(KeychainStatus.io, "cannot create \(stateDirectory.path)")
        }
        for leftover in [socketPath, socketPath + ".ctrl"] { unlink(leftover) }
        let directory = stateDirectory.path
        let child: ChildProcess
        do {
            child = try ChildProcess(
                executable: swtpm,
                arguments: [
                    "socket", "--tpm2", "--tpmstate", "dir=\(directory)",
                    "--server", "type=unixio,path=\(socketPath)", "--ctrl", "type=unixio,path=\(socketPath).ctrl",
                    "--flags", "not-need-init,startup-clear", "--log", "file=\(directory)/swtpm.log",
                ]
            )
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
        guard
            let child = process.withLock({ current -> ChildProcess? in
                defer { current = nil }
                return current
            })
        else {
            return
        }
        if child.isRunning {
            child.terminate()
            for _ in 0..<200 where child.isRunning { usleep(10_000) }
            if child.isRunning { child.kill() }
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
                    do { try swtpm.start() } catch {
                        swtpm.logger.error("swtpm restart failed", metadata: ["error": "\(error)"])
                    }
                }
            }
        }
    }
}

/// A child process started with `posix_spawn`: standard input and output on /dev/null, no other descriptor
/// inherited.
final class ChildProcess: Sendable {
    let processIdentifier: pid_t
    /// Set once the child has been reaped.
    private let exited = Mutex(false)

    init(executable: String, arguments: [String]) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor: Int32 in 0...2 {
            posix_spawn_file_actions_addopen(
                &actions,
                descriptor,
                "/dev/null",
                descriptor == 0 ? O_RDONLY : O_WRONLY,
                0
            )
        }
        Self.closeOnExec()
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid = pid_t()
        let result = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard result == 0 else { throw KeychainError(KeychainStatus.io, String(cString: strerror(result))) }
        processIdentifier = pid
    }

    /// Marks every descriptor above 2 close-on-exec, so that the child inherits none (keyseald never runs any
    /// other program, so nothing else loses a descriptor it needed).
    private static func closeOnExec() {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return }
        for entry in entries {
            guard let descriptor = Int32(entry), descriptor > 2 else { continue }
            let flags = fcntl(descriptor, F_GETFD)
            if flags >= 0 { _ = fcntl(descriptor, F_SETFD, flags | FD_CLOEXEC) }
        }
    }

    /// Whether the child still runs (reaps it once it has exited).
    var isRunning: Bool {
        exited.withLock { exited in
            guard !exited else { return false }
            var status: Int32 = 0
            if waitpid(processIdentifier, &status, WNOHANG) == processIdentifier { exited = true }
            return !exited
        }
    }

    func terminate() { _ = Glibc.kill(processIdentifier, SIGTERM) }
    func kill() { _ = Glibc.kill(processIdentifier, SIGKILL) }

    func waitUntilExit() {
        exited.withLock { exited in
            guard !exited else { return }
            var status: Int32 = 0
            _ = Posix.waitpid(processIdentifier, &status, 0)
            exited = true
        }
    }
}
