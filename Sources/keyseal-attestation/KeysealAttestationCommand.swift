import ArgumentParser
import Crypto
import FoundationEssentials
import Glibc
import KeysealAttestation
import KeysealAttestationOptions
import KeysealModel
import SwiftASN1
import X509

/// The attestation commands that need X.509 and the verifier, which `keyseal` runs as this program so that it links
/// neither (`keyseal attestation ca-challenge|ca-issue`, `keyseal verify-attestation`; docs/ARCHITECTURE.md). They
/// run without keyseald. Failures print `keyseal: <command>: <message> (<OSStatus>)` and exit with its low byte.
@main
struct KeysealAttestationCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keyseal",
        abstract: "Key attestation without keyseald: the CA's side of the AK enrollment, and the verifier.",
        subcommands: [AttestationGroup.self, VerifyAttestationCommand.self]
    )

    static func main() {
        // As `keyseal` passes them: its global options may come first; the command goes first here.
        var arguments = Array(CommandLine.arguments.dropFirst())
        if let index = arguments.firstIndex(where: { ["ca-challenge", "ca-issue", "verify-attestation"].contains($0) })
        {
            let command = arguments.remove(at: index)
            arguments.removeAll { $0 == "attestation" }
            arguments.insert(contentsOf: command == "verify-attestation" ? [command] : ["attestation", command], at: 0)
        }
        main(arguments)
    }
}

/// `keyseal attestation ca-challenge|ca-issue`.
struct AttestationGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attestation",
        abstract: "The CA's side of the attestation key's enrollment.",
        subcommands: [CAChallenge.self, CAIssue.self]
    )
}

/// `--socket` and `--json` as every keyseal command takes them (the socket is not used: no keyseald here).
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("keyseald's socket (not used).", valueName: "path"))
    var socket: String?
    @Flag(name: .long, help: "Print one JSON document on standard output.")
    var json = false
}

struct CAChallenge: ParsableCommand {
    static let configuration = AttestationCommandHelp.caChallenge
    @OptionGroup var global: GlobalOptions
    @OptionGroup var options: CAChallengeOptions
    var request: String { options.request }
    var caKey: String { options.caKey }
    var caCert: String { options.caCert }
    var ekCA: String? { options.ekCA }
    var output: String { options.output }

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

struct CAIssue: ParsableCommand {
    static let configuration = AttestationCommandHelp.caIssue
    @OptionGroup var global: GlobalOptions
    @OptionGroup var options: CAIssueOptions
    var state: String { options.state }
    var proof: String { options.proof }
    var caKey: String? { options.caKey }
    var caCert: String? { options.caCert }
    var output: String { options.output }

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

/// `keyseal verify-attestation`: checks an attestation without keyseald.
struct VerifyAttestationCommand: ParsableCommand {
    static let configuration = AttestationCommandHelp.verifyAttestation

    @OptionGroup var global: GlobalOptions
    @OptionGroup var options: VerifyAttestationOptions
    var input: String { options.input }
    var challenge: String { options.challenge }
    var ca: String { options.ca }
    var publicKey: String? { options.publicKey }
    var json: Bool { global.json }

    func validate() throws {
        guard Hex.decode(challenge) != nil else { throw ValidationError("--challenge: not hex") }
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
                    challenge: Hex.decode(challenge)!,
                    trustAnchors: anchors,
                    expectedPublicKey: expected
                )
            } catch {
                throw KeychainError(KeychainStatus.decode, error.description)
            }
            if json {
                struct Report: Encodable {
                    var verified = true
                    var publicKey: String
                    var accessibility: String?
                    var thisDeviceOnly: Bool?
                    var nonExportable: Bool?
                }
                let report = Report(
                    publicKey: verified.publicKey.pemRepresentation,
                    accessibility: verified.properties?.accessibility,
                    thisDeviceOnly: verified.properties?.thisDeviceOnly,
                    nonExportable: verified.properties?.nonExportable
                )
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                Console.out(String(decoding: try encoder.encode(report), as: UTF8.self))
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
    /// Runs `body`; a failure prints `keyseal: <command>: <message> (<OSStatus>)` (and with `--json` the error
    /// document) and exits with the status's low byte, as every keyseal command does.
    static func reporting(_ command: String, json: Bool = false, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as ExitCode {
            throw error
        } catch {
            let failure = (error as? KeychainError) ?? KeychainError(KeychainStatus.decode, "\(error)")
            Console.err("keyseal: \(command): \(failure.message) (\(failure.status))")
            if json {
                struct Document: Encodable {
                    struct Failure: Encodable {
                        var status: Int32
                        var message: String
                    }
                    var error: Failure
                }
                let document = Document(error: .init(status: failure.status, message: failure.message))
                if let data = try? JSONEncoder().encode(document) { Console.out(String(decoding: data, as: UTF8.self)) }
            }
            let low = Int32(UInt32(bitPattern: failure.status) & 0xFF)
            throw ExitCode(low == 0 ? 1 : low)
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

/// Standard output and error.
enum Console {
    static func out(_ line: String) { rawBytes(Data((line + "\n").utf8)) }
    static func err(_ line: String) { write(Data((line + "\n").utf8), to: STDERR_FILENO) }
    static func rawBytes(_ data: Data) { write(data, to: STDOUT_FILENO) }

    private static func write(_ data: Data, to fd: Int32) {
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Posix.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                guard written > 0 else { return }
                offset += written
            }
        }
    }
}
