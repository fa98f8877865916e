import Crypto
import Foundation
import KeysealTestSupport
import Testing

/// The setup of Scripts/bench-pkcs11.sh's comparison with tpm2-pkcs11, checked: one swtpm behind tpm2-abrmd on a
/// private session bus, keyseald on it (`--tcti tabrmd:bus_type=session`) with a hardware P-256 key, and a
/// tpm2-pkcs11 token in the same TPM with a P-256 key of its own (`tpm2_ptool addkey --algorithm=ecc256`). The
/// benchmark's C program (keyseal-pkcs11-probe) signs through libkeyseal-pkcs11.so and through libtpm2_pkcs11.so, and
/// the TPM's own sign time (Scripts/bench_tpm_sign.c) is measured through the same tpm2-abrmd.
@Suite("PKCS#11 module beside tpm2-pkcs11 on one TPM", .serialized)
struct PKCS11PeerTests {
    /// The benchmark's stack: `peer` (tpm2-pkcs11's token and its tpm2-abrmd) and a keyseald on the same tpm2-abrmd.
    final class Setup {
        /// The tpm2-pkcs11 token holding the benchmark's key.
        static let token = "peer"
        let peer: TPM2PKCS11Fixture
        let daemon: Process
        let socket: String
        var directory: TemporaryDirectory { peer.directory }

        init() throws {
            peer = try TPM2PKCS11Fixture(withKeys: false)
            do {
                // A second token (the fixture's own is the first slot), so the probe must find its slot by label.
                try peer.ptool([
                    "addtoken", "--pid=1", "--sopin=so-pin-5678", "--userpin=\(peer.pin)", "--label=\(Self.token)",
                ])
                try peer.ptool([
                    "addkey", "--algorithm=ecc256", "--label=\(Self.token)", "--userpin=\(peer.pin)",
                    "--key-label=peer",
                ])
                socket = peer.directory.appending("run/keyseal.sock").path
                daemon = try startKeyseald(
                    arguments: [
                        "--store", peer.directory.appending("store").path, "--backend", "tpm", "--tcti",
                        peer.resourceManager.tcti,
                    ],
                    socket: socket,
                    environment: peer.resourceManager.environment,
                    log: peer.directory.appending("keyseald.log")
                )
            } catch {
                peer.remove()
                throw error
            }
        }

        deinit {
            daemon.terminate()
            daemon.waitForExit()
            peer.remove()
        }

        /// keyseal-pkcs11-probe's `sign` through `module` (a fixed 32-byte digest, CKM_ECDSA): the raw signature.
        func sign(module: String, key: String, pin: String, environment: [String: String]) throws -> Data {
            let probe = try builtProductsDirectory().appendingPathComponent("keyseal-pkcs11-probe").path
            let result = try runProcess(probe, [module, "sign", key, pin], environment: environment)
            let line = result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
            guard line.hasPrefix("login=0x0 rv=0x0 sig="), let signature = Self.bytes(hex: line.dropFirst(21))
            else { throw FixtureError("\(module): \(line) \(result.stderrText)") }
            return signature
        }

        static func bytes(hex: Substring) -> Data? {
            guard hex.count % 2 == 0 else { return nil }
            var bytes = Data()
            var index = hex.startIndex
            while index < hex.endIndex {
                let next = hex.index(index, offsetBy: 2)
                guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
                bytes.append(byte)
                index = next
            }
            return bytes
        }

        /// The key's public half as SubjectPublicKeyInfo DER, read by pkcs11-tool (OpenSC) through `module`.
        func publicKey(module: String, token: String, key: String, environment: [String: String]) throws -> Data {
            let output = directory.appending("\(key).pub.der").path
            let result = try runProcess(
                try requireTool("pkcs11-tool", package: "opensc"),
                [
                    "--module", module, "--token-label", token, "--read-object", "--type", "pubkey", "--label", key,
                    "-o", output,
                ],
                environment: environment
            )
            guard result.status == 0 else { throw FixtureError("pkcs11-tool: \(result.stderrText)") }
            return try Data(contentsOf: URL(fileURLWithPath: output))
        }
    }

    /// The digest keyseal-pkcs11-probe signs: the bytes 0 to 31.
    static let digest = Data((0..<32).map { UInt8($0) })

