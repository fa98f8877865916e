import CKeysealSys
import Foundation
import Glibc
import KeysealCore

/// Whether the tests run in CI, where a missing swtpm or SoftHSM2 is a failure and never a skip.
public var runningInCI: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

/// Variables that suites set in the test process for the library under test: the askpass program and its time
/// limit, fprintd's verify override and system bus, the application id. Suites run in parallel, so a fixture's
/// processes never inherit them from the test process; a fixture that needs one passes it explicitly.
public let processWideTestVariables: Set<String> = [
    "KEYSEAL_ASKPASS", "SSH_ASKPASS", "KEYSEAL_ASKPASS_TIMEOUT", "KEYSEAL_FPRINTD_VERIFY", "KEYSEAL_APPLICATION_ID",
    "DBUS_SYSTEM_BUS_ADDRESS",
]

/// The environment a fixture's process starts from: the test process's, without ``processWideTestVariables``.
public var fixtureEnvironment: [String: String] {
    ProcessInfo.processInfo.environment.filter { !processWideTestVariables.contains($0.key) }
}

/// A fixture could not be set up.
public struct FixtureError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A private temporary directory (0700), removed by ``remove()``.
public final class TemporaryDirectory: @unchecked Sendable {
    public let url: URL
    public var path: String { url.path }

    public init(prefix: String = "keyseal-test") throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory())
        let url = base.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: url,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        self.url = url
    }

    public func appending(_ component: String) -> URL { url.appendingPathComponent(component) }

    public func remove() { try? FileManager.default.removeItem(at: url) }
}

/// The full path of `tool` on PATH (and the usual sbin folders), or nil.
public func findTool(_ tool: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    let folders = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/local/bin"]
    for folder in folders {
        let candidate = folder + "/" + tool
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

/// The outcome of a finished process.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: Data
    public var stderr: Data
    public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    public var stderrText: String { String(decoding: stderr, as: UTF8.self) }
}

/// Runs `executable` with `arguments` to completion, feeding `input` on standard input, for at most `timeout`: a
/// child that outlives it is killed (SIGKILL) and the call throws, naming it, so a hung tool fails its test instead of
/// holding the test process.
///
/// The child is started with `posix_spawn` and reaped with `waitpid`, and its output is read with `poll` on this
/// thread: nothing here waits for Foundation's `Process` to notice an exit (its `waitUntilExit` spins a run loop
/// until a manager thread reports it). Only the three pipes reach the child; every other descriptor of the test
/// process is closed in it, and the child starts with no signal blocked or ignored.
@discardableResult
public func runProcess(
    _ executable: String,
    _ arguments: [String],
    environment: [String: String]? = nil,
    input: Data? = nil,
    timeout: Duration = .seconds(300)
) throws -> ProcessResult {
    ignoreBrokenPipes
    var variables = fixtureEnvironment
    if let environment { variables.merge(environment) { _, new in new } }
    var standardInput: [Int32] = [-1, -1]
    var standardOutput: [Int32] = [-1, -1]
    var standardError: [Int32] = [-1, -1]
    guard keyseal_pipe_cloexec(&standardInput) == 0, keyseal_pipe_cloexec(&standardOutput) == 0,
        keyseal_pipe_cloexec(&standardError) == 0
    else {
        let reason = String(cString: strerror(errno))
        for descriptor in (standardInput + standardOutput + standardError) where descriptor >= 0 { close(descriptor) }
        throw FixtureError("cannot make pipes for \(executable): \(reason)")
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, standardInput[0], 0)
    posix_spawn_file_actions_adddup2(&actions, standardOutput[1], 1)
    posix_spawn_file_actions_adddup2(&actions, standardError[1], 2)
    posix_spawn_file_actions_addclosefrom_np(&actions, 3)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    _ = keyseal_spawnattr_own_group(&attributes)
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for argument in argv { free(argument) } }
    let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { for entry in envp { free(entry) } }
    var pid = pid_t()
    let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    close(standardInput[0])
    close(standardOutput[1])
    close(standardError[1])
    guard spawned == 0 else {
        close(standardInput[1])
        close(standardOutput[0])
        close(standardError[0])
        throw FixtureError("cannot run \(executable): \(String(cString: strerror(spawned)))")
    }
    var child = ChildOutput(
        pid: pid,
        input: standardInput[1],
        output: standardOutput[0],
        error: standardError[0],
        pending: [UInt8](input ?? Data())
    )
    defer { child.closeAll() }
    guard let status = child.run(until: ContinuousClock.now + timeout) else {
        // The child leads a process group of its own: its descendants (a daemon a shell started) go with it.
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let name = URL(fileURLWithPath: executable).lastPathComponent
        throw FixtureError(
            "\(name) \(arguments.prefix(3).joined(separator: " ")) did not finish within \(timeout) and was killed; "
                + "its output so far: \(String(decoding: child.errorBytes.suffix(2000), as: UTF8.self))"
        )
    }
    return ProcessResult(status: status, stdout: Data(child.outputBytes), stderr: Data(child.errorBytes))
}

