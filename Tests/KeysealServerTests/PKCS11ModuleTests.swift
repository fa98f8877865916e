import Crypto
import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// The PKCS#11 module `libkeyseal-pkcs11.so` in the field's programs, against real keyseald processes on swtpm and
/// SoftHSM2: p11-kit, p11tool (GnuTLS), pkcs11-tool (OpenSC), OpenSSL's pkcs11 engine, curl, ssh-keygen, and a C
/// program of its own (keyseal-pkcs11-probe) for fork, threads and bad input.
@Suite("PKCS#11 module", .serialized)
struct PKCS11ModuleTests {
    static let backends: [DaemonFixture.Backend] = [.tpm, .pkcs11]

    /// A keyseald with one P-256 key labelled "device" (in the hardware), the module copied where uid 65534 can read
    /// it, and a p11-kit user configuration that registers it.
    final class Setup {
        let daemon: DaemonFixture
        let directory: TemporaryDirectory
        let cli: CLI
        var module: String { directory.appending("lib/libkeyseal-pkcs11.so").path }
        var home: String { directory.appending("home").path }

        init(_ backend: DaemonFixture.Backend, sharedWithNobody: Bool = false, hardware: Bool = true) throws {
            daemon =
                sharedWithNobody
                ? try DaemonFixture.sharedWithNobody(backend: backend) : try DaemonFixture(backend)
            directory = try TemporaryDirectory(prefix: "p11mod")
            chmod(directory.path, 0o755)
            cli = CLI(socket: daemon.socketPath)
            let lib = directory.appending("lib")
            try FileManager.default.createDirectory(at: lib, withIntermediateDirectories: true)
            chmod(lib.path, 0o755)
            try FileManager.default.copyItem(
                atPath: try builtProductsDirectory().appendingPathComponent("libkeyseal-pkcs11.so").path,
                toPath: module
            )
            chmod(module, 0o755)
            let modules = directory.appending("home/.config/pkcs11/modules")
            try FileManager.default.createDirectory(at: modules, withIntermediateDirectories: true)
            try "module: \(module)\ncritical: no\n".write(
                to: modules.appendingPathComponent("keyseal.module"),
                atomically: true,
                encoding: .utf8
            )
            var arguments = ["create-key", "--tag", "device", "-l", "device"]
            if hardware { arguments.append("--hardware") }
            let created = try cli.run(arguments)
            guard created.status == 0 else { throw FixtureError("create-key: \(created.stderrText)") }
        }

        deinit {
            daemon.remove()
            directory.remove()
        }

        /// The environment of a client program: the daemon's socket, the p11-kit user configuration, no SoftHSM2 or
        /// TPM variables of the test process.
        var environment: [String: String] {
            ["KEYSEAL_SOCKET": daemon.socketPath, "HOME": home, "XDG_CONFIG_HOME": home + "/.config"]
        }

        func run(_ tool: String, _ arguments: [String], extra: [String: String] = [:]) throws -> ProcessResult {
            try runProcess(tool, arguments, environment: environment.merging(extra) { _, new in new })
        }

        func probe(_ arguments: String...) throws -> String {
            let probe = try builtProductsDirectory().appendingPathComponent("keyseal-pkcs11-probe").path
            let result = try run(probe, [module] + arguments)
            return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// A copy of the built program `name` where uid 65534 can run it: the build directory of a checkout may be
        /// closed to other users (a CI clone under a private temporary directory).
        func builtProgramForNobody(_ name: String) throws -> String {
            let copy = directory.appending("lib/\(name)").path
            if !FileManager.default.fileExists(atPath: copy) {
                try FileManager.default.copyItem(
                    atPath: try builtProductsDirectory().appendingPathComponent(name).path,
                    toPath: copy
                )
                chmod(copy, 0o755)
            }
            return copy
        }

        /// Runs a program as uid 65534 with the client environment.
        func runAsNobody(_ tool: String, _ arguments: [String]) throws -> ProcessResult {
            let setpriv = try requireTool("setpriv", package: "util-linux")
            let env = try requireTool("env", package: "coreutils")
            return try runProcess(
                setpriv,
                ["--reuid", "65534", "--regid", "65534", "--clear-groups", env]
                    + environment.map { "\($0.key)=\($0.value)" }.sorted() + [tool] + arguments
            )
        }

        func setPasscodeAndLock() throws {
            let set = try cli("passcode", "set", "--passcode-stdin", "--allow-weak-passcode", input: "1234\n")
            guard set.status == 0 else { throw FixtureError("passcode set: \(set.stderrText)") }
            let lock = try cli("lock")
            guard lock.status == 0 else { throw FixtureError("lock: \(lock.stderrText)") }
        }
    }

    // MARK: The module itself

    @Test func theModuleNeedsNoSwiftLibraries() throws {
        let module = try builtProductsDirectory().appendingPathComponent("libkeyseal-pkcs11.so").path
        let ldd = try runProcess(try requireTool("ldd", package: "libc-bin"), [module])
        #expect(ldd.status == 0, "\(ldd.stderrText)")
        #expect(!ldd.stdoutText.contains("libswift") && !ldd.stdoutText.contains("libFoundation"), "\(ldd.stdoutText)")
        #expect(!ldd.stdoutText.contains("not found"), "\(ldd.stdoutText)")
        let symbols = try runProcess(try requireTool("nm", package: "binutils"), ["-D", "--defined-only", module])
        #expect(symbols.stdoutText.contains(" T C_GetFunctionList"))
        #expect(symbols.stdoutText.contains(" T C_GetInterfaceList"))
        #expect(symbols.stdoutText.contains(" T C_GetInterface\n"))
    }

