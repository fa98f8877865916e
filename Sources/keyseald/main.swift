import ArgumentParser
import Foundation
import Keyseal
import KeysealServer
import Logging

/// keyseald: wiring and argument parsing only (CLI.md); the daemon is KeysealServer.
@main
struct Keyseald: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keyseald",
        abstract: "The Keyseal daemon: serves one keychain store on a Unix socket.")

    enum BackendName: String, ExpressibleByArgument, CaseIterable {
        case tpm, swtpm, pkcs11
        case hostKey = "host-key"
    }

    @Option(name: .customLong("store"), help: "The store directory (created and provisioned if missing).")
    var store: String

    @Option(help: "The socket (default: $KEYSEAL_SOCKET, else $XDG_RUNTIME_DIR/keyseal/keyseal.sock, else /run/keyseal/keyseal.sock).")
    var socket: String?

    @Option(help: "Where the device key lives: tpm, swtpm (development), pkcs11 or host-key.")
    var backend: BackendName = .tpm

    @Option(help: "The TPM's TCTI (default: $KEYSEAL_TCTI, else device:/dev/tpmrm0).")
    var tcti: String?

    @Flag(help: "Set a random TPM lockout authorization and print it once (keep it offline).")
    var tpmProtectLockout = false

    @Option(name: .customLong("pkcs11-module"), help: "The PKCS#11 module: a path or a p11-kit module name.")
    var pkcs11Module: String?

    @Option(name: .customLong("pkcs11-token"), help: "The PKCS#11 token label.")
    var pkcs11Token: String?

    @Option(name: .customLong("pkcs11-pin-file"), help: "A file holding the token PIN (readable only by this user).")
    var pkcs11PinFile: String?

    @Option(name: .customLong("host-key"), help: "The host key file, outside the store directory.")
    var hostKey: String?

    @Option(name: .customLong("auto-lock"), help: "Idle seconds before locking (default 300); wins over the stored setting.")
    var autoLock: Int?

    @Flag(name: .customLong("no-auto-lock"), help: "Never lock when idle.")
    var noAutoLock = false

    @Option(help: "The access policy file (docs/OPERATIONS.md).")
    var policy: String?

    @Option(name: .customLong("socket-group"), help: "Make the socket 0660 and its directory 0750 with this group.")
    var socketGroup: String?

    @Option(help: "A configuration file (reserved; not read yet).")
    var config: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "notice"

    func validate() throws {
        if autoLock != nil && noAutoLock { throw ValidationError("--auto-lock and --no-auto-lock exclude each other") }
        if let autoLock, autoLock <= 0 { throw ValidationError("--auto-lock takes a positive number of seconds") }
        if Logger.Level(rawValue: logLevel) == nil { throw ValidationError("unknown --log-level \(logLevel)") }
        if backend == .pkcs11 && (pkcs11Module == nil || pkcs11Token == nil) {
            throw ValidationError("--backend pkcs11 needs --pkcs11-module and --pkcs11-token")
        }
        if backend != .pkcs11 && (pkcs11Module != nil || pkcs11Token != nil || pkcs11PinFile != nil) {
            throw ValidationError("--pkcs11-… options need --backend pkcs11")
        }
        if backend != .tpm && tcti != nil { throw ValidationError("--tcti needs --backend tpm") }
        if tpmProtectLockout && backend != .tpm && backend != .swtpm {
            throw ValidationError("--tpm-protect-lockout needs --backend tpm")
        }
        if backend != .hostKey && hostKey != nil { throw ValidationError("--host-key needs --backend host-key") }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .notice
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        if level > .debug { setenv("TSS2_LOG", "all+NONE", 1) }
        let logger = Logger(label: "keyseald")
        for failure in Hardening.apply() { logger.warning("hardening incomplete: \(failure)") }

        let environment = ProcessInfo.processInfo.environment
        let deviceBackend: DaemonOptions.Backend
        switch backend {
        case .tpm: deviceBackend = .tpm(tcti: tcti ?? environment["KEYSEAL_TCTI"] ?? "device:/dev/tpmrm0")
        case .swtpm: deviceBackend = .swtpm
        case .pkcs11:
            deviceBackend = .pkcs11(
                module: pkcs11Module ?? "", token: pkcs11Token ?? "", pinFile: pkcs11PinFile.map(Self.url))
        case .hostKey: deviceBackend = .hostKey(file: hostKey.map(Self.url))
        }
        let options = DaemonOptions(
            storeDirectory: Self.url(store),
            socket: SocketConfiguration(
                path: socket ?? KeychainStore.defaultSocketPath, group: socketGroup),
            backend: deviceBackend,
            autoLock: noAutoLock ? .never : autoLock.map { .seconds($0) } ?? .stored,
            policyFile: policy.map(Self.url))
        do {
            let daemon = try KeysealDaemon(options: options, logger: logger)
            if tpmProtectLockout {
                do {
                    let secret = try daemon.protectHardwareLockout()
                    let hex = secret.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
                    print("TPM lockout authorization (shown once; keep it offline): \(hex)")
                } catch let error as KeychainError where error.status == KeychainStatus.param {
                    logger.notice("lockout authorization not changed: \(error.message)")
                }
            }
            try await daemon.run()
        } catch let error as KeychainError {
            Self.fail(error.description)
        } catch {
            Self.fail("\(error)")
        }
    }

    static func url(_ path: String) -> URL { URL(fileURLWithPath: path) }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("keyseald: \(message)\n".utf8))
        Foundation.exit(1)
    }
}
