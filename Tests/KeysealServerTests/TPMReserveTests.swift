import Foundation
import KeysealTestSupport
import Testing

/// The TPM's last try, kept in reserve, through the real keyseald (`--backend tpm`) and command line; and
/// `--tpm-protect-lockout`'s value, checked with tpm2-tools.
@Suite("keyseald on a TPM: the reserve and the lockout authorization", .serialized)
struct TPMReserveTests {
    static let right = "correct-horse-7\n"
    static let wrong = "wrong-guess-42\n"

    @Test("swtpm defaults: at the reserve the right passcode is refused as the reserve, and it is not counted")
    func reserveOnSwtpmDefaults() throws {
        let daemon = try DaemonFixture(.tpm, tpmLimits: (3, 1000, 1000))
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("passcode", "set", "--passcode-stdin", input: Self.right)
        try cli("lock")
        #expect(try CLI.json(try cli("--json", "status"))["hardwareTriesLeft"] as? Int == 2)
        for _ in 0..<2 { #expect(try cli("unlock", "--passcode-stdin", input: Self.wrong).status == 51) }
        let refused = try cli("unlock", "--passcode-stdin", input: Self.right)
        #expect(refused.status == 51)
        #expect(refused.stderrText.contains("Keyseal keeps the TPM's last try in reserve"))
        #expect(refused.stderrText.contains("tpm2_dictionarylockout -c"))
        #expect(!refused.stderrText.contains("dictionary-attack lockout"))
        let change = try cli("passcode", "change", "--passcode-stdin", input: Self.right + "another-pass-9\n")
        #expect(change.status == 51)
        #expect(change.stderrText.contains("in reserve"))
        let status = try CLI.json(try cli("--json", "status"))
        #expect(status["failedAttempts"] as? Int == 2)
        #expect(status["hardwareTriesLeft"] as? Int == 0)
        #expect(try daemon.swtpm!.lockoutCounter() == 2)
    }

    @Test("tight limits: after one wrong try the reserve holds; a counter reset lets the right passcode in")
    func reserveOnTightLimitsThenReset() throws {
        let daemon = try DaemonFixture(.tpm, tpmLimits: (2, 600, 1))
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("passcode", "set", "--passcode-stdin", input: Self.right)
        try cli("lock")
        #expect(try cli("unlock", "--passcode-stdin", input: Self.wrong).status == 51)
        let refused = try cli("--json", "unlock", "--passcode-stdin", input: Self.right)
        #expect(refused.status == 51)
        let error = try #require(try CLI.json(refused)["error"] as? [String: Any])
        #expect(error["retryAfterSeconds"] as? Int == 600)
        #expect(try CLI.json(try cli("--json", "status"))["failedAttempts"] as? Int == 1)
        try daemon.swtpm!.tool("tpm2_dictionarylockout", ["-c"])
        #expect(try cli("unlock", "--passcode-stdin", input: Self.right).status == 0)
        #expect(try CLI.json(try cli("--json", "status"))["failedAttempts"] as? Int == 0)
    }

    @Test("wide TPM limits: the store's escalating delay still comes first")
    func escalatingDelayOnTPM() throws {
        let daemon = try DaemonFixture(.tpm, tpmLimits: (32, 60, 2))
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("passcode", "set", "--passcode-stdin", input: Self.right)
        try cli("lock")
        for _ in 0..<5 { #expect(try cli("unlock", "--passcode-stdin", input: Self.wrong).status == 51) }
        let refused = try cli("unlock", "--passcode-stdin", input: Self.right)
        #expect(refused.status == 51)
        #expect(refused.stderrText.contains("too many failed attempts (5)"))
        #expect(try daemon.swtpm!.lockoutCounter() == 5)
    }

    @Test("--tpm-lockout-file gets exactly the value tpm2_dictionarylockout -c -p takes, in a 0600 file")
    func lockoutFileValueWorks() throws {
        let daemon = try DaemonFixture(.tpm, start: false, tpmLimits: (5, 60, 1))
        defer { daemon.remove() }
        let file = daemon.root.appending("lockout-auth").path
        daemon.extraArguments = ["--tpm-protect-lockout", "--tpm-lockout-file", file]
        try daemon.start()
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.count == 33 && text.hasSuffix("\n"))
        let value = String(text.dropLast())
        #expect(!daemon.log_().contains(value))
        let swtpm = try #require(daemon.swtpm)
        #expect(try swtpm.tool("tpm2_dictionarylockout", ["-c"], check: false).status != 0)
        // A wrong authorization blocks the lockout hierarchy for lockoutRecovery (1 s): retry until it passes.
        var reset = try swtpm.tool("tpm2_dictionarylockout", ["-c", "-p", value], check: false)
        let deadline = Date().addingTimeInterval(10)
        while reset.status != 0, Date() < deadline {
            usleep(250_000)
            reset = try swtpm.tool("tpm2_dictionarylockout", ["-c", "-p", value], check: false)
        }
        #expect(reset.status == 0, "\(reset.stderrText)")
    }

    @Test("--tpm-protect-lockout with stdout not a terminal and no file refuses, and the TPM is unchanged")
    func lockoutNeedsTerminalOrFile() throws {
        let daemon = try DaemonFixture(.tpm, arguments: ["--tpm-protect-lockout"], start: false)
        defer { daemon.remove() }
        #expect(throws: (any Error).self) { try daemon.start() }
        daemon.process?.terminate()
        #expect(daemon.log_().contains("--tpm-lockout-file"))
        // The lockout authorization is still empty: a reset needs no value.
        #expect(try daemon.swtpm!.tool("tpm2_dictionarylockout", ["-c"], check: false).status == 0)
    }
}
