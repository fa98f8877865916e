import Foundation
import Keyseal
import KeysealTestSupport
import Testing

/// Boot binding (PCR policy), the recovery key and the anti-rollback counter through the real keyseald on swtpm
/// and the command line (docs/TPM.md "Boot binding", "Recovery key", "Anti-rollback counter").
@Suite("keyseald on a TPM: PCR binding, recovery and anti-rollback", .serialized)
struct BootBindingTests {
    static let passcode = "correct-horse-7\n"
    /// Exit status of errKeysealRecoveryRequired (−25700) and errKeysealRolledBack (−25701): their low bytes.
    static let recoveryRequiredExit: Int32 = 156
    static let rolledBackExit: Int32 = 155

    /// A daemon on swtpm bound to PCR 7, with one always item and a recovery key in a file; returns the key.
    static func boundDaemon(
        backend: DaemonFixture.Backend = .tpm,
        passcode: Bool = false
    ) throws
        -> (DaemonFixture, CLI, String)
    {
        let daemon = try DaemonFixture(backend, arguments: ["--tpm-pcrs", "7"], tpmLimits: (32, 600, 2))
        let cli = CLI(socket: daemon.socketPath)
        try expectOK(
            cli("add-generic-password", "-a", "acct", "-s", "svc", "-w", "always-secret", "--accessible", "always")
        )
        if passcode {
            try expectOK(cli("passcode", "set", "--passcode-stdin", "--allow-weak-passcode", input: Self.passcode))
            try expectOK(cli("add-generic-password", "-a", "acct", "-s", "locked-svc", "-w", "ak-secret"))
        }
        let file = daemon.root.appending("recovery-key").path
        try expectOK(
            cli("recovery-key", "create", "--file", file, "--passcode-stdin", input: passcode ? Self.passcode : "")
        )
        let key = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return (daemon, cli, key)
    }

    static func expectOK(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(result.status == 0, "\(result.stderrText)", sourceLocation: sourceLocation)
        if result.status != 0 { throw FixtureError("command failed: \(result.stderrText)") }
    }

    static func extendPCR7(_ swtpm: SwtpmFixture) throws {
        try swtpm.tool("tpm2_pcrextend", ["7:sha256=" + String(repeating: "ab", count: 32)])
    }

