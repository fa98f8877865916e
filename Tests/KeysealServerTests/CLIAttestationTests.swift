import Crypto
import Foundation
import Keyseal
import KeysealAttestation
import KeysealTestSupport
import SwiftASN1
import Testing
import X509

/// Key attestation from the command line against a real keyseald on swtpm with an EK certificate: the AK's
/// enrollment (`attestation …`), `attest`, `verify-attestation`, and python-fido2's WebAuthn verifier on the same
/// statement (docs/TPM.md, "Key attestation").
@Suite("CLI key attestation", .serialized)
struct CLIAttestationTests {
    static let python = ProcessInfo.processInfo.environment["KEYSEAL_PYTHON"] ?? "/opt/keyseal-python/bin/python3"
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Python/fido2_tpm_attestation.py").path

    /// A CA's key and certificate as PEM files in `directory`.
    static func writeCA(in directory: TemporaryDirectory, name: String) throws -> (key: String, certificate: String) {
        let key = P256.Signing.PrivateKey()
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(86_400 * 365),
            issuer: try DistinguishedName { CommonName(name) },
            subject: try DistinguishedName { CommonName(name) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: Certificate.PrivateKey(key)
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        let keyPath = directory.appending("\(name).key").path
        let certificatePath = directory.appending("\(name).pem").path
        try key.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
        try PEMDocument(type: "CERTIFICATE", derBytes: serializer.serializedBytes).pemString
            .write(toFile: certificatePath, atomically: true, encoding: .utf8)
        return (keyPath, certificatePath)
    }

    /// The enrollment through the command line with the CA in `ca`; returns the AK certificate's path.
    static func enroll(
        _ cli: CLI,
        daemon: DaemonFixture,
        ca: (key: String, certificate: String),
        files: TemporaryDirectory
    ) throws -> String {
        let ekCA = files.appending("ek-ca.pem").path
        try #require(daemon.swtpm?.endorsementCACertificates).write(toFile: ekCA, atomically: true, encoding: .utf8)
        func step(_ arguments: String...) throws {
            let result = try cli.run(arguments)
            try #require(result.status == 0, "\(arguments.joined(separator: " ")): \(result.stderrText)")
        }
        let request = files.appending("request.json").path
        let challenge = files.appending("challenge.json").path
        let proof = files.appending("proof.json").path
        let certificate = files.appending("ak.pem").path
        try step("attestation", "enroll-request", "--output", request)
        try step(
            "attestation",
            "ca-challenge",
            "--request",
            request,
            "--ca-key",
            ca.key,
            "--ca-cert",
            ca.certificate,
            "--ek-ca",
            ekCA,
            "--output",
            challenge
        )
        try step("attestation", "activate", "--challenge", challenge, "--output", proof)
        try step("attestation", "ca-issue", "--state", challenge + ".state", "--proof", proof, "--output", certificate)
        try step("attestation", "install", "--certificate", certificate, "--chain", ca.certificate)
        return certificate
    }

    @Test(
        "an enrolled AK attests a hardware key: Keyseal's verifier and python-fido2 accept it; a replayed challenge exits 93"
    )
    func enrollAttestAndVerify() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer { ekCA.remove() }
        let daemon = try DaemonFixture(.tpm, endorsementCA: ekCA)
        defer { daemon.remove() }
        let files = try TemporaryDirectory(prefix: "keyseal-attest")
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let ca = try Self.writeCA(in: files, name: "fleet-ca")
        _ = try Self.enroll(cli, daemon: daemon, ca: ca, files: files)
        #expect(
            (try FileManager.default.attributesOfItem(atPath: files.appending("challenge.json.state").path)[
                .posixPermissions
            ] as? Int) == 0o600
        )