extension Process {
    /// Waits until the process has exited, at most `limit`: false when it has not. Fixtures call this after SIGKILL
    /// instead of `waitUntilExit`, which has no limit and relies on Foundation's manager thread to notice the exit:
    /// once the process is gone or a zombie (`/proc/PID/stat` state Z), it has exited, noticed or not.
    @discardableResult
    public func waitForExit(within limit: Duration = .seconds(30)) -> Bool {
        let deadline = ContinuousClock.now + limit
        while isRunning {
            if Self.isGoneOrZombie(processIdentifier) { return true }
            if ContinuousClock.now >= deadline { return false }
            usleep(2_000)
        }
        return true
    }

    /// Waits for the exit Foundation reports, at most `limit`, and returns `terminationStatus`. A process still
    /// running at the limit is killed (SIGKILL) and the call throws, naming it: a test reads the status of a process
    /// that has ended, and never waits without end.
    public func exitStatus(within limit: Duration = .seconds(120)) throws -> Int32 {
        let deadline = ContinuousClock.now + limit
        while isRunning {
            if ContinuousClock.now >= deadline {
                kill(processIdentifier, SIGKILL)
                let name = executableURL?.lastPathComponent ?? "a process"
                throw FixtureError("\(name) did not exit within \(limit) and was killed")
            }
            usleep(2_000)
        }
        return terminationStatus
    }

    private static func isGoneOrZombie(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        // "PID (COMM) STATE ...": the command may contain spaces and parentheses; the state follows the last ")".
        guard let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }
}

/// SIGPIPE ignored in the test process, once: a child that closes its input before reading all of it makes the
/// write fail with EPIPE instead of ending the test process (children get the default action back at spawn).
private let ignoreBrokenPipes: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

/// The parent's side of a child started by ``runProcess(_:_:environment:input:timeout:)``: its pipes, what it wrote,
/// and its exit.
private struct ChildOutput {
    let pid: pid_t
    var input: Int32
    var output: Int32
    var error: Int32
    var pending: [UInt8]
    var outputBytes: [UInt8] = []
    var errorBytes: [UInt8] = []

    init(pid: pid_t, input: Int32, output: Int32, error: Int32, pending: [UInt8]) {
        self.pid = pid
        self.input = input
        self.output = output
        self.error = error
        self.pending = pending
        // Writes never block the loop: the child may not read its input at all.
        _ = fcntl(input, F_SETFL, fcntl(input, F_GETFL) | O_NONBLOCK)
        if pending.isEmpty { closeInput() }
    }

