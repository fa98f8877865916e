import ArgumentParser
import Crypto
import KeysealAttestation
import KeysealClient
import SwiftASN1
import X509

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// `keyseal attestation …`: the attestation key's enrollment with a CA (docs/OPERATIONS.md "Key attestation").
/// `enroll-request`, `activate` and `install` run on the device through keyseald (administrators); `ca-challenge` and
/// `ca-issue` are the CA's side and run anywhere, without keyseald.
struct AttestationCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attestation",
        abstract: "Enroll the TPM's attestation key (AK) with a CA: device and CA steps.",
        discussion: """
            Device: enroll-request → (CA: ca-challenge) → activate → (CA: ca-issue) → install. The CA checks the \
            EK certificate against --ek-ca, makes a credential only the TPM holding that EK can open for an AK of \
            that Name (TPM2_MakeCredential), and issues the AK certificate once the device proved it \
            (TPM2_ActivateCredential). Then `keyseal attest` certifies hardware keys with the AK.
            """,
        subcommands: [EnrollRequest.self, CAChallenge.self, Activate.self, CAIssue.self, Install.self]
    )

    struct EnrollRequest: ClientCommand {
        static let configuration = CommandConfiguration(
            commandName: "enroll-request",
            abstract: "Write the EK certificate and the AK's public area (JSON) for the CA (administrators)."
        )
        static var displayName: String { "attestation enroll-request" }

        @OptionGroup var global: GlobalOptions
        @Option(name: .long, help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"))
        var output: String?

        func execute(_ client: DaemonClient) throws {
            guard case .keyResult(let json) = try client.send(.attestation(.enrollmentRequest)) else {
                throw unexpected
            }
            try AttestationFiles.emit(json, to: output)
        }
    }

    struct CAChallenge: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ca-challenge",
            abstract: "CA side: check the EK certificate and make a credential to the EK for the AK (no keyseald).",
            discussion: """
                Writes the challenge for the device to --output and what ca-issue needs to --output.state (0600: it \
                holds the credential; keep it on the CA). Every certificate in --ek-ca (the TPM maker's root and \
                intermediates) is trusted to issue EK certificates; without --ek-ca the EK certificate is not checked.
                """
        )
        @OptionGroup var global: GlobalOptions
        @Option(name: .long, help: ArgumentHelp("The device's enrollment request.", valueName: "file"))
        var request: String
        @Option(name: .customLong("ca-key"), help: ArgumentHelp("The CA's private key (PEM).", valueName: "file"))
        var caKey: String
        @Option(name: .customLong("ca-cert"), help: ArgumentHelp("The CA's certificate (PEM).", valueName: "file"))
        var caCert: String
        @Option(name: .customLong("ek-ca"), help: ArgumentHelp("EK CA certificates (PEM).", valueName: "file"))
        var ekCA: String?
        @Option(name: .long, help: ArgumentHelp("The challenge file to write.", valueName: "file"))
        var output: String

        func run() throws {
            try AttestationFiles.reporting("attestation ca-challenge") {
                // The CA's key and certificate are checked now, so a challenge is never made for a CA that cannot issue.
                _ = try AttestationFiles.caIdentity(key: caKey, certificate: caCert)
                let request = try AttestationFiles.decode(EnrollmentRequest.self, from: self.request)
                let anchors = try ekCA.map { try AttestationFiles.certificates($0) }
                if anchors == nil {
                    Console.err(
                        "keyseal: attestation ca-challenge: warning: the EK certificate was not checked (no --ek-ca)"
                    )
                }
                var (challenge, state) = try AttestationCA.makeChallenge(for: request, ekTrustAnchors: anchors)
                state.caKey = AttestationFiles.absolute(caKey)
                state.caCertificate = AttestationFiles.absolute(caCert)
                try AttestationFiles.write(try AttestationFiles.json(state), to: output + ".state", mode: 0o600)
                try AttestationFiles.write(try AttestationFiles.json(challenge), to: output, mode: 0o644)
            }
        }
    }

    struct Activate: ClientCommand {
        static let configuration = CommandConfiguration(
            commandName: "activate",
            abstract: "Device side: TPM2_ActivateCredential of the CA's challenge; writes the proof (administrators)."
        )
        static var displayName: String { "attestation activate" }

        @OptionGroup var global: GlobalOptions
        @Option(name: .long, help: ArgumentHelp("The CA's challenge.", valueName: "file"))
        var challenge: String
        @Option(name: .long, help: ArgumentHelp("Write the proof here instead of standard output.", valueName: "file"))
        var output: String?

        func execute(_ client: DaemonClient) throws {
            let challenge = try AttestationFiles.decode(CredentialChallenge.self, from: self.challenge)
            guard let blob = Data(base64Encoded: challenge.credentialBlob),
                let secret = Data(base64Encoded: challenge.secret)
            else {
                throw CommandFailure(status: -26275, message: "the challenge is not in the expected format")
            }
            let request = WireRequest.attestation(.activate(credentialBlob: blob, secret: secret))
            guard case .keyResult(let credential) = try client.send(request) else { throw unexpected }
            let proof = ActivationProof(credential: credential.base64EncodedString())
            try AttestationFiles.emit(try AttestationFiles.json(proof), to: output)
        }
    }

    struct CAIssue: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ca-issue",
            abstract: "CA side: check the device's proof and issue the AK certificate (no keyseald).",
            discussion: """
                The certificate: X.509 v3, empty subject, the TPM's manufacturer, model and version (from the EK \
                certificate) in the subjectAltName, EKU 2.23.133.8.3 (tcg-kp-AIKCertificate), not a CA.
                """
        )
        @OptionGroup var global: GlobalOptions
        @Option(name: .long, help: ArgumentHelp("The state ca-challenge wrote.", valueName: "file"))
        var state: String
        @Option(name: .long, help: ArgumentHelp("The device's proof.", valueName: "file"))
        var proof: String
        @Option(name: .customLong("ca-key"), help: ArgumentHelp("The CA's private key (PEM).", valueName: "file"))
        var caKey: String?
        @Option(name: .customLong("ca-cert"), help: ArgumentHelp("The CA's certificate (PEM).", valueName: "file"))
        var caCert: String?
        @Option(name: .long, help: ArgumentHelp("The AK certificate to write (PEM).", valueName: "file"))
        var output: String

        func run() throws {
            try AttestationFiles.reporting("attestation ca-issue") {
                let state = try AttestationFiles.decode(ChallengeState.self, from: self.state)
                let proof = try AttestationFiles.decode(ActivationProof.self, from: self.proof)
                guard let keyPath = caKey ?? state.caKey, let certificatePath = caCert ?? state.caCertificate else {
                    throw KeychainError(KeychainStatus.param, "give --ca-key and --ca-cert")
                }
                let (key, certificate) = try AttestationFiles.caIdentity(key: keyPath, certificate: certificatePath)
                let issued = try AttestationCA.issue(state: state, proof: proof, caKey: key, caCertificate: certificate)
                var serializer = DER.Serializer()
                try serializer.serialize(issued)
                let pem = AttestationKeyCertificates.pem([serializer.serializedBytes])
                try AttestationFiles.write(Data(pem.utf8), to: output, mode: 0o644)
            }
        }
    }

    struct Install: ClientCommand {
        static let configuration = CommandConfiguration(
            commandName: "install",
            abstract: "Store the AK certificate (and its CA chain) beside the store (administrators).",
            discussion: "The certificate must be for this TPM's attestation key; it replaces an earlier one."
        )
        static var displayName: String { "attestation install" }

        @OptionGroup var global: GlobalOptions
        @Option(name: .long, help: ArgumentHelp("The AK certificate (PEM).", valueName: "file"))
        var certificate: String
        @Option(name: .long, help: ArgumentHelp("The CA chain (PEM), issuer first.", valueName: "file"))
        var chain: String?

        func execute(_ client: DaemonClient) throws {
            var ders = try AttestationFiles.pemCertificates(certificate)
            if let chain { ders += try AttestationFiles.pemCertificates(chain) }
            guard case .ok = try client.send(.attestation(.install(certificates: ders.map { Data($0) }))) else {
                throw unexpected
            }
            if global.json {
                Console.out(JSON.object([("installed", .int(Int64(ders.count)))]).rendered)
            } else {
                Console.out(
                    "attestation key certificate installed (\(ders.count) certificate\(ders.count == 1 ? "" : "s"))"
                )
            }
        }
    }
}

