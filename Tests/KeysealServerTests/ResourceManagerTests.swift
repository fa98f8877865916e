import Foundation
import Glibc
import KeysealTestSupport
import Testing

/// keyseald on a TPM reached through tpm2-abrmd (`tabrmd:` TCTI) on a private session bus.
@Suite("keyseald through tpm2-abrmd", .serialized)
struct ResourceManagerTests {
    private func startDaemon(
        _ broker: ResourceManagerFixture,
        store: URL,
        name: String = "keyseal"
    ) throws
        -> (Process, CLI)
    {
        let socket = broker.directory.appending("run/\(name).sock").path
        let process = try startKeyseald(
            arguments: ["--store", store.path, "--backend", "tpm", "--tcti", broker.tcti],
            socket: socket,
            environment: broker.environment,
            log: broker.directory.appending("\(name).log")
        )
        return (process, CLI(socket: socket))
    }

    @Test("tpm2-abrmd restarted under an idle keyseald: the next unlock succeeds at the first attempt")
    func brokerRestartIsInvisible() throws {
        let broker = try ResourceManagerFixture(maxTries: 10)
        defer { broker.remove() }
        let (daemon, cli) = try startDaemon(broker, store: broker.directory.appending("store"))
        defer {
            daemon.terminate()
            daemon.waitForExit()
        }
        #expect(try cli("passcode", "set", "--passcode-stdin", input: "correct horse battery\n").status == 0)
        #expect(try cli("add-generic-password", "-a", "alice", "-s", "mail", "-w", "wu-secret").status == 0)
        #expect(try cli("lock").status == 0)

        try broker.restartResourceManager()
        let unlocked = try cli("unlock", "--passcode-stdin", input: "correct horse battery\n")
        #expect(unlocked.status == 0, "\(unlocked.stderrText)")
        #expect(try cli("find-generic-password", "-a", "alice", "-s", "mail", "-w").stdoutText == "wu-secret\n")
        let status = try cli("--json", "status")
        #expect((try CLI.json(status)["failedAttempts"] as? Int) == 0, "\(status.stdoutText)")
    }

    @Test("tpm2-abrmd restarted under an idle keyseald that signed: nothing is left in the TPM after keyseald stops")
    func brokerRestartLeavesNoSession() throws {
        let broker = try ResourceManagerFixture(maxTries: 32)
        defer { broker.remove() }
        let (daemon, cli) = try startDaemon(broker, store: broker.directory.appending("store"))
        #expect(try cli("passcode", "set", "--passcode-stdin", input: "correct horse battery\n").status == 0)
        #expect(try cli("create-key", "--tag", "hardware", "--hardware").status == 0)
        #expect(try cli("sign", "--tag", "hardware", input: "before").status == 0)
        // Idle here: a session keyseald kept now would be parked by this tpm2-abrmd and lost with it.
        #expect(try broker.swtpm.handlesInUse() == [], "while idle")
        try broker.restartResourceManager()
        #expect(try cli("lock").status == 0)
        #expect(try cli("unlock", "--passcode-stdin", input: "correct horse battery\n").status == 0)
        #expect(try cli("sign", "--tag", "hardware", input: "after").status == 0)
        daemon.terminate()
        #expect(try daemon.exitStatus() == 0)
        #expect(try broker.swtpm.handlesInUse() == [], "after stop")
    }

    @Test("keyseald stopped with SIGTERM behind tpm2-abrmd leaves no session or object there, three times in a row")
    func cleanStopLeavesNothing() throws {
        let broker = try ResourceManagerFixture(maxTries: 32)
        defer { broker.remove() }
        let store = broker.directory.appending("store")
        for round in 0..<3 {
            let (daemon, cli) = try startDaemon(broker, store: store)
            if round == 0 {
                #expect(try cli("passcode", "set", "--passcode-stdin", input: "correct horse battery\n").status == 0)
                #expect(try cli("create-key", "--tag", "hardware", "--hardware").status == 0)
            }
            // Every kind of session keyseald starts: the salted one (unseal, add), a signing one, a failed try's.
            #expect(try cli("unlock", "--passcode-stdin", input: "wrong passcode here\n").status == 51)
            #expect(try cli("unlock", "--passcode-stdin", input: "correct horse battery\n").status == 0)
            #expect(try cli("add-generic-password", "-a", "alice", "-s", "round-\(round)", "-w", "secret").status == 0)
            #expect(try cli("sign", "--tag", "hardware", input: "round \(round)").status == 0)
            #expect(try cli("status").status == 0)
            daemon.terminate()
            #expect(try daemon.exitStatus() == 0)
            // As the broker sees it, and as the TPM behind it does.
            let getcap = try requireTool("tpm2_getcap", package: "tpm2-tools")
            let saved = try runProcess(
                getcap,
                ["-T", broker.tcti, "handles-saved-session"],
                environment: broker.environment
            )
            #expect(saved.status == 0 && !saved.stdoutText.contains("- "), "after stop \(round): \(saved.stdoutText)")
            #expect(try broker.swtpm.handlesInUse() == [], "after stop \(round)")
        }
    }

