import Foundation
import KeysealTestSupport
import Testing

/// Runs `keyseal` as a process against `socket`.
struct CLI {
    let socket: String

    @discardableResult
    func callAsFunction(_ arguments: String..., input: String? = nil) throws -> ProcessResult {
        try run(arguments, input: input.map { Data($0.utf8) })
    }

    func run(_ arguments: [String], input: Data? = nil) throws -> ProcessResult {
        try runProcess(
            try builtProductsDirectory().appendingPathComponent("keyseal").path,
            ["--socket", socket] + arguments,
            input: input ?? Data()
        )
    }

    static func json(_ result: ProcessResult) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: result.stdout)
        return try #require(object as? [String: Any], "not a JSON object: \(result.stdoutText)")
    }
}

/// The accessibility classes by their CLI names, with whether each is readable while locked.
private let classes: [(name: String, readableWhenLocked: Bool)] = [
    ("when-unlocked", false), ("after-first-unlock", true), ("always", true),
    ("when-unlocked-this-device-only", false), ("after-first-unlock-this-device-only", true),
    ("always-this-device-only", true), ("when-passcode-set-this-device-only", false),
]

/// The end-to-end scenarios of the command line through a real keyseald, on swtpm and on SoftHSM2.
@Suite("keyseal command line", .serialized)
struct CLIScenarioTests {
    static let backends: [DaemonFixture.Backend] = [.swtpm, .pkcs11]

    @Test("locked: when-unlocked classes exit 36 with a hint, the others print the secret", arguments: backends)
    func lockedClasses(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(try cli("passcode", "set", "--passcode-stdin", input: "correct horse\n").status == 0)
        for entry in classes {
            let added = try cli(
                "add-generic-password",
                "-a",
                entry.name,
                "-s",
                "cli",
                "-w",
                "secret-\(entry.name)",
                "--accessible",
                entry.name
            )
            #expect(added.status == 0, "\(entry.name): \(added.stderrText)")
        }
        #expect(try cli("lock").status == 0)
        for entry in classes {
            let found = try cli("find-generic-password", "-a", entry.name, "-s", "cli", "-w")
            if entry.readableWhenLocked {
                #expect(found.status == 0, "\(entry.name): \(found.stderrText)")
                #expect(found.stdoutText == "secret-\(entry.name)\n")
            } else {
                #expect(found.status == 36, "\(entry.name) exited \(found.status)")
                #expect(found.stdoutText.isEmpty)
                #expect(found.stderrText.contains("run keyseal unlock"))
            }
        }
    }

