import ArgumentParser
import CKeysealSys
import KeysealClient
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

// Keys for ssh (docs/SSH-AGENT.md): the `kssh` mark on key items and the agent that offers the marked keys.

struct SSHMark: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-mark",
        abstract: "Mark a private key for keyseal ssh-agent, or with --off unmark it."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: KeySelection
    @Flag(name: .long, help: "Remove the mark: the agent no longer offers the key.")
    var off = false

    func validate() throws {
        if selection.tag == nil && selection.hash == nil { throw ValidationError("give --tag or --hash") }
    }

    func execute(_ client: DaemonClient) throws {
        var attributes = selection.attributes
        attributes[AttributeKey.keyClass] = .string("1")
        let query = ItemQuery(itemClass: .key, attributes: attributes, synchronizable: .any, limit: .all)
        let changes = ItemChanges(attributes: [AttributeKey.sshAgent: .bool(!off)])
        _ = try client.send(.update(query, changes))
        if global.json {
            Console.out(JSON.object([("ssh", .bool(!off))]).rendered)
        } else {
            Console.out(
                off ? "the key is no longer offered by keyseal ssh-agent" : "the key is offered by keyseal ssh-agent"
            )
        }
    }
}

struct SSHAgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-agent",
        abstract: "Serve the ssh-agent protocol with the keys marked --ssh, in the foreground until SIGTERM.",
        discussion: """
            Offers the private keys marked for ssh (create-key --ssh, ssh-mark) that the calling user may use in \
            keyseald: P-256 keys (hardware or software) as ecdsa-sha2-nistp256, P-384 and P-521 as \
            ecdsa-sha2-nistp384/521, RSA keys as rsa-sha2-256/512. Signatures are made by keyseald; a locked \
            accessibility class answers SSH_AGENT_FAILURE. The socket is made 0600 (its directory 0700 when the \
            agent creates it) and removed at SIGTERM or SIGINT. Under systemd socket activation (LISTEN_FDS) the \
            agent serves the socket it is given and -a is not needed.

            Programs find the agent through SSH_AUTH_SOCK: -D prints the line that sets it \
            (SSH_AUTH_SOCK=SOCKET; export SSH_AUTH_SOCK;). With the systemd user units \
            (keyseal-ssh-agent.socket), export SSH_AUTH_SOCK="$XDG_RUNTIME_DIR/keyseal/ssh-agent.sock". \
            ssh-add KEYFILE imports an ECDSA key only with --allow-add; removing keys and locking through the \
            agent are refused (keyseal delete-key, keyseal lock).
            """
    )

    @Option(name: .long, help: ArgumentHelp("keyseald's socket.", valueName: "path"))
    var socket: String?
    @Option(name: .customShort("a"), help: ArgumentHelp("The agent's socket (SSH_AUTH_SOCK).", valueName: "socket"))
    var address: String?
    @Flag(name: .customShort("D"), help: "First print SSH_AUTH_SOCK=SOCKET; export SSH_AUTH_SOCK; on standard output.")
    var printEnvironment = false
    @Flag(name: .long, help: "Ask before every signature through the askpass program, naming the key and the caller.")
    var confirm = false
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The askpass program for --confirm (default: $SSH_ASKPASS, else systemd-ask-password); exit 0 = allow.",
            valueName: "program"
        )
    )
    var askpass: String?
    @Flag(name: .long, help: "Let ssh-add import ECDSA keys into Keyseal (software keys, not extractable, marked).")
    var allowAdd = false

    func run() throws {
        do {
            try serve()
        } catch let failure as CommandFailure {
            failure.report(command: "ssh-agent", json: false)
            throw ExitCode(failure.exitCode)
        }
    }

    func serve() throws {
        let environment = ProcessInfo.processInfo.environment
        let activated = Self.activatedListener(environment)
        guard activated != nil || address != nil else {
            throw ValidationError("give -a SOCKET (or start the agent through systemd socket activation)")
        }
        let options = SSHAgentOptions(
            keysealSocket: GlobalOptions.socketPath(socket),
            confirm: confirm,
            askpass: askpass ?? environment["SSH_ASKPASS"].flatMap { $0.isEmpty ? nil : $0 } ?? "systemd-ask-password",
            allowAdd: allowAdd
        )
        let listener: Int32
        var path: String?
        if let activated {
            listener = activated
        } else {
            let socketPath = address!
            listener = try Self.listen(socketPath)
            path = socketPath
        }
        Self.handleTermination(removing: path)
        if printEnvironment, let shown = path ?? environment["SSH_AUTH_SOCK"] {
            Console.out("SSH_AUTH_SOCK=\(Self.shellQuoted(shown)); export SSH_AUTH_SOCK;")
        }
        SSHAgent.log(
            "serving \(path ?? "the socket systemd passed") for keyseald at \(options.keysealSocket)"
                + (confirm ? ", confirming each signature with \(options.askpass)" : "")
        )
        SSHAgent(options: options).serve(listener: listener)
    }

    /// The socket systemd passed (`LISTEN_PID` is this process, `LISTEN_FDS` ≥ 1: descriptor 3), else nil.
    static func activatedListener(_ environment: [String: String]) -> Int32? {
        guard let pid = environment["LISTEN_PID"].flatMap({ Int32($0) }), pid == getpid(),
            let count = environment["LISTEN_FDS"].flatMap({ Int($0) }), count >= 1
        else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        _ = fcntl(3, F_SETFD, FD_CLOEXEC)
        return 3
    }

    /// A listening socket at `path`, 0600; a missing directory is created 0700. A stale socket (nobody listening)
    /// is replaced; a live one or any other file is an error.
    static func listen(_ path: String) throws -> Int32 {
        // Bound and listening under a name of its own first, then renamed into place: the socket appears only when
        // it accepts connections.
        let staging = "\(path).\(getpid())"
        let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        guard staging.utf8.count < capacity else {
            let limit = capacity - 1 - (staging.utf8.count - path.utf8.count)
            throw CommandFailure(status: -50, message: "the socket path is over \(limit) bytes")
        }
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
        if !directory.isEmpty, access(directory, F_OK) != 0, mkdir(directory, 0o700) != 0 {
            throw CommandFailure(
                status: -50,
                message: "cannot create \(directory): \(String(cString: strerror(errno)))"
            )
        }
        if access(path, F_OK) == 0 {
            var mode: UInt32 = 0
            let probe = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            defer { close(probe) }
            let live = withAddress(path) { connect(probe, $0, $1) == 0 }
            guard keyseal_file_mode(path, 0, &mode) == 0, mode & 0o170000 == 0o140000, !live else {
                throw CommandFailure(status: -25299, message: "\(path) exists (another agent, or not a socket)")
            }
            unlink(path)
        }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CommandFailure(status: -50, message: "socket: \(String(cString: strerror(errno)))") }
        // Created 0600: no window in which another user could connect.
        let previous = umask(0o177)
        unlink(staging)
        let bound = withAddress(staging) { bind(fd, $0, $1) == 0 }
        umask(previous)
        guard bound, Glibc.listen(fd, 64) == 0, chmod(staging, 0o600) == 0, rename(staging, path) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            unlink(staging)
            throw CommandFailure(status: -50, message: "cannot listen on \(path): \(reason)")
        }
        return fd
    }

    static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: Array(path.utf8) + [0])
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// SIGTERM and SIGINT: remove the socket (one the agent made) and exit 0. The signals are blocked in this thread
    /// before any other starts (threads inherit the mask) and taken by one thread with `sigwait`, so no handler runs
    /// in the middle of other code.
    static func handleTermination(removing path: String?) {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let started = SSHAgent.detachThread {
            var signals = sigset_t()
            sigemptyset(&signals)
            sigaddset(&signals, SIGTERM)
            sigaddset(&signals, SIGINT)
            var received: Int32 = 0
            while sigwait(&signals, &received) != 0 {}
            if let path { unlink(path) }
            SSHAgent.log("stopped")
            Glibc.exit(0)
        }
        if !started { pthread_sigmask(SIG_UNBLOCK, &signals, nil) }
    }

    /// `'…'` for sh, with `'` written as `'\''`.
    static func shellQuoted(_ text: String) -> String {
        "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }
}
