import CKeysealSys
import Glibc
import Synchronization

/// A program run to ask the user something — an askpass program, fprintd's tools — with a time limit and a bound on
/// what it may print: the one way the package runs such programs (LocalAuthentication's passcode prompt and
/// fingerprint check, the Secret Service bridge's Unlock prompt).
///
/// The program runs in a process group of its own with standard input on /dev/null and standard output on a pipe
/// (standard error is inherited); no other descriptor of this process reaches it. What it prints is read into
/// ``SecretBytes`` (it may be a passcode) and never into a `String` or an array that lingers. At the time limit, or
/// once it has printed more than the limit allows, its whole process group is killed (SIGKILL).
package struct PromptProgram: Sendable {
    /// The default time limit, seconds: as long as a person may take to answer a prompt.
    package static let defaultTimeoutSeconds = 120
    /// The default bound on the output: a passcode line.
    package static let defaultOutputLimit = 4096

    /// How the program ended.
    package enum Outcome: Sendable {
        /// It exited by itself with `status`, having printed `output`.
        case exited(status: Int32, output: SecretBytes)
        /// A signal ended it (not one of ours).
        case signaled
        /// It had not exited within the time limit: its process group was killed.
        case timedOut
        /// It printed more than the output limit: its process group was killed.
        case outputTooLong
    }

    /// The process id, also its process group's.
    package let pid: pid_t
    private let output: Int32
    /// Whether the program was reaped (its process group id may then be anyone's): ``terminate()`` signals only
    /// before, and the reap happens under this lock.
    private let reaped = Reaped()

    private final class Reaped: Sendable {
        let state = Mutex(false)
    }

    /// Starts `command` (its first element is looked up on the `PATH` when it has no slash), with `environment`
    /// added to this process's. Throws a message when it cannot be started.
    package static func spawn(
        _ command: [String],
        environment extra: [String: String] = [:]
    ) throws(PromptProgramError) -> PromptProgram {
        guard let program = command.first, !program.isEmpty else { throw PromptProgramError("no program to run") }
        var pipe: [Int32] = [-1, -1]
        guard keyseal_pipe_cloexec(&pipe) == 0 else {
            throw PromptProgramError("pipe2 failed: \(String(cString: strerror(errno)))")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        _ = keyseal_spawnattr_own_group(&attributes)
        let arguments = command.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var variables: [UnsafeMutablePointer<CChar>?] = []
        var index = 0
        while let entry = environ[index] {
            let name = String(cString: entry).prefix { $0 != "=" }
            if extra[String(name)] == nil { variables.append(strdup(entry)) }
            index += 1
        }
        variables += extra.map { strdup("\($0.key)=\($0.value)") }
        variables.append(nil)
        defer { for variable in variables { free(variable) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, program, &actions, &attributes, arguments, variables)
        _ = Posix.close(pipe[1])
        guard result == 0 else {
            _ = Posix.close(pipe[0])
            throw PromptProgramError("cannot run \(program): \(String(cString: strerror(result)))")
        }
        _ = fcntl(pipe[0], F_SETFL, fcntl(pipe[0], F_GETFL) | O_NONBLOCK)
        return PromptProgram(pid: pid, output: pipe[0])
    }

    /// Reads what the program prints until it exits, at most `outputLimit` bytes and `timeoutSeconds` seconds (its
    /// process group is killed past either), and reaps it. Whatever it left running in its process group is killed
    /// too: the group is signalled while the program is still a zombie (``keyseal_child_exited`` does not reap), so
    /// its id cannot belong to anyone else yet. Call once.
    package func finish(timeoutSeconds: Int, outputLimit: Int = PromptProgram.defaultOutputLimit) -> Outcome {
        defer { _ = Posix.close(output) }
        let deadline = Self.now() + Double(max(timeoutSeconds, 0))
        var filled = 0
        var overflow = false
        var status: Int32 = 0
        var exited = false
        // Reaped by someone else (a host program that ignores SIGCHLD): it has exited, its status is lost, and its
        // group id may be free already, so the group is not signalled.
        var reapedElsewhere = false
        // One byte more than the limit: reading it means the program printed too much.
        let buffer = SecretBytes(count: outputLimit + 1) { buffer in
            var open = true
            while !exited && !overflow {
                let left = deadline - Self.now()
                if left <= 0 { break }
                if open {
                    var poller = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
                    _ = poll(&poller, 1, Int32(min(left, 0.05) * 1000) + 1)
                    open = Self.drain(output, into: buffer, filled: &filled)
                    overflow = filled > outputLimit
                } else {
                    usleep(20_000)
                }
                switch keyseal_child_exited(pid) {
                case 1: exited = true
                case -1:
                    exited = true
                    reapedElsewhere = true
                default: break
                }
            }
            if exited && !overflow {
                // What it printed before exiting is in the pipe still (a descendant may keep it open: not waited for).
                _ = Self.drain(output, into: buffer, filled: &filled)
                overflow = filled > outputLimit
            }
        }
        reaped.state.withLock { isReaped in
            isReaped = true
            guard !reapedElsewhere else { return }
            kill(-pid, SIGKILL)
            if Posix.waitpid(pid, &status, 0) != pid { reapedElsewhere = true }
        }
        if !exited || overflow { return overflow ? .outputTooLong : .timedOut }
        // Its status is unknown: taken as a dismissal, never as an answer.
        if reapedElsewhere { return .signaled }
        // WIFEXITED: the low seven bits are zero; WEXITSTATUS: the next byte.
        guard status & 0x7f == 0 else { return .signaled }
        let printed = buffer.withUnsafeBytes { SecretBytes(copying: $0.prefix(filled)) }
        return .exited(status: (status >> 8) & 0xff, output: printed)
    }

    /// Asks the program's process group to end (SIGTERM): a prompt dismissed by its caller.
    package func terminate() {
        reaped.state.withLock { isReaped in
            if !isReaped { kill(-pid, SIGTERM) }
        }
    }

    /// The first line of `output` (without its line feed, and a carriage return before it), as a passcode.
    package static func firstLine(_ output: SecretBytes) -> SecretBytes {
        output.withUnsafeBytes { bytes in
            var line = bytes[...]
            if let end = line.firstIndex(of: 0x0A) { line = line[..<end] }
            if line.last == 0x0D { line = line.dropLast() }
            return SecretBytes(copying: line)
        }
    }

    /// Reads what is available into `buffer` after `filled`, stopping one byte past the limit (the buffer's size):
    /// false once the pipe is closed.
    private static func drain(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, filled: inout Int) -> Bool {
        while filled < buffer.count {
            let count = Posix.read(fd, buffer.baseAddress! + filled, buffer.count - filled)
            if count > 0 {
                filled += count
            } else {
                return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
            }
        }
        return true
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

/// Why a ``PromptProgram`` could not be started.
package struct PromptProgramError: Error, Sendable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