    /// PKCS#11 v3.0's entry points, as a v3.0 caller (dlopen) uses them: one "PKCS 11" interface, the v2.40 function
    /// list (version 2.40), no interface of another name or version.
    @Test func theV3InterfaceOffersTheFunctionList() throws {
        let setup = try Setup(.hostKey, hardware: false)
        #expect(
            try setup.probe("interface")
                == "count=0x0,1 list=0x0 name=PKCS 11 version=2.40 same=1 get=0x0 same=1 default=0x0 v3=0x7 "
                + "other=0x7 info=0x0 cryptoki=2.40"
        )
    }

    /// On swtpm only (the field's programs below cover SoftHSM2; the process's SoftHSM2 token pool is small).
    @Test func aCProgramSignsWithAKeyOfKeyseald() throws {
        let setup = try Setup(.tpm)
        let line = try setup.probe("sign", "device")
        #expect(line.hasPrefix("rv=0x0 sig="), "\(line)")
        #expect(line.count == "rv=0x0 sig=".count + 128, "\(line)")
    }

    @Test func aChildAfterForkSignsOnAConnectionOfItsOwn() throws {
        let setup = try Setup(.tpm)
        #expect(try setup.probe("fork", "device") == "parent=0x0 child=0 parent_failures=0")
    }