        let created = try cli("--json", "create-key", "--tag", "device", "--hardware")
        try #require(created.status == 0, "\(created.stderrText)")
        let publicKey = files.appending("device.pub").path
        try #require(try CLI.json(created)["publicKey"] as? String).write(
            toFile: publicKey,
            atomically: true,
            encoding: .utf8
        )

        // The challenge python-fido2 expects: authenticatorData naming this key, then a clientDataHash.
        let made = try runProcess(Self.python, [Self.script, "challenge", publicKey])
        try #require(made.status == 0, "\(made.stderrText)")
        let challenge = made.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        let statement = files.appending("attestation.cbor").path
        let attested = try cli("attest", "--tag", "device", "--challenge", challenge, "--output", statement)
        try #require(attested.status == 0, "\(attested.stderrText)")

        let verified = try cli(
            "verify-attestation",
            "--input",
            statement,
            "--challenge",
            challenge,
            "--ca",
            ca.certificate,
            "--public-key",
            publicKey
        )
        #expect(verified.status == 0, "\(verified.stderrText)")
        let fido2 = try runProcess(Self.python, [Self.script, "verify", publicKey, statement, ca.certificate])
        #expect(fido2.status == 0, "\(fido2.stderrText)")
        // With --json and no --output: the statement as base64.
        let printed = try cli("--json", "attest", "--tag", "device", "--challenge", challenge)
        let base64 = try #require(try CLI.json(printed)["statement"] as? String)
        try #require(Data(base64Encoded: base64)).write(to: URL(fileURLWithPath: statement))
        let reverified = try cli(
            "verify-attestation",
            "--input",
            statement,
            "--challenge",
            challenge,
            "--ca",
            ca.certificate
        )
        #expect(reverified.status == 0, "\(reverified.stderrText)")

        let garbage = files.appending("garbage.cbor").path
        try Data("not an attestation".utf8).write(to: URL(fileURLWithPath: garbage))
        let malformed = try cli(
            "verify-attestation",
            "--input",
            garbage,
            "--challenge",
            challenge,
            "--ca",
            ca.certificate
        )
        #expect(malformed.status == 93 && malformed.stderrText.contains("malformed:"), "\(malformed.stderrText)")
        let replayed = try cli(
            "verify-attestation",
            "--input",
            statement,
            "--challenge",
            "00ff",
            "--ca",
            ca.certificate
        )
        #expect(replayed.status == 93 && replayed.stderrText.contains("challenge:"), "\(replayed.stderrText)")
        // An AK certificate from another CA than the one the verifier trusts.
        let other = try Self.writeCA(in: files, name: "other-ca")
        let foreign = try cli(
            "verify-attestation",
            "--input",
            statement,
            "--challenge",
            challenge,
            "--ca",
            other.certificate
        )
        #expect(foreign.status == 93 && foreign.stderrText.contains("chain:"), "\(foreign.stderrText)")
        let fido2Foreign = try runProcess(
            Self.python,
            [Self.script, "verify", publicKey, statement, other.certificate]
        )
        #expect(fido2Foreign.status == 1)
    }

    /// The `properties` of the `json` document at `path` with `key` set to `value`, written back.
    static func editProperty(_ path: String, _ key: String, to value: Any) throws {
        var document = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        )
        var properties = try #require(document["properties"] as? [String: Any])
        properties[key] = value
        document["properties"] = properties
        try JSONSerialization.data(withJSONObject: document).write(to: URL(fileURLWithPath: path))
    }

    /// The bytes of lowercase or uppercase hex text.
    static func bytes(hex: String) throws -> [UInt8] {
        let digits = Array(hex.utf8)
        try #require(digits.count % 2 == 0)
        return try stride(from: 0, to: digits.count, by: 2).map {
            try #require(UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16))
        }
    }

    /// The WebAuthn statement of `path`: the CBOR file, or the one inside a `json` document.
    static func statement(at path: String) throws -> TPMAttestationStatement {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        guard bytes.first == UInt8(ascii: "{") else { return try TPMAttestationStatement(cbor: Array(bytes)) }
        let document = try JSONDecoder().decode(AttestationDocument.self, from: bytes)
        return try TPMAttestationStatement(cbor: Array(try #require(Data(base64Encoded: document.statement))))
    }

    @Test(
        "the json format binds the key's accessibility class, this-device-only and non-exportable; an edit of any is refused"
    )
    func jsonBindsProperties() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer { ekCA.remove() }
        let daemon = try DaemonFixture(.tpm, endorsementCA: ekCA)
        defer { daemon.remove() }
        let files = try TemporaryDirectory(prefix: "keyseal-attest")
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let ca = try Self.writeCA(in: files, name: "fleet-ca")
        _ = try Self.enroll(cli, daemon: daemon, ca: ca, files: files)
        try #require(try cli("create-key", "--tag", "device", "--hardware").status == 0)
        try #require(
            try cli(
                "create-key",
                "--tag",
                "bound",
                "--hardware",
                "--accessible",
                "after-first-unlock-this-device-only"
            ).status == 0
        )
        for (tag, accessibility, thisDeviceOnly) in [
            ("device", "when-unlocked", false), ("bound", "after-first-unlock-this-device-only", true),
        ] {
            let document = files.appending("\(tag).json").path
            let attested = try cli(
                "attest",
                "--tag",
                tag,
                "--challenge",
                "c0ffee",
                "--format",
                "json",
                "--output",
                document
            )
            try #require(attested.status == 0, "\(attested.stderrText)")
            func verify() throws -> ProcessResult {
                try cli(
                    "--json",
                    "verify-attestation",
                    "--input",
                    document,
                    "--challenge",
                    "c0ffee",
                    "--ca",
                    ca.certificate
                )
            }
            let verified = try verify()
            #expect(verified.status == 0, "\(verified.stderrText)")
            let report = try CLI.json(verified)
            #expect(report["accessibility"] as? String == accessibility)
            #expect(report["thisDeviceOnly"] as? Bool == thisDeviceOnly)
            #expect(report["nonExportable"] as? Bool == true)
            // What the TPM signed: 0x02, then SHA-256 of the domain tag, a zero byte, the challenge's length (8 bytes),
            // the challenge and the properties in the documented text (docs/TPM.md).
            let binding =
                "accessibility=\(accessibility)\nthis-device-only=\(thisDeviceOnly ? 1 : 0)\nnon-exportable=1\n"
            let preimage =
                Array("keyseal-key-properties/v2".utf8) + [0] + [0, 0, 0, 0, 0, 0, 0, 3] + [0xC0, 0xFF, 0xEE]
                + Array(binding.utf8)
            let certified = try TPMCertifyInfo(marshalled: try Self.statement(at: document).certInfo)
            #expect(certified.extraData == [0x02] + Array(SHA256.hash(data: preimage)))

            // Each property edited alone breaks the binding.
            let original = try Data(contentsOf: URL(fileURLWithPath: document))
            for (key, value) in [
                ("accessibility", thisDeviceOnly ? "after-first-unlock" : "always-this-device-only") as (String, Any),
                ("thisDeviceOnly", !thisDeviceOnly), ("nonExportable", false),
            ] {
                try Self.editProperty(document, key, to: value)
                let edited = try verify()
                #expect(edited.status == 93 && edited.stderrText.contains("challenge:"), "\(key): \(edited.stderrText)")
                try original.write(to: URL(fileURLWithPath: document))
            }
            #expect(try verify().status == 0)
        }
    }

    /// The hex text of `bytes`.
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test(
        "a webauthn-tpm attestation over a json preimage does not pass as a json document: properties cannot be forged"
    )
    func webauthnStatementDoesNotPassAsJSON() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer { ekCA.remove() }
        let daemon = try DaemonFixture(.tpm, endorsementCA: ekCA)
        defer { daemon.remove() }
        let files = try TemporaryDirectory(prefix: "keyseal-attest")
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let ca = try Self.writeCA(in: files, name: "fleet-ca")
        _ = try Self.enroll(cli, daemon: daemon, ca: ca, files: files)
        try #require(try cli("create-key", "--tag", "device", "--hardware", "--accessible", "always").status == 0)

        // The properties the key does not have, in each encoding of the json format's binding: the one of
        // keyseal-tpm-attestation-v1 (challenge ‖ text) and the one of v2 (docs/TPM.md, "Attesting a key").
        let challenge: [UInt8] = [0xC0, 0xFF, 0xEE]
        let forged = "accessibility=when-unlocked-this-device-only\nthis-device-only=1\nnon-exportable=1\n"
        let version1 = challenge + Array(("keyseal-key-properties/v1\n" + forged).utf8)
        let version2 =
            Array("keyseal-key-properties/v2".utf8) + [0] + [0, 0, 0, 0, 0, 0, 0, UInt8(challenge.count)] + challenge
            + Array(forged.utf8)
        for (index, preimage) in [version1, version2].enumerated() {
            let statement = files.appending("webauthn-\(index).cbor").path
            let attested = try cli(
                "attest",
                "--tag",
                "device",
                "--challenge",
                Self.hex(preimage),
                "--format",
                "webauthn-tpm",
                "--output",
                statement
            )
            // The device may refuse to certify such a challenge; if it certifies it, no json document may carry it.
            guard attested.status == 0 else { continue }
            for format in ["keyseal-tpm-attestation-v1", AttestationDocument.formatName] {
                let document = files.appending("forged-\(index).json").path
                let wrapped: [String: Any] = [
                    "format": format,
                    "properties": [
                        "accessibility": "when-unlocked-this-device-only", "thisDeviceOnly": true,
                        "nonExportable": true,
                    ],
                    "statement": try Data(contentsOf: URL(fileURLWithPath: statement)).base64EncodedString(),
                ]
                try JSONSerialization.data(withJSONObject: wrapped).write(to: URL(fileURLWithPath: document))
                let verified = try cli(
                    "--json",
                    "verify-attestation",
                    "--input",
                    document,
                    "--challenge",
                    Self.hex(challenge),
                    "--ca",
                    ca.certificate
                )
                #expect(
                    verified.status == 93 && !verified.stdoutText.contains("when-unlocked-this-device-only"),
                    "v\(index + 1) preimage as \(format): \(verified.status) \(verified.stdoutText) \(verified.stderrText)"
                )
            }
        }
    }

    @Test(
        "non-exportable and generated in the TPM are the certified key's own attributes in both formats; a WebAuthn verifier checks them through the Name"
    )
    func tpmAttributesCertifiedInBothFormats() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer { ekCA.remove() }
        let daemon = try DaemonFixture(.tpm, endorsementCA: ekCA)
        defer { daemon.remove() }
        let files = try TemporaryDirectory(prefix: "keyseal-attest")
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let ca = try Self.writeCA(in: files, name: "fleet-ca")
        _ = try Self.enroll(cli, daemon: daemon, ca: ca, files: files)
        let created = try cli("--json", "create-key", "--tag", "device", "--hardware")
        try #require(created.status == 0, "\(created.stderrText)")
        let publicKey = files.appending("device.pub").path
        try #require(try CLI.json(created)["publicKey"] as? String).write(
            toFile: publicKey,
            atomically: true,
            encoding: .utf8
        )
        let made = try runProcess(Self.python, [Self.script, "challenge", publicKey])
        try #require(made.status == 0, "\(made.stderrText)")
        let challenge = made.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        let webauthn = files.appending("attestation.cbor").path
        let json = files.appending("attestation.json").path
        for (format, output) in [("webauthn-tpm", webauthn), ("json", json)] {
            let attested = try cli(
                "attest",
                "--tag",
                "device",
                "--challenge",
                challenge,
                "--format",
                format,
                "--output",
                output
            )
            try #require(attested.status == 0, "\(format): \(attested.stderrText)")
            let area = try TPMPublicArea(marshalled: try Self.statement(at: output).pubArea)
            for (bit, label) in [
                (TPMConstant.fixedTPM, "fixedTPM"), (TPMConstant.fixedParent, "fixedParent"),
                (TPMConstant.sensitiveDataOrigin, "sensitiveDataOrigin"),
            ] {
                #expect(area.has(bit), "\(format): the certified key lacks \(label)")
            }
        }
        // webauthn-tpm: extraData is SHA-256(challenge) and nothing else, as WebAuthn verifiers require.
        let statement = try Self.statement(at: webauthn)
        #expect(
            try TPMCertifyInfo(marshalled: statement.certInfo).extraData
                == Array(SHA256.hash(data: try Self.bytes(hex: challenge)))
        )
        #expect(try runProcess(Self.python, [Self.script, "verify", publicKey, webauthn, ca.certificate]).status == 0)

        // The attributes are part of the Name the TPM certified: the public area with fixedTPM cleared (a key that
        // could leave its TPM) no longer matches it, for Keyseal's verifier and for python-fido2's.
        var tampered = statement
        tampered.pubArea[7] &= ~UInt8(TPMConstant.fixedTPM)
        #expect(try !TPMPublicArea(marshalled: tampered.pubArea).has(TPMConstant.fixedTPM))
        try Data(tampered.cbor()).write(to: URL(fileURLWithPath: webauthn))
        let refused = try cli(
            "verify-attestation",
            "--input",
            webauthn,
            "--challenge",
            challenge,
            "--ca",
            ca.certificate
        )
        #expect(refused.status == 93 && refused.stderrText.contains("name:"), "\(refused.stderrText)")
        let fido2 = try runProcess(Self.python, [Self.script, "verify", publicKey, webauthn, ca.certificate])
        #expect(fido2.status == 1 && fido2.stderrText.lowercased().contains("name"), "\(fido2.stderrText)")
    }

    @Test("the native API attests a hardware key through keyseald (HardwareP256Key.attestation); the CLI verifies it")
    func nativeAPI() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer { ekCA.remove() }
        let daemon = try DaemonFixture(.tpm, endorsementCA: ekCA)
        defer { daemon.remove() }
        let files = try TemporaryDirectory(prefix: "keyseal-attest")
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let ca = try Self.writeCA(in: files, name: "fleet-ca")
        _ = try Self.enroll(cli, daemon: daemon, ca: ca, files: files)
        let key = try daemon.client().generateHardwareP256Key(tag: Data("native".utf8))
        let statement = files.appending("native.cbor")
        try key.attestation(challenge: Data([1, 2, 3])).write(to: statement)
        let publicKey = files.appending("native.pub").path
        try key.publicKey.pemRepresentation.write(toFile: publicKey, atomically: true, encoding: .utf8)
        let verified = try cli(
            "verify-attestation",
            "--input",
            statement.path,
            "--challenge",
            "010203",
            "--ca",
            ca.certificate,
            "--public-key",
            publicKey
        )
        #expect(verified.status == 0, "\(verified.stderrText)")
    }

    @Test(
        "a software key is not attested (errSecParam, 206); nor a key before the AK is enrolled (53), nor a locked one (36)"
    )
    func softwareKeyRefused() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer { ekCA.remove() }
        let daemon = try DaemonFixture(.tpm, endorsementCA: ekCA)
        defer { daemon.remove() }
        let files = try TemporaryDirectory(prefix: "keyseal-attest")
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try #require(try cli("create-key", "--tag", "hardware", "--hardware").status == 0)
        let early = try cli("attest", "--tag", "hardware", "--challenge", "01")
        #expect(early.status == 53, "\(early.stderrText)")
        _ = try Self.enroll(cli, daemon: daemon, ca: try Self.writeCA(in: files, name: "fleet-ca"), files: files)
        try #require(try cli("create-key", "--tag", "software").status == 0)
        let refused = try cli("attest", "--tag", "software", "--challenge", "01")
        #expect(refused.status == 206 && refused.stderrText.contains("software key"), "\(refused.stderrText)")
        // A key of a locked class is not attested either (errSecInteractionNotAllowed, 36).
        try #require(try cli("passcode", "set", "--passcode-stdin", input: "attest passcode\n").status == 0)
        try #require(try cli("lock").status == 0)
        let locked = try cli("attest", "--tag", "hardware", "--challenge", "01")
        #expect(locked.status == 36, "\(locked.stderrText)")
    }

    @Test("another user cannot have a key outside its groups attested: not found, as for every key operation")
    func anotherGroupsKeyRefused() throws {
        try #require(getuid() == 0, "needs root to run the probe as uid 65534")
        let daemon = try DaemonFixture.sharedWithNobody(backend: .tpm)
        defer { daemon.remove() }
        let key = try daemon.client().generateKey(KeyGenerationRequest(keyType: .p256, inHardware: true))
        guard case .item(let reference) = key.reference else {
            Issue.record("a stored key has an item reference")
            return
        }
        let hex = reference.map { String(format: "%02x", $0) }.joined()
        #expect(try daemon.probeAsNobody(["attest", hex]).hasPrefix("error -25300"))
    }

    @Test("the enrollment is for administrators: a client's enroll-request is refused (missing entitlement)")
    func enrollmentIsForAdministrators() throws {
        try #require(getuid() == 0, "needs root to run the probe as uid 65534")
        let daemon = try DaemonFixture.sharedWithNobody(backend: .tpm)
        defer { daemon.remove() }
        #expect(try daemon.probeAsNobody(["enroll-request"]).hasPrefix("error -34018"))
    }

    @Test("on the PKCS#11 backend attestation is errSecUnimplemented (exit 252) with a clear message")
    func pkcs11Unimplemented() throws {
        let daemon = try DaemonFixture(.pkcs11)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let result = try cli("attestation", "enroll-request")
        #expect(result.status == 252 && result.stderrText.contains("TPM backend"), "\(result.stderrText)")
        try #require(try cli("create-key", "--tag", "token", "--hardware").status == 0)
        let attested = try cli("attest", "--tag", "token", "--challenge", "01")
        #expect(attested.status == 252 && attested.stderrText.contains("TPM backend"), "\(attested.stderrText)")
    }
}
