import FoundationEssentials
import Glibc
import KeysealClient

/// An askpass program run for an Unlock prompt: it prints the passcode on its standard output (one line) and exits
/// 0; anything else, or no answer within the timeout, dismisses the prompt. The passcode never touches a String.
struct Askpass: Sendable {
    let pid: pid_t
    let output: Int32

    static func spawn(_ command: [String]) throws -> Askpass {
        var fds: [Int32] = [0, 0]
        guard makePipe(&fds, nonBlocking: false) else { throw BusError(BusError.failed, "pipe2 failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        var arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, command[0], &actions, nil, &arguments, environ)
        close(fds[1])
        guard result == 0 else {
            close(fds[0])
            throw BusError(
                BusError.failed,
                "cannot run the askpass program \(command[0]): \(String(cString: strerror(result)))"
            )
        }
        return Askpass(pid: pid, output: fds[0])
    }

    /// The first line the program prints, if it exits 0 within `timeoutSeconds`; the program is killed otherwise.
    func read(timeoutSeconds: Int) -> SecretBytes? {
        defer { close(output) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        defer { zeroize(&buffer) }
        var filled = 0
        let deadline = time(nil) + timeoutSeconds
        while filled < buffer.count {
            var poller = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            let left = Int32(max(0, deadline - time(nil)) * 1000)
            guard left > 0, poll(&poller, 1, left) > 0 else { break }
            let count = buffer.withUnsafeMutableBytes {
                Glibc.read(output, $0.baseAddress! + filled, $0.count - filled)
            }
            if count <= 0 { break }
            filled += count
        }
        if time(nil) >= deadline { kill(pid, SIGKILL) }
        var status: Int32 = 0
        _ = Posix.waitpid(pid, &status, 0)
        // Exited normally with status 0 (WIFEXITED && WEXITSTATUS == 0).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else { return nil }
        let end = buffer[..<filled].firstIndex(of: 10) ?? filled
        guard end > 0 else { return nil }
        return SecretBytes(copying: buffer[..<end])
    }
}
