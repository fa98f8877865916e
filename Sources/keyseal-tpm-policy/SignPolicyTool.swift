import ArgumentParser
import FoundationEssentials
import Glibc
import KeysealModel
import KeysealTPM
import KeysealTPMPolicyOptions

/// `keyseal tpm sign-policy`, run by `keyseal` as this program (docs/TPM.md "Signed PCR policies"): a signed PCR
/// policy for the build system, without keyseald; `--current` reads the PCRs through the TCTI. Failures print
/// `keyseal: tpm sign-policy: <message> (<OSStatus>)` and exit with its low byte.
@main
struct SignPolicyCommand: ParsableCommand {
    static let configuration = SignPolicyHelp.configuration

    @OptionGroup var options: SignPolicyOptions
    @Flag(name: .long, help: "Print one JSON document on standard output.")
    var json = false
    @Option(name: .long, help: .hidden)
    var socket: String?

    static func main() {
        // As `keyseal` passes them: its global options may come first, then `tpm sign-policy`.
        var arguments = Array(CommandLine.arguments.dropFirst())
        if let index = arguments.firstIndex(of: "advance-policy-epoch") {
            arguments.remove(at: index)
            if index > 0, arguments[index - 1] == "tpm" { arguments.remove(at: index - 1) }
            AdvancePolicyEpochCommand.main(arguments)
            return
        }
        if let index = arguments.firstIndex(of: "sign-policy") {
            arguments.remove(at: index)
            if index > 0, arguments[index - 1] == "tpm" { arguments.remove(at: index - 1) }
        }
        main(arguments)
    }

    func run() throws {
        do {
            let list = try Self.pcrList(options.pcrs)
            guard !list.isEmpty else { throw CommandFailure(status: -50, message: "--pcrs names one PCR or more") }
            let values: [Int: [UInt8]]
            if options.current {
                let tcti =
                    options.tcti ?? ProcessInfo.processInfo.environment["KEYSEAL_TCTI"] ?? "device:/dev/tpmrm0"
                values = try TPMDeviceKey.readPCRs(tcti: tcti, pcrs: list)
            } else {
                values = try Self.values(file: options.pcrValues!, pcrs: list)
            }
            guard let pem = FileManager.default.contents(atPath: options.privateKey), pem.count < 65536 else {
                throw CommandFailure(status: -50, message: "cannot read the private key \(options.privateKey)")
            }
            let policy = try SignedPCRPolicy.sign(
                values: values,
                privateKeyPEM: String(decoding: pem, as: UTF8.self),
                epoch: options.epoch
            )
            try Self.write(try SignedPCRPolicy.encodeFile([policy]), to: options.output)
            if json {
                let pcrs = policy.pcrs.map(String.init).joined(separator: ",")
                let epoch = policy.epoch.map { ",\"epoch\":\($0)" } ?? ""
                print("{\"pcrs\":[\(pcrs)],\"pkfp\":\"\(policy.pkfp)\",\"pol\":\"\(policy.pol)\"\(epoch)}")
            } else {
                let epoch = policy.epoch.map { " for epoch \($0)" } ?? ""
                print("signed: PCR \(policy.pcrs.map(String.init).joined(separator: ",")) policy \(policy.pol)\(epoch)")
            }
        } catch let failure as CommandFailure {
            throw failure.reported()
        } catch let error as KeychainError {
            throw CommandFailure(status: error.status, message: error.message).reported()
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

    /// `--pcrs`: PCR numbers 0–23, comma-separated.
    static func pcrList(_ text: String) throws(CommandFailure) -> [Int] {
        let numbers = text.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
        guard !numbers.isEmpty, numbers.allSatisfy({ $0 != nil && (0..<24).contains($0!) }) else {
            throw CommandFailure(status: -50, message: "--pcrs takes PCR numbers 0 to 23, comma-separated")
        }
        return Array(Set(numbers.map { $0! })).sorted()
    }
}

/// `keyseal tpm advance-policy-epoch`, run by `keyseal` as this program (docs/TPM.md "Withdrawing signed states"):
/// moves the TPM's policy epoch, without keyseald.
struct AdvancePolicyEpochCommand: ParsableCommand {
    static let configuration = AdvancePolicyEpochHelp.configuration

    @OptionGroup var options: AdvancePolicyEpochOptions
    @Flag(name: .long, help: "Print one JSON document on standard output.")
    var json = false
    @Option(name: .long, help: .hidden)
    var socket: String?

    func run() throws {
        do {
            let tcti = options.tcti ?? ProcessInfo.processInfo.environment["KEYSEAL_TCTI"] ?? "device:/dev/tpmrm0"
            let epoch = try TPMDeviceKey.advancePolicyEpoch(tcti: tcti, to: options.epoch)
            print(json ? "{\"epoch\":\(epoch)}" : "policy epoch: \(epoch)")
        } catch let error as KeychainError {
            throw CommandFailure(status: error.status, message: error.message, command: "tpm advance-policy-epoch")
                .reported()
        }
    }
}

/// A failure: one line on stderr, `keyseal: tpm sign-policy: <message> (<OSStatus>)`, and the status's low byte.
struct CommandFailure: Error {
    var status: Int32
    var message: String
    var command = "tpm sign-policy"

    func reported() -> ExitCode {
        let line = Array("keyseal: \(command): \(message) (\(status))\n".utf8)
        _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        let low = Int32(UInt32(bitPattern: status) & 0xFF)
        return ExitCode(low == 0 ? 1 : low)
    }
}
