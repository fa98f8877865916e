import ArgumentParser
import FoundationEssentials
import KeysealClient

/// `keyseal`: the command line of docs/COMMAND-LINE.md, modelled on macOS `security`. It talks to keyseald over the
/// thin client only (no engine, no NIO, no SQLite), so it starts in a few milliseconds.
@main
struct KeysealCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keyseal",
        abstract: "Keyseal's keychain from the command line: lock state, passcode, and password items.",
        discussion: """
            Talks to keyseald at --socket (default: $KEYSEAL_SOCKET, else $XDG_RUNTIME_DIR/keyseal/keyseal.sock, \
            else /run/keyseal/keyseal.sock). Global options (--socket, --json) go before or after the command.

            Exit status: 0 on success; otherwise the OSStatus's low byte as macOS security exits (not found 44, \
            duplicate 45, locked 36, wrong passcode 51, bad parameter 206, missing entitlement 30, too large 42, \
            not available 53, decode 93); 50 when keyseald is not reachable; 64 for usage errors. \
            `keyseal error CODE` explains a status.

            Secrets given with -w or -X on the command line are visible to other local users (ps, /proc): prefer \
            --password-stdin or --hex-stdin, or put -w last to be prompted.
            """,
        version: KeysealVersion.description,
        subcommands: [
            StatusCommand.self, UnlockCommand.self, LockCommand.self, PasscodeCommand.self, SettingsCommand.self,
            AddGenericPassword.self, FindGenericPassword.self, DeleteGenericPassword.self,
            AddInternetPassword.self, FindInternetPassword.self, DeleteInternetPassword.self,
            DumpKeychain.self, ExportCommand.self, ImportCommand.self, DoctorCommand.self, ErrorCommand.self,
            CreateKey.self, FindKey.self, DeleteKey.self, SignCommand.self, CreateCSR.self,
            AddCertificates.self, FindCertificate.self, DeleteCertificate.self, FindIdentity.self,
            RecoveryKeyCommand.self, RecoverCommand.self, TPMCommand.self,
            AttestationCommand.self, AttestCommand.self, VerifyAttestationCommand.self,
            SSHMark.self, SSHAgentCommand.self,
        ]
    )

    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        // The lookups scripts run most take a path of their own (docs/DECISIONS.md, "The find commands' plain command
        // lines are parsed by hand").
        if let find = FindParser.parse(arguments) { FindParser.exit(find.run()) }
        AttestationHelper.runIfNeeded(arguments)
        SignPolicyHelper.runIfNeeded(arguments)
        main(ArgumentRewriter.rewrite(arguments))
    }
}

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("keyseald's socket.", valueName: "path"))
    var socket: String?

    @Flag(name: .long, help: "Print one JSON document on standard output.")
    var json = false

    var socketPath: String { Self.socketPath(socket) }

    /// The socket given, else the default of the environment.
    static func socketPath(_ socket: String?) -> String {
        socket ?? Wire.defaultSocketPath(environment: ProcessInfo.processInfo.environment)
    }
}

/// A command that talks to keyseald: failures print one line (and the JSON error document) and exit with the
/// status's low byte.
protocol ClientCommand: ParsableCommand {
    var global: GlobalOptions { get }
    /// The command's name in error lines (`passcode set`, `find-generic-password`).
    static var displayName: String { get }
    func execute(_ client: DaemonClient) throws
}

extension ClientCommand {
    static var displayName: String { configuration.commandName ?? "keyseal" }

    func run() throws {
        do {
            try execute(DaemonClient(socketPath: global.socketPath))
        } catch let failure as CommandFailure {
            failure.report(command: Self.displayName, json: global.json)
            throw ExitCode(failure.exitCode)
        } catch let error as KeychainError {
            let failure = CommandFailure(error)
            failure.report(command: Self.displayName, json: global.json)
            throw ExitCode(failure.exitCode)
        }
    }
}

/// The connection to keyseald; daemon failures become `CommandFailure`s.
struct DaemonClient {
    let connection: KeysealConnection

    init(socketPath: String) { connection = KeysealConnection(socketPath: socketPath) }

    func send(_ request: WireRequest) throws(CommandFailure) -> WireResponse {
        do {
            return try connection.send(request)
        } catch {
            throw CommandFailure(error)
        }
    }
}

/// Rewrites the command line before parsing, for what swift-argument-parser cannot express directly:
/// global options before the command move after it; `error` takes negative codes as written; `-w` given last
/// to an add command prompts for the password, as `security` does.
enum ArgumentRewriter {
    static let addCommands: Set<String> = ["add-generic-password", "add-internet-password"]

    static func rewrite(_ arguments: [String]) -> [String] {
        var globals: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--json" {
                globals.append(argument)
            } else if argument == "--socket", index + 1 < arguments.count {
                globals += [argument, arguments[index + 1]]
                index += 1
            } else if argument.hasPrefix("--socket=") {
                globals.append(argument)
            } else {
                break
            }
            index += 1
        }
        guard index < arguments.count else { return arguments }
        let command = arguments[index]
        var rest = Array(arguments[(index + 1)...])
        if command == "error", !rest.contains("--") {
            // Options of `error` itself (--json, --help) stay before the separator; codes follow it.
            var options: [String] = []
            var codes: [String] = []
            var position = 0
            while position < rest.count {
                let argument = rest[position]
                if argument == "--socket", position + 1 < rest.count {
                    options += [argument, rest[position + 1]]
                    position += 1
                } else if ["--json", "--help", "-h"].contains(argument) || argument.hasPrefix("--socket=") {
                    options.append(argument)
                } else {
                    codes.append(argument)
                }
                position += 1
            }
            rest = options + ["--"] + codes
        }
        if addCommands.contains(command), rest.last == "-w" {
            rest[rest.count - 1] = "--password-prompt"
        }
        if ["passcode", "recovery-key", "tpm", "attestation"].contains(command), let sub = rest.first,
            !sub.hasPrefix("-")
        {
            return [command, sub] + globals + rest.dropFirst()
        }
        return [command] + globals + rest
    }
}
