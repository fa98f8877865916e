import Foundation
import KeysealTestSupport
import Testing

/// `keyseal ssh-agent` as a process against a real keyseald, used by OpenSSH's own programs (ssh-add, ssh, sshd,
/// ssh-keygen -Y) and by git, on swtpm and on SoftHSM2.
@Suite("ssh-agent", .serialized)
struct SSHAgentTests {
    static let backends: [DaemonFixture.Backend] = [.swtpm, .pkcs11]

    @Test("ssh-add -L lists the keys marked --ssh and only those; ssh-mark changes the mark", arguments: backends)
    func listsMarkedKeysOnly(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(try cli("create-key", "--tag", "marked", "--hardware", "--ssh").status == 0)
        #expect(try cli("create-key", "--tag", "plain", "--type", "ec384").status == 0)
        #expect(try cli("find-key", "--tag", "marked").stdoutText.contains(" ssh\n"))
        let agent = try AgentProcess(daemon: daemon)
        defer { agent.stop() }

        let listed = try agent.sshAdd("-L")
        #expect(listed.status == 0, "\(listed.stderrText) \(agent.log)")
        let lines = listed.stdoutText.split(separator: "\n")
        #expect(lines.count == 1 && lines.first?.hasPrefix("ecdsa-sha2-nistp256 ") == true)
        #expect(lines.first?.hasSuffix(" marked") == true)

        #expect(try cli("ssh-mark", "--tag", "plain").status == 0)
        let both = try agent.sshAdd("-L").stdoutText
        #expect(both.contains("ecdsa-sha2-nistp384 ") && both.split(separator: "\n").count == 2)
        #expect(try cli("ssh-mark", "--tag", "marked", "--off").status == 0)
        let after = try agent.sshAdd("-L").stdoutText.split(separator: "\n")
        #expect(after.count == 1 && after.first?.hasSuffix(" plain") == true)
    }

    @Test("ssh logs in to a private sshd through the agent with a key in the hardware", arguments: backends)
    func sshLogin(backend: DaemonFixture.Backend) throws {
        guard runningAsRoot("sshd needs root") else { return }
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(try cli("create-key", "--tag", "login", "--hardware", "--ssh").status == 0)
        let agent = try AgentProcess(daemon: daemon)
        defer { agent.stop() }
        let sshd = try SSHServer(authorizedKeys: try agent.sshAdd("-L").stdoutText)
        defer { sshd.stop() }

        let result = try sshd.ssh(agent: agent.socket, command: "echo logged-in-as-$(id -un)")
        #expect(result.status == 0, "\(result.stderrText) \(agent.log) \(sshd.log)")
        #expect(result.stdoutText == "logged-in-as-root\n")
    }

    @Test(
        "ssh-keygen -Y sign through the agent verifies with ssh-keygen -Y verify (P-256 hardware, P-384, RSA)",
        arguments: backends
    )
    func sshKeygenSignatures(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(try cli("create-key", "--tag", "p256", "--hardware", "--ssh").status == 0)
        #expect(try cli("create-key", "--tag", "p384", "--type", "ec384", "--ssh").status == 0)
        #expect(try cli("create-key", "--tag", "rsa", "--type", "rsa2048", "--ssh").status == 0)
        let agent = try AgentProcess(daemon: daemon)
        defer { agent.stop() }
        let listed = try agent.sshAdd("-L")
        let keys = listed.stdoutText.split(separator: "\n").map(String.init)
        #expect(keys.count == 3, "\(listed.stderrText) \(agent.log)")
        for key in keys {
            let signed = try agent.signAndVerify(publicKey: key, message: "message for \(key.suffix(5))")
            #expect(signed.status == 0, "\(key): \(signed.stderrText) \(agent.log)")
            #expect(signed.stdoutText.contains("Good \"file\" signature"), "\(key): \(signed.stdoutText)")
        }
    }

