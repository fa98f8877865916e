import Foundation
import Keyseal
import KeysealClient
import KeysealTestSupport
import Testing

// Session objects, what C_CreateObject keeps, read-only sessions and a login without a PIN: the module as test suites
// of the field (python-pkcs11, crypto11) and tools that take no PIN from a file meet it.
extension PKCS11ModuleTests {
    /// The keyseal-pkcs11-probe `command` with `arguments` as a process of its own, and its standard output.
    final class ProbeProcess {
        let process = Process()
        let output = Pipe()

        init(_ setup: Setup, _ arguments: [String], extra: [String: String] = [:]) throws {
            process.executableURL = try builtProductsDirectory().appendingPathComponent("keyseal-pkcs11-probe")
            process.arguments = [setup.module] + arguments
            process.environment = fixtureEnvironment.merging(setup.environment.merging(extra) { _, new in new }) {
                _,
                new in new
            }
            process.standardOutput = output
            try process.run()
        }

        /// Its output's lines once it has exited.
        func lines() throws -> [String] {
            _ = try process.exitStatus()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            return text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        }
    }

    /// Waits (at most 60 s) for the probe to create `path`.
    static func waitForFile(_ path: String) {
        for _ in 0..<600 where !FileManager.default.fileExists(atPath: path) { usleep(100_000) }
    }