    @Test(
        "a user tpm2-abrmd's bus policy refuses: keyseald fails with one line naming the refusal and group tss, no GLib warning"
    )
    func refusedByTheBusPolicy() throws {
        let broker = try ResourceManagerFixture(busPolicy: .tss)
        defer { broker.remove() }
        // uid 65534 is in neither user nor group root or tss, the only ones Debian's tpm2-abrmd policy lets call it.
        let home = broker.directory.appending("nobody")
        try FileManager.default.createDirectory(
            at: home,
            withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700]
        )
        #expect(chown(home.path, 65534, 65534) == 0)
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let keyseald = try builtProductsDirectory().appendingPathComponent("keyseald").path
        let result = try runProcess(
            setpriv,
            [
                "--reuid", "65534", "--regid", "65534", "--clear-groups", keyseald, "--store",
                home.appendingPathComponent("store").path, "--socket", home.appendingPathComponent("keyseal.sock").path,
                "--backend", "tpm", "--tcti", broker.tcti,
            ],
            environment: broker.environment
        )
        #expect(result.status == 1)
        let lines = result.stderrText.split(separator: "\n", omittingEmptySubsequences: true)
        #expect(lines.count == 1, "\(result.stderrText)")
        #expect(lines.first?.hasPrefix("keyseald: no TPM reachable at TCTI tabrmd:bus_type=session") == true)
        #expect(result.stderrText.contains("the D-Bus policy refused this user's call to tpm2-abrmd"))
        #expect(result.stderrText.contains("org.freedesktop.DBus.Error.AccessDenied"))
        #expect(result.stderrText.contains("add the user to group tss"))
        #expect(!result.stderrText.contains("WARNING"))
    }

    @Test(
        "two keyseald on one TPM through tpm2-abrmd at once; every store on the TPM shares its dictionary-attack counter"
    )
    func twoDaemonsShareOneTPM() throws {
        let broker = try ResourceManagerFixture(maxTries: 10)
        defer { broker.remove() }
        let (first, a) = try startDaemon(broker, store: broker.directory.appending("store-a"), name: "a")
        defer {
            first.terminate()
            first.waitForExit()
        }
        let (second, b) = try startDaemon(broker, store: broker.directory.appending("store-b"), name: "b")
        defer {
            second.terminate()
            second.waitForExit()
        }
        for cli in [a, b] {
            #expect(try cli("passcode", "set", "--passcode-stdin", input: "correct horse battery\n").status == 0)
            #expect(try cli("add-generic-password", "-a", "alice", "-s", "mail", "-w", "secret").status == 0)
            #expect(try cli("lock").status == 0)
        }
        func hardwareTries(_ cli: CLI) throws -> Int? {
            try CLI.json(try cli("--json", "status"))["hardwareTriesLeft"] as? Int
        }
        let before = try #require(try hardwareTries(b))
        #expect(try a("unlock", "--passcode-stdin", input: "wrong passcode here\n").status == 51)
        #expect(try hardwareTries(b) == before - 1)
        for cli in [a, b] {
            #expect(try cli("unlock", "--passcode-stdin", input: "correct horse battery\n").status == 0)
            #expect(try cli("find-generic-password", "-a", "alice", "-s", "mail", "-w").stdoutText == "secret\n")
        }
    }
}

/// keyseald's start on a TPM device node the user cannot open.
@Suite("keyseald on a TPM device node it may not open")
struct TPMDeviceNodeTests {
    @Test("a device node this user cannot read and write: keyseald fails with one line naming the path and group tss")
    func deviceNodeDenied() throws {
        let root = try TemporaryDirectory(prefix: "keyseal-device-node")
        defer { root.remove() }
        chmod(root.path, 0o711)
        // A root-owned 0600 file stands in for /dev/tpmrm0 (tss:tss 0660) seen by a user outside group tss.
        let node = root.appending("tpmrm0")
        try SoftHSMFixture.writeFile(node, contents: "")
        let home = root.appending("nobody")
        try FileManager.default.createDirectory(
            at: home,
            withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700]
        )
        #expect(chown(home.path, 65534, 65534) == 0)
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let keyseald = try builtProductsDirectory().appendingPathComponent("keyseald").path
        let result = try runProcess(
            setpriv,
            [
                "--reuid", "65534", "--regid", "65534", "--clear-groups", keyseald, "--store",
                home.appendingPathComponent("store").path, "--socket", home.appendingPathComponent("keyseal.sock").path,
                "--backend", "tpm", "--tcti", "device:\(node.path)",
            ]
        )
        #expect(result.status == 1)
        let lines = result.stderrText.split(separator: "\n", omittingEmptySubsequences: true)
        #expect(lines.count == 1, "\(result.stderrText)")
        #expect(result.stderrText.contains("\(node.path) is not readable and writable by this user"))
        #expect(result.stderrText.contains("add the user to group tss"))
    }
}