/// `keyseal attest`: TPM2_Certify of a hardware key by the AK.
struct AttestCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "attest",
        abstract: "Attest that a key was generated in this TPM and cannot leave it (TPM2_Certify by the AK).",
        discussion: """
            webauthn-tpm (default): the W3C WebAuthn "tpm" attestation statement (CBOR: ver, alg, x5c, sig, \
            certInfo, pubArea) whose certInfo.extraData is SHA-256(challenge). json: Keyseal's document, which also \
            binds the key's accessibility class, this-device-only and non-exportable properties (extraData = \
            SHA-256(challenge ‖ properties)). Check either with verify-attestation.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Option(name: .long, help: ArgumentHelp("The key's application tag.", valueName: "tag"))
    var tag: String
    @Option(name: .long, help: ArgumentHelp("The verifier's challenge, in hex.", valueName: "hex"))
    var challenge: String
    @Option(name: .long, help: "webauthn-tpm or json.")
    var format = "webauthn-tpm"
    @Option(name: .long, help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"))
    var output: String?

    func validate() throws {
        guard let bytes = Formatting.bytes(hex: challenge), !bytes.isEmpty, bytes.count <= 4096 else {
            throw ValidationError("--challenge: 1 to 4096 bytes in hex")
        }
        guard ["webauthn-tpm", "json"].contains(format) else { throw ValidationError("--format: webauthn-tpm or json") }
    }

    func execute(_ client: DaemonClient) throws {
        let selection = try KeySelection.parse(["--tag", tag])
        let keys = try selection.find(client, privateOnly: true)
        guard let reference = keys.first?.persistentRef else {
            throw CommandFailure(status: -25300, message: "no private key has the tag \(tag)")
        }
        guard keys.count == 1 else {
            throw CommandFailure(status: -50, message: "\(keys.count) keys have the tag \(tag)")
        }
        let operation = WireKeyOperation(
            reference: reference,
            kind: .attest,
            algorithm: format,
            data: Data(Formatting.bytes(hex: challenge)!)
        )
        guard case .keyResult(let statement) = try client.send(.keyOperation(operation)) else { throw unexpected }
        try AttestationFiles.emit(statement, to: output)
    }
}

/// `keyseal verify-attestation`: checks an attestation without keyseald.
struct VerifyAttestationCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-attestation",
        abstract: "Check a key attestation (webauthn-tpm or json) against a challenge and a CA (no keyseald).",
        discussion: """
            Checks: the AK certificate (empty subject, EKU 2.23.133.8.3, not a CA) chains to --ca; certInfo's \
            magic and type; the certified Name is pubArea's; pubArea has fixedTPM, fixedParent and \
            sensitiveDataOrigin; extraData is SHA-256 of the challenge (and of the properties, for json); the AK's \
            signature; with --public-key, the certified key. Exit 0 when all hold, else 93 with the failed check.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Option(name: .long, help: ArgumentHelp("The attestation.", valueName: "file"))
    var input: String
    @Option(name: .long, help: ArgumentHelp("The challenge, in hex.", valueName: "hex"))
    var challenge: String
    @Option(
        name: .long,
        help: ArgumentHelp("The CA certificate(s) that issued the AK certificate (PEM).", valueName: "file")
    )
    var ca: String
    @Option(name: .customLong("public-key"), help: ArgumentHelp("The expected key (PEM).", valueName: "file"))
    var publicKey: String?
    var json: Bool { global.json }

    func validate() throws {
        guard Formatting.bytes(hex: challenge) != nil else { throw ValidationError("--challenge: not hex") }
    }

    func run() throws {
        try AttestationFiles.reporting("verify-attestation", json: json) {
            let input = try AttestationFiles.read(self.input)
            let anchors = try AttestationFiles.certificates(ca)
            var expected: P256.Signing.PublicKey?
            if let publicKey {
                guard let pem = String(data: try AttestationFiles.read(publicKey), encoding: .utf8),
                    let key = try? P256.Signing.PublicKey(pemRepresentation: pem)
                else {
                    throw KeychainError(KeychainStatus.param, "\(publicKey) is not a P-256 public key in PEM")
                }
                expected = key
            }
            let verified: VerifiedAttestation
            do throws(AttestationFailure) {
                verified = try AttestationVerifier.verify(
                    Array(input),
                    challenge: Formatting.bytes(hex: challenge)!,
                    trustAnchors: anchors,
                    expectedPublicKey: expected
                )
            } catch {
                throw KeychainError(KeychainStatus.decode, error.description)
            }
            if json {
                var fields: [(String, JSON)] = [
                    ("verified", .bool(true)),
                    ("publicKey", .string(verified.publicKey.pemRepresentation)),
                ]
                if let properties = verified.properties {
                    fields.append(("accessibility", .string(properties.accessibility)))
                    fields.append(("thisDeviceOnly", .bool(properties.thisDeviceOnly)))
                    fields.append(("nonExportable", .bool(properties.nonExportable)))
                }
                Console.out(JSON.object(fields).rendered)
            } else {
                Console.out("attestation verified: the key was generated in a TPM whose AK the CA certified")
                if let properties = verified.properties {
                    Console.out(
                        "properties: accessibility \(properties.accessibility), this-device-only "
                            + "\(properties.thisDeviceOnly ? "yes" : "no"), non-exportable \(properties.nonExportable ? "yes" : "no")"
                    )
                }
            }
        }
    }
}

