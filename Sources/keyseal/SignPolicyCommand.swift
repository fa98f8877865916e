import ArgumentParser
import KeysealModel
import KeysealTPM

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// `keyseal tpm sign-policy`: a signed PCR policy for the build system (docs/OPERATIONS.md "Signed PCR policies").
/// Runs without keyseald; `--current` reads the PCRs through the TCTI.
struct SignPolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign-policy",
        abstract: "Sign the PCR policy of a boot state (build system; no keyseald needed).",
        discussion: """
            Writes FILE: {"sha256": [{"pcrs": [..], "pkfp": HEX, "pol": HEX, "sig": BASE64}]}, the layout of \
            systemd's tpm2-pcr-signature.json. pol is the TPM's PolicyPCR digest over the given SHA-256 PCR values; \
            sig signs it (RSASSA-PKCS1-v1_5 or ECDSA, SHA-256) with --private-key, RSA 2048 or NIST P-256 (PEM); \
            pkfp is the SHA-256 of the key's public half (DER). A device started with `keyseald --tpm-pcrs LIST \
            --tpm-pcr-public-key PUBLIC.pem` opens in that state when the file is in its signature directory.

            --pcr-values FILE: lines `PCR:HEX` or `PCR=HEX` (`tpm2_pcrread sha256:7` output works as it is), or a JSON \
            object {"7": "HEX"}. --current reads the values from the TPM at --tcti (default: $KEYSEAL_TCTI, else \
            device:/dev/tpmrm0) instead: the state this machine is in now. FILE is replaced; it holds nothing secret.
            """
    )

    @Option(name: .long, help: "The PCRs the policy covers (comma-separated, 0-23), as the device's --tpm-pcrs.")
    var pcrs: String
    @Option(name: .long, help: ArgumentHelp("The PCR values to sign.", valueName: "file"))
    var pcrValues: String?
    @Flag(name: .long, help: "Sign the values the TPM's PCRs have now.")
    var current = false
    @Option(name: .long, help: ArgumentHelp("The TPM to read with --current.", valueName: "tcti"))
    var tcti: String?
    @Option(name: .long, help: ArgumentHelp("The signing key (PEM, RSA 2048 or P-256).", valueName: "file"))
    var privateKey: String
    @Option(name: .long, help: ArgumentHelp("Where to write the signed policy (JSON).", valueName: "file"))
    var output: String
    /// `--json`; `--socket` is accepted as by every command and not used.
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (pcrValues == nil) != !current else {
            throw ValidationError("give one of --pcr-values FILE and --current")
        }
    }

    func run() throws {
        do {
            let list = try TPMCommand.Reseal.pcrList(pcrs)
            guard !list.isEmpty else { throw CommandFailure(status: -50, message: "--pcrs names one PCR or more") }
            let values: [Int: [UInt8]]
            if current {
                let tcti =
                    tcti ?? ProcessInfo.processInfo.environment["KEYSEAL_TCTI"] ?? "device:/dev/tpmrm0"
                values = try TPMDeviceKey.readPCRs(tcti: tcti, pcrs: list)
            } else {
                values = try Self.values(file: pcrValues!, pcrs: list)
            }
            guard let pem = FileManager.default.contents(atPath: privateKey), pem.count < 65536 else {
                throw CommandFailure(status: -50, message: "cannot read the private key \(privateKey)")
            }
            let policy = try SignedPCRPolicy.sign(values: values, privateKeyPEM: String(decoding: pem, as: UTF8.self))
            try Self.write(try SignedPCRPolicy.encodeFile([policy]), to: output)
            if global.json {
                Console.out(
                    JSON.object([
                        ("pcrs", .array(policy.pcrs.map { .int(Int64($0)) })), ("pkfp", .string(policy.pkfp)),
                        ("pol", .string(policy.pol)), ("output", .string(output)),
                    ]).rendered
                )
            } else {
                Console.out("signed: PCR \(policy.pcrs.map(String.init).joined(separator: ",")) policy \(policy.pol)")
            }
        } catch let failure as CommandFailure {
            failure.report(command: "tpm sign-policy", json: global.json)
            throw ExitCode(failure.exitCode)
        } catch let error as KeychainError {
            let failure = CommandFailure(error)
            failure.report(command: "tpm sign-policy", json: global.json)
            throw ExitCode(failure.exitCode)
        }
    }

    /// The values of `pcrs` in `file`: lines `PCR:HEX`, `PCR=HEX` or `PCR : 0xHEX` (other lines, such as
    /// `sha256:` and `#` comments, are skipped), or a JSON object of PCR numbers to hex values.
    static func values(file: String, pcrs: [Int]) throws -> [Int: [UInt8]] {
        guard let data = FileManager.default.contents(atPath: file), data.count < 65536 else {
            throw CommandFailure(status: -50, message: "cannot read the PCR values in \(file)")
        }
        var found: [Int: [UInt8]] = [:]
        func add(_ pcr: String, _ value: String) throws {
            guard let number = Int(Self.trimmed(pcr)), pcrs.contains(number) else { return }
            var hex = Self.trimmed(value)
            if hex.hasPrefix("0x") || hex.hasPrefix("0X") { hex.removeFirst(2) }
            guard let bytes = SignedPCRPolicy.bytes(hex: hex), bytes.count == 32 else {
                throw CommandFailure(
                    status: -50,
                    message: "the value of PCR \(number) in \(file) is not 32 bytes of hex"
                )
            }
            found[number] = bytes
        }
        if let object = try? JSONDecoder().decode([String: String].self, from: data) {
            for (pcr, value) in object { try add(pcr, value) }
        } else {
            for line in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
                let text = Self.trimmed(line)
                guard !text.hasPrefix("#"), let separator = text.firstIndex(where: { $0 == ":" || $0 == "=" }) else {
                    continue
                }
                let value = text[text.index(after: separator)...]
                guard !Self.trimmed(value).isEmpty else { continue }
                try add(String(text[..<separator]), String(value))
            }
        }
        let missing = pcrs.filter { found[$0] == nil }
        guard missing.isEmpty else {
            throw CommandFailure(
                status: -50,
                message: "\(file) has no SHA-256 value for PCR \(missing.map(String.init).joined(separator: ","))"
            )
        }
        return found
    }

    /// `text` without leading and trailing spaces and tabs.
    static func trimmed<Text: StringProtocol>(_ text: Text) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }

    /// Replaces `path` with `data` (0600, written to a temporary file beside it and renamed).
    static func write(_ data: Data, to path: String) throws {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw CommandFailure(
                status: -36,
                message: "cannot create \(temporary): \(String(cString: strerror(errno)))"
            )
        }
        let bytes = Array(data) + [UInt8(ascii: "\n")]
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw CommandFailure(status: -36, message: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}
