import ArgumentParser
import KeysealAttestationOptions
import KeysealClient

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
/// `ca-issue` are the CA's side and run anywhere, without keyseald: `keyseal` runs `keyseal-attestation` for them
/// (``AttestationHelper``), so that it links no X.509 or libcrypto code itself.
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

    /// The CA's challenge file (TPM2B_ID_OBJECT and TPM2B_ENCRYPTED_SECRET, base64).
    struct Challenge: Decodable {
        var credentialBlob: String
        var secret: String
    }

    /// Run by `keyseal-attestation` (``AttestationHelper``); declared here for help, the man page and completions.
    struct CAChallenge: ParsableCommand {
        static let configuration = AttestationCommandHelp.caChallenge
        @OptionGroup var global: GlobalOptions
        @OptionGroup var options: CAChallengeOptions
    }

    /// Run by `keyseal-attestation` (``AttestationHelper``); declared here for help, the man page and completions.
    struct CAIssue: ParsableCommand {
        static let configuration = AttestationCommandHelp.caIssue
        @OptionGroup var global: GlobalOptions
        @OptionGroup var options: CAIssueOptions
    }

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
            let challenge = try AttestationFiles.decode(Challenge.self, from: self.challenge)
            guard let blob = Data(base64Encoded: challenge.credentialBlob),
                let secret = Data(base64Encoded: challenge.secret)
            else {
                throw CommandFailure(status: -26275, message: "the challenge is not in the expected format")
            }
            let request = WireRequest.attestation(.activate(credentialBlob: blob, secret: secret))
            guard case .keyResult(let credential) = try client.send(request) else { throw unexpected }
            let proof = JSON.object([("credential", .string(credential.base64EncodedString()))]).rendered + "\n"
            try AttestationFiles.emit(Data(proof.utf8), to: output)
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
            guard case .ok = try client.send(.attestation(.install(certificates: ders))) else {
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
            binds the key's accessibility class, this-device-only and non-exportable properties (extraData = 0x02 || \
            SHA-256("keyseal-key-properties/v2" || 0x00 || challenge length (8 bytes) || challenge || properties), \
            never a webauthn-tpm extraData). Check either with verify-attestation.
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
        guard let bytes = Hex.decode(challenge), !bytes.isEmpty, bytes.count <= 4096 else {
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
            data: Data(Hex.decode(challenge)!)
        )
        guard case .keyResult(let statement) = try client.send(.keyOperation(operation)) else { throw unexpected }
        if global.json && output == nil && format == "webauthn-tpm" {
            // The CBOR statement as base64, rather than binary bytes on a terminal.
            Console.out(JSON.object([("statement", .string(statement.base64EncodedString()))]).rendered)
        } else {
            try AttestationFiles.emit(statement, to: output)
        }
    }
}

/// `keyseal verify-attestation`: run by `keyseal-attestation` (``AttestationHelper``); declared here for help, the
/// man page and completions.
struct VerifyAttestationCommand: ParsableCommand {
    static let configuration = AttestationCommandHelp.verifyAttestation
    @OptionGroup var global: GlobalOptions
    @OptionGroup var options: VerifyAttestationOptions
}

/// The commands that need X.509 and the attestation verifier run as `keyseal-attestation`, installed next to
/// `keyseal`: linking swift-certificates and libcrypto into `keyseal` made every command start slower (measured:
/// docs/ARCHITECTURE.md, "The command line").
enum AttestationHelper {
    static let commands: Set<String> = ["ca-challenge", "ca-issue", "verify-attestation"]

    /// Replaces this process with `keyseal-attestation` when `arguments` name one of its commands; returns otherwise.
    static func runIfNeeded(_ arguments: [String]) {
        let index = HelperProgram.commandIndex(arguments)
        guard index < arguments.count else { return }
        let command: String
        if arguments[index] == "verify-attestation" {
            command = "verify-attestation"
        } else if arguments[index] == "attestation", index + 1 < arguments.count,
            commands.contains(arguments[index + 1])
        {
            command = "attestation " + arguments[index + 1]
        } else {
            return
        }
        HelperProgram.exec("keyseal-attestation", arguments, command: command)
    }
}

/// Files of the device-side attestation commands.
enum AttestationFiles {
    static func read(_ path: String) throws(CommandFailure) -> Data {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CommandFailure(status: -36, message: "cannot read \(path)")
        }
        return data
    }

    static func decode<T: Decodable>(_ type: T.Type, from path: String) throws -> T {
        let data = try read(path)
        guard let value = try? JSONDecoder().decode(type, from: data) else {
            throw CommandFailure(status: -26275, message: "\(path) is not the expected JSON")
        }
        return value
    }

    /// The DER certificates of a PEM file.
    static func pemCertificates(_ path: String) throws -> [Data] {
        guard let ders = CertificateOutput.certificates(in: try read(path)), !ders.isEmpty,
            String(decoding: try read(path), as: UTF8.self).contains("-----BEGIN CERTIFICATE-----")
        else {
            throw CommandFailure(status: -26275, message: "\(path) holds no PEM certificate")
        }
        return ders
    }

    /// Writes to `path` (0644, truncated), or to standard output.
    static func emit(_ data: Data, to path: String?) throws {
        guard let path else {
            Console.rawBytes(data)
            return
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw CommandFailure(status: -36, message: "cannot write \(path)") }
        defer { close(fd) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(fd) == 0 else {
            throw CommandFailure(status: -36, message: "cannot write \(path)")
        }
    }
}