    @Test("-g prints security's layout: the class by its code, the attributes, the password on stderr")
    func attributeLayout() throws {
        let daemon = try DaemonFixture(.hostKey)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("add-generic-password", "-a", "alice", "-s", "layout", "-w", "s3cret")
        let generic = try cli("find-generic-password", "-a", "alice", "-s", "layout", "-g")
        #expect(generic.stdoutText.hasPrefix("class: \"genp\"\nattributes:\n"))
        #expect(generic.stdoutText.contains("    \"acct\"<blob>=\"alice\"\n"))
        #expect(generic.stderrText == "password: \"s3cret\"\n")
        try cli("add-internet-password", "-a", "bob", "-s", "example.com", "-w", "pw")
        #expect(
            try cli("find-internet-password", "-a", "bob", "-s", "example.com").stdoutText.hasPrefix(
                "class: \"inet\"\n"
            )
        )
    }

    @Test("a wrong passcode exits 51 and unlocks nothing; the right one unlocks every class", arguments: backends)
    func unlock(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("passcode", "set", "--passcode-stdin", input: "correct horse\n")
        try cli("add-generic-password", "-a", "alice", "-s", "cli", "-w", "s3cret")
        try cli("lock")
        let wrong = try cli("unlock", "--passcode-stdin", input: "battery staple\n")
        #expect(wrong.status == 51)
        #expect(wrong.stderrText.hasPrefix("keyseal: unlock: "))
        #expect(!wrong.stderrText.contains("battery"))
        #expect(try cli("find-generic-password", "-a", "alice", "-w").status == 36)
        #expect(try cli("unlock", "--passcode-stdin", input: "correct horse\n").status == 0)
        #expect(try cli("find-generic-password", "-a", "alice", "-w").stdoutText == "s3cret\n")
    }

    @Test("a daemon restart is a reboot: before first unlock, only the always classes answer", arguments: backends)
    func restart(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("passcode", "set", "--passcode-stdin", input: "correct horse\n")
        try cli("add-generic-password", "-a", "ck", "-s", "cli", "-w", "after", "--accessible", "after-first-unlock")
        try cli("add-generic-password", "-a", "dk", "-s", "cli", "-w", "always", "--accessible", "always")
        try daemon.restart()
        let status = try cli("--json", "status")
        #expect(status.status == 0)
        #expect(try CLI.json(status)["lockState"] as? String == "before-first-unlock")
        #expect(try cli("find-generic-password", "-a", "ck", "-w").status == 36)
        #expect(try cli("find-generic-password", "-a", "dk", "-w").stdoutText == "always\n")
        try cli("unlock", "--passcode-stdin", input: "correct horse\n")
        try cli("lock")
        #expect(try cli("find-generic-password", "-a", "ck", "-w").stdoutText == "after\n")
    }

    @Test("an item deleted from the file with its ledger entry is reported by status and in keyseald's log")
    func deletedItemIsReported() throws {
        let daemon = try DaemonFixture(.hostKey)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("add-generic-password", "-a", "alice", "-s", "web", "-w", "one")
        try cli("add-generic-password", "-a", "bob", "-s", "web", "-w", "two")
        #expect(try CLI.json(try cli("--json", "status"))["ledger"] == nil)
        daemon.stop()
        let database = daemon.storeDirectory.appendingPathComponent("keyseal.db").path
        let edit = try runProcess(
            try requireTool("sqlite3", package: "sqlite3"),
            [
                database,
                "DELETE FROM ledger WHERE id = (SELECT max(id) FROM items); DELETE FROM items WHERE id = (SELECT max(id) FROM items);",
            ]
        )
        #expect(edit.status == 0, "\(edit.stderrText)")
        try daemon.start()
        let status = try cli("status")
        #expect(
            status.stdoutText.contains("ledger:           1 of 128 ledger buckets failed verification, 1 item missing")
        )
        let ledger = try #require(try CLI.json(try cli("--json", "status"))["ledger"] as? [String: Any])
        #expect(ledger["missingItems"] as? Int == 1)
        #expect(daemon.log_().contains("generation ledger failed verification"))
        #expect(try cli("find-generic-password", "-a", "alice", "-w").stdoutText == "one\n")
    }

    @Test("duplicate exits 45; -U changes only what is given; delete, then delete again exits 44", arguments: backends)
    func upsertAndDelete(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(
            try cli(
                "add-generic-password",
                "-a",
                "alice",
                "-s",
                "web",
                "-w",
                "one",
                "-l",
                "Label",
                "--accessible",
                "after-first-unlock"
            ).status == 0
        )
        #expect(try cli("add-generic-password", "-a", "alice", "-s", "web", "-w", "two").status == 45)
        #expect(try cli("add-generic-password", "-a", "alice", "-s", "web", "-j", "a comment", "-U").status == 0)
        let kept = try CLI.json(try cli("--json", "find-generic-password", "-a", "alice", "-s", "web", "-g"))
        #expect(kept["password"] as? String == "one")
        #expect(kept["label"] as? String == "Label")
        #expect(kept["comment"] as? String == "a comment")
        #expect(kept["accessible"] as? String == "after-first-unlock")
        #expect(
            try cli("add-generic-password", "-a", "alice", "-s", "web", "-U", "--password-stdin", input: "two\n").status
                == 0
        )
        #expect(try cli("find-generic-password", "-a", "alice", "-s", "web", "-w").stdoutText == "two\n")
        let deleted = try cli("delete-generic-password", "-a", "alice", "-s", "web")
        #expect(deleted.status == 0)
        #expect(try cli("delete-generic-password", "-a", "alice", "-s", "web").status == 44)
        let missing = try cli("find-generic-password", "-a", "alice", "-s", "web")
        #expect(missing.status == 44)
        #expect(missing.stderrText.contains("could not be found in the keychain. (-25300)"))
    }

    @Test("internet passwords take scheme names and 4-character codes for -r and -t", arguments: backends)
    func internetPasswords(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(
            try cli(
                "add-internet-password",
                "-a",
                "bob",
                "-s",
                "example.com",
                "-r",
                "https",
                "-P",
                "443",
                "-p",
                "/login",
                "-t",
                "form",
                "-w",
                "pw"
            ).status == 0
        )
        #expect(
            try cli("add-internet-password", "-a", "bob", "-s", "example.com", "-r", "ssh", "-w", "key").status == 0
        )
        #expect(try cli("find-internet-password", "-s", "example.com", "-r", "htps", "-w").stdoutText == "pw\n")
        #expect(try cli("find-internet-password", "-s", "example.com", "-r", "ssh ", "-w").stdoutText == "key\n")
        let item = try CLI.json(try cli("--json", "find-internet-password", "-a", "bob", "-r", "https"))
        #expect(item["protocol"] as? String == "https")
        #expect(item["authenticationType"] as? String == "form")
        #expect(item["port"] as? Int == 443)
        #expect(item["class"] as? String == "internet-password")
        #expect(
            try cli(
                "add-internet-password",
                "-a",
                "bob",
                "-s",
                "example.com",
                "-r",
                "https",
                "-P",
                "443",
                "-p",
                "/login",
                "-t",
                "form",
                "-w",
                "again"
            ).status == 45
        )
        #expect(try cli("delete-internet-password", "-s", "example.com").stdoutText == "deleted 2 items\n")
    }

    @Test("--json parses everywhere and shows a secret only when asked", arguments: backends)
    func json(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("add-generic-password", "-a", "alice", "-s", "web", "-w", "hunter2")
        try cli("add-generic-password", "-a", "raw", "-s", "web", "-X", "ff00c3")
        let plain = try cli("--json", "find-generic-password", "-a", "alice")
        #expect(try CLI.json(plain)["password"] == nil)
        #expect(!plain.stdoutText.contains("hunter2") && !plain.stderrText.contains("hunter2"))
        let dump = try cli("--json", "dump-keychain")
        #expect((try CLI.json(dump)["items"] as? [Any])?.count == 2)
        #expect(!dump.stdoutText.contains("hunter2"))
        let withSecrets = try CLI.json(try cli("--json", "dump-keychain", "-d"))
        let items = try #require(withSecrets["items"] as? [[String: Any]])
        #expect(items.contains { $0["password"] as? String == "hunter2" })
        #expect(items.contains { $0["data"] as? String == Data([0xff, 0x00, 0xc3]).base64EncodedString() })
        let status = try CLI.json(try cli("--json", "status"))
        #expect(status["lockState"] as? String == "unlocked")
        #expect((status["items"] as? [String: Any])?["when-unlocked"] as? Int == 2)
        let notFound = try cli("--json", "find-generic-password", "-a", "nobody")
        #expect(notFound.status == 44)
        let error = try #require(try CLI.json(notFound)["error"] as? [String: Any])
        #expect(error["status"] as? Int == -25300)
        #expect(error["name"] as? String == "errSecItemNotFound")
    }

    @Test("after five wrong passcodes unlock exits 51 and says how long to wait, also in --json")
    func escalatingDelay() throws {
        let daemon = try DaemonFixture(.hostKey)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("passcode", "set", "--passcode-stdin", input: "right-pass-1\n")
        try cli("lock")
        for _ in 0..<5 { #expect(try cli("unlock", "--passcode-stdin", input: "wrong\n").status == 51) }
        let refused = try cli("unlock", "--passcode-stdin", input: "right-pass-1\n")
        #expect(refused.status == 51)
        #expect(refused.stderrText.contains("try again in"))
        let json = try cli("--json", "unlock", "--passcode-stdin", input: "right-pass-1\n")
        let error = try #require(try CLI.json(json)["error"] as? [String: Any])
        #expect((error["retryAfterSeconds"] as? Int ?? 0) > 0)
        #expect(try CLI.json(try cli("--json", "status"))["lockState"] as? String == "locked")
    }

    @Test("at the TPM's reserve unlock exits 51 naming the reserve; the always class stays readable")
    func tpmLockout() throws {
        let daemon = try DaemonFixture(.swtpm)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("passcode", "set", "--passcode-stdin", input: "right-pass-1\n")
        try cli("add-generic-password", "-a", "dk", "-s", "cli", "-w", "always", "--accessible", "always")
        try cli("lock")
        var last = try cli("unlock", "--passcode-stdin", input: "wrong\n")
        for _ in 0..<4 where !last.stderrText.contains("in reserve") {
            #expect(last.status == 51)
            #expect(last.stderrText.contains("more tr"))
            last = try cli("unlock", "--passcode-stdin", input: "wrong\n")
        }
        #expect(last.status == 51)
        #expect(last.stderrText.contains("Keyseal keeps the TPM's last try in reserve"))
        #expect(last.stderrText.contains("try again in"))
        #expect(try cli("find-generic-password", "-a", "dk", "-w").stdoutText == "always\n")
    }

    @Test(
        "export and import through the command line: per-class rules, refusals, the store unchanged",
        arguments: backends
    )
    func backupRoundTrip(backend: DaemonFixture.Backend) throws {
        let source = try DaemonFixture(backend)
        defer { source.remove() }
        let target = try DaemonFixture(backend)
        defer { target.remove() }
        let from = CLI(socket: source.socketPath)
        let to = CLI(socket: target.socketPath)
        try from("passcode", "set", "--passcode-stdin", input: "pin-2468\n")
        for entry in classes {
            try from(
                "add-generic-password",
                "-a",
                entry.name,
                "-s",
                "backup",
                "-w",
                "v-\(entry.name)",
                "--accessible",
                entry.name
            )
        }
        let file = source.root.appending("store.ksb").path
        let exported = try from("--json", "export", "--output", file, "--passphrase-stdin", input: "backup words\n")
        #expect(exported.status == 0, "\(exported.stderrText)")
        #expect(try CLI.json(exported)["exported"] as? Int == 6)
        #expect(try CLI.json(exported)["skippedPasscodeOnly"] as? Int == 1)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        #expect(bytes.range(of: Data("v-when-unlocked".utf8)) == nil)
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int == 0o600)
        #expect(try from("export", "--output", file, "--passphrase-stdin", input: "backup words\n").status == 206)

        #expect(try to("import", file, "--passphrase-stdin", input: "not the words\n").status == 51)
        let truncated = target.root.appending("truncated.ksb").path
        try bytes.prefix(bytes.count - 40).write(to: URL(fileURLWithPath: truncated))
        #expect(try to("import", truncated, "--passphrase-stdin", input: "backup words\n").status == 93)
        #expect(try to("find-generic-password", "-a", "when-unlocked", "-s", "backup").status == 44)

        // Another device: the portable classes arrive; the this-device-only ones are skipped and named.
        let imported = try to("--json", "import", file, "--passphrase-stdin", input: "backup words\n")
        #expect(imported.status == 0, "\(imported.stderrText)")
        let report = try CLI.json(imported)
        #expect(report["restored"] as? Int == 3)
        let skipped = try #require(report["skipped"] as? [[String: Any]])
        #expect(
            Set(skipped.compactMap { $0["account"] as? String }) == [
                "when-unlocked-this-device-only", "after-first-unlock-this-device-only", "always-this-device-only",
            ]
        )
        #expect(skipped.allSatisfy { $0["reason"] as? String == "other-device" })
        for name in ["when-unlocked", "after-first-unlock", "always"] {
            #expect(try to("find-generic-password", "-a", name, "-s", "backup", "-w").stdoutText == "v-\(name)\n")
        }
        #expect(try to("find-generic-password", "-a", "always-this-device-only", "-s", "backup").status == 44)
    }

    @Test("lock without a passcode changes nothing, says why and exits 0; status exits 0 in every state")
    func lockWithoutPasscode() throws {
        let daemon = try DaemonFixture(.hostKey)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let lock = try cli("lock")
        #expect(lock.status == 0)
        #expect(lock.stdoutText.contains("no passcode"))
        #expect(try CLI.json(try cli("--json", "status"))["lockState"] as? String == "unlocked")
        try cli("passcode", "set", "--passcode-stdin", input: "pin-2468\n")
        try cli("lock")
        let locked = try cli("status")
        #expect(locked.status == 0)
        #expect(locked.stdoutText.contains("locked"))
    }

    @Test("passcode change takes the old then the new one; remove takes the current one")
    func passcodeChange() throws {
        let daemon = try DaemonFixture(.hostKey)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("passcode", "set", "--passcode-stdin", input: "old pin\n")
        #expect(try cli("passcode", "set", "--passcode-stdin", input: "again-pass-3\n").status == 206)
        #expect(try cli("passcode", "change", "--passcode-stdin", input: "wrong\nnew pin\n").status == 51)
        #expect(try cli("passcode", "change", "--passcode-stdin", input: "old pin\nnew pin\n").status == 0)
        try cli("lock")
        #expect(try cli("unlock", "--passcode-stdin", input: "old pin\n").status == 51)
        #expect(try cli("unlock", "--passcode-stdin", input: "new pin\n").status == 0)
        #expect(try cli("passcode", "remove", "--passcode-stdin", input: "new pin\n").status == 0)
        #expect(try CLI.json(try cli("--json", "status"))["passcodeSet"] as? Bool == false)
    }

    @Test(
        "usage errors exit 64 with a usage line",
        arguments: [
            ["no-such-command"], ["add-generic-password", "-s", "web"], ["find-generic-password", "-w", "-g"],
            ["settings", "-t", "0"], ["error"], ["add-internet-password", "-a", "a", "-s", "b", "-r", "gopherx"],
            ["add-generic-password", "-a", "a", "-s", "b", "-X", "abc"],
        ]
    )
    func usageErrors(arguments: [String]) throws {
        let result = try CLI(socket: "/nonexistent/keyseal.sock").run(arguments)
        #expect(result.status == 64)
        #expect(result.stderrText.contains("Usage: keyseal"))
    }

    @Test("no daemon at the socket exits 50 and names the path")
    func noDaemon() throws {
        let result = try CLI(socket: "/nonexistent/keyseal.sock")("status")
        #expect(result.status == 50)
        #expect(result.stderrText.contains("/nonexistent/keyseal.sock"))
        #expect(result.stderrText.contains("(-25294)"))
    }

    @Test("error prints names and meanings; negative codes work as written")
    func errorCodes() throws {
        let result = try CLI(socket: "/nonexistent/keyseal.sock")("error", "-25308", "-25293")
        #expect(result.status == 0)
        #expect(
            result.stdoutText == """
                -25308 errSecInteractionNotAllowed: User interaction is not allowed.
                -25293 errSecAuthFailed: The user name or passphrase you entered is not correct.

                """
        )
    }
}