    @Test(
        "git commit -S with gpg.format=ssh signs through the agent; git verify-commit accepts it",
        arguments: backends
    )
    func gitCommitSigning(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        #expect(try CLI(socket: daemon.socketPath)("create-key", "--tag", "git", "--hardware", "--ssh").status == 0)
        let agent = try AgentProcess(daemon: daemon)
        defer { agent.stop() }
        let key = try agent.sshAdd("-L").stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        let git = try requireTool("git", package: "git")
        let repository = agent.root.appending("repo").path
        let signers = agent.root.appending("allowed_signers")
        try "dev@example.com \(key)\n".write(to: signers, atomically: true, encoding: .utf8)
        let environment = [
            "SSH_AUTH_SOCK": agent.socket, "HOME": agent.root.path, "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_NAME": "Dev",
            "GIT_COMMITTER_EMAIL": "dev@example.com",
        ]
        func run(_ arguments: String...) throws -> ProcessResult {
            try runProcess(git, ["-C", repository] + arguments, environment: environment)
        }
        #expect(try runProcess(git, ["init", "-q", repository], environment: environment).status == 0)
        #expect(try run("config", "gpg.format", "ssh").status == 0)
        #expect(try run("config", "user.signingkey", "key::\(key)").status == 0)
        #expect(try run("config", "gpg.ssh.allowedSignersFile", signers.path).status == 0)
        let committed = try run("commit", "-q", "-S", "--allow-empty", "-m", "signed by a TPM key")
        #expect(committed.status == 0, "\(committed.stderrText) \(agent.log)")
        let verified = try run("verify-commit", "HEAD")
        #expect(verified.status == 0, "\(verified.stderrText)")
        #expect(verified.stderrText.contains("Good \"git\" signature for dev@example.com"), "\(verified.stderrText)")
    }

    @Test("with the store locked the agent answers failure, ssh fails, and the log says why", arguments: backends)
    func lockedStoreRefuses(backend: DaemonFixture.Backend) throws {
        guard runningAsRoot("sshd needs root") else { return }
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let passcode = "correct horse battery"
        #expect(try cli("passcode", "set", "--passcode-stdin", input: passcode + "\n").status == 0)
        #expect(try cli("create-key", "--tag", "locked", "--hardware", "--ssh").status == 0)
        let agent = try AgentProcess(daemon: daemon)
        defer { agent.stop() }
        let sshd = try SSHServer(authorizedKeys: try agent.sshAdd("-L").stdoutText)
        defer { sshd.stop() }
        #expect(try sshd.ssh(agent: agent.socket, command: "true").status == 0, "\(agent.log)")

        #expect(try cli("lock").status == 0)
        let login = try sshd.ssh(agent: agent.socket, command: "echo should-not-run")
        #expect(login.status != 0 && !login.stdoutText.contains("should-not-run"))
        let listed = try agent.sshAdd("-L")
        #expect(listed.status != 0 && !listed.stdoutText.contains("ecdsa"))
        let log = agent.log
        #expect(log.contains("locked (run keyseal unlock)"), "\(log)")
        #expect(!log.contains(passcode))
    }

    @Test("an agent run by another uid offers only the keys of that uid's groups", arguments: backends)
    func otherUserSeesOnlyItsGroups(backend: DaemonFixture.Backend) throws {
        guard runningAsRoot() else { return }
        let daemon = try DaemonFixture.sharedWithNobody(backend: backend)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(try cli("create-key", "--tag", "roots", "--hardware", "--ssh").status == 0)
        let theirs = try cli("create-key", "--tag", "nobodys", "--ssh", "--access-group", "uid.65534")
        #expect(theirs.status == 0, "\(theirs.stderrText)")
        let agent = try AgentProcess(daemon: daemon, uid: 65534)
        defer { agent.stop() }
        let listed = try agent.sshAdd("-L")
        #expect(listed.status == 0, "\(listed.stderrText) \(agent.log)")
        let lines = listed.stdoutText.split(separator: "\n")
        #expect(lines.count == 1 && lines.first?.hasSuffix(" nobodys") == true, "\(listed.stdoutText)")
        let signed = try agent.signAndVerify(publicKey: String(lines.first ?? ""), message: "from nobody")
        #expect(signed.status == 0, "\(signed.stderrText) \(agent.log)")
    }