    /// `C_GenerateKeyPair` with CKA_TOKEN false, in a read-only session, makes a session key that keyseald holds for
    /// the module's connection and never stores: it reports CKA_TOKEN false on both halves, keeps the caller's CKA_ID,
    /// is sensitive and not extractable, signs, is seen by the process's other session, is refused while the store is
    /// locked (its class gates it as a stored key's) and signs again once unlocked; destroying it, or closing the
    /// session that made it, ends it. The read-only session may not make a token key (CKR_SESSION_READ_ONLY).
    @Test(arguments: backends)
    func aSessionKeyIsNeverStoredAndEndsWithItsSession(_ backend: DaemonFixture.Backend) throws {
        let setup = try Setup(backend)
        let set = try setup.cli("passcode", "set", "--passcode-stdin", "--allow-weak-passcode", input: "1234\n")
        #expect(set.status == 0, "\(set.stderrText)")
        let flag = setup.directory.appending("session").path
        let probe = try ProbeProcess(setup, ["sessionkey", flag])
        Self.waitForFile(flag + ".made")
        // Not in the store, whoever looks: keyseal's own search finds no such key.
        for label in ["session-key", "token-key"] {
            let found = try setup.cli("find-key", "-l", label)
            #expect(found.status != 0, "\(found.stdoutText)")
        }
        #expect(try setup.cli("lock").status == 0)
        _ = FileManager.default.createFile(atPath: flag + ".locked", contents: nil)
        Self.waitForFile(flag + ".tried")
        #expect(try setup.cli("unlock", "--passcode-stdin", input: "1234\n").status == 0)
        _ = FileManager.default.createFile(atPath: flag, contents: nil)
        let lines = try probe.lines()
        #expect(
            lines == [
                "gen=0x0 tokengen=0xb5 token=0,0 extractable=0 value=0x11 id=abcd sign=0x0 found=2",
                "locked=0x101",
                "unlocked=0x0 destroy=0x0 destroyed=0x60 gen2=0x0 close=0x0 closed=0x60 after=0,0",
            ],
            "\(lines)"
        )
        let found = try setup.cli("find-key", "-l", "session-key-2")
        #expect(found.status != 0, "\(found.stdoutText)")
    }

    /// A process that ends without closing anything (no C_CloseSession, no C_Finalize) ends its session keys too:
    /// keyseald forgets them with the connection, and a hardware session key's object leaves the token (SoftHSM2,
    /// counted through the token's own module).
    @Test func aSessionKeyEndsWithTheProcess() throws {
        let setup = try Setup(.pkcs11)
        let softhsm = try #require(setup.daemon.softhsm)
        let tool = try requireTool("pkcs11-tool", package: "opensc")
        func privateKeysOnTheToken() throws -> Int {
            let listed = try runProcess(
                tool,
                [
                    "--module", softhsm.module, "--token-label", softhsm.tokenLabel, "--login", "--pin", softhsm.pin,
                    "--list-objects", "--type", "privkey",
                ],
                environment: softhsm.environment
            )
            return listed.stdoutText.components(separatedBy: "Private Key Object").count - 1
        }
        let before = try privateKeysOnTheToken()
        let flag = setup.directory.appending("exit").path
        let probe = try ProbeProcess(setup, ["exitwithkey", flag])
        Self.waitForFile(flag + ".made")
        #expect(try privateKeysOnTheToken() == before + 1)
        _ = FileManager.default.createFile(atPath: flag, contents: nil)
        #expect(try probe.lines() == ["gen=0x0"])
        var after = -1
        for _ in 0..<50 {
            after = try privateKeysOnTheToken()
            if after == before { break }
            usleep(100_000)
        }
        #expect(after == before)
        #expect(try setup.cli("find-key", "-l", "leaving-key").status != 0)
    }

    /// `C_CreateObject` never accepts and loses. Session objects (CKA_TOKEN false, made in a read-only session) keep
    /// every attribute as given: a certificate with a 32-byte label that is not UTF-8 is found by that label, and its
    /// CKA_ID and both public-key hashes read back equal; a data object too; closing their session ends them. A token
    /// certificate keeps what the store can keep, and is refused otherwise: a public-key hash
    /// (CKR_ATTRIBUTE_TYPE_INVALID), a label that is not UTF-8 or another CKA_ID than its key's
    /// (CKR_ATTRIBUTE_VALUE_INVALID), leaving nothing stored; the read-only session may not make one.
    @Test func createdObjectsKeepWhatTheCallerGaveOrAreRefused() throws {
        let setup = try Setup(.hostKey, hardware: false)
        let openssl = try requireTool("openssl", package: "openssl")
        let dir = setup.directory.path
        let made = try runProcess(
            openssl,
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                "\(dir)/cert.key", "-subj", "/CN=created", "-days", "1", "-outform", "DER", "-out", "\(dir)/cert.der",
            ]
        )
        #expect(made.status == 0, "\(made.stderrText)")
        #expect(
            try setup.probe("objects", "\(dir)/cert.der")
                == "session=0x0 found=1 same=1 kept=3 token=0 data=0x0 tokenro=0xb5 hash=0x12 label=0x13 id=0x13 "
                + "stored=0 token=0x0 stored=1 close=0x0 after=0,0"
        )
    }

    /// While the store is unlocked, `C_Login(CKU_USER, NULL, 0)` logs in with no PIN (the token reports
    /// CKF_PROTECTED_AUTHENTICATION_PATH); while it is locked and no askpass program is configured it fails with
    /// CKR_PIN_INCORRECT without counting a try (the store's failed attempts stay 0) and the key stays refused; a PIN
    /// given keeps its meaning (a wrong one counts).
    @Test(arguments: backends)
    func aLoginWithoutAPINFollowsTheStoresLockState(_ backend: DaemonFixture.Backend) throws {
        let setup = try Setup(backend)
        let set = try setup.cli("passcode", "set", "--passcode-stdin", "--allow-weak-passcode", input: "1234\n")
        #expect(set.status == 0, "\(set.stderrText)")
        #expect(try setup.probe("login") == "info=0x0 protected=1 login=0x0 sign=0x0")
        #expect(try setup.cli("lock").status == 0)
        #expect(try setup.probe("login") == "info=0x0 protected=1 login=0xa0 find=0x101")
        func failedAttempts() throws -> Int {
            let status = try CLI.json(try setup.cli("status", "--json"))
            return status["failedAttempts"] as? Int ?? -1
        }
        #expect(try failedAttempts() == 0)
        #expect(try setup.probe("login", "9999") == "info=0x0 protected=1 login=0xa0 find=0x101")
        #expect(try failedAttempts() == 1)
        #expect(try setup.probe("login", "1234") == "info=0x0 protected=1 login=0x0 sign=0x0")
    }

    /// While the store is locked, a login without a PIN asks the askpass program (`$KEYSEAL_ASKPASS`) for the
    /// passcode and unlocks with it; a dismissed prompt (the program exits 1) is CKR_FUNCTION_CANCELED and counts no
    /// try.
    @Test func aLoginWithoutAPINAsksTheAskpassProgramWhileLocked() throws {
        let setup = try Setup(.hostKey, hardware: false)
        try setup.setPasscodeAndLock()
        let dismiss = setup.directory.appending("dismiss.sh").path
        try "#!/bin/sh\nexit 1\n".write(toFile: dismiss, atomically: true, encoding: .utf8)
        chmod(dismiss, 0o755)
        let answer = setup.directory.appending("answer.sh").path
        try "#!/bin/sh\necho 1234\n".write(toFile: answer, atomically: true, encoding: .utf8)
        chmod(answer, 0o755)
        let probe = try builtProductsDirectory().appendingPathComponent("keyseal-pkcs11-probe").path
        let dismissed = try setup.run(probe, [setup.module, "login"], extra: ["KEYSEAL_ASKPASS": dismiss])
        #expect(dismissed.stdoutText == "info=0x0 protected=1 login=0x50 find=0x101\n")
        let status = try CLI.json(try setup.cli("status", "--json"))
        #expect(status["failedAttempts"] as? Int == 0 && status["lockState"] as? String == "locked", "\(status)")
        let answered = try setup.run(probe, [setup.module, "login"], extra: ["KEYSEAL_ASKPASS": answer])
        #expect(answered.stdoutText == "info=0x0 protected=1 login=0x0 sign=0x0\n")
        let unlocked = try CLI.json(try setup.cli("status", "--json"))
        #expect(unlocked["lockState"] as? String == "unlocked", "\(unlocked)")
    }

    /// A key keyseald holds for a connection (`kSecAttrIsPermanent` false over the wire, a PKCS#11 session key) is
    /// that connection's alone: another connection of the same uid can neither sign with its reference nor release it
    /// (errSecItemNotFound), nor can a new connection once the first has closed; one connection holds at most 64.
    @Test func aKeyHeldForAConnectionServesNoOtherConnection() throws {
        let daemon = try DaemonFixture(.hostKey)
        defer { daemon.remove() }
        let owner = KeysealConnection(socketPath: daemon.socketPath)
        let other = KeysealConnection(socketPath: daemon.socketPath)
        let request = KeyGenerationRequest(keyType: .p256, isPermanent: false, isExtractable: false)
        guard case .key(let key) = try owner.send(.generateKey(request)) else {
            Issue.record("no key")
            return
        }
        let sign = WireKeyOperation(
            reference: key.reference,
            kind: .sign,
            algorithm: "algid:sign:ECDSA:digest-RFC4754",
            data: Data(repeating: 7, count: 32)
        )
        let release = ItemQuery(itemClass: .key, synchronizable: .any, persistentRef: key.reference, limit: .all)
        func status(_ connection: KeysealConnection, _ request: WireRequest) -> OSStatus {
            do throws(KeychainError) {
                _ = try connection.send(request)
                return 0
            } catch {
                return error.status
            }
        }
        #expect(status(owner, .keyOperation(sign)) == 0)
        #expect(status(other, .keyOperation(sign)) == KeychainStatus.itemNotFound)
        #expect(status(other, .delete(release)) == KeychainStatus.itemNotFound)
        #expect(status(owner, .keyOperation(sign)) == 0)
        // Not an item: no lookup finds it.
        let all = ItemQuery(itemClass: .key, synchronizable: .any, limit: .all, limitGiven: true)
        #expect(status(owner, .copyMatching(all)) == KeychainStatus.itemNotFound)
        owner.disconnect()
        let later = KeysealConnection(socketPath: daemon.socketPath)
        #expect(status(later, .keyOperation(sign)) == KeychainStatus.itemNotFound)
        for _ in 0..<64 { #expect(status(later, .generateKey(request)) == 0) }
        #expect(status(later, .generateKey(request)) == KeychainStatus.allocate)
        later.disconnect()
        other.disconnect()
    }

    /// No passcode in a file or a variable: with a passcode set and the store unlocked, pkcs11-tool (`--login`, no
    /// `--pin`), GnuTLS's p11tool (`--login --test-sign`) and certtool (a self-signed certificate) and OpenSSL's pkcs11
    /// engine (`openssl pkeyutl -sign`) sign through the module with no PIN anywhere; once the store is locked each is
    /// refused.
    @Test func fieldToolsSignWithNoPINWhileUnlocked() throws {
        let setup = try Setup(.tpm)
        let set = try setup.cli("passcode", "set", "--passcode-stdin", "--allow-weak-passcode", input: "1234\n")
        #expect(set.status == 0, "\(set.stderrText)")
        let dir = setup.directory.path
        let id = try Self.applicationLabel(setup, label: "device")
        try Data(repeating: 0x5a, count: 32).write(to: URL(fileURLWithPath: "\(dir)/digest"))
        try "cn = no pin\nexpiration_days = 1\nsigning_key\n".write(
            toFile: "\(dir)/template",
            atomically: true,
            encoding: .utf8
        )
        let configuration = try Self.openSSLConfiguration(setup)
        let pkcs11Tool = try requireTool("pkcs11-tool", package: "opensc")
        let p11tool = try requireTool("p11tool", package: "gnutls-bin")
        let certtool = try requireTool("certtool", package: "gnutls-bin")
        let openssl = try requireTool("openssl", package: "openssl")
        let key = "pkcs11:token=Keyseal;object=device;type=private"
        func signAll() throws -> [String: ProcessResult] {
            [
                "pkcs11-tool": try setup.run(
                    pkcs11Tool,
                    [
                        "--module", setup.module, "--login", "--id", id, "--mechanism", "ECDSA", "--sign", "-i",
                        "\(dir)/digest", "-o", "\(dir)/pkcs11-tool.sig",
                    ]
                ),
                "p11tool": try setup.run(
                    p11tool,
                    ["--provider", setup.module, "--login", "--test-sign", "pkcs11:token=Keyseal;object=device"]
                ),
                "certtool": try setup.run(
                    certtool,
                    [
                        "--provider", setup.module, "--generate-self-signed", "--load-privkey", key, "--template",
                        "\(dir)/template", "--outfile", "\(dir)/certtool.pem",
                    ]
                ),
                "openssl": try setup.run(
                    openssl,
                    [
                        "pkeyutl", "-sign", "-engine", "pkcs11", "-keyform", "engine", "-inkey", key, "-in",
                        "\(dir)/digest", "-out", "\(dir)/openssl.sig",
                    ],
                    extra: ["OPENSSL_CONF": configuration]
                ),
            ]
        }
        for (tool, result) in try signAll() {
            #expect(result.status == 0, "\(tool): \(result.stdoutText) \(result.stderrText)")
        }
        #expect(try setup.cli("lock").status == 0)
        for (tool, result) in try signAll() {
            #expect(result.status != 0, "\(tool) signed while locked: \(result.stdoutText)")
        }
    }
}