    @Test(
        "bound to PCR 7: an extend means recovery required (always item exit 156); recover brings it all back",
        arguments: [DaemonFixture.Backend.tpm, .tabrmd]
    )
    func recoveryAfterExtend(backend: DaemonFixture.Backend) throws {
        let (daemon, cli, key) = try Self.boundDaemon(backend: backend)
        defer { daemon.remove() }
        let before = try CLI.json(try cli("--json", "status"))
        #expect((before["pcrs"] as? [String: Any])?["bound"] as? [Int] == [7])
        #expect((before["pcrs"] as? [String: Any])?["match"] as? Bool == true)
        #expect(key.count == 79 && key.split(separator: "-").count == 16)

        try Self.extendPCR7(try #require(daemon.swtpm))
        try daemon.restart()
        let status = try CLI.json(try cli("--json", "status"))
        #expect(status["recoveryRequired"] as? Bool == true)
        #expect((status["pcrs"] as? [String: Any])?["match"] as? Bool == false)
        let refused = try cli("find-generic-password", "-a", "acct", "-s", "svc", "-w")
        #expect(refused.status == Self.recoveryRequiredExit)
        #expect(refused.stderrText.contains("recovery required"))
        #expect(try cli("error", "-25700").stdoutText.contains("errKeysealRecoveryRequired"))

        try Self.expectOK(cli("recover", "--recovery-key-stdin", input: key + "\n"))
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "svc", "-w").stdoutText == "always-secret\n")
        // Sealed again to the new values: the next start needs no recovery.
        try daemon.restart()
        let after = try CLI.json(try cli("--json", "status"))
        #expect(after["recoveryRequired"] as? Bool == false)
        #expect((after["pcrs"] as? [String: Any])?["match"] as? Bool == true)
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "svc", "-w").stdoutText == "always-secret\n")
    }

    @Test("a wrong recovery key is refused and counted by the TPM; the right one with the passcode unlocks")
    func wrongRecoveryKeyCounted() throws {
        let (daemon, cli, key) = try Self.boundDaemon(passcode: true)
        defer { daemon.remove() }
        let swtpm = try #require(daemon.swtpm)
        try Self.extendPCR7(swtpm)
        try daemon.restart()
        let counted = try swtpm.lockoutCounter()
        let wrong = String(repeating: "0123-", count: 15) + "4567"
        let refused = try cli("recover", "--recovery-key-stdin", input: wrong + "\n" + Self.passcode)
        #expect(refused.status == 51)
        #expect(refused.stderrText.contains("wrong recovery key"))
        #expect(try swtpm.lockoutCounter() == counted + 1)
        #expect(try CLI.json(try cli("--json", "status"))["recoveryRequired"] as? Bool == true)

        try Self.expectOK(cli("recover", "--recovery-key-stdin", input: key + "\n" + Self.passcode))
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "locked-svc", "-w").stdoutText == "ak-secret\n")
        // The passcode object was sealed again too: after a restart the passcode unlocks through the TPM.
        try daemon.restart()
        try Self.expectOK(cli("unlock", "--passcode-stdin", input: Self.passcode))
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "locked-svc", "-w").stdoutText == "ak-secret\n")
    }

    @Test("tpm reseal: unbound before a planned change, bound again after it; no recovery needed")
    func plannedReseal() throws {
        let (daemon, cli, _) = try Self.boundDaemon(passcode: true)
        defer { daemon.remove() }
        try Self.expectOK(cli("tpm", "reseal", "--pcrs", "none", "--passcode-stdin", input: Self.passcode))
        try Self.extendPCR7(try #require(daemon.swtpm))
        try daemon.restart()
        #expect(try CLI.json(try cli("--json", "status"))["recoveryRequired"] as? Bool == false)
        try Self.expectOK(cli("unlock", "--passcode-stdin", input: Self.passcode))
        try Self.expectOK(cli("tpm", "reseal", "--pcrs", "7", "--passcode-stdin", input: Self.passcode))
        let status = try CLI.json(try cli("--json", "status"))
        #expect((status["pcrs"] as? [String: Any])?["bound"] as? [Int] == [7])
        #expect((status["pcrs"] as? [String: Any])?["match"] as? Bool == true)
        try daemon.restart()
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "svc", "-w").stdoutText == "always-secret\n")
    }

    /// The outside review's attack: a live system with root re-creates the storage primary and unseals the device
    /// object from a copy of the keybag with tpm2-tools.
    static func liveUSBUnseal(_ daemon: DaemonFixture) throws -> ProcessResult {
        daemon.stop()
        let blob = [UInt8](try KeychainStoreTestHooks.sealedDeviceSecret(directory: daemon.storeDirectory))
        var offset = blob[4] == 2 ? 10 : 6
        func sized() -> [UInt8] {
            let size = Int(blob[offset]) << 8 | Int(blob[offset + 1])
            defer { offset += 2 + size }
            return Array(blob[offset..<offset + 2 + size])
        }
        _ = sized()  // the primary's Name
        let publicArea = sized()
        let privateArea = Array(blob[offset...])
        let dir = daemon.root.path
        try Data(publicArea).write(to: URL(fileURLWithPath: "\(dir)/ds.pub"))
        try Data(privateArea).write(to: URL(fileURLWithPath: "\(dir)/ds.priv"))
        let swtpm = try #require(daemon.swtpm)
        defer { _ = try? swtpm.tool("tpm2_flushcontext", ["-t"], check: false) }
        try swtpm.tool(
            "tpm2_createprimary",
            [
                "-Q", "-C", "o", "-G", "ecc256:aes128cfb", "-a",
                "restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda", "-c", "\(dir)/p.ctx",
            ]
        )
        try swtpm.tool("tpm2_flushcontext", ["-t"])
        try swtpm.tool(
            "tpm2_load",
            ["-Q", "-C", "\(dir)/p.ctx", "-u", "\(dir)/ds.pub", "-r", "\(dir)/ds.priv", "-c", "\(dir)/ds.ctx"]
        )
        try swtpm.tool("tpm2_flushcontext", ["-t"])
        let bound = blob[4] == 2
        return try swtpm.tool(
            "tpm2_unseal",
            ["-c", "\(dir)/ds.ctx"] + (bound ? ["-p", "pcr:sha256:7"] : []),
            check: false
        )
    }

    @Test("live USB: tpm2_unseal of the device object from a copy of the keybag works unbound, fails once bound")
    func liveUSBAttack() throws {
        let unbound = try DaemonFixture(.tpm, tpmLimits: (32, 600, 2))
        defer { unbound.remove() }
        let open = try Self.liveUSBUnseal(unbound)
        #expect(open.status == 0, "\(open.stderrText)")
        #expect(open.stdout.count == 32)

        let (daemon, _, _) = try Self.boundDaemon()
        defer { daemon.remove() }
        try Self.extendPCR7(try #require(daemon.swtpm))
        let attack = try Self.liveUSBUnseal(daemon)
        #expect(attack.status != 0)
        #expect(attack.stdout.isEmpty)
    }

    // MARK: Anti-rollback

    /// A daemon on swtpm with a passcode set, an always item and the store locked.
    static func lockedDaemon(arguments: [String] = []) throws -> (DaemonFixture, CLI) {
        let daemon = try DaemonFixture(.tpm, arguments: arguments, tpmLimits: (32, 600, 2))
        let cli = CLI(socket: daemon.socketPath)
        try expectOK(
            cli("add-generic-password", "-a", "acct", "-s", "svc", "-w", "always-secret", "--accessible", "always")
        )
        try expectOK(cli("passcode", "set", "--passcode-stdin", "--allow-weak-passcode", input: Self.passcode))
        try expectOK(cli("add-generic-password", "-a", "acct", "-s", "locked-svc", "-w", "ak-secret"))
        try expectOK(cli("lock"))
        return (daemon, cli)
    }

    static func counterValue(_ cli: CLI) throws -> Int? {
        let status = try CLI.json(try cli("--json", "status"))
        return (status["antiRollbackCounter"] as? [String: Any])?["value"] as? Int
    }

    static func counterIndex(_ cli: CLI) throws -> UInt32? {
        let status = try CLI.json(try cli("--json", "status"))
        guard let text = (status["antiRollbackCounter"] as? [String: Any])?["index"] as? String else { return nil }
        return UInt32(text.dropFirst(2), radix: 16)
    }

    @Test(
        "root replaces the counter with another index holding an older copy's value and puts that copy back: rolled back",
        arguments: NVIndexReplacement.allCases
    )
    func replacedCounterDetected(replacement: NVIndexReplacement) throws {
        let (daemon, cli) = try Self.lockedDaemon(arguments: ["--tpm-pcrs", "7"])
        defer { daemon.remove() }
        let swtpm = try #require(daemon.swtpm)
        let index = try #require(try Self.counterIndex(cli))
        let value = try #require(try Self.counterValue(cli))
        daemon.stop()
        let copy = daemon.root.appending("store-copy").path
        try FileManager.default.copyItem(atPath: daemon.storeDirectory.path, toPath: copy)
        try daemon.start()
        for _ in 0..<2 { #expect(try cli("unlock", "--passcode-stdin", input: "wrong-guess-42\n").status == 51) }
        #expect(try CLI.json(try cli("--json", "status"))["failedAttempts"] as? Int == 2)
        daemon.stop()
        try swtpm.replaceNVIndex(index, with: replacement, holding: UInt64(value))
        try FileManager.default.removeItem(at: daemon.storeDirectory)
        try FileManager.default.moveItem(atPath: copy, toPath: daemon.storeDirectory.path)
        try daemon.start()

        let status = try CLI.json(try cli("--json", "status"))
        #expect(status["rolledBack"] as? Bool == true)
        let detail = status["boot"] as? String ?? ""
        #expect(detail.contains("0x\(String(index, radix: 16)) is not this store's anti-rollback counter"), "\(detail)")
        let unlock = try cli("unlock", "--passcode-stdin", input: Self.passcode)
        #expect(unlock.status == Self.rolledBackExit, "\(unlock.stderrText)")
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "locked-svc", "-w").status == Self.rolledBackExit)
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "svc", "-w").stdoutText == "always-secret\n")

        // The administrator keeps this copy: a new counter of the store's own, at another index.
        try Self.expectOK(cli("tpm", "accept-rollback"))
        #expect(try Self.counterIndex(cli).map { $0 != index } == true)
        try daemon.restart()
        #expect(try CLI.json(try cli("--json", "status"))["rolledBack"] as? Bool == false)
        try Self.expectOK(cli("unlock", "--passcode-stdin", input: Self.passcode))
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "locked-svc", "-w").stdoutText == "ak-secret\n")
    }

    @Test("recovery required: status shows the failed attempts and the next try that recover then enforces")
    func recoveryStatusShowsFailedAttempts() throws {
        let (daemon, cli, key) = try Self.boundDaemon(passcode: true)
        defer { daemon.remove() }
        try Self.expectOK(cli("lock"))
        for _ in 0..<5 { #expect(try cli("unlock", "--passcode-stdin", input: "wrong-guess-42\n").status == 51) }
        try Self.extendPCR7(try #require(daemon.swtpm))
        try daemon.restart()

        let status = try CLI.json(try cli("--json", "status"))
        #expect(status["recoveryRequired"] as? Bool == true)
        #expect(status["failedAttempts"] as? Int == 5)
        #expect(status["nextTryAt"] is String)
        #expect(try cli("status").stdoutText.contains("failed attempts:  5"))
        let refused = try cli("recover", "--recovery-key-stdin", input: key + "\n" + Self.passcode)
        #expect(refused.status == 51)
        #expect(refused.stderrText.contains("too many failed attempts (5)"), "\(refused.stderrText)")
    }

    @Test(
        "rollback: a copy put back after three failed tries is detected; the count is not reset; an administrator decides"
    )
    func rollbackDetected() throws {
        let (daemon, cli) = try Self.lockedDaemon()
        defer { daemon.remove() }
        daemon.stop()
        let copy = daemon.root.appending("store-copy").path
        try FileManager.default.copyItem(atPath: daemon.storeDirectory.path, toPath: copy)
        try daemon.start()
        for _ in 0..<3 { #expect(try cli("unlock", "--passcode-stdin", input: "wrong-guess-42\n").status == 51) }
        daemon.stop()
        try FileManager.default.removeItem(at: daemon.storeDirectory)
        try FileManager.default.moveItem(atPath: copy, toPath: daemon.storeDirectory.path)
        try daemon.start()

        let status = try CLI.json(try cli("--json", "status"))
        #expect(status["rolledBack"] as? Bool == true)
        #expect(status["failedAttempts"] as? Int == 3)
        let unlock = try cli("unlock", "--passcode-stdin", input: Self.passcode)
        #expect(unlock.status == Self.rolledBackExit)
        #expect(unlock.stderrText.contains("rolled back"))
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "locked-svc", "-w").status == Self.rolledBackExit)
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "svc", "-w").stdoutText == "always-secret\n")

        try Self.expectOK(cli("tpm", "accept-rollback"))
        let accepted = try CLI.json(try cli("--json", "status"))
        #expect(accepted["rolledBack"] as? Bool == false)
        #expect(accepted["failedAttempts"] as? Int == 3)
        try daemon.restart()
        #expect(try CLI.json(try cli("--json", "status"))["rolledBack"] as? Bool == false)
        try Self.expectOK(cli("unlock", "--passcode-stdin", input: Self.passcode))
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "locked-svc", "-w").stdoutText == "ak-secret\n")
    }

    @Test(
        "a kill -9 between the keybag's commit and the counter's increment, or just after the increment, never bricks the store",
        arguments: ["after-commit", "after-increment"]
    )
    func crashDuringIncrement(point: String) throws {
        let (daemon, cli) = try Self.lockedDaemon()
        defer { daemon.remove() }
        let before = try #require(try Self.counterValue(cli))
        daemon.stop()
        daemon.extraEnvironment["KEYSEAL_TEST_CRASH_AT"] = point
        try daemon.start()
        let killed = try cli("unlock", "--passcode-stdin", input: "wrong-guess-42\n")
        #expect(killed.status != 0)
        #expect(daemon.stop() == 128 + SIGKILL)
        daemon.extraEnvironment = [:]
        try daemon.start()
        let status = try CLI.json(try cli("--json", "status"))
        #expect(status["rolledBack"] as? Bool == false)
        #expect(status["failedAttempts"] as? Int == 1)
        #expect(try Self.counterValue(cli) == before + 1)
        try Self.expectOK(cli("unlock", "--passcode-stdin", input: Self.passcode))
        #expect(try Self.counterValue(cli) == before + 2)
    }

    @Test(
        "checkpoint interval 0: a kill -9 after an item write's commit, before or after its increment, never bricks the store",
        arguments: ["after-commit", "after-increment"]
    )
    func crashDuringCheckpoint(point: String) throws {
        let daemon = try DaemonFixture(.tpm, arguments: ["--checkpoint-interval", "0"], tpmLimits: (32, 600, 2))
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try Self.expectOK(cli("add-generic-password", "-a", "acct", "-s", "first", "-w", "one"))
        let before = try #require(try Self.counterValue(cli))
        daemon.stop()
        daemon.extraEnvironment["KEYSEAL_TEST_CRASH_AT"] = point
        try daemon.start()
        #expect(try cli("add-generic-password", "-a", "acct", "-s", "second", "-w", "two").status != 0)
        #expect(daemon.stop() == 128 + SIGKILL)
        daemon.extraEnvironment = [:]
        try daemon.start()
        #expect(try CLI.json(try cli("--json", "status"))["rolledBack"] as? Bool == false)
        #expect(try Self.counterValue(cli) == before + 1)
        // The write was committed with the checkpoint: it is there, and so is the earlier one.
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "second", "-w").stdoutText == "two\n")
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "first", "-w").stdoutText == "one\n")
        try Self.expectOK(cli("add-generic-password", "-a", "acct", "-s", "third", "-w", "three"))
        #expect(try Self.counterValue(cli) == before + 2)
    }
}