    /// OpenSSH's regress test `agent-getpeereid.sh`, step by step, and then the attack it guards against: the socket
    /// made reachable by everyone (0666 in a traversable directory), so that only the agent's own check stands
    /// between user nobody and root's keys.
    @Test("another uid is refused even through a socket everyone may open (agent-getpeereid.sh)")
    func otherUIDRefused() throws {
        guard runningAsRoot() else { return }
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let sshAdd = try requireTool("ssh-add", package: "openssh-client")
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(try cli("create-key", "--tag", "roots", "--ssh").status == 0)
        let agent = try AgentProcess(daemon: daemon)
        defer { agent.stop() }
        let directory = (agent.socket as NSString).deletingLastPathComponent
        chmod(directory, 0o711)
        func asNobody() throws -> ProcessResult {
            try runProcess(
                setpriv,
                ["--reuid", "65534", "--regid", "65534", "--clear-groups", sshAdd, "-l"],
                environment: ["SSH_AUTH_SOCK": agent.socket]
            )
        }

        // The script's steps: the socket 0644; its owner lists; nobody fails with 2 or more.
        chmod(agent.socket, 0o644)
        let owner = try agent.sshAdd("-l")
        #expect(owner.status == 0 && owner.stdoutText.contains("roots"), "\(owner.stderrText) \(agent.log)")
        #expect(try asNobody().status >= 2)

        // Everyone may open the socket: the agent itself refuses nobody, and lists nothing to it.
        chmod(agent.socket, 0o666)
        let nobody = try asNobody()
        #expect(nobody.status != 0, "\(nobody.stdoutText)")
        #expect(!nobody.stdoutText.contains("roots") && !nobody.stdoutText.contains("ecdsa"))
        #expect(agent.log.contains("uid mismatch: a client of uid 65534 refused"), "\(agent.log)")
        // Root and the owner still are served.
        #expect(try agent.sshAdd("-l").status == 0)
    }

    @Test(
        "--confirm asks the askpass program, naming the key and the caller: no refuses, yes signs",
        arguments: backends
    )
    func confirmBeforeUse(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        #expect(try CLI(socket: daemon.socketPath)("create-key", "--tag", "asked", "--hardware", "--ssh").status == 0)
        let scratch = try TemporaryDirectory(prefix: "askpass")
        defer { scratch.remove() }
        let answer = scratch.appending("answer")
        let prompt = scratch.appending("prompt")
        let askpass = scratch.appending("askpass")
        try "#!/bin/sh\nprintf '%s' \"$1\" > '\(prompt.path)'\nexit $(cat '\(answer.path)')\n".write(
            to: askpass,
            atomically: true,
            encoding: .utf8
        )
        chmod(askpass.path, 0o755)
        let agent = try AgentProcess(daemon: daemon, arguments: ["--confirm", "--askpass", askpass.path])
        defer { agent.stop() }
        let key = try agent.sshAdd("-L").stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)

        try "1".write(to: answer, atomically: true, encoding: .utf8)
        let refused = try agent.signAndVerify(publicKey: key, message: "refused")
        #expect(refused.status != 0)
        let asked = (try? String(contentsOf: prompt, encoding: .utf8)) ?? ""
        #expect(asked.contains("\"asked\"") && asked.contains("ssh-keygen["), "prompt: \(asked)")
        #expect(agent.log.contains("not confirmed"))

