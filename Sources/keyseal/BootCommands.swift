import ArgumentParser
import FoundationEssentials
import KeysealClient

#if canImport(Glibc)
import Glibc
#endif

/// `keyseal recovery-key create`: a new recovery key, shown once (docs/OPERATIONS.md "Boot binding and recovery").
struct RecoveryKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recovery-key",
        abstract: "Manage the recovery key of a TPM store bound to PCRs.",
        subcommands: [Create.self]
    )

    struct Create: ClientCommand {
        static let configuration = CommandConfiguration(
            commandName: "create",
            abstract: "Create a recovery key (administrators; replaces an earlier one) and show it once.",
            discussion: """
                The key (256 bits, 16 groups of 4 hexadecimal digits) is printed to the terminal only; with --file \
                it is written to a new file (0600) instead. With a passcode set, the passcode is asked for (or read \
                from standard input with --passcode-stdin). Keep the key offline: with this TPM it opens the store \
                when the PCRs change (`keyseal recover`).
                """
        )
        static var displayName: String { "recovery-key create" }

        @OptionGroup var global: GlobalOptions
        @Flag(name: .long, help: "Read the passcode from standard input (one line), when one is set.")
        var passcodeStdin = false
        @Option(name: .long, help: "Write the key to this new file (0600) instead of the terminal.")
        var file: String?

        func execute(_ client: DaemonClient) throws {
            guard file != nil || isatty(STDOUT_FILENO) == 1 else {
                throw CommandFailure(
                    status: -50,
                    message: "the recovery key is shown only on a terminal; stdout is not one, so give --file FILE "
                        + "(nothing was created)"
                )
            }
            guard case .status(let status) = try client.send(.status) else { throw unexpected }
            let passcode =
                status.passcodeSet ? try SecretInput.passcode("passcode", fromStandardInput: passcodeStdin) : nil
            // The file is created before the key: a key that cannot be kept is never made (it would replace the
            // earlier one).
            let fd = try file.map(RecoveryKeyOutput.createNewFile) ?? STDOUT_FILENO
            defer { if fd != STDOUT_FILENO { close(fd) } }
            let response: WireResponse
            do {
                response = try client.send(.createRecoveryKey(passcode: passcode))
            } catch {
                if let file { unlink(file) }
                throw error
            }
            guard case .secret(let key) = response else { throw unexpected }
            if let file {
                try RecoveryKeyOutput.writeLine(prefix: "", key, to: fd, what: file)
                guard fsync(fd) == 0 else {
                    throw CommandFailure(
                        status: -36,
                        message: "cannot sync \(file): \(String(cString: strerror(errno)))"
                    )
                }
                Console.out(
                    global.json ? JSON.object([("file", .string(file))]).rendered : "recovery key written to \(file)"
                )
            } else {
                try RecoveryKeyOutput.writeLine(
                    prefix: "recovery key (shown once; keep it offline): ",
                    key,
                    to: fd,
                    what: "the terminal"
                )
            }
        }
    }
}

