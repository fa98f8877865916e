import Crypto
import Foundation
import Keyseal
import KeysealTestSupport
import Testing

/// Boot binding to signed PCR policies (`PolicyAuthorize`) through the real keyseald on swtpm, the command line
/// (`keyseal tpm sign-policy`), openssl and tpm2-tools (docs/TPM.md "Signed PCR policies").
@Suite("keyseald on a TPM: signed PCR policies", .serialized)
struct SignedPCRPolicyTests {
    static let passcode = "correct-horse-7\n"
    static let recoveryRequiredExit: Int32 = 156

    enum KeyType: String, CaseIterable, CustomStringConvertible {
        case rsa2048, p256
        var description: String { rawValue }
        var genpkey: [String] {
            switch self {
            case .rsa2048: ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]
            case .p256: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]
            }
        }
    }

    /// A signing key pair made by openssl: (private PEM file, public PEM file).
    static func makeKey(_ type: KeyType, named name: String, in root: TemporaryDirectory) throws -> (String, String) {
        let openssl = try requireTool("openssl", package: "openssl")
        let privatePath = root.appending("\(name).key.pem").path
        let publicPath = root.appending("\(name).pub.pem").path
        try expectOK(runProcess(openssl, ["genpkey"] + type.genpkey + ["-out", privatePath]))
        try expectOK(runProcess(openssl, ["pkey", "-in", privatePath, "-pubout", "-out", publicPath]))
        return (privatePath, publicPath)
    }

    static func expectOK(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(result.status == 0, "\(result.stderrText)", sourceLocation: sourceLocation)
        if result.status != 0 { throw FixtureError("command failed: \(result.stderrText)") }
    }

    /// `keyseal tpm sign-policy --pcrs 7` of the swtpm's current PCR 7 (keyseald stopped: it would hold the swtpm's
    /// one connection).
    static func signCurrent(_ cli: CLI, _ swtpm: SwtpmFixture, key: String, output: String, epoch: Int? = nil) throws {
        let arguments = [
            "tpm", "sign-policy", "--pcrs", "7", "--current", "--tcti", swtpm.tcti, "--private-key", key, "--output",
            output,
        ]
        try expectOK(cli.run(arguments + (epoch.map { ["--epoch", String($0)] } ?? [])))
    }

    static func extendPCR7(_ swtpm: SwtpmFixture, with byte: String) throws {
        try swtpm.tool("tpm2_pcrextend", ["7:sha256=" + String(repeating: byte, count: 32)])
    }

    /// The boot states the tests sign: PCR 7 extended once from reset, with different data (as two firmware or
    /// Secure Boot configurations measure differently).
    static let stateA = "a1"
    static let stateB = "b2"

    /// A boot into the state `byte` names: a power cycle (the PCRs reset), then PCR 7 extended with it.
    static func boot(_ swtpm: SwtpmFixture, into byte: String) throws {
        try swtpm.restart()
        try extendPCR7(swtpm, with: byte)
    }

    /// The store's sealed device and passcode objects as its keybag holds them (keyseald stopped).
    static func sealedObjects(_ daemon: DaemonFixture) throws -> [Data?] {
        [
            try KeychainStoreTestHooks.sealedDeviceSecret(directory: daemon.storeDirectory),
            try KeychainStoreTestHooks.sealedPasscodeSecret(directory: daemon.storeDirectory),
        ]
    }

    /// The `pkfp` of a signature file's first entry.
    static func fingerprint(ofSignatureFile path: String) throws -> String {
        let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
        return try #require(((file as? [String: Any])?["sha256"] as? [[String: Any]])?.first?["pkfp"] as? String)
    }

    /// A daemon on swtpm whose store is bound to PCR 7 through policies signed by a new key of `type`, created in
    /// boot state A (signed with `--current`), with an always item, a passcode, a passcode item and a recovery key.
    /// Returns the daemon (running), its CLI, the signature directory, the key pair, the recovery key.
    static func signedDaemon(
        _ type: KeyType,
        epoch: Int? = nil
    ) throws -> (daemon: DaemonFixture, cli: CLI, signatures: String, key: (String, String), recovery: String) {
        let daemon = try DaemonFixture(.tpm, start: false, tpmLimits: (32, 600, 2))
        let cli = CLI(socket: daemon.socketPath)
        let signatures = daemon.root.appending("signatures").path
        try FileManager.default.createDirectory(atPath: signatures, withIntermediateDirectories: true)
        let key = try makeKey(type, named: "build", in: daemon.root)
        let swtpm = try #require(daemon.swtpm)
        try extendPCR7(swtpm, with: stateA)
        try signCurrent(cli, swtpm, key: key.0, output: signatures + "/state-a.json", epoch: epoch)
        daemon.extraArguments = [
            "--tpm-pcrs", "7", "--tpm-pcr-public-key", key.1, "--tpm-pcr-signatures", signatures,
        ]
        try daemon.start()
        let recovery = try provision(cli, daemon)
        return (daemon, cli, signatures, key, recovery)
    }

    /// Fills a new store: an always item, a passcode, a passcode-class item and a recovery key (returned).
    static func provision(_ cli: CLI, _ daemon: DaemonFixture) throws -> String {
        try expectOK(
            cli("add-generic-password", "-a", "acct", "-s", "svc", "-w", "always-secret", "--accessible", "always")
        )
        try expectOK(cli("passcode", "set", "--passcode-stdin", "--allow-weak-passcode", input: Self.passcode))
        try expectOK(cli("add-generic-password", "-a", "acct", "-s", "locked-svc", "-w", "ak-secret"))
        let file = daemon.root.appending("recovery-key").path
        try expectOK(cli("recovery-key", "create", "--file", file, "--passcode-stdin", input: Self.passcode))
        return try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Both items readable: the always one at once, the passcode one after an unlock through the passcode object.
    static func expectOpens(_ cli: CLI, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let status = try CLI.json(try cli("--json", "status"))
        #expect(status["recoveryRequired"] as? Bool == false, sourceLocation: sourceLocation)
        #expect((status["pcrs"] as? [String: Any])?["match"] as? Bool == true, sourceLocation: sourceLocation)
        let always = try cli("find-generic-password", "-a", "acct", "-s", "svc", "-w")
        #expect(always.stdoutText == "always-secret\n", "\(always.stderrText)", sourceLocation: sourceLocation)
        try expectOK(cli("unlock", "--passcode-stdin", input: Self.passcode), sourceLocation: sourceLocation)
        let locked = try cli("find-generic-password", "-a", "acct", "-s", "locked-svc", "-w")
        #expect(locked.stdoutText == "ak-secret\n", "\(locked.stderrText)", sourceLocation: sourceLocation)
    }

    /// The store refuses everything that needs the device secret: recovery required (exit 156).
    static func expectRecoveryRequired(_ cli: CLI, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let status = try CLI.json(try cli("--json", "status"))
        let required = status["recoveryRequired"] as? Bool == true
        let refused = try cli("find-generic-password", "-a", "acct", "-s", "svc", "-w")
        #expect(refused.status == Self.recoveryRequiredExit, "\(refused.stderrText)", sourceLocation: sourceLocation)
        #expect(refused.stdout.isEmpty, sourceLocation: sourceLocation)
        // The test stops here when the store opened: the steps after it assume the recovery-required state.
        try #require(required, "the store is not recovery-required", sourceLocation: sourceLocation)
    }

    @Test(
        "two signed boot states (PCR 7 extended differently from reset) both open, item and passcode, nothing re-sealed",
        arguments: KeyType.allCases
    )
    func twoSignedStatesOpen(type: KeyType) throws {
        let (daemon, cli, signatures, key, _) = try Self.signedDaemon(type)
        defer { daemon.remove() }
        let swtpm = try #require(daemon.swtpm)
        let before = try CLI.json(try cli("--json", "status"))
        #expect((before["boot"] as? String ?? "").contains("through policies signed by the key"), "\(before)")
        daemon.stop()
        let sealed = try Self.sealedObjects(daemon)
        #expect(sealed.allSatisfy { $0 != nil })

        // State B: a power cycle, then PCR 7 extended with other data. The build system signs it from its predicted
        // values (here tpm2_pcrread's output).
        try Self.boot(swtpm, into: Self.stateB)
        let values = daemon.root.appending("state-b.values").path
        let read = try swtpm.tool("tpm2_pcrread", ["sha256:7"])
        try read.stdout.write(to: URL(fileURLWithPath: values))
        try Self.expectOK(
            cli(
                "tpm",
                "sign-policy",
                "--pcrs",
                "7",
                "--pcr-values",
                values,
                "--private-key",
                key.0,
                "--output",
                signatures + "/state-b.json"
            )
        )
        try daemon.start()
        try Self.expectOpens(cli)
        daemon.stop()
        #expect(try Self.sealedObjects(daemon) == sealed, "the objects were sealed again in state B")

        // Back to state A (another power cycle): it opens with its own signature.
        try Self.boot(swtpm, into: Self.stateA)
        try daemon.start()
        try Self.expectOpens(cli)
        daemon.stop()
        #expect(try Self.sealedObjects(daemon) == sealed, "the objects were sealed again in state A")
    }

    @Test(
        "a state signed for a policy epoch below the TPM's is refused even with its file restored; the recovery key opens"
    )
    func withdrawnStateRefused() throws {
        // State A signed for epoch 0 at enrolment.
        let (daemon, cli, signatures, key, recovery) = try Self.signedDaemon(.rsa2048, epoch: 0)
        defer { daemon.remove() }
        let swtpm = try #require(daemon.swtpm)
        daemon.stop()
        let signatureA = try Data(contentsOf: URL(fileURLWithPath: signatures + "/state-a.json"))

        // The update to image B: its state signed for epoch 1 from predicted values, A's signature deleted.
        try Self.boot(swtpm, into: Self.stateB)
        let values = daemon.root.appending("state-b.values").path
        try swtpm.tool("tpm2_pcrread", ["sha256:7"]).stdout.write(to: URL(fileURLWithPath: values))
        let signB = [
            "tpm", "sign-policy", "--pcrs", "7", "--pcr-values", values, "--private-key", key.0, "--epoch", "1",
            "--output", signatures + "/state-b.json",
        ]
        try Self.expectOK(cli.run(signB))
        try FileManager.default.removeItem(atPath: signatures + "/state-a.json")
        try daemon.start()
        try Self.expectOpens(cli)
        daemon.stop()

        // The administrator withdraws every state signed for epoch 0; B, signed for 1, still opens.
        let advanced = try cli("tpm", "advance-policy-epoch", "--epoch", "1", "--tcti", swtpm.tcti)
        try Self.expectOK(advanced)
        #expect(advanced.stdoutText == "policy epoch: 1\n", "\(advanced.stdoutText)")
        let back = try cli("tpm", "advance-policy-epoch", "--epoch", "0", "--tcti", swtpm.tcti)
        #expect(back.status != 0 && back.stderrText.contains("never moves back"), "\(back.stderrText)")
        try Self.boot(swtpm, into: Self.stateB)
        try daemon.start()
        try Self.expectOpens(cli)
        daemon.stop()

        // A's old signature file put back, image A booted: refused, recovery required.
        try signatureA.write(to: URL(fileURLWithPath: signatures + "/state-a.json"))
        try Self.boot(swtpm, into: Self.stateA)
        try daemon.start()
        try Self.expectRecoveryRequired(cli)
        let detail = try CLI.json(try cli("--json", "status"))["boot"] as? String ?? ""
        #expect(detail.contains("1 signature was withdrawn"), "\(detail)")

        // The store's recovery key still opens it.
        try Self.expectOK(cli("recover", "--recovery-key-stdin", input: recovery + "\n" + Self.passcode))
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "svc", "-w").stdoutText == "always-secret\n")
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "locked-svc", "-w").stdoutText == "ak-secret\n")
    }

    @Test(
        "the TPM itself refuses a withdrawn signature: tpm2-tools with it open the device object until the epoch moves"
    )
    func withdrawnSignatureRefusedByTheTPM() throws {
        let (daemon, cli, signatures, _, _) = try Self.signedDaemon(.rsa2048, epoch: 0)
        defer { daemon.remove() }
        let swtpm = try #require(daemon.swtpm)
        daemon.stop()
        let dir = daemon.root.path
        try Self.writeDeviceObject(
            daemon,
            publicPath: "\(dir)/ds.pub",
            privatePath: "\(dir)/ds.priv",
            policyKeyPath: "\(dir)/key.pub"
        )
        let file = try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: signatures + "/state-a.json"))
        )
        let entry = try #require(((file as? [String: Any])?["sha256"] as? [[String: Any]])?.first)
        #expect(entry["epoch"] as? Int == 0, "\(entry)")
        let pol = try #require(entry["pol"] as? String)
        let sig = try #require(entry["sig"] as? String)
        try Data(Self.bytes(pol)).write(to: URL(fileURLWithPath: "\(dir)/pol"))
        try #require(Data(base64Encoded: sig)).write(to: URL(fileURLWithPath: "\(dir)/sig"))
        // Epoch 0 ends at Clock (1 << 48) - 1: `PolicyCounterTimer(clock <= that)`, as `sign-policy --epoch 0` signed.
        let lastClockOfEpoch0 = String((UInt64(1) << 48) - 1)

        /// Keyseal's own policy, run by other software: what root on the withdrawn image could do.
        func unsealWithSignature() throws -> ProcessResult {
            defer { _ = try? swtpm.tool("tpm2_flushcontext", ["-s"], check: false) }
            try swtpm.tool(
                "tpm2_createprimary",
                [
                    "-Q", "-C", "o", "-G", "ecc256:aes128cfb", "-a",
                    "restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda", "-c",
                    "\(dir)/p.ctx",
                ]
            )
            try swtpm.tool("tpm2_flushcontext", ["-t"])
            try swtpm.tool(
                "tpm2_load",
                ["-Q", "-C", "\(dir)/p.ctx", "-u", "\(dir)/ds.pub", "-r", "\(dir)/ds.priv", "-c", "\(dir)/ds.ctx"]
            )
            try swtpm.tool("tpm2_flushcontext", ["-t"])
            try swtpm.tool(
                "tpm2_loadexternal",
                [
                    "-Q", "-C", "o", "-u", "\(dir)/key.pub", "-c", "\(dir)/key.ctx", "-n", "\(dir)/key.name",
                ]
            )
            try swtpm.tool(
                "tpm2_verifysignature",
                [
                    "-c", "\(dir)/key.ctx", "-g", "sha256", "-m", "\(dir)/pol", "-f", "rsassa", "-s", "\(dir)/sig",
                    "-t",
                    "\(dir)/ticket",
                ]
            )
            try swtpm.tool("tpm2_flushcontext", ["-t"])
            try swtpm.tool("tpm2_startauthsession", ["--policy-session", "-S", "\(dir)/s.ctx"])
            try swtpm.tool("tpm2_policypcr", ["-Q", "-S", "\(dir)/s.ctx", "-l", "sha256:7"])
            let epoch = try swtpm.tool(
                "tpm2_policycountertimer",
                ["-Q", "-S", "\(dir)/s.ctx", "--ule", "clock=\(lastClockOfEpoch0)"],
                check: false
            )
            guard epoch.status == 0 else { return epoch }
            try swtpm.tool(
                "tpm2_policyauthorize",
                [
                    "-Q", "-S", "\(dir)/s.ctx", "-i", "\(dir)/pol", "-n", "\(dir)/key.name", "-t", "\(dir)/ticket",
                ]
            )
            return try swtpm.tool("tpm2_unseal", ["-c", "\(dir)/ds.ctx", "-p", "session:\(dir)/s.ctx"], check: false)
        }

        // In epoch 0 the signature opens the device object (so the chain above is Keyseal's policy).
        let before = try unsealWithSignature()
        #expect(before.status == 0 && before.stdout.count == 32, "\(before.stderrText)")
        try Self.expectOK(cli("tpm", "advance-policy-epoch", "--epoch", "1", "--tcti", swtpm.tcti))
        let after = try unsealWithSignature()
        #expect(after.status != 0, "\(after.stderrText)")
        #expect(after.stdout.isEmpty)
    }

    /// The device object of the store's keybag (a signed-bound blob, version 3) as tpm2-tools load it.
    static func writeDeviceObject(
        _ daemon: DaemonFixture,
        publicPath: String,
        privatePath: String,
        policyKeyPath: String
    ) throws {
        let blob = [UInt8](try KeychainStoreTestHooks.sealedDeviceSecret(directory: daemon.storeDirectory))
        try #require(blob[4] == 3, "not a blob bound to signed policies")
        var offset = 10
        func sized() -> [UInt8] {
            let size = Int(blob[offset]) << 8 | Int(blob[offset + 1])
            defer { offset += 2 + size }
            return Array(blob[offset..<offset + 2 + size])
        }
        try Data(sized()).write(to: URL(fileURLWithPath: policyKeyPath))  // the policy key's TPM2B_PUBLIC
        _ = sized()  // the primary's Name
        try Data(sized()).write(to: URL(fileURLWithPath: publicPath))
        try Data(blob[offset...]).write(to: URL(fileURLWithPath: privatePath))
    }

    @Test("2,000 entries with the right pol and bad signatures: keyseald opens in seconds, none reaches the TPM")
    func manyBadSignaturesStayCheap() throws {
        let (daemon, cli, signatures, _, _) = try Self.signedDaemon(.rsa2048)
        defer { daemon.remove() }
        daemon.stop()
        let file = try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: signatures + "/state-a.json"))
        )
        let good = try #require(((file as? [String: Any])?["sha256"] as? [[String: Any]])?.first)
        // Two files (each under the 1 MiB read limit) that sort before the good one: the current state's pol, the
        // bound key's pkfp, 256 random bytes as the signature.
        for part in 0..<2 {
            let entries: [[String: Any]] = (0..<1000).map { _ in
                [
                    "pcrs": [7], "pkfp": good["pkfp"] ?? "", "pol": good["pol"] ?? "",
                    "sig": Data((0..<256).map { _ in UInt8.random(in: 0...255) }).base64EncodedString(),
                ]
            }
            try JSONSerialization.data(withJSONObject: ["sha256": entries]).write(
                to: URL(fileURLWithPath: signatures + "/0-bad-\(part).json")
            )
        }
        let clock = ContinuousClock()
        let started = clock.now
        try daemon.start()
        try Self.expectOpens(cli)
        let elapsed = clock.now - started
        // Before the bound, each entry cost a TPM2_LoadExternal and a TPM2_VerifySignature: 53 s for 2,000 at a start,
        // as many again at the unlock.
        #expect(elapsed < .seconds(10), "start and unlock took \(elapsed)")

        // Without the good file: refused, every bad one counted as not verifying, still in seconds.
        daemon.stop()
        try FileManager.default.removeItem(atPath: signatures + "/state-a.json")
        let again = clock.now
        try daemon.start()
        try Self.expectRecoveryRequired(cli)
        #expect(clock.now - again < .seconds(10), "start took \(clock.now - again)")
        let detail = try CLI.json(try cli("--json", "status"))["boot"] as? String ?? ""
        #expect(detail.contains("2000 signatures for them did not verify"), "\(detail)")
    }

    @Test("a boot state nobody signed needs the recovery key, which opens the store and re-seals to the same key")
    func unsignedStateNeedsRecovery() throws {
        let (daemon, cli, signatures, key, recovery) = try Self.signedDaemon(.rsa2048)
        defer { daemon.remove() }
        let swtpm = try #require(daemon.swtpm)
        let fingerprint = try Self.fingerprint(ofSignatureFile: signatures + "/state-a.json")
        daemon.stop()
        try Self.extendPCR7(swtpm, with: "cd")
        try daemon.start()
        try Self.expectRecoveryRequired(cli)
        let detail = try CLI.json(try cli("--json", "status"))["boot"] as? String ?? ""
        #expect(detail.contains("recovery required"), "\(detail)")

        try Self.expectOK(cli("recover", "--recovery-key-stdin", input: recovery + "\n" + Self.passcode))
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "svc", "-w").stdoutText == "always-secret\n")
        #expect(try cli("find-generic-password", "-a", "acct", "-s", "locked-svc", "-w").stdoutText == "ak-secret\n")
        let recovered = try CLI.json(try cli("--json", "status"))["boot"] as? String ?? ""
        #expect(recovered.contains("bound to PCR 7 through policies signed by the key \(fingerprint)"), "\(recovered)")

        // `recover` sealed the objects to the same key, not to this state's values: the next start in this state,
        // which nobody signed, needs the recovery key again.
        daemon.stop()
        try daemon.start()
        try Self.expectRecoveryRequired(cli)
        let again = try CLI.json(try cli("--json", "status"))["boot"] as? String ?? ""
        #expect(again.contains(fingerprint), "\(again)")

        // Once this state's signature is installed, it opens without the recovery key.
        daemon.stop()
        try Self.signCurrent(cli, swtpm, key: key.0, output: signatures + "/state-c.json")
        try daemon.start()
        try Self.expectOpens(cli)
    }

    @Test("reseal of a signed store: --pcrs LIST keeps the key and needs a signature; --pcrs none drops the key")
    func resealOfSignedStore() throws {
        let (daemon, cli, signatures, key, _) = try Self.signedDaemon(.p256)
        defer { daemon.remove() }
        let swtpm = try #require(daemon.swtpm)
        let fingerprint = try Self.fingerprint(ofSignatureFile: signatures + "/state-a.json")
        func boot() throws -> String { try CLI.json(try cli("--json", "status"))["boot"] as? String ?? "" }
        func reseal(_ pcrs: String) throws -> ProcessResult {
            try cli("tpm", "reseal", "--pcrs", pcrs, "--passcode-stdin", input: Self.passcode)
        }
        daemon.stop()
        let original = try Self.sealedObjects(daemon)
        try daemon.start()

        // No policy signed for PCRs 7 and 14: refused, nothing sealed again.
        let refused = try reseal("7,14")
        #expect(refused.status != 0)
        #expect(
            refused.stderrText.contains("no policy signed by the PCR policy key \(fingerprint)"),
            "\(refused.stderrText)"
        )
        #expect(refused.stderrText.contains("nothing was bound"), "\(refused.stderrText)")
        #expect(try boot().contains("bound to PCR 7 through policies signed by the key \(fingerprint)"))
        daemon.stop()
        #expect(try Self.sealedObjects(daemon) == original, "a refused reseal changed the sealed objects")

        // Signed for PCRs 7 and 14 now: re-sealed to the same key.
        let both = ["--pcrs", "7,14", "--current", "--tcti", swtpm.tcti, "--private-key", key.0]
        try Self.expectOK(cli.run(["tpm", "sign-policy"] + both + ["--output", signatures + "/a-7-14.json"]))
        try daemon.start()
        try Self.expectOK(reseal("7,14"))
        #expect(try boot().contains("bound to PCR 7,14 through policies signed by the key \(fingerprint)"))
        daemon.stop()
        let resealed = try Self.sealedObjects(daemon)
        let device = [UInt8](try #require(resealed[0]))
        #expect(device[4] == 3 && device[6..<10] == [0, 0, 0x40, 0x80], "\(device.prefix(10))")
        #expect(resealed != original)

        // Still bound to the key: a new PCR 14 value, signed, opens without a reseal.
        try swtpm.tool("tpm2_pcrextend", ["14:sha256=" + String(repeating: "e4", count: 32)])
        try Self.expectOK(cli.run(["tpm", "sign-policy"] + both + ["--output", signatures + "/b-7-14.json"]))
        try daemon.start()
        try Self.expectOpens(cli)

        // --pcrs none unbinds the objects and forgets the key, in the running daemon too: a later --pcrs 7 (same
        // process, keyseald still started with --tpm-pcr-public-key) is plain PolicyPCR, which needs no signature
        // (there is none left).
        try Self.expectOK(reseal("none"))
        let unbound = try boot()
        #expect(unbound.contains("not bound to PCRs") && !unbound.contains("signed by the key"), "\(unbound)")
        for name in try FileManager.default.contentsOfDirectory(atPath: signatures) {
            try FileManager.default.removeItem(atPath: signatures + "/" + name)
        }
        let rebound = try reseal("7")
        #expect(rebound.status == 0, "\(rebound.stderrText)")
        let plain = try boot()
        #expect(plain.contains("bound to PCR 7") && !plain.contains("signed by the key"), "\(plain)")
        daemon.stop()
        #expect([UInt8](try #require(try Self.sealedObjects(daemon)[0]))[4] == 2, "not a plain PolicyPCR blob")
        try daemon.start()
        try Self.expectOpens(cli)

        // And unbound after a restart: --pcrs none, then the blob is of version 1 (no PCRs, no key).
        try Self.expectOK(reseal("none"))
        daemon.stop()
        #expect([UInt8](try #require(try Self.sealedObjects(daemon)[0]))[4] == 1)
    }

    @Test("a policy signed by another key is refused, whether it names that key or the bound one")
    func otherKeyRefused() throws {
        let (daemon, cli, signatures, _, _) = try Self.signedDaemon(.p256)
        defer { daemon.remove() }
        let swtpm = try #require(daemon.swtpm)
        let other = try Self.makeKey(.p256, named: "other", in: daemon.root)
        daemon.stop()
        try Self.extendPCR7(swtpm, with: "ef")
        let forged = signatures + "/state-b.json"
        try Self.signCurrent(cli, swtpm, key: other.0, output: forged)
        try daemon.start()
        try Self.expectRecoveryRequired(cli)

        // The same signature relabelled with the bound key's fingerprint: the TPM's TPM2_VerifySignature refuses it.
        daemon.stop()
        let bound = try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: signatures + "/state-a.json"))
        )
        let boundFingerprint = try #require(((bound as? [String: Any])?["sha256"] as? [[String: Any]])?.first?["pkfp"])
        var file = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: forged))) as? [String: Any]
        )
        var entries = try #require(file["sha256"] as? [[String: Any]])
        #expect(entries[0]["pkfp"] as? String != boundFingerprint as? String)
        entries[0]["pkfp"] = boundFingerprint
        file["sha256"] = entries
        try JSONSerialization.data(withJSONObject: file).write(to: URL(fileURLWithPath: forged))
        try daemon.start()
        try Self.expectRecoveryRequired(cli)
        let detail = try CLI.json(try cli("--json", "status"))["boot"] as? String ?? ""
        #expect(detail.contains("did not verify") || daemon.log_().contains("did not verify"), "\(detail)")
    }

    @Test("a signature file naming the key by its SubjectPublicKeyInfo's SHA-256, as earlier sign-policy wrote, opens")
    func earlierFingerprintStillNamesTheKey() throws {
        let (daemon, cli, signatures, key, _) = try Self.signedDaemon(.p256)
        defer { daemon.remove() }
        let swtpm = try #require(daemon.swtpm)
        daemon.stop()
        try Self.boot(swtpm, into: Self.stateB)
        let file = signatures + "/state-b.json"
        try Self.signCurrent(cli, swtpm, key: key.0, output: file)
        // Relabel the entry with the earlier fingerprint: SHA-256 of the public key's DER SubjectPublicKeyInfo.
        let pem = try String(contentsOfFile: key.1, encoding: .utf8)
        let spki = try P256.Signing.PublicKey(pemRepresentation: pem).derRepresentation
        let earlier = SHA256.hash(data: spki).map { String(format: "%02x", $0) }.joined()
        var json = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any]
        )
        var entries = try #require(json["sha256"] as? [[String: Any]])
        #expect(entries[0]["pkfp"] as? String != earlier)
        entries[0]["pkfp"] = earlier
        json["sha256"] = entries
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: file))
        try daemon.start()
        try Self.expectOpens(cli)
    }

    @Test("enrolment is refused when no signed policy matches the current values; nothing is bound")
    func enrolmentRefusedWithoutMatchingSignature() throws {
        let daemon = try DaemonFixture(.tpm, start: false, tpmLimits: (32, 600, 2))
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let swtpm = try #require(daemon.swtpm)
        let signatures = daemon.root.appending("signatures").path
        try FileManager.default.createDirectory(atPath: signatures, withIntermediateDirectories: true)
        let key = try Self.makeKey(.rsa2048, named: "build", in: daemon.root)
        // A signature for another state only (the one after an extend); the TPM is back in the fresh state.
        try Self.extendPCR7(swtpm, with: "ab")
        try Self.signCurrent(cli, swtpm, key: key.0, output: signatures + "/state-b.json")
        try swtpm.restart()
        let arguments =
            daemon.arguments + [
                "--tpm-pcrs", "7", "--tpm-pcr-public-key", key.1, "--tpm-pcr-signatures", signatures,
            ]
        // Bounded: a keyseald that accepts the enrolment keeps running, and must fail the test rather than hang it.
        let keyseald = try builtProductsDirectory().appendingPathComponent("keyseald").path
        let timeout = try requireTool("timeout", package: "coreutils")
        let refused = try runProcess(timeout, ["20", keyseald] + arguments, environment: daemon.environment)
        #expect(refused.status != 0 && refused.status != 124, "exit \(refused.status)")
        #expect(refused.stderrText.contains("no policy signed by the PCR policy key"), "\(refused.stderrText)")
        #expect(refused.stderrText.contains("nothing was bound"), "\(refused.stderrText)")
        #expect(throws: (any Error).self) {
            try KeychainStoreTestHooks.sealedDeviceSecret(directory: daemon.storeDirectory)
        }

        // Signed for the current state, the same command creates the store.
        try Self.signCurrent(cli, swtpm, key: key.0, output: signatures + "/state-a.json")
        daemon.extraArguments = [
            "--tpm-pcrs", "7", "--tpm-pcr-public-key", key.1, "--tpm-pcr-signatures", signatures,
        ]
        try daemon.start()
        #expect((try CLI.json(try cli("--json", "status"))["boot"] as? String ?? "").contains("signed by the key"))
    }

    @Test("live USB: tpm2_unseal of the signed-bound device object from a copy of the keybag fails")
    func liveUSBAttack() throws {
        let (daemon, _, _, _, _) = try Self.signedDaemon(.rsa2048)
        defer { daemon.remove() }
        let swtpm = try #require(daemon.swtpm)
        daemon.stop()
        try Self.extendPCR7(swtpm, with: "cd")  // the live system's boot state, which nobody signed
        let blob = [UInt8](try KeychainStoreTestHooks.sealedDeviceSecret(directory: daemon.storeDirectory))
        try #require(blob[4] == 3, "not a blob bound to signed policies")
        var offset = 10
        func sized() -> [UInt8] {
            let size = Int(blob[offset]) << 8 | Int(blob[offset + 1])
            defer { offset += 2 + size }
            return Array(blob[offset..<offset + 2 + size])
        }
        _ = sized()  // the policy key's public area
        _ = sized()  // the primary's Name
        let publicArea = sized()
        let privateArea = Array(blob[offset...])
        let dir = daemon.root.path
        try Data(publicArea).write(to: URL(fileURLWithPath: "\(dir)/ds.pub"))
        try Data(privateArea).write(to: URL(fileURLWithPath: "\(dir)/ds.priv"))
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
        for attempt in [[], ["-p", "pcr:sha256:7"]] {
            let attack = try swtpm.tool("tpm2_unseal", ["-c", "\(dir)/ds.ctx"] + attempt, check: false)
            #expect(attack.status != 0, "\(attempt)")
            #expect(attack.stdout.isEmpty, "\(attempt)")
            _ = try? swtpm.tool("tpm2_flushcontext", ["-s"], check: false)
        }
    }

    /// systemd's `systemd-measure` (systemd 252 and later; Debian installs it in /lib/systemd, outside PATH).
    static func systemdMeasure() throws -> String {
        for path in ["/usr/lib/systemd/systemd-measure", "/lib/systemd/systemd-measure"]
        where FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        throw FixtureError("systemd-measure is not installed (Debian package systemd, 252 or later)")
    }

    @Test("systemd-measure signs PCR 11 for a UKI: its tpm2-pcr-signature.json opens the store; sign-policy agrees")
    func systemdMeasureSignatureOpens() throws {
        let measure = try Self.systemdMeasure()
        let daemon = try DaemonFixture(.tpm, start: false, tpmLimits: (32, 600, 2))
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let swtpm = try #require(daemon.swtpm)
        let signatures = daemon.root.appending("signatures").path
        try FileManager.default.createDirectory(atPath: signatures, withIntermediateDirectories: true)
        let key = try Self.makeKey(.rsa2048, named: "build", in: daemon.root)

        // A unified kernel image's sections, in the order systemd-stub measures them into PCR 11 (name with its NUL,
        // then the contents), then the boot phases systemd-pcrphase measures; the store is bound in the last one.
        let sections: [(name: String, content: Data)] = [
            (".linux", Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })),
            (".osrel", Data("ID=keyseal-test\nVERSION_ID=42\n".utf8)),
            (".cmdline", Data("console=ttyS0 quiet\n".utf8)),
            (".pcrpkey", try Data(contentsOf: URL(fileURLWithPath: key.1))),
        ]
        var options: [String] = []
        for section in sections {
            let path = daemon.root.appending("uki\(section.name)").path
            try section.content.write(to: URL(fileURLWithPath: path))
            options.append("--\(section.name.dropFirst())=\(path)")
        }
        let phase = "enter-initrd:leave-initrd:sysinit:ready"
        let environment = ["TSS2_LOG": "all+NONE", "SYSTEMD_LOG_LEVEL": "warning"]
        let calculated = try runProcess(
            measure,
            ["calculate"] + options + ["--bank=sha256", "--phase=\(phase)", "--json=short"],
            environment: environment
        )
        try Self.expectOK(calculated)
        let predicted = try #require(
            ((try JSONSerialization.jsonObject(with: calculated.stdout) as? [String: Any])?["sha256"]
                as? [[String: Any]])?.first,
            "\(calculated.stdoutText)"
        )
        #expect(predicted["pcr"] as? Int == 11 && predicted["phase"] as? String == phase, "\(predicted)")
        let value = try #require(predicted["hash"] as? String)

        // The boot, as systemd-stub and systemd-pcrphase measure it; PCR 11 must reach what systemd-measure predicted.
        func bootTheImage() throws {
            let measurements =
                sections.flatMap { [Data($0.name.utf8) + Data([0]), $0.content] }
                + phase.split(separator: ":").map { Data($0.utf8) }
            for measurement in measurements {
                try swtpm.tool("tpm2_pcrextend", ["11:sha256=" + Self.hex(Array(SHA256.hash(data: measurement)))])
            }
            let read = try swtpm.tool("tpm2_pcrread", ["sha256:11"]).stdoutText.lowercased()
            try #require(read.contains("0x" + value), "PCR 11 is not what systemd-measure predicted: \(read)")
        }
        try bootTheImage()

        // systemd-measure signs every phase through the swtpm (it computes the PolicyPCR digests in a trial session).
        let signed = try runProcess(
            measure,
            ["sign"] + options + [
                "--bank=sha256", "--tpm2-device=\(swtpm.tcti)", "--private-key=\(key.0)", "--public-key=\(key.1)",
                "--json=short",
            ],
            environment: environment
        )
        try Self.expectOK(signed)
        try signed.stdout.write(to: URL(fileURLWithPath: signatures + "/tpm2-pcr-signature.json"))
        let systemdEntries = try #require(
            (try JSONSerialization.jsonObject(with: signed.stdout) as? [String: Any])?["sha256"] as? [[String: Any]]
        )
        #expect(systemdEntries.count == 4, "one entry a phase: \(signed.stdoutText)")

        // keyseal tpm sign-policy over the same PCR and value: the same pol and pkfp, and the same bytes of sig
        // (RSASSA-PKCS1-v1_5 is deterministic).
        let values = daemon.root.appending("pcr11.json").path
        try Data("{\"11\": \"\(value)\"}".utf8).write(to: URL(fileURLWithPath: values))
        let ours = daemon.root.appending("keyseal.json").path
        try Self.expectOK(
            cli("tpm", "sign-policy", "--pcrs", "11", "--pcr-values", values, "--private-key", key.0, "--output", ours)
        )
        let entry = try #require(
            ((try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: ours))) as? [String: Any])?[
                "sha256"
            ] as? [[String: Any]])?.first
        )
        let theirs = try #require(
            systemdEntries.first { $0["pol"] as? String == entry["pol"] as? String },
            "no systemd-measure entry has keyseal's pol \(entry["pol"] ?? "")"
        )
        #expect(theirs["pcrs"] as? [Int] == [11] && entry["pcrs"] as? [Int] == [11])
        #expect(theirs["pkfp"] as? String == entry["pkfp"] as? String)
        #expect(theirs["sig"] as? String == entry["sig"] as? String)

        // A store bound to PCR 11 and the key: enrolment finds systemd's file (the only one) and the TPM verifies it.
        daemon.extraArguments = [
            "--tpm-pcrs", "11", "--tpm-pcr-public-key", key.1, "--tpm-pcr-signatures", signatures,
        ]
        try daemon.start()
        _ = try Self.provision(cli, daemon)
        let fingerprint = try #require(entry["pkfp"] as? String)
        let status = try CLI.json(try cli("--json", "status"))["boot"] as? String ?? ""
        #expect(status.contains("bound to PCR 11 through policies signed by the key \(fingerprint)"), "\(status)")

        // The next boot of the same image opens the store with systemd-measure's signature, item and passcode.
        daemon.stop()
        try swtpm.restart()
        try bootTheImage()
        try daemon.start()
        try Self.expectOpens(cli)

        // Before the image's measurements (PCR 11 as at reset) nothing was signed: recovery required.
        daemon.stop()
        try swtpm.restart()
        try daemon.start()
        try Self.expectRecoveryRequired(cli)
    }

    @Test(
        "sign-policy: openssl verifies the signature over SHA-256(pol) with the public key; pkfp as systemd hashes it"
    )
    func signatureVerifiesWithOpenSSL() throws {
        let root = try TemporaryDirectory()
        defer { root.remove() }
        let openssl = try requireTool("openssl", package: "openssl")
        let values = root.appending("values").path
        try "# state\nsha256:\n  7 : 0x\(String(repeating: "11", count: 32))\n".write(
            toFile: values,
            atomically: true,
            encoding: .utf8
        )
        for type in KeyType.allCases {
            let key = try Self.makeKey(type, named: type.rawValue, in: root)
            let output = root.appending("\(type).json").path
            try Self.expectOK(
                CLI(socket: "/nonexistent")(
                    "tpm",
                    "sign-policy",
                    "--pcrs",
                    "7",
                    "--pcr-values",
                    values,
                    "--private-key",
                    key.0,
                    "--output",
                    output
                )
            )
            let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: output)))
            let entry = try #require(((file as? [String: Any])?["sha256"] as? [[String: Any]])?.first)
            #expect(entry["pcrs"] as? [Int] == [7])
            let pol = try #require(entry["pol"] as? String)
            // PolicyPCR over PCR 7 = 0x11…11, as the TPM 2.0 specification computes it.
            let expected = Self.pcrPolicyDigest(pcr7: [UInt8](repeating: 0x11, count: 32))
            #expect(pol == expected)
            try Data(Self.bytes(pol)).write(to: URL(fileURLWithPath: root.appending("pol").path))
            let base64 = try #require(entry["sig"] as? String)
            let sig = try #require(Data(base64Encoded: base64))
            try sig.write(to: URL(fileURLWithPath: root.appending("sig").path))
            let verified = try runProcess(
                openssl,
                [
                    "dgst", "-sha256", "-verify", key.1, "-signature", root.appending("sig").path,
                    root.appending("pol").path,
                ]
            )
            #expect(verified.status == 0 && verified.stdoutText.contains("Verified OK"), "\(verified.stderrText)")
            // systemd's pkfp: SHA-256 of i2d_PublicKey, the PKCS#1 DER of an RSA key, the EC point of a P-256 key
            // (the BIT STRING that ends its SubjectPublicKeyInfo).
            let encoded: Data
            switch type {
            case .rsa2048:
                let der = try runProcess(
                    openssl,
                    ["rsa", "-pubin", "-in", key.1, "-RSAPublicKey_out", "-outform", "DER"]
                )
                try Self.expectOK(der)
                encoded = der.stdout
            case .p256:
                let der = try runProcess(openssl, ["pkey", "-pubin", "-in", key.1, "-outform", "DER"])
                try Self.expectOK(der)
                encoded = der.stdout.suffix(65)
                #expect(encoded.first == 0x04)
            }
            #expect(entry["pkfp"] as? String == Self.hex(Array(SHA256.hash(data: encoded))), "\(type)")
        }
    }

    /// SHA-256(0³² ‖ TPM_CC_PolicyPCR ‖ TPML_PCR_SELECTION{sha256, PCR 7} ‖ SHA-256(value)), written out here from the
    /// specification rather than taken from the code under test.
    static func pcrPolicyDigest(pcr7 value: [UInt8]) -> String {
        let selection: [UInt8] = [0, 0, 0, 1, 0x00, 0x0B, 3, 0x80, 0, 0]
        let command: [UInt8] = [0, 0, 0x01, 0x7F]
        let message = [UInt8](repeating: 0, count: 32) + command + selection + Array(SHA256.hash(data: value))
        return hex(Array(SHA256.hash(data: message)))
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func bytes(_ hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }
}