        try "0".write(to: answer, atomically: true, encoding: .utf8)
        let allowed = try agent.signAndVerify(publicKey: key, message: "allowed")
        #expect(allowed.status == 0, "\(allowed.stderrText) \(agent.log)")
    }

    @Test("ssh-add KEYFILE imports an ECDSA key, not extractable and marked, only with --allow-add")
    func sshAddImports() throws {
        let daemon = try DaemonFixture(.swtpm)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let scratch = try TemporaryDirectory(prefix: "ssh-add")
        defer { scratch.remove() }
        let keyFile = scratch.appending("id_ecdsa").path
        let keygen = try requireTool("ssh-keygen", package: "openssh-client")
        let made = try runProcess(
            keygen,
            ["-q", "-t", "ecdsa", "-b", "384", "-N", "", "-C", "imported", "-f", keyFile]
        )
        #expect(made.status == 0, "\(made.stderrText)")

        let closed = try AgentProcess(daemon: daemon)
        #expect(try closed.sshAdd(keyFile).status != 0)
        #expect(closed.log.contains("--allow-add"))
        closed.stop()
        #expect(try cli("find-key", "-l", "imported").status == 44)

        let agent = try AgentProcess(daemon: daemon, arguments: ["--allow-add"])
        defer { agent.stop() }
        let added = try agent.sshAdd(keyFile)
        #expect(added.status == 0, "\(added.stderrText) \(agent.log)")
        let found = try cli("--json", "find-key", "-l", "imported")
        let key = try #require((try JSONSerialization.jsonObject(with: found.stdout) as? [[String: Any]])?.first)
        #expect(
            key["extractable"] as? Bool == false && key["ssh"] as? Bool == true && key["type"] as? String == "ec384"
        )
        let publicKey = try String(contentsOfFile: keyFile + ".pub", encoding: .utf8)
        let listed = try agent.sshAdd("-L").stdoutText
        #expect(listed.contains(String(publicKey.split(separator: " ")[1])))
    }

    @Test("unknown, malformed and over-long messages get SSH_AGENT_FAILURE; the agent keeps serving")
    func badMessages() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        #expect(try CLI(socket: daemon.socketPath)("create-key", "--tag", "k", "--ssh").status == 0)
        let agent = try AgentProcess(daemon: daemon)
        defer { agent.stop() }
        let script = """
            import socket, struct, sys
            def ask(payload, raw=None):
                s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(sys.argv[1])
                s.sendall(raw if raw is not None else struct.pack(">I", len(payload)) + payload)
                reply = s.recv(64); s.close(); return reply.hex()
            print(ask(bytes([99])))                                   # unknown message
            print(ask(bytes([13]) + b"\\x00\\x00\\x01\\x00abc"))        # sign request, truncated string
            print(ask(bytes([11, 0])))                                # identities request with trailing bytes
            print(ask(b"", raw=struct.pack(">I", 1 << 30) + b"x"))    # over-long frame
            print(ask(bytes([17]) + b"\\x00\\x00\\x00\\x13ecdsa-sha2-nistp256"))  # add without --allow-add
            """
        let result = try runProcess("/usr/bin/python3", ["-c", script, agent.socket])
        #expect(result.stdoutText == String(repeating: "0000000105\n", count: 5), "\(result.stderrText)")
        #expect(try agent.sshAdd("-L").stdoutText.hasPrefix("ecdsa-sha2-nistp256 "))
    }

    @Test("clients that connect and stay idle do not hold up others (an answer within 2 s)")
    func idleClientsDoNotBlockOthers() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        #expect(try CLI(socket: daemon.socketPath)("create-key", "--tag", "k", "--ssh").status == 0)
        let agent = try AgentProcess(daemon: daemon)
        defer { agent.stop() }
        let script = """
            import socket, struct, sys
            idle = []
            for _ in range(16):
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); idle.append(s)
            s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(sys.argv[1])
            s.sendall(struct.pack(">IB", 1, 11))
            print(s.recv(5)[4])
            """
        let result = try runProcess("/usr/bin/python3", ["-c", script, agent.socket])
        #expect(result.stdoutText == "12\n", "\(result.stderrText)")
    }

    /// The review's lockout: each client held a connection to keyseald of the user's uid from its first request on,
    /// so 64 clients that asked once and stayed idle (the far end of `ssh -A` can open them) used up the uid's
    /// connections (`--max-connections`, 64): the user's command line got errSecAllocate (-108), and the agent closed
    /// every further client at once. The agent now shares a few connections to keyseald, and a newcomer over its cap
    /// closes the client idle the longest.
    @Test("100 clients that asked once and stay idle do not lock the user out of keyseald or of the agent")
    func idleClientsDoNotExhaustTheUsersConnections() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(try cli("create-key", "--tag", "k", "--ssh").status == 0)
        let agent = try AgentProcess(daemon: daemon)
        defer { agent.stop() }
        let scratch = try TemporaryDirectory(prefix: "idle-clients")
        defer { scratch.remove() }
        let ready = scratch.appending("ready").path
        _ = FileManager.default.createFile(atPath: ready, contents: nil)
        let script = """
            import socket, struct, sys, time
            held = []
            for _ in range(100):
                s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
                try:
                    s.sendall(struct.pack(">IB", 1, 11)); s.recv(65536)
                except OSError:
                    pass
                held.append(s)
            print("ready", flush=True)
            time.sleep(120)
            """
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        holder.arguments = ["-c", script, agent.socket]
        holder.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: ready))
        holder.standardInput = FileHandle.nullDevice
        try holder.run()
        defer {
            holder.terminate()
            _ = try? holder.exitStatus(within: .seconds(30))
        }
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline, holder.isRunning,
            (try? String(contentsOfFile: ready, encoding: .utf8))?.contains("ready") != true
        {
            usleep(50_000)
        }
        #expect((try? String(contentsOfFile: ready, encoding: .utf8))?.contains("ready") == true)
        let status = try cli("status")
        #expect(status.status == 0, "\(status.stderrText)")
        let listed = try agent.sshAdd("-l")
        #expect(listed.status == 0, "\(listed.stderrText) \(agent.log)")
    }

    /// The agent's clients are bounded in time too: one that sends nothing for the idle timeout (600 s; the debug
    /// build takes it from `KEYSEAL_TESTING_AGENT_IDLE_SECONDS`) is closed.
    @Test("a client that sends nothing for the idle timeout is closed")
    func idleClientIsClosed() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let agent = try AgentProcess(daemon: daemon, environment: ["KEYSEAL_TESTING_AGENT_IDLE_SECONDS": "2"])
        defer { agent.stop() }
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(sys.argv[1])
            try:
                print("closed" if s.recv(1) == b"" else "data")
            except OSError as error:
                print("open", error)
            """
        let result = try runProcess("/usr/bin/python3", ["-c", script, agent.socket])
        #expect(result.stdoutText == "closed\n", "\(result.stdoutText) \(result.stderrText)")
    }

    /// The prompt named every process up the chain, root's and other accounts' included (a user's `ssh` started by
    /// root's session manager named root's processes to the user). It now stops at the first process of another uid.
    @Test("--confirm's prompt names only processes of the caller's uid")
    func confirmPromptStopsAtAnotherAccount() throws {
        guard runningAsRoot() else { return }
        let daemon = try DaemonFixture.sharedWithNobody()
        defer { daemon.remove() }
        let created = try CLI(socket: daemon.socketPath)(
            "create-key",
            "--tag",
            "nobodys",
            "--ssh",
            "--access-group",
            "uid.65534"
        )
        #expect(created.status == 0, "\(created.stderrText)")
        let scratch = try TemporaryDirectory(prefix: "askpass")
        defer { scratch.remove() }
        // The agent, its askpass and the signing ssh-keygen run as uid 65534.
        chown(scratch.path, 65534, 65534)
        chmod(scratch.path, 0o755)
        let prompt = scratch.appending("prompt")
        let askpass = scratch.appending("askpass")
        try "#!/bin/sh\nprintf '%s' \"$1\" > '\(prompt.path)'\nexit 1\n".write(
            to: askpass,
            atomically: true,
            encoding: .utf8
        )
        chmod(askpass.path, 0o755)
        let agent = try AgentProcess(daemon: daemon, uid: 65534, arguments: ["--confirm", "--askpass", askpass.path])
        defer { agent.stop() }
        let key = try agent.sshAdd("-L").stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(key.hasSuffix(" nobodys"), "\(key) \(agent.log)")
        let keyFile = scratch.appending("key.pub")
        let message = scratch.appending("message")
        try (key + "\n").write(to: keyFile, atomically: true, encoding: .utf8)
        try "asked by nobody".write(to: message, atomically: true, encoding: .utf8)
        for file in [keyFile, message] { chown(file.path, 65534, 65534) }
        // ssh-keygen as uid 65534, a child of this test process (root's).
        let signed = try runProcess(
            try requireTool("setpriv", package: "util-linux"),
            [
                "--reuid", "65534", "--regid", "65534", "--clear-groups",
                try requireTool("ssh-keygen", package: "openssh-client"), "-Y", "sign", "-f", keyFile.path, "-n",
                "file", message.path,
            ],
            environment: ["SSH_AUTH_SOCK": agent.socket]
        )
        #expect(signed.status != 0)
        let asked = (try? String(contentsOf: prompt, encoding: .utf8)) ?? ""
        #expect(asked.contains("ssh-keygen["), "prompt: \(asked) \(agent.log)")
        #expect(!asked.contains("[\(getpid())]"), "the prompt names root's test process: \(asked)")
    }

    @Test("SIGTERM removes the socket; -D prints the line that exports SSH_AUTH_SOCK")
    func terminationAndEnvironmentLine() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let agent = try AgentProcess(daemon: daemon, arguments: ["-D"])
        let socket = agent.socket
        let deadline = Date().addingTimeInterval(5)
        while agent.output.isEmpty && Date() < deadline { usleep(10_000) }
        #expect(agent.output == "SSH_AUTH_SOCK='\(socket)'; export SSH_AUTH_SOCK;\n")
        #expect(agent.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: socket))
    }

    @Test("socket activation: the agent serves the socket systemd passes (LISTEN_FDS, LISTEN_PID)")
    func socketActivation() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        #expect(try CLI(socket: daemon.socketPath)("create-key", "--tag", "activated", "--ssh").status == 0)
        let activate = try requireTool("systemd-socket-activate", package: "systemd")
        let scratch = try TemporaryDirectory(prefix: "ssh-agent-activated")
        defer { scratch.remove() }
        let socket = scratch.appending("agent.sock").path
        let keyseal = try builtProductsDirectory().appendingPathComponent("keyseal").path
        // No -a: the agent serves descriptor 3 only when LISTEN_PID names it.
        let process = try Spawned(
            [activate, "-l", socket, keyseal, "--socket", daemon.socketPath, "ssh-agent"],
            log: scratch.appending("agent.log").path
        )
        defer { process.stop() }
        let deadline = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: socket) && Date() < deadline { usleep(10_000) }
        let listed = try runProcess(
            try requireTool("ssh-add", package: "openssh-client"),
            ["-L"],
            environment: ["SSH_AUTH_SOCK": socket]
        )
        #expect(listed.status == 0 && listed.stdoutText.hasSuffix(" activated\n"), "\(listed.stderrText)")
    }

    @Test("the agent's socket is 0600 and a directory it creates is 0700")
    func socketModes() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let agent = try AgentProcess(daemon: daemon)
        defer { agent.stop() }
        let socketMode = try FileManager.default.attributesOfItem(atPath: agent.socket)[.posixPermissions] as? Int
        let directory = (agent.socket as NSString).deletingLastPathComponent
        let directoryMode = try FileManager.default.attributesOfItem(atPath: directory)[.posixPermissions] as? Int
        #expect(socketMode == 0o600 && directoryMode == 0o700)
    }
}

/// A `keyseal ssh-agent` process on a socket of its own, optionally as another uid (with `setpriv`).
final class AgentProcess {
    let root: TemporaryDirectory
    let socket: String
    let process = Process()
    let logPath: String
    let outputPath: String

    init(
        daemon: DaemonFixture,
        uid: UInt32? = nil,
        arguments: [String] = [],
        environment: [String: String] = [:]
    ) throws {
        root = try TemporaryDirectory(prefix: "ssh-agent")
        chmod(root.path, 0o711)
        socket = root.appending("agent/agent.sock").path
        logPath = root.appending("agent.log").path
        outputPath = root.appending("agent.out").path
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        let keyseal = try builtProductsDirectory().appendingPathComponent("keyseal").path
        let command = [keyseal, "--socket", daemon.socketPath, "ssh-agent", "-a", socket] + arguments
        if let uid {
            chown(root.path, uid, uid)
            process.executableURL = URL(fileURLWithPath: try requireTool("setpriv", package: "util-linux"))
            process.arguments = ["--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups"] + command
        } else {
            process.executableURL = URL(fileURLWithPath: keyseal)
            process.arguments = Array(command.dropFirst())
        }
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardInput = FileHandle.nullDevice
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            guard process.isRunning else { throw FixtureError("keyseal ssh-agent exited: \(log)") }
            if FileManager.default.fileExists(atPath: socket) { return }
            usleep(10_000)
        }
        throw FixtureError("keyseal ssh-agent did not listen within 20 s: \(log)")
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Sends SIGTERM and waits; the exit status.
    @discardableResult
    func stop() -> Int32 {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        return (try? process.exitStatus(within: .seconds(30))) ?? -1
    }

    deinit {
        stop()
        root.remove()
    }

    func sshAdd(_ arguments: String...) throws -> ProcessResult {
        try runProcess(
            try requireTool("ssh-add", package: "openssh-client"),
            arguments,
            environment: ["SSH_AUTH_SOCK": socket]
        )
    }

    /// `ssh-keygen -Y sign` with the public key (the agent signs), then `ssh-keygen -Y verify` of that signature; the
    /// verification's result (or the signing's, when it failed).
    func signAndVerify(publicKey: String, message: String) throws -> ProcessResult {
        let keygen = try requireTool("ssh-keygen", package: "openssh-client")
        let scratch = try TemporaryDirectory(prefix: "ssh-sign")
        defer { scratch.remove() }
        let keyFile = scratch.appending("key.pub")
        let messageFile = scratch.appending("message")
        let signers = scratch.appending("allowed_signers")
        try (publicKey + "\n").write(to: keyFile, atomically: true, encoding: .utf8)
        try message.write(to: messageFile, atomically: true, encoding: .utf8)
        try "signer@example.com \(publicKey)\n".write(to: signers, atomically: true, encoding: .utf8)
        let signed = try runProcess(
            keygen,
            ["-Y", "sign", "-f", keyFile.path, "-n", "file", messageFile.path],
            environment: ["SSH_AUTH_SOCK": socket]
        )
        guard signed.status == 0 else { return signed }
        return try runProcess(
            keygen,
            [
                "-Y", "verify", "-f", signers.path, "-I", "signer@example.com", "-n", "file", "-s",
                messageFile.path + ".sig",
            ],
            input: Data(message.utf8)
        )
    }
}

/// A private sshd on 127.0.0.1: its own host key, port, configuration and authorized_keys; run as root with
/// `-D -f config`, stopped by ``stop()``.
final class SSHServer {
    let root: TemporaryDirectory
    let port: Int
    let process: Spawned
    let logPath: String

    init(authorizedKeys: String) throws {
        let sshd = try requireTool("sshd", package: "openssh-server")
        let keygen = try requireTool("ssh-keygen", package: "openssh-client")
        root = try TemporaryDirectory(prefix: "sshd")
        let hostKey = root.appending("host_key").path
        #expect(try runProcess(keygen, ["-q", "-t", "ed25519", "-N", "", "-f", hostKey]).status == 0)
        let authorized = root.appending("authorized_keys")
        try authorizedKeys.write(to: authorized, atomically: true, encoding: .utf8)
        port = try Self.freePort()
        let config = root.appending("sshd_config")
        try """
        Port \(port)
        ListenAddress 127.0.0.1
        HostKey \(hostKey)
        PidFile \(root.appending("sshd.pid").path)
        AuthorizedKeysFile \(authorized.path)
        StrictModes no
        UsePAM no
        PermitRootLogin prohibit-password
        PasswordAuthentication no
        KbdInteractiveAuthentication no
        PubkeyAuthentication yes
        PubkeyAcceptedAlgorithms ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521,rsa-sha2-256,rsa-sha2-512
        LogLevel VERBOSE

        """.write(to: config, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        logPath = root.appending("sshd.log").path
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process = try Spawned([sshd, "-D", "-e", "-f", config.path], log: logPath)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            guard process.isRunning else { throw FixtureError("sshd exited: \(log)") }
            if Self.accepts(port) { return }
            usleep(20_000)
        }
        throw FixtureError("sshd did not listen within 20 s: \(log)")
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func stop() {
        process.stop()
        root.remove()
    }

    /// `ssh` with only the agent's keys, the server's host key pinned, no prompts.
    func ssh(agent: String, command: String) throws -> ProcessResult {
        try ssh(identity: ["-o", "IdentityAgent=\(agent)"], command: command)
    }

    /// `ssh` with the keys `identity` names (options: an agent, a PKCS#11 provider), the server's host key pinned, no
    /// prompts; `environment` added to the test's.
    func ssh(identity: [String], command: String, environment: [String: String]? = nil) throws -> ProcessResult {
        let hostKey = try String(contentsOfFile: root.appending("host_key.pub").path, encoding: .utf8)
            .split(separator: " ").prefix(2).joined(separator: " ")
        let knownHosts = root.appending("known_hosts")
        try "[127.0.0.1]:\(port) \(hostKey)\n".write(to: knownHosts, atomically: true, encoding: .utf8)
        return try runProcess(
            try requireTool("ssh", package: "openssh-client"),
            ["-F", "/dev/null"] + identity + [
                "-o", "IdentityFile=none", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o",
                "UserKnownHostsFile=\(knownHosts.path)", "-o", "ConnectTimeout=10", "-p", "\(port)", "root@127.0.0.1",
                command,
            ],
            environment: environment
        )
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw FixtureError("no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// A process started with posix_spawn, for daemons that close every inherited descriptor (sshd,
/// systemd-socket-activate): Foundation's `Process` watches a descriptor it passes to the child and, when that
/// closes, waits for the child in a blocking call that stalls every other `Process` of the test.
final class Spawned {
    let pid: pid_t
    private var status: Int32?

    init(_ command: [String], log: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, command[0], &actions, nil, &arguments, environ)
        guard result == 0 else {
            throw FixtureError("cannot start \(command[0]): \(String(cString: strerror(result)))")
        }
        self.pid = pid
    }

    var isRunning: Bool {
        guard status == nil else { return false }
        var raw: Int32 = 0
        if waitpid(pid, &raw, WNOHANG) == pid { status = raw }
        return status == nil
    }

    func stop() {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
        status = raw
    }
}