    /// Reads and writes until the child has exited and its pipes are closed (or, when a descendant of it still holds
    /// them, two seconds after its exit); nil when `deadline` passes first. The status is Foundation's
    /// `terminationStatus`: the exit code, or the number of the signal that ended the child.
    mutating func run(until deadline: ContinuousClock.Instant) -> Int32? {
        var exit: (status: Int32, at: ContinuousClock.Instant)?
        while true {
            if exit == nil {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid { exit = (status, .now) }
            }
            let now = ContinuousClock.now
            // Once the child has exited, a descendant still holding its pipes delays the answer by two seconds at
            // most, and never turns it into a timeout.
            if let exit, (output < 0 && error < 0) || now - exit.at > .seconds(2) || now >= deadline {
                let signal = exit.status & 0x7f
                return signal == 0 ? (exit.status >> 8) & 0xff : signal
            }
            if now >= deadline { return nil }
            var polled: [pollfd] = []
            if output >= 0 { polled.append(pollfd(fd: output, events: Int16(POLLIN), revents: 0)) }
            if error >= 0 { polled.append(pollfd(fd: error, events: Int16(POLLIN), revents: 0)) }
            if input >= 0 { polled.append(pollfd(fd: input, events: Int16(POLLOUT), revents: 0)) }
            if polled.isEmpty {
                usleep(1000)
                continue
            }
            // A short wait: the loop also watches for the exit, which no descriptor reports.
            guard poll(&polled, nfds_t(polled.count), 20) > 0 else { continue }
            for entry in polled where entry.revents != 0 {
                if entry.fd == input {
                    writeInput()
                } else if entry.fd == output {
                    if !read(from: output, into: &outputBytes) {
                        close(output)
                        output = -1
                    }
                } else if entry.fd == error {
                    if !read(from: error, into: &errorBytes) {
                        close(error)
                        error = -1
                    }
                }
            }
        }
    }

    /// Appends what `descriptor` has; false at its end.
    private func read(from descriptor: Int32, into bytes: inout [UInt8]) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        if count > 0 {
            bytes.append(contentsOf: buffer[0..<count])
            return true
        }
        return count < 0 && (errno == EINTR || errno == EAGAIN)
    }

    private mutating func writeInput() {
        let written = pending.withUnsafeBytes { Glibc.write(input, $0.baseAddress, $0.count) }
        if written > 0 {
            pending.removeFirst(written)
            if pending.isEmpty { closeInput() }
        } else if written < 0 && errno != EINTR && errno != EAGAIN {
            // The child closed its input (EPIPE): what it did not read is dropped, as a shell pipe would.
            closeInput()
        }
    }

    private mutating func closeInput() {
        if input >= 0 { close(input) }
        input = -1
    }

    mutating func closeAll() {
        closeInput()
        if output >= 0 { close(output) }
        if error >= 0 { close(error) }
        output = -1
        error = -1
    }
}

/// Returns the path of `tool`, or throws a failure that names the missing Debian package. Hardware tests call
/// this: outside CI a missing tool is reported as an error too, so nothing is silently skipped.
public func requireTool(_ tool: String, package: String) throws -> String {
    if let found = findTool(tool) { return found }
    throw FixtureError("\(tool) is not installed (Debian package \(package)); run Scripts/bootstrap.sh")
}

/// Sets variables of this process's environment while other threads may be reading it.
///
/// Fixtures set variables (`SOFTHSM2_CONF`, `TPM2_PKCS11_STORE`, `DBUS_SESSION_BUS_ADDRESS` …) when first used, while
/// other tests of the process run: loading a PKCS#11 module (SoftHSM2 reads `SOFTHSM2_CONF` in `C_Initialize`),
/// starting a process (Foundation copies the environment) or `ProcessInfo.environment`. glibc's `setenv` grows the
/// environment array with `realloc`, which can free the array a reader is walking. This builds a new array and
/// publishes it in one store, never freeing the old one (the strings of replaced variables are kept too), so a reader
/// sees either the old or the new environment, whole.
public func publishEnvironment(_ variables: [String: String]) {
    environmentLock.withLock {
        var entries: [UnsafeMutablePointer<CChar>?] = []
        var index = 0
        // glibc's `environ`, read and replaced through its symbol (Foundation's `environ` is read-only).
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "environ") else {
            for (name, value) in variables { setenv(name, value, 1) }
            return
        }
        let slot = symbol.assumingMemoryBound(to: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?.self)
        if let current = slot.pointee {
            while let entry = current[index] {
                let name = String(cString: entry).split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
                if variables[name] == nil { entries.append(entry) }
                index += 1
            }
        }
        for (name, value) in variables.sorted(by: { $0.key < $1.key }) {
            entries.append(strdup("\(name)=\(value)"))
        }
        entries.append(nil)
        let published = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: entries.count)
        published.initialize(from: entries, count: entries.count)
        slot.pointee = published
    }
}

private let environmentLock = NSLock()