/// Files of the attestation commands, and their failures as one line with the status's exit code.
enum AttestationFiles {
    static func reporting(_ command: String, json: Bool = false, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as KeychainError {
            let failure = CommandFailure(error)
            failure.report(command: command, json: json)
            throw ExitCode(failure.exitCode)
        } catch let failure as CommandFailure {
            failure.report(command: command, json: json)
            throw ExitCode(failure.exitCode)
        } catch let error as ExitCode {
            throw error
        } catch {
            let failure = CommandFailure(status: -26275, message: "\(error)")
            failure.report(command: command, json: json)
            throw ExitCode(failure.exitCode)
        }
    }

    static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    static func read(_ path: String) throws -> Data {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw KeychainError(KeychainStatus.io, "cannot read \(path)")
        }
        return data
    }

    static func decode<T: Decodable>(_ type: T.Type, from path: String) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: try read(path))
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(KeychainStatus.decode, "\(path) is not the expected JSON")
        }
    }

    static func json<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(value) + Data("\n".utf8)
    }

    static func pemCertificates(_ path: String) throws -> [[UInt8]] {
        guard let text = String(data: try read(path), encoding: .utf8) else {
            throw KeychainError(KeychainStatus.decode, "\(path) is not PEM")
        }
        let ders = try AttestationKeyCertificates.ders(text)
        guard !ders.isEmpty else { throw KeychainError(KeychainStatus.decode, "\(path) holds no certificate") }
        return ders
    }

    static func certificates(_ path: String) throws -> [Certificate] {
        do {
            return try pemCertificates(path).map { try Certificate(derEncoded: $0) }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(KeychainStatus.decode, "\(path): a certificate does not parse")
        }
    }

    static func caIdentity(key: String, certificate: String) throws -> (Certificate.PrivateKey, Certificate) {
        guard let pem = String(data: try read(key), encoding: .utf8),
            let privateKey = try? Certificate.PrivateKey(pemEncoded: pem)
        else {
            throw KeychainError(KeychainStatus.param, "\(key) is not a private key in PEM (EC or RSA)")
        }
        guard let caCertificate = try certificates(certificate).first else {
            throw KeychainError(KeychainStatus.param, "\(certificate) holds no certificate")
        }
        guard caCertificate.publicKey == privateKey.publicKey else {
            throw KeychainError(KeychainStatus.param, "the CA key is not the CA certificate's key")
        }
        return (privateKey, caCertificate)
    }

    /// Writes `data` to a new or truncated file with `mode` (set even if the file existed).
    static func write(_ data: Data, to path: String, mode: mode_t) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode)
        guard fd >= 0 else { throw KeychainError(KeychainStatus.io, "cannot write \(path)") }
        defer { close(fd) }
        _ = fchmod(fd, mode)
        let written = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(fd) == 0 else {
            throw KeychainError(KeychainStatus.io, "cannot write \(path)")
        }
    }

    /// Writes to `path`, or to standard output.
    static func emit(_ data: Data, to path: String?) throws {
        if let path {
            try write(data, to: path, mode: 0o644)
        } else {
            Console.rawBytes(data)
        }
    }
}