/// `keyseal recover`: opens a store whose PCRs changed with its recovery key, sealed again to the current values.
struct RecoverCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "recover",
        abstract: "Bring back a store whose PCRs changed, with its recovery key (re-seals to the current PCR values).",
        discussion: """
            The recovery key is prompted for on the terminal without echo, or read from standard input with \
            --recovery-key-stdin; when a passcode is set, the passcode follows (the next line of standard input). \
            A wrong recovery key is counted by the TPM (exit 51, with the tries left).
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(
        name: .long,
        help: "Read the recovery key (then the passcode, when one is set) from standard input, one per line."
    )
    var recoveryKeyStdin = false

    func execute(_ client: DaemonClient) throws {
        guard case .status(let status) = try client.send(.status) else { throw unexpected }
        let key: SecretBytes
        var passcode: SecretBytes?
        if recoveryKeyStdin {
            let what = status.passcodeSet ? ["recovery key", "passcode"] : ["recovery key"]
            let lines = try SecretInput.lines(what.count, what: what)
            key = lines[0]
            if status.passcodeSet { passcode = lines[1] }
        } else {
            key = try SecretInput.passcode("recovery key", fromStandardInput: false)
            if status.passcodeSet { passcode = try SecretInput.passcode("passcode", fromStandardInput: false) }
        }
        _ = try client.send(.recover(key: key, passcode: passcode))
        if global.json {
            Console.out(JSON.object([("recovered", .bool(true))]).rendered)
        } else {
            Console.out("recovered: the store is sealed to the current PCR values")
        }
    }
}

/// `keyseal tpm reseal` and `keyseal tpm accept-rollback`.
struct TPMCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tpm",
        abstract: "TPM boot binding and anti-rollback (administrators).",
        subcommands: [Reseal.self, AcceptRollback.self, SignPolicyCommand.self, AdvancePolicyEpochCommand.self]
    )

    struct Reseal: ClientCommand {
        static let configuration = CommandConfiguration(
            commandName: "reseal",
            abstract: "Seal the device and passcode objects again to the PCRs' current values (or to --pcrs).",
            discussion: """
                For planned changes: `--pcrs none` before a firmware update, then `--pcrs 7` after it. With a \
                passcode set, the passcode is asked for (or read with --passcode-stdin); the store is unlocked \
                afterwards.
                """
        )
        static var displayName: String { "tpm reseal" }

        @OptionGroup var global: GlobalOptions
        @Flag(name: .long, help: "Read the passcode from standard input (one line), when one is set.")
        var passcodeStdin = false
        @Option(name: .long, help: "Bind to these PCRs instead (comma-separated, 0-23), or none.")
        var pcrs: String?

        func execute(_ client: DaemonClient) throws {
            let list = try pcrs.map(Self.pcrList)
            guard case .status(let status) = try client.send(.status) else { throw unexpected }
            let passcode =
                status.passcodeSet ? try SecretInput.passcode("passcode", fromStandardInput: passcodeStdin) : nil
            _ = try client.send(.tpmReseal(passcode: passcode, pcrs: list))
            let bound = list.map { $0.isEmpty ? "unbound" : "PCR " + $0.map(String.init).joined(separator: ",") }
            if global.json {
                Console.out(JSON.object([("resealed", .bool(true))]).rendered)
            } else {
                Console.out("resealed" + (bound.map { ": \($0)" } ?? " to the current PCR values"))
            }
        }

        static func pcrList(_ text: String) throws(CommandFailure) -> [Int] {
            if text == "none" { return [] }
            let numbers = text.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
            guard !numbers.isEmpty, numbers.allSatisfy({ $0 != nil && (0..<24).contains($0!) }) else {
                throw CommandFailure(status: -50, message: "--pcrs takes PCR numbers 0 to 23, comma-separated, or none")
            }
            return Array(Set(numbers.map { $0! })).sorted()
        }
    }

    struct AcceptRollback: ClientCommand {
        static let configuration = CommandConfiguration(
            commandName: "accept-rollback",
            abstract: "Keep a rolled-back store as it is (the failure count stays raised).",
            discussion: """
                After an older copy of the store was put back, the passcode classes are refused until an \
                administrator either puts the newer copy back or runs this: the store then takes the TPM counter's \
                value, its failure count stays raised by the events the copy did not know of, and the passcode \
                classes are served again (after an unlock when a passcode is set).
                """
        )
        static var displayName: String { "tpm accept-rollback" }

        @OptionGroup var global: GlobalOptions

        func execute(_ client: DaemonClient) throws {
            _ = try client.send(.acceptRollback)
            Console.out(global.json ? JSON.object([("accepted", .bool(true))]).rendered : "rollback accepted")
        }
    }
}

/// Where `recovery-key create` puts the key: one `write(2)` to the terminal or to a new 0600 file, synced; never a
/// buffered stream.
enum RecoveryKeyOutput {
    /// A new 0600 file (an existing one is never overwritten).
    static func createNewFile(_ path: String) throws -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw CommandFailure(
                status: -36,
                message:
                    "cannot create \(path) for the recovery key: \(String(cString: strerror(errno))) (nothing was created)"
            )
        }
        return fd
    }

    static func writeLine(prefix: String, _ key: SecretBytes, to fd: Int32, what: String) throws {
        var line = [UInt8](repeating: 0, count: prefix.utf8.count + key.count + 1)
        defer { SecretInput.wipe(&line) }
        line.replaceSubrange(0..<prefix.utf8.count, with: prefix.utf8)
        key.withUnsafeBytes { line.replaceSubrange(prefix.utf8.count..<prefix.utf8.count + key.count, with: $0) }
        line[line.count - 1] = UInt8(ascii: "\n")
        let written = line.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == line.count else {
            throw CommandFailure(status: -36, message: "cannot write the recovery key to \(what)")
        }
    }
}