@Suite("keyseal shipped completions")
struct CLICompletionTests {
    @Test("the shipped completion scripts are those the built command generates", arguments: ["bash", "zsh", "fish"])
    func completionsAreCurrent(shell: String) throws {
        let generated = try runProcess(
            try builtProductsDirectory().appendingPathComponent("keyseal").path,
            ["--generate-completion-script", shell]
        )
        #expect(generated.status == 0)
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let shipped = try Data(contentsOf: repository.appendingPathComponent("Scripts/completions/keyseal.\(shell)"))
        #expect(generated.stdout == shipped, "run Scripts/generate-cli-docs.sh")
    }
}

@Suite("keyseal terminal prompts")
struct CLIPromptTests {
    /// Runs `keyseal arguments` on a pseudo-terminal (util-linux `script`), typing `lines` after the prompts.
    func onTerminal(
        _ socket: String,
        _ arguments: [String],
        typing lines: [String]
    ) throws -> (status: Int32, text: String) {
        let script = try requireTool("script", package: "bsdutils")
        let keyseal = try builtProductsDirectory().appendingPathComponent("keyseal").path
        let command = ([keyseal, "--socket", socket] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: script)
        process.arguments = ["-qec", command, "/dev/null"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        for line in lines {
            usleep(400_000)  // after the prompt, as a person types
            input.fileHandleForWriting.write(Data((line + "\n").utf8))
        }
        let captured = output.fileHandleForReading.readDataToEndOfFile()
        let status = try process.exitStatus()
        try? input.fileHandleForWriting.close()
        return (status, String(decoding: captured, as: UTF8.self))
    }

    @Test("passcodes typed on a terminal are not echoed; a new one is asked twice")
    func noEcho() throws {
        let daemon = try DaemonFixture(.hostKey)
        defer { daemon.remove() }
        let set = try onTerminal(daemon.socketPath, ["passcode", "set"], typing: ["typed-pin-1", "typed-pin-1"])
        #expect(set.status == 0, "\(set.text)")
        #expect(set.text.contains("New passcode:"))
        #expect(set.text.contains("Repeat the new passcode:"))
        #expect(!set.text.contains("typed-pin-1"))
        try CLI(socket: daemon.socketPath)("lock")
        let unlock = try onTerminal(daemon.socketPath, ["unlock"], typing: ["typed-pin-1"])
        #expect(unlock.status == 0, "\(unlock.text)")
        #expect(!unlock.text.contains("typed-pin-1"))
    }
}