    /// Sixteen threads of one C_Initialize, each on sessions of its own, sign messages of their own at once, every
    /// other one with a C_SignUpdate per byte (4000 calls): every call answers CKR_OK and every signature verifies
    /// (swift-crypto) for its own message. With the module's lock removed the probe crashes (its session table is
    /// corrupted) and this fails.
    @Test func threadsSignAtOnceWithP11KitsLockingArguments() throws {
        let setup = try Setup(.hostKey, hardware: false)
        let lines = try setup.probe("threads", "device", "16").split(separator: "\n").map(String.init)
        #expect(lines.last == "failures=0 rvs=", "\(lines.last ?? "")")
        let point = try #require(lines.first.flatMap { Self.bytes(hex: String($0.dropFirst("point=".count))) })
        // CKA_EC_POINT: a DER OCTET STRING of the uncompressed point.
        let key = try P256.Signing.PublicKey(x963Representation: point.suffix(65))
        let signatures = lines.dropFirst().dropLast()
        #expect(signatures.count == 16 * 20)
        var valid = 0
        for line in signatures {
            // "THREAD ROUND=SIGNATURE"; the message is the probe's thread_message.
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            let names = parts.first?.split(separator: " ") ?? []
            guard parts.count == 2, names.count == 2, let raw = Self.bytes(hex: parts[1]),
                let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw)
            else { continue }
            var message = Array("thread \(names[0]) round \(names[1]), signed whole or a byte at a time ".utf8)
            message += [UInt8](repeating: UInt8(ascii: "."), count: 4000 - message.count)
            if key.isValidSignature(signature, for: Data(message)) { valid += 1 }
        }
        #expect(valid == 16 * 20)
    }

    static func bytes(hex: String) -> Data? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var data = Data()
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
                return nil
            }
            data.append(byte)
        }
        return data
    }

    /// C_Verify with the public key: a valid signature is CKR_OK; a tampered one, or one over other data,
    /// CKR_SIGNATURE_INVALID; a short one CKR_SIGNATURE_LEN_RANGE; either ends the operation; the private key does not
    /// verify (no CKA_VERIFY). CKM_ECDSA_SHA256 signed in parts verifies whole and in parts, not over a prefix.
    @Test func verifyAcceptsTheKeysSignaturesAndRefusesATamperedOne() throws {
        let setup = try Setup(.tpm)
        #expect(
            try setup.probe("verify", "device")
                == "valid=0x0 tampered=0xc0 otherdata=0xc0 short=0xc1 ended=0x91 private=0x68 signparts=0x0 "
                + "oneshot=0x0 verifyparts=0x0 verifyprefix=0xc0"
        )
    }

    /// The host program's OpenSSL configuration plays no part in C_Verify: one that activates only the null provider
    /// (the default context then has no algorithms) leaves the module's checks as they are, since they use a library
    /// context of the module's own.
    @Test func verifyIgnoresTheHostsOpenSSLConfiguration() throws {
        let setup = try Setup(.tpm)
        let configuration = setup.directory.appending("hostile-openssl.cnf")
        try """
        openssl_conf = openssl_init
        [openssl_init]
        providers = provider_sect
        [provider_sect]
        null = null_sect
        [null_sect]
        activate = 1

        """.write(to: configuration, atomically: true, encoding: .utf8)
        let probe = try builtProductsDirectory().appendingPathComponent("keyseal-pkcs11-probe").path
        let result = try setup.run(
            probe,
            [setup.module, "verify", "device"],
            extra: ["OPENSSL_CONF": configuration.path]
        )
        #expect(
            result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
                == "valid=0x0 tampered=0xc0 otherdata=0xc0 short=0xc1 ended=0x91 private=0x68 signparts=0x0 "
                + "oneshot=0x0 verifyparts=0x0 verifyprefix=0xc0",
            "\(result.stderrText)"
        )
    }

    /// C_Verify leaves libcrypto's error queue as the caller had it: the caller's error stays first and last, whether
    /// the signature verifies, does not, or is one libcrypto refuses with an error of its own.
    @Test func verifyKeepsTheCallersErrorQueue() throws {
        let setup = try Setup(.tpm)
        #expect(try setup.probe("errqueue", "device") == "valid=0x0 tampered=0xc0 range=0xc0 kept=1 extra=0")
    }

    /// C_SignUpdate/C_SignFinal (three parts, one empty, a size query before the result) give the same signature as one
    /// C_Sign (PKCS#1 v1.5 is deterministic); C_Sign after C_SignUpdate is refused.
    @Test func multiPartSigningEqualsOneShot() throws {
        let setup = try Setup(.hostKey, hardware: false)
        #expect(try setup.cli("create-key", "--tag", "rsa", "-l", "rsa", "--type", "rsa2048").status == 0)
        #expect(
            try setup.probe("multipart", "rsa")
                == "oneshot=0x0 parts=0x0 query=256 equal=1 verify=0x0 mixed=0x7 rawlong=0x21 pssshort=0x21"
        )
    }

    /// PKCS#11 v2.40 §5.4 (C_Initialize): a second `C_Initialize` is CKR_CRYPTOKI_ALREADY_INITIALIZED (0x191), whether or
    /// not keyseald was reached; after `C_Finalize` (a second one is CKR_CRYPTOKI_NOT_INITIALIZED, 0x190) it works
    /// again, and a child after fork() initializes anew.
    @Test func aSecondInitializeIsAlreadyInitialized() throws {
        let setup = try Setup(.hostKey, hardware: false)
        #expect(
            try setup.probe("reinitialize")
                == "again=0x191 again_null=0x191 token=0x0 again_connected=0x191 finalize=0x0 finalize_again=0x190 "
                + "initialize=0x0 token_after=0x0 child=0"
        )
    }

    @Test func badInputGetsAClearReturnValue() throws {
        let setup = try Setup(.hostKey, hardware: false)
        let line = try setup.probe("bad")
        let expected = [
            "getinfo_null=0x7", "slotlist_null=0x7", "tokeninfo_badslot=0x7", "session_unknown=0xb3",
            "key_unknown=0x60", "mechanism_null=0x7", "object_unknown=0x82", "sign_uninitialized=0x91",
            "findobjects_null=0x7", "unsupported=0x54", "mechinfo_unknown=0x7", "mechinfo_unknown2=0x70",
            "login_so=0x103", "random_null=0x7", "random_huge=0x7",
        ]
        #expect(line.split(separator: " ").map(String.init) == expected, "\(line)")
    }

    @Test func privateKeyValueIsNeverReadableAndShortBuffersAreAnswered() throws {
        let setup = try Setup(.tpm)
        let line = try setup.probe("attributes", "device")
        #expect(
            line
                == "value=0x11 value_len=-1 point_size=0x0 point_len=67 short=0x150 short_len=-1 modulus=0x12 "
                + "sigsize=0x0 siglen=64 sigshort=0x150 sigshort_len=64 sig=0x0 sighuge=0x0 sighuge_len=64",
            "\(line)"
        )
    }

    @Test func aStoppedDaemonIsAMissingDeviceAndTheModuleRecoversWhenItReturns() throws {
        let setup = try Setup(.hostKey, hardware: false)
        let flag = setup.directory.appending("restarted").path
        let probe = try builtProductsDirectory().appendingPathComponent("keyseal-pkcs11-probe").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: probe)
        process.arguments = [setup.module, "reconnect", "device", flag]
        process.environment = fixtureEnvironment.merging(setup.environment) { _, new in new }
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        usleep(500_000)
        setup.daemon.stop()
        _ = FileManager.default.createFile(atPath: flag + ".down", contents: nil)
        usleep(500_000)
        try setup.daemon.start()
        _ = FileManager.default.createFile(atPath: flag, contents: nil)
        _ = try process.exitStatus()
        let line = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(line.trimmingCharacters(in: .whitespacesAndNewlines) == "before=0x0 during=0x32 token=0xe0 after=0x0")
    }

    // MARK: The field's programs

    /// p11-kit reads a user's module files (`~/.config/pkcs11/modules`) for users other than root: run as uid 65534.
    /// The backend plays no part in p11-kit's loading: swtpm only.
    @Test func p11KitListsTheModuleFromItsModuleFile() throws {
        let setup = try Setup(.tpm, sharedWithNobody: true)
        let result = try setup.runAsNobody(try requireTool("p11-kit", package: "p11-kit"), ["list-modules"])
        #expect(result.status == 0, "\(result.stderrText)")
        #expect(result.stdoutText.contains("keyseal: \(setup.module)"), "\(result.stdoutText)")
        #expect(result.stdoutText.contains("token: Keyseal"), "\(result.stdoutText)")
    }

    @Test(arguments: backends)
    func p11toolListsAndTestSignsTheKey(_ backend: DaemonFixture.Backend) throws {
        let setup = try Setup(backend)
        let p11tool = try requireTool("p11tool", package: "gnutls-bin")
        let listed = try setup.run(
            p11tool,
            ["--provider", setup.module, "--list-all", "--login", "pkcs11:token=Keyseal"],
            extra: ["GNUTLS_PIN": "unused"]
        )
        #expect(listed.status == 0, "\(listed.stderrText)")
        #expect(listed.stdoutText.contains("object=device;type=private"), "\(listed.stdoutText)")
        #expect(listed.stdoutText.contains("object=device;type=public"), "\(listed.stdoutText)")
        let signed = try setup.run(
            p11tool,
            ["--provider", setup.module, "--login", "--test-sign", "pkcs11:token=Keyseal;object=device"],
            extra: ["GNUTLS_PIN": "unused"]
        )
        #expect(signed.status == 0, "\(signed.stdoutText) \(signed.stderrText)")
        #expect(signed.stderrText.contains("Verifying against public key in the token... ok"), "\(signed.stderrText)")
    }

    @Test(arguments: backends)
    func pkcs11ToolListsAndTestsTheToken(_ backend: DaemonFixture.Backend) throws {
        let setup = try Setup(backend)
        let tool = try requireTool("pkcs11-tool", package: "opensc")
        let listed = try setup.run(tool, ["--module", setup.module, "--list-objects"])
        #expect(listed.status == 0, "\(listed.stderrText)")
        #expect(listed.stdoutText.contains("Private Key Object; EC"), "\(listed.stdoutText)")
        #expect(listed.stdoutText.contains("label:      device"), "\(listed.stdoutText)")
        let tested = try setup.run(tool, ["--module", setup.module, "--test", "--login", "--pin", "unused"])
        #expect(tested.status == 0, "\(tested.stdoutText) \(tested.stderrText)")
        #expect(tested.stdoutText.contains("No errors"), "\(tested.stdoutText)")

        // A signature by pkcs11-tool (CKM_ECDSA_SHA256), verified by OpenSSL with the public key it read.
        let dir = setup.directory.path
        try Data("message".utf8).write(to: URL(fileURLWithPath: "\(dir)/message"))
        let signed = try setup.run(
            tool,
            [
                "--module", setup.module, "--login", "--pin", "unused", "--sign", "--mechanism", "ECDSA-SHA256",
                "--label", "device", "--signature-format", "openssl", "-i", "\(dir)/message", "-o", "\(dir)/sig.der",
            ]
        )
        #expect(signed.status == 0, "\(signed.stderrText)")
        let read = try setup.run(
            tool,
            [
                "--module", setup.module, "--read-object", "--type", "pubkey", "--label", "device", "-o",
                "\(dir)/pub.der",
            ]
        )
        #expect(read.status == 0, "\(read.stderrText)")
        let verified = try runProcess(
            try requireTool("openssl", package: "openssl"),
            [
                "dgst", "-sha256", "-verify", "\(dir)/pub.der", "-keyform", "DER", "-signature", "\(dir)/sig.der",
                "\(dir)/message",
            ]
        )
        #expect(verified.status == 0 && verified.stdoutText.contains("Verified OK"), "\(verified.stderrText)")
    }

    @Test(arguments: backends)
    func sshKeygenReadsThePublicKey(_ backend: DaemonFixture.Backend) throws {
        let setup = try Setup(backend)
        let result = try setup.run(try requireTool("ssh-keygen", package: "openssh-client"), ["-D", setup.module])
        #expect(result.status == 0, "\(result.stderrText)")
        #expect(result.stdoutText.hasPrefix("ecdsa-sha2-nistp256 "), "\(result.stdoutText)")
    }

    /// `ssh -I` (PKCS11Provider) logs in to a private sshd on 127.0.0.1 with the key, found and signed through the
    /// module; with the store locked the module finds no key and the login fails.
    @Test(arguments: backends)
    func sshLogsInWithTheModuleAsPKCS11Provider(_ backend: DaemonFixture.Backend) throws {
        guard runningAsRoot("sshd needs root") else { return }
        let setup = try Setup(backend)
        let keys = try setup.run(try requireTool("ssh-keygen", package: "openssh-client"), ["-D", setup.module])
        #expect(keys.status == 0, "\(keys.stderrText)")
        let sshd = try SSHServer(authorizedKeys: keys.stdoutText)
        defer { sshd.stop() }
        let identity = ["-o", "PKCS11Provider=\(setup.module)", "-o", "IdentityAgent=none"]
        let login = try sshd.ssh(identity: identity, command: "echo logged-in", environment: setup.environment)
        #expect(login.status == 0, "\(login.stderrText) \(sshd.log)")
        #expect(login.stdoutText == "logged-in\n")
        try setup.setPasscodeAndLock()
        let refused = try sshd.ssh(identity: identity, command: "echo should-not-run", environment: setup.environment)
        #expect(refused.status != 0 && !refused.stdoutText.contains("should-not-run"), "\(refused.stdoutText)")
    }

    /// An OpenSSL configuration loading the pkcs11 engine (libengine-pkcs11-openssl) over the module.
    static func openSSLConfiguration(_ setup: Setup) throws -> String {
        let engine = "/usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so"
        guard FileManager.default.fileExists(atPath: engine) else {
            throw FixtureError("the OpenSSL pkcs11 engine is not installed (libengine-pkcs11-openssl)")
        }
        let path = setup.directory.appending("openssl.cnf").path
        try """
        openssl_conf = openssl_init
        [openssl_init]
        engines = engine_section
        [engine_section]
        pkcs11 = pkcs11_section
        [pkcs11_section]
        engine_id = pkcs11
        dynamic_path = \(engine)
        MODULE_PATH = \(setup.module)
        init = 0
        [req]
        distinguished_name = dn
        [dn]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(arguments: backends)
    func openSSLMakesARequestSignedByTheKey(_ backend: DaemonFixture.Backend) throws {
        let setup = try Setup(backend)
        let openssl = try requireTool("openssl", package: "openssl")
        let configuration = try Self.openSSLConfiguration(setup)
        let csr = setup.directory.appending("device.csr").path
        let made = try setup.run(
            openssl,
            [
                "req", "-new", "-engine", "pkcs11", "-keyform", "engine", "-key",
                "pkcs11:token=Keyseal;object=device;type=private", "-subj", "/CN=device", "-out", csr,
            ],
            extra: ["OPENSSL_CONF": configuration]
        )
        #expect(made.status == 0, "\(made.stderrText)")
        let verified = try runProcess(openssl, ["req", "-verify", "-noout", "-in", csr])
        #expect(verified.status == 0, "\(verified.stderrText)")
        #expect((verified.stdoutText + verified.stderrText).contains("verify OK"), "\(verified.stderrText)")
    }

    @Test func curlAuthenticatesWithATPMKeyThroughTheModule() throws {
        let setup = try Setup(.tpm)
        let openssl = try requireTool("openssl", package: "openssl")
        let curl = try requireTool("curl", package: "curl")
        let configuration = try Self.openSSLConfiguration(setup)
        let dir = setup.directory.path
        func ssl(_ arguments: [String], extra: [String: String] = [:]) throws {
            let result = try runProcess(openssl, arguments, environment: extra)
            guard result.status == 0 else { throw FixtureError("openssl \(arguments[0]): \(result.stderrText)") }
        }
        try ssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            "\(dir)/ca.key",
            "-out", "\(dir)/ca.pem", "-subj", "/CN=test CA", "-days", "1",
        ])
        try ssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            "\(dir)/server.key", "-out", "\(dir)/server.pem", "-subj", "/CN=127.0.0.1", "-addext",
            "subjectAltName=IP:127.0.0.1", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key", "-days", "1",
        ])
        try ssl(
            [
                "req", "-new", "-engine", "pkcs11", "-keyform", "engine", "-key",
                "pkcs11:token=Keyseal;object=device;type=private", "-subj", "/CN=device", "-out", "\(dir)/device.csr",
            ],
            extra: setup.environment.merging(["OPENSSL_CONF": configuration]) { _, new in new }
        )
        try ssl([
            "x509", "-req", "-in", "\(dir)/device.csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key",
            "-CAcreateserial", "-out", "\(dir)/device.pem", "-days", "1",
        ])
        let port = 20000 + Int(getpid() % 20000)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: openssl)
        server.arguments = [
            "s_server", "-accept", "127.0.0.1:\(port)", "-cert", "\(dir)/server.pem", "-key", "\(dir)/server.key",
            "-CAfile", "\(dir)/ca.pem", "-Verify", "1", "-verify_return_error", "-www",
        ]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer {
            // SIGKILL: a process started from the test runner may inherit SIGTERM blocked.
            kill(server.processIdentifier, SIGKILL)
            server.waitForExit()
        }
        usleep(500_000)
        let curlArguments = [
            "-sS", "--cacert", "\(dir)/ca.pem", "--engine", "pkcs11", "--key-type", "ENG", "--key",
            "pkcs11:token=Keyseal;object=device;type=private", "--cert", "\(dir)/device.pem",
            "https://127.0.0.1:\(port)/",
        ]
        let fetched = try setup.run(curl, curlArguments, extra: ["OPENSSL_CONF": configuration])
        #expect(fetched.status == 0, "\(fetched.stderrText)")
        #expect(fetched.stdoutText.contains("Client certificate"), "\(fetched.stdoutText.prefix(400))")

        // Locked: the key's class refuses, and the handshake fails instead of signing.
        try setup.setPasscodeAndLock()
        let refused = try setup.run(curl, curlArguments, extra: ["OPENSSL_CONF": configuration])
        #expect(refused.status != 0)
    }

    /// The key's application label (CKA_ID) in hex, from `keyseal find-key --json`.
    static func applicationLabel(_ setup: Setup, label: String) throws -> String {
        let found = try setup.cli("--json", "find-key", "-l", label)
        let object = try JSONSerialization.jsonObject(with: found.stdout)
        let keys = try #require(object as? [[String: Any]], "\(found.stdoutText)")
        return try #require(keys.first?["applicationLabel"] as? String)
    }

    /// Keyseal sizes an RSA key by its block (a 2047-bit modulus is a 2048-bit key); PKCS#11's CKA_MODULUS_BITS is the
    /// modulus's own length, which pkcs11-tool prints.
    @Test func modulusBitsAreTheModulusLength() throws {
        let setup = try Setup(.hostKey, hardware: false)
        let dir = setup.directory.path
        let openssl = try requireTool("openssl", package: "openssl")
        var made = try runProcess(
            openssl,
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2047", "-out", "\(dir)/rsa.pem"]
        )
        #expect(made.status == 0, "\(made.stderrText)")
        made = try runProcess(
            openssl,
            ["rsa", "-in", "\(dir)/rsa.pem", "-traditional", "-outform", "DER", "-out", "\(dir)/rsa.der"]
        )
        #expect(made.status == 0, "\(made.stderrText)")
        let store = try KeychainStore.daemon(socket: setup.daemon.socketPath)
        let added = try KeychainStore.withDefault(store) {
            let add: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecAttrKeyType as String: kSecAttrKeyTypeRSA,
                kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecAttrLabel as String: "rsa2047",
                kSecAttrApplicationTag as String: Data("rsa2047".utf8),
                kSecValueData as String: try Data(contentsOf: URL(fileURLWithPath: "\(dir)/rsa.der")),
            ]
            return SecItemAdd(add as CFDictionary, nil)
        }
        #expect(added == errSecSuccess)
        let tool = try requireTool("pkcs11-tool", package: "opensc")
        let listed = try setup.run(tool, ["--module", setup.module, "--list-objects", "--type", "pubkey"])
        #expect(listed.status == 0, "\(listed.stderrText)")
        #expect(listed.stdoutText.contains("RSA 2047 bits"), "\(listed.stdoutText)")
    }

    @Test func aSoftwareRSAKeySignsAndDecryptsThroughPkcs11Tool() throws {
        let setup = try Setup(.hostKey, hardware: false)
        #expect(try setup.cli("create-key", "--tag", "rsa", "-l", "rsa", "--type", "rsa2048").status == 0)
        let id = try Self.applicationLabel(setup, label: "rsa")
        let tool = try requireTool("pkcs11-tool", package: "opensc")
        let openssl = try requireTool("openssl", package: "openssl")
        let dir = setup.directory.path
        try Data("message".utf8).write(to: URL(fileURLWithPath: "\(dir)/message"))
        let read = try setup.run(
            tool,
            ["--module", setup.module, "--read-object", "--type", "pubkey", "--id", id, "-o", "\(dir)/rsa.der"]
        )
        #expect(read.status == 0, "\(read.stderrText)")
        for (mechanism, options) in [
            ("SHA256-RSA-PKCS", [String]()),
            ("SHA256-RSA-PKCS-PSS", ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"]),
        ] {
            let signed = try setup.run(
                tool,
                [
                    "--module", setup.module, "--login", "--pin", "unused", "--sign", "--mechanism", mechanism, "--id",
                    id, "-i", "\(dir)/message", "-o", "\(dir)/rsa.sig",
                ]
            )
            #expect(signed.status == 0, "\(mechanism): \(signed.stderrText)")
            let verified = try runProcess(
                openssl,
                ["dgst", "-sha256"] + options + [
                    "-verify", "\(dir)/rsa.der", "-keyform", "DER", "-signature", "\(dir)/rsa.sig", "\(dir)/message",
                ]
            )
            #expect(verified.stdoutText.contains("Verified OK"), "\(mechanism): \(verified.stderrText)")
        }
        let encrypted = try runProcess(
            openssl,
            [
                "pkeyutl", "-encrypt", "-pubin", "-keyform", "DER", "-inkey", "\(dir)/rsa.der", "-pkeyopt",
                "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha256", "-pkeyopt", "rsa_mgf1_md:sha256", "-in",
                "\(dir)/message", "-out", "\(dir)/message.enc",
            ]
        )
        #expect(encrypted.status == 0, "\(encrypted.stderrText)")
        let decrypted = try setup.run(
            tool,
            [
                "--module", setup.module, "--login", "--pin", "unused", "--decrypt", "--mechanism", "RSA-PKCS-OAEP",
                "--hash-algorithm", "SHA256", "--mgf", "MGF1-SHA256", "--id", id, "-i", "\(dir)/message.enc",
            ]
        )
        #expect(decrypted.status == 0 && decrypted.stdoutText.hasSuffix("message"), "\(decrypted.stderrText)")
    }

    /// CKM_RSA_PKCS signs the caller's block (openssl recovers it), CKM_RSA_PKCS_PSS signs a digest with the hash its
    /// parameters name, and CKM_RSA_PKCS and OAEP with SHA-384 decrypt what openssl encrypted.
    @Test func rawPKCS1DigestPSSAndOtherOAEPHashes() throws {
        let setup = try Setup(.hostKey, hardware: false)
        #expect(try setup.cli("create-key", "--tag", "rsa", "-l", "rsa", "--type", "rsa2048").status == 0)
        let id = try Self.applicationLabel(setup, label: "rsa")
        let tool = try requireTool("pkcs11-tool", package: "opensc")
        let openssl = try requireTool("openssl", package: "openssl")
        let dir = setup.directory.path
        try Data("a block to sign".utf8).write(to: URL(fileURLWithPath: "\(dir)/block"))
        let read = try setup.run(
            tool,
            ["--module", setup.module, "--read-object", "--type", "pubkey", "--id", id, "-o", "\(dir)/rsa.der"]
        )
        #expect(read.status == 0, "\(read.stderrText)")
        func pkcs11(_ arguments: [String]) throws -> ProcessResult {
            try setup.run(tool, ["--module", setup.module, "--login", "--pin", "unused", "--id", id] + arguments)
        }
        // CKM_RSA_PKCS: the block comes back from the signature under the public key.
        let signed = try pkcs11(["--sign", "--mechanism", "RSA-PKCS", "-i", "\(dir)/block", "-o", "\(dir)/raw.sig"])
        #expect(signed.status == 0, "\(signed.stderrText)")
        let recovered = try runProcess(
            openssl,
            [
                "pkeyutl", "-verifyrecover", "-pubin", "-keyform", "DER", "-inkey", "\(dir)/rsa.der", "-pkeyopt",
                "rsa_padding_mode:pkcs1", "-in", "\(dir)/raw.sig",
            ]
        )
        #expect(recovered.stdoutText == "a block to sign", "\(recovered.stderrText)")
        // CKM_RSA_PKCS_PSS over a SHA-384 digest.
        let digest = try runProcess(openssl, ["dgst", "-sha384", "-binary", "\(dir)/block"])
        try digest.stdout.write(to: URL(fileURLWithPath: "\(dir)/digest"))
        let pss = try pkcs11([
            "--sign", "--mechanism", "RSA-PKCS-PSS", "--hash-algorithm", "SHA384", "--mgf", "MGF1-SHA384",
            "--salt-len", "48", "-i", "\(dir)/digest", "-o", "\(dir)/pss.sig",
        ])
        #expect(pss.status == 0, "\(pss.stderrText)")
        let verified = try runProcess(
            openssl,
            [
                "pkeyutl", "-verify", "-pubin", "-keyform", "DER", "-inkey", "\(dir)/rsa.der", "-pkeyopt",
                "rsa_padding_mode:pss", "-pkeyopt", "digest:sha384", "-pkeyopt", "rsa_pss_saltlen:48", "-in",
                "\(dir)/digest", "-sigfile", "\(dir)/pss.sig",
            ]
        )
        #expect(verified.status == 0, "\(verified.stdoutText)\(verified.stderrText)")
        // Decryption: PKCS#1 v1.5 and OAEP with SHA-384.
        for (mechanism, encrypt, decrypt) in [
            ("RSA-PKCS", ["-pkeyopt", "rsa_padding_mode:pkcs1"], [String]()),
            (
                "RSA-PKCS-OAEP",
                [
                    "-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha384", "-pkeyopt",
                    "rsa_mgf1_md:sha384",
                ],
                ["--hash-algorithm", "SHA384", "--mgf", "MGF1-SHA384"]
            ),
        ] {
            let encrypted = try runProcess(
                openssl,
                ["pkeyutl", "-encrypt", "-pubin", "-keyform", "DER", "-inkey", "\(dir)/rsa.der"] + encrypt + [
                    "-in", "\(dir)/block", "-out", "\(dir)/block.enc",
                ]
            )
            #expect(encrypted.status == 0, "\(mechanism): \(encrypted.stderrText)")
            let decrypted = try pkcs11(["--decrypt", "--mechanism", mechanism] + decrypt + ["-i", "\(dir)/block.enc"])
            #expect(
                decrypted.status == 0 && decrypted.stdoutText.hasSuffix("a block to sign"),
                "\(mechanism): \(decrypted.stderrText)"
            )
        }
    }

    /// pkcs11-tool's --verify through the module (ECDSA raw and with SHA-256, RSA PKCS#1 v1.5 raw and with SHA-256, PSS
    /// with SHA-384): each signature it made is valid, the same with one bit changed is not.
    @Test func pkcs11ToolVerifiesSignaturesAndRefusesTamperedOnes() throws {
        let setup = try Setup(.hostKey, hardware: false)
        #expect(try setup.cli("create-key", "--tag", "rsa", "-l", "rsa", "--type", "rsa2048").status == 0)
        let ec = try Self.applicationLabel(setup, label: "device")
        let rsa = try Self.applicationLabel(setup, label: "rsa")
        let tool = try requireTool("pkcs11-tool", package: "opensc")
        let dir = setup.directory.path
        // 32 bytes: a digest for the raw mechanisms, a message for the others.
        try Data("a message of thirty-two bytes!!!".utf8).write(to: URL(fileURLWithPath: "\(dir)/message"))
        for (id, mechanism) in [
            (ec, "ECDSA"), (ec, "ECDSA-SHA256"), (rsa, "RSA-PKCS"), (rsa, "SHA256-RSA-PKCS"),
            (rsa, "SHA384-RSA-PKCS-PSS"),
        ] {
            let common = ["--module", setup.module, "--login", "--pin", "unused", "--id", id, "--mechanism", mechanism]
            let signed = try setup.run(
                tool,
                common + ["--sign", "-i", "\(dir)/message", "-o", "\(dir)/signature"]
            )
            #expect(signed.status == 0, "\(mechanism): \(signed.stderrText)")
            let verified = try setup.run(
                tool,
                common + ["--verify", "-i", "\(dir)/message", "--signature-file", "\(dir)/signature"]
            )
            #expect(verified.stdoutText.contains("Signature is valid"), "\(mechanism): \(verified.stdoutText)")
            var tampered = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/signature"))
            tampered[tampered.count / 2] ^= 0x01
            try tampered.write(to: URL(fileURLWithPath: "\(dir)/tampered"))
            let refused = try setup.run(
                tool,
                common + ["--verify", "-i", "\(dir)/message", "--signature-file", "\(dir)/tampered"]
            )
            #expect(refused.stdoutText.contains("Invalid signature"), "\(mechanism): \(refused.stdoutText)")
            #expect(!refused.stdoutText.contains("Signature is valid"), "\(mechanism)")
        }
    }

    /// C_DeriveKey with CKM_ECDH1_DERIVE (pkcs11-tool --derive, the peer's public key in DER) gives the secret OpenSSL
    /// derives from the peer's private key and the module's public key.
    @Test(arguments: backends)
    func ecdhDerivesTheSecretOpenSSLDerives(_ backend: DaemonFixture.Backend) throws {
        let setup = try Setup(backend)
        let id = try Self.applicationLabel(setup, label: "device")
        let tool = try requireTool("pkcs11-tool", package: "opensc")
        let openssl = try requireTool("openssl", package: "openssl")
        let dir = setup.directory.path
        func ssl(_ arguments: [String]) throws {
            let result = try runProcess(openssl, arguments)
            guard result.status == 0 else { throw FixtureError("openssl \(arguments[0]): \(result.stderrText)") }
        }
        try ssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "\(dir)/peer.pem"])
        try ssl(["pkey", "-in", "\(dir)/peer.pem", "-pubout", "-outform", "DER", "-out", "\(dir)/peer.der"])
        let read = try setup.run(
            tool,
            ["--module", setup.module, "--read-object", "--type", "pubkey", "--id", id, "-o", "\(dir)/device.der"]
        )
        #expect(read.status == 0, "\(read.stderrText)")
        try ssl([
            "pkeyutl", "-derive", "-inkey", "\(dir)/peer.pem", "-peerkey", "\(dir)/device.der", "-peerform", "DER",
            "-out", "\(dir)/expected",
        ])
        let derived = try setup.run(
            tool,
            [
                "--module", setup.module, "--login", "--pin", "unused", "--derive", "--mechanism", "ECDH1-DERIVE",
                "--id", id, "-i", "\(dir)/peer.der", "-o", "\(dir)/derived",
            ]
        )
        #expect(derived.status == 0, "\(derived.stdoutText) \(derived.stderrText)")
        let expected = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/expected"))
        let secret = try? Data(contentsOf: URL(fileURLWithPath: "\(dir)/derived"))
        #expect(expected.count == 32 && secret == expected)
    }

    /// `C_GenerateKeyPair` makes a P-256 key inside the TPM; `C_CreateObject` stores a certificate for it, which then
    /// carries the key's CKA_ID.
    @Test func aKeyPairIsGeneratedInTheTPMAndItsCertificateStored() throws {
        let setup = try Setup(.tpm)
        let tool = try requireTool("pkcs11-tool", package: "opensc")
        let generated = try setup.run(
            tool,
            [
                "--module", setup.module, "--login", "--pin", "unused", "--keypairgen", "--key-type", "EC:prime256v1",
                "--label", "made", "--id", "0102",
            ]
        )
        #expect(generated.status == 0, "\(generated.stderrText)")
        let found = try setup.cli("find-key", "-l", "made")
        #expect(found.stdoutText.contains("hardware"), "\(found.stdoutText)")
        let id = try Self.applicationLabel(setup, label: "made")

        let configuration = try Self.openSSLConfiguration(setup)
        let openssl = try requireTool("openssl", package: "openssl")
        let dir = setup.directory.path
        let made = try setup.run(
            openssl,
            [
                "req", "-new", "-x509", "-days", "1", "-engine", "pkcs11", "-keyform", "engine", "-key",
                "pkcs11:token=Keyseal;object=made;type=private", "-subj", "/CN=made", "-outform", "DER", "-out",
                "\(dir)/made.der",
            ],
            extra: ["OPENSSL_CONF": configuration]
        )
        #expect(made.status == 0, "\(made.stderrText)")
        let written = try setup.run(
            tool,
            [
                "--module", setup.module, "--login", "--pin", "unused", "--write-object", "\(dir)/made.der", "--type",
                "cert", "--label", "made certificate",
            ]
        )
        #expect(written.status == 0, "\(written.stderrText)")
        let listed = try setup.run(tool, ["--module", setup.module, "--list-objects", "--type", "cert"])
        #expect(listed.stdoutText.contains("Certificate Object; type = X.509 cert"), "\(listed.stdoutText)")
        #expect(listed.stdoutText.contains("ID:         \(id)"), "\(listed.stdoutText)")
        #expect(listed.stdoutText.contains("subject:    DN: CN=made"), "\(listed.stdoutText)")
    }

    // MARK: Locked store, other users

    /// While the store is locked even the search is refused, CKR_USER_NOT_LOGGED_IN (keyseald seals a locked class's
    /// attributes with its class key); the passcode as PIN unlocks and signs, a wrong one is CKR_PIN_INCORRECT.
    @Test(arguments: backends)
    func aLockedStoreRefusesToSignUntilLogin(_ backend: DaemonFixture.Backend) throws {
        let setup = try Setup(backend)
        try setup.setPasscodeAndLock()
        #expect(try setup.probe("sign", "device") == "rv=0x101 find found=0")
        #expect(try setup.probe("sign", "device", "9999") == "login=0xa0 rv=0x101 find found=0")
        #expect(try setup.probe("sign", "device", "1234").hasPrefix("login=0x0 rv=0x0 sig="))
    }

    /// A key found while the store was unlocked, by a logged-in session: once the store locks, keyseald refuses the
    /// signature (CKR_USER_NOT_LOGGED_IN); after an unlock the same session signs again.
    @Test func aKeyFoundBeforeTheStoreLockedIsRefusedAfter() throws {
        let setup = try Setup(.tpm)
        let set = try setup.cli("passcode", "set", "--passcode-stdin", "--allow-weak-passcode", input: "1234\n")
        #expect(set.status == 0, "\(set.stderrText)")
        let flag = setup.directory.appending("unlocked").path
        let process = Process()
        process.executableURL = try builtProductsDirectory().appendingPathComponent("keyseal-pkcs11-probe")
        process.arguments = [setup.module, "reconnect", "device", flag, "1234"]
        process.environment = fixtureEnvironment.merging(setup.environment) { _, new in new }
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        usleep(1_000_000)
        #expect(try setup.cli("lock").status == 0)
        _ = FileManager.default.createFile(atPath: flag + ".down", contents: nil)
        usleep(1_000_000)
        #expect(try setup.cli("unlock", "--passcode-stdin", input: "1234\n").status == 0)
        _ = FileManager.default.createFile(atPath: flag, contents: nil)
        _ = try process.exitStatus()
        let line = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(
            line.trimmingCharacters(in: .whitespacesAndNewlines)
                == "login=0x0 before=0x0 during=0x101 token=0x0 after=0x0"
        )
    }

    @Test(arguments: backends)
    func p11toolAndPkcs11ToolAreRefusedOnALockedStore(_ backend: DaemonFixture.Backend) throws {
        let setup = try Setup(backend)
        try setup.setPasscodeAndLock()
        let p11tool = try requireTool("p11tool", package: "gnutls-bin")
        let signed = try setup.run(
            p11tool,
            ["--provider", setup.module, "--login", "--test-sign", "pkcs11:token=Keyseal;object=device"],
            extra: ["GNUTLS_PIN": "9999"]
        )
        #expect(signed.status != 0)
        #expect(!signed.stderrText.contains("Verifying against public key in the token... ok"))
        let tool = try requireTool("pkcs11-tool", package: "opensc")
        let tested = try setup.run(tool, ["--module", setup.module, "--login", "--pin", "9999", "--test"])
        #expect(tested.status != 0)
        #expect(tested.stderrText.contains("CKR_PIN_INCORRECT") || tested.stdoutText.contains("CKR_PIN_INCORRECT"))
        // The search is refused while locked: ssh finds no key to offer.
        let ssh = try setup.run(try requireTool("ssh-keygen", package: "openssh-client"), ["-D", setup.module])
        #expect(ssh.status != 0 && !ssh.stdoutText.contains("ecdsa-sha2-nistp256"), "\(ssh.stdoutText)")
    }

    @Test(arguments: backends)
    func anotherUserSeesOnlyItsOwnGroups(_ backend: DaemonFixture.Backend) throws {
        let setup = try Setup(backend, sharedWithNobody: true)
        let tool = try requireTool("pkcs11-tool", package: "opensc")
        let own = try setup.runAsNobody(
            try setup.builtProgramForNobody("keyseal"),
            ["--socket", setup.daemon.socketPath, "create-key", "--tag", "nobodys", "-l", "nobodys"]
        )
        #expect(own.status == 0, "\(own.stderrText)")
        let listed = try setup.runAsNobody(tool, ["--module", setup.module, "--list-objects"])
        #expect(listed.status == 0, "\(listed.stderrText)")
        #expect(listed.stdoutText.contains("label:      nobodys"), "\(listed.stdoutText)")
        #expect(!listed.stdoutText.contains("label:      device"), "\(listed.stdoutText)")
        let probe = try setup.builtProgramForNobody("keyseal-pkcs11-probe")
        let signed = try setup.runAsNobody(probe, [setup.module, "sign", "device"])
        #expect(signed.stdoutText.hasPrefix("rv=0x0 find found=0"), "\(signed.stdoutText)")
    }
}