    /// Verifies a raw ECDSA P-256 signature of ``digest`` with openssl (the digest as given, not hashed again).
    static func openSSLVerifies(_ signature: Data, publicKey: Data, in directory: TemporaryDirectory) throws -> Bool {
        let der = try P256.Signing.ECDSASignature(rawRepresentation: signature).derRepresentation
        let files = (
            key: directory.appending("verify.pub.der"), digest: directory.appending("digest"),
            signature: directory.appending("signature.der")
        )
        try publicKey.write(to: files.key)
        try digest.write(to: files.digest)
        try der.write(to: files.signature)
        let result = try runProcess(
            try requireTool("openssl", package: "openssl"),
            [
                "pkeyutl", "-verify", "-pubin", "-keyform", "DER", "-inkey", files.key.path, "-in", files.digest.path,
                "-sigfile", files.signature.path,
            ]
        )
        return result.status == 0 && result.stdoutText.contains("Signature Verified Successfully")
    }

    @Test("keyseald's key through libkeyseal-pkcs11.so and tpm2-pkcs11's own key sign in one TPM; both verify")
    func bothModulesSignInOneTPM() throws {
        let setup = try Setup()
        let created = try CLI(socket: setup.socket)("create-key", "--tag", "bench", "-l", "bench", "--hardware")
        #expect(created.status == 0, "\(created.stderrText)")

        // Keyseal: the store has no passcode, and the module then takes any PIN (as the benchmark logs in).
        let keysealModule = try builtProductsDirectory().appendingPathComponent("libkeyseal-pkcs11.so").path
        let keysealEnvironment = ["KEYSEAL_SOCKET": setup.socket]
        let keysealSignature = try setup.sign(
            module: keysealModule,
            key: "bench",
            pin: "unused",
            environment: keysealEnvironment
        )
        let keysealPublic = try setup.publicKey(
            module: keysealModule,
            token: "Keyseal",
            key: "bench",
            environment: keysealEnvironment
        )

        // tpm2-pkcs11: its token found by label (KEYSEAL_PROBE_TOKEN), logged in with its user PIN.
        var peerEnvironment = setup.peer.environment
        peerEnvironment["KEYSEAL_PROBE_TOKEN"] = Setup.token
        let peerSignature = try setup.sign(
            module: TPM2PKCS11Fixture.module,
            key: "peer",
            pin: setup.peer.pin,
            environment: peerEnvironment
        )
        let peerPublic = try setup.publicKey(
            module: TPM2PKCS11Fixture.module,
            token: Setup.token,
            key: "peer",
            environment: setup.peer.environment
        )

        #expect(keysealPublic != peerPublic)
        #expect(try Self.openSSLVerifies(keysealSignature, publicKey: keysealPublic, in: setup.directory))
        #expect(try Self.openSSLVerifies(peerSignature, publicKey: peerPublic, in: setup.directory))
        // Each signature is of its own key: verified with the other's public key it fails.
        #expect(try !Self.openSSLVerifies(keysealSignature, publicKey: peerPublic, in: setup.directory))

        // keyseald's device key is that TPM's (its only TCTI is the tpm2-abrmd tpm2-pkcs11 uses).
        let status = try CLI.json(try CLI(socket: setup.socket)("--json", "status"))
        #expect(status["hardwareBacked"] as? Bool == true, "\(status)")
    }

    @Test("The benchmark's TPM floor program signs through tpm2-abrmd")
    func theFloorProgramSignsThroughTheBroker() throws {
        let broker = try ResourceManagerFixture()
        defer { broker.remove() }
        let program = broker.directory.appending("bench-tpm-sign").path
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/bench_tpm_sign.c").path
        let compiled = try runProcess(
            try requireTool("cc", package: "gcc"),
            ["-O2", "-o", program, source, "-ltss2-esys", "-ltss2-tctildr"]
        )
        #expect(compiled.status == 0, "\(compiled.stderrText)")
        let result = try runProcess(program, [broker.tcti, "5"], environment: broker.environment)
        #expect(result.status == 0, "\(result.stdoutText) \(result.stderrText)")
        #expect(result.stdoutText.hasPrefix("median_us="), "\(result.stdoutText)")
    }
}
