import ArgumentParser
import CKeysealHeapWipe
import FoundationEssentials
import Glibc
import Keyseal
import KeysealServer
import Logging
import Synchronization

/// keyseald: wiring and argument parsing only (docs/COMMAND-LINE.md, "keyseald"); the daemon is KeysealServer.
@main
struct Keyseald: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keyseald",
        abstract: "The Keyseal daemon: serves one keychain store on a Unix socket.",
        discussion: """
            The system service keyseald.service runs it as the keyseal user with --config \
            /etc/keyseal/keyseald.conf (every option, commented), the access policy /etc/keyseal/policy, the store \
            /var/lib/keyseal and the socket /run/keyseal/keyseal.sock (group keyseal). The user unit \
            keyseald.service (systemctl --user enable --now keyseald) keeps a user's store in ~/.local/state/keyseal \
            and serves $XDG_RUNTIME_DIR/keyseal/keyseal.sock. A missing store is created and provisioned with no \
            passcode. SIGTERM closes the store cleanly and exits 0. Removing the package never deletes a store. The \
            full guide is /usr/share/doc/keyseal/OPERATIONS.md.gz.
            """,
        version: KeysealVersion.description
    )

    enum BackendName: String, ExpressibleByArgument, CaseIterable {
        case tpm, swtpm, pkcs11
        case hostKey = "host-key"
    }

    @Option(name: .customLong("store"), help: "The store directory (created and provisioned if missing).")
    var store: String?

    @Option(
        help:
            "The socket (default: $KEYSEAL_SOCKET, else $XDG_RUNTIME_DIR/keyseal/keyseal.sock, else /run/keyseal/keyseal.sock)."
    )
    var socket: String?

    @Option(help: "Where the device key lives: tpm (default), swtpm (development), pkcs11 or host-key.")
    var backend: BackendName?

    @Option(help: "The TPM's TCTI (default: $KEYSEAL_TCTI, else device:/dev/tpmrm0).")
    var tcti: String?

    @Flag(
        help:
            "Set a random TPM lockout authorization and show it once: on the terminal, or in the --tpm-lockout-file file (keep it offline)."
    )
    var tpmProtectLockout = false

    @Option(
        name: .customLong("tpm-lockout-file"),
        help:
            "With --tpm-protect-lockout: write the value to this new file (0600) instead of the terminal; needed when stdout is not a terminal."
    )
    var tpmLockoutFile: String?

    @Option(
        name: .customLong("tpm-pcrs"),
        help:
            "When the store is created: bind its device and passcode objects to these PCRs' current values (SHA-256 bank), e.g. 7 or 7,14; default none."
    )
    var tpmPCRs: String?

    @Option(
        name: .customLong("tpm-pcr-public-key"),
        help: ArgumentHelp(
            "With --tpm-pcrs, when the store is created: bind its device and passcode objects to PCR policies signed by this key (PEM public key, RSA 2048 or P-256) instead of the PCRs' current values; refused unless a signed policy matches them now.",
            valueName: "file"
        )
    )
    var tpmPCRPublicKey: String?

    @Option(
        name: .customLong("tpm-pcr-signatures"),
        help: ArgumentHelp(
            "Where signed PCR policies (JSON, systemd's tpm2-pcr-signature.json layout) are read at each open; default /etc/keyseal/pcr-signatures. The store's own pcr-signatures directory is read after it.",
            valueName: "dir"
        )
    )
    var tpmPCRSignatures: String?

    @Option(
        name: .customLong("checkpoint-interval"),
        help:
            "TPM stores: seconds between checkpoints of the item ledger on the anti-rollback counter (default 900; 0: every item write)."
    )
    var checkpointInterval: Int?

    @Option(name: .customLong("pkcs11-module"), help: "The PKCS#11 module: a path or a p11-kit module name.")
    var pkcs11Module: String?

    @Option(name: .customLong("pkcs11-token"), help: "The PKCS#11 token label.")
    var pkcs11Token: String?

    @Option(name: .customLong("pkcs11-pin-file"), help: "A file holding the token PIN (readable only by this user).")
    var pkcs11PinFile: String?

    @Option(name: .customLong("host-key"), help: "The host key file, outside the store directory.")
    var hostKey: String?

    @Option(
        name: .customLong("auto-lock"),
        help: "Idle seconds before locking (default 300); wins over the stored setting."
    )
    var autoLock: Int?

    @Flag(name: .customLong("no-auto-lock"), help: "Never lock when idle.")
    var noAutoLock = false

    @Option(help: "The access policy file (docs/OPERATIONS.md).")
    var policy: String?

    @Option(name: .customLong("socket-group"), help: "Make the socket 0660 and its directory 0750 with this group.")
    var socketGroup: String?

    @Option(
        name: .customLong("frame-timeout"),
        help: "Seconds a connection may hold an incomplete request frame before it is closed (default 10)."
    )
    var frameTimeout: Int?

    @Option(
        name: .customLong("max-unlocked"),
        help: "Lock this many seconds after an unlock whatever the activity (default: never)."
    )
    var maxUnlocked: Int?

    @Option(
        name: .customLong("max-connections"),
        help: "Open connections per uid (default \(DaemonLimits.defaultConnectionsPerUID))."
    )
    var maxConnections: Int?

    @Option(
        name: .customLong("max-pending-bytes"),
        help: "Bytes of requests read and not yet decoded per uid (default 16M; suffixes K, M, G)."
    )
    var maxPendingBytes: String?

    @Option(
        name: .customLong("quota-items"),
        help: "Items a non-administrator may keep in one access group (default \(DaemonLimits.defaultItemsPerGroup))."
    )
    var quotaItems: Int?

    @Option(
        name: .customLong("quota-bytes"),
        help: "Stored bytes a non-administrator may keep in one access group (default 64M; suffixes K, M, G)."
    )
    var quotaBytes: String?

    @Option(
        name: .customLong("quota-hardware-keys"),
        help:
            "Keys in the TPM or token a non-administrator may keep in its access groups together (default \(DaemonLimits.defaultHardwareKeysPerUID))."
    )
    var quotaHardwareKeys: Int?

    @Option(
        name: .customLong("idle-timeout"),
        help: "Seconds a connection without a subscription may go without a request (default 60; 0: never closed)."
    )
    var idleTimeout: Int?

    @Option(
        name: .customLong("max-response"),
        help: "Stored bytes one lookup may return (default 64M; suffixes K, M, G)."
    )
    var maxResponse: String?

    @Option(
        name: .customLong("response-memory-per-uid"),
        help: "Bytes of lookup results one uid's connections may hold, gathered and not yet written (default 64M)."
    )
    var responseMemoryPerUID: String?

    @Option(
        name: .customLong("response-memory"),
        help: "Bytes of lookup results all connections may hold, gathered and not yet written (default 160M)."
    )
    var responseMemory: String?

    @Option(
        help:
            "A configuration file: `key = value` lines with the long option names as keys (docs/OPERATIONS.md); options given here win."
    )
    var config: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice (default), warning, error or critical.")
    var logLevel: String?

    /// The options after the configuration file filled in what the command line left out.
    struct Settings {
        var store: String
        var socket: String?
        var backend: BackendName
        var tcti: String?
        var pkcs11Module: String?
        var pkcs11Token: String?
        var pkcs11PinFile: String?
        var hostKey: String?
        var autoLock: Int?
        var noAutoLock: Bool
        var policy: String?
        var socketGroup: String?
        var frameTimeout: Int
        var maxUnlocked: Int?
        var limits: DaemonLimits
        var logLevel: Logger.Level
    }

    /// A byte count: a whole number, optionally with K, M or G (powers of 1024).
    static func byteCount(_ text: String, name: String) throws -> Int {
        var digits = Substring(text)
        var scale = 1
        switch text.last {
        case "K", "k": scale = 1 << 10
        case "M", "m": scale = 1 << 20
        case "G", "g": scale = 1 << 30
        default: break
        }
        if scale != 1 { digits = digits.dropLast() }
        guard let value = Int(digits), value > 0, value <= Int.max / scale else {
            throw ValidationError("\(name) takes a positive number of bytes (K, M or G allowed), not \(text)")
        }
        return value * scale
    }

    /// Merges the command line over `file`, then checks the combination.
    func settings(over file: DaemonConfigFile) throws -> Settings {
        func integer(_ key: String, _ flag: Int?) throws -> Int? {
            if let flag { return flag }
            guard let text = file[key] else { return nil }
            guard let value = Int(text) else {
                throw ValidationError("\(key) in \(config ?? "") is not a whole number: \(text)")
            }
            return value
        }
        guard let store = store ?? file["store"] else {
            throw ValidationError("--store is required (on the command line or as `store` in the configuration file)")
        }
        var backend = self.backend ?? .tpm
        if self.backend == nil, let name = file["backend"] {
            guard let parsed = BackendName(rawValue: name) else {
                throw ValidationError("unknown backend \(name) in \(config ?? ""): use tpm, swtpm, pkcs11 or host-key")
            }
            backend = parsed
        }
        let levelName = logLevel ?? file["log-level"] ?? "notice"
        guard let level = Logger.Level(rawValue: levelName) else {
            throw ValidationError("unknown log level \(levelName)")
        }
        // The command line's --auto-lock or --no-auto-lock replaces both keys of the file.
        if self.autoLock != nil && self.noAutoLock {
            throw ValidationError("--auto-lock and --no-auto-lock exclude each other")
        }
        var autoLock = self.autoLock
        var noAutoLock = self.noAutoLock
        if autoLock == nil && !noAutoLock {
            autoLock = try integer("auto-lock", nil)
            noAutoLock = file.flags["no-auto-lock"] ?? false
        }
        func bytes(_ key: String, _ flag: String?, _ fallback: Int) throws -> Int {
            guard let text = flag ?? file[key] else { return fallback }
            return try Self.byteCount(text, name: "--\(key)")
        }
        func positive(_ key: String, _ flag: Int?, _ fallback: Int) throws -> Int {
            guard let value = try integer(key, flag) else { return fallback }
            guard value > 0 else { throw ValidationError("--\(key) takes a positive number") }
            return value
        }
        let idle = try integer("idle-timeout", idleTimeout) ?? Int(DaemonLimits.defaultIdleTimeout.components.seconds)
        guard idle >= 0 else { throw ValidationError("--idle-timeout takes a number of seconds (0: never)") }
        let limits = DaemonLimits(
            connectionsPerUID: try positive("max-connections", maxConnections, DaemonLimits.defaultConnectionsPerUID),
            pendingBytesPerUID: try bytes("max-pending-bytes", maxPendingBytes, DaemonLimits.defaultPendingBytesPerUID),
            itemsPerGroup: try positive("quota-items", quotaItems, DaemonLimits.defaultItemsPerGroup),
            bytesPerGroup: try bytes("quota-bytes", quotaBytes, DaemonLimits.defaultBytesPerGroup),
            idleTimeout: idle == 0 ? nil : .seconds(idle),
            responseBytes: try bytes("max-response", maxResponse, DaemonLimits.defaultResponseBytes),
            hardwareKeysPerUID: try positive(
                "quota-hardware-keys",
                quotaHardwareKeys,
                DaemonLimits.defaultHardwareKeysPerUID
            ),
            responseMemoryPerUID: try bytes(
                "response-memory-per-uid",
                responseMemoryPerUID,
                DaemonLimits.defaultResponseMemoryPerUID
            ),
            responseMemory: try bytes("response-memory", responseMemory, DaemonLimits.defaultResponseMemory)
        )
        let maxUnlocked = try integer("max-unlocked", maxUnlocked)
        if let maxUnlocked, maxUnlocked <= 0 {
            throw ValidationError("--max-unlocked takes a positive number of seconds")
        }
        let settings = Settings(
            store: store,
            socket: socket ?? file["socket"],
            backend: backend,
            tcti: tcti ?? file["tcti"],
            pkcs11Module: pkcs11Module ?? file["pkcs11-module"],
            pkcs11Token: pkcs11Token ?? file["pkcs11-token"],
            pkcs11PinFile: pkcs11PinFile ?? file["pkcs11-pin-file"],
            hostKey: hostKey ?? file["host-key"],
            autoLock: autoLock,
            noAutoLock: noAutoLock,
            policy: policy ?? file["policy"],
            socketGroup: socketGroup ?? file["socket-group"],
            frameTimeout: try integer("frame-timeout", frameTimeout) ?? 10,
            maxUnlocked: maxUnlocked,
            limits: limits,
            logLevel: level
        )
        try settings.validate(tpmProtectLockout: tpmProtectLockout)
        if tpmLockoutFile != nil && !tpmProtectLockout {
            throw ValidationError("--tpm-lockout-file needs --tpm-protect-lockout")
        }
        return settings
    }

    func run() async throws {
        var file = DaemonConfigFile()
        if let config {
            do {
                file = try DaemonConfigFile.load(file: Self.url(config))
            } catch let error as KeychainError {
                Self.fail(error.message)
            }
        }
        let settings = try self.settings(over: file)
        let level = settings.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        if level > .debug { setenv("TSS2_LOG", "all+NONE", 1) }
        let logger = Logger(label: "keyseald")
        for failure in Hardening.apply() { logger.warning("hardening incomplete: \(failure)") }
        if tpmProtectLockout && tpmLockoutFile == nil && isatty(STDOUT_FILENO) != 1 {
            // A pipe or the journal would keep the value, or lose it in a buffer: refuse before anything changes.
            Self.fail(
                "--tpm-protect-lockout shows the value only on a terminal; stdout is not one, so give "
                    + "--tpm-lockout-file FILE (the TPM was not changed)"
            )
        }

        let environment = ProcessInfo.processInfo.environment
        let deviceBackend: DaemonOptions.Backend
        switch settings.backend {
        case .tpm: deviceBackend = .tpm(tcti: settings.tcti ?? environment["KEYSEAL_TCTI"] ?? "device:/dev/tpmrm0")
        case .swtpm: deviceBackend = .swtpm
        case .pkcs11:
            deviceBackend = .pkcs11(
                module: settings.pkcs11Module ?? "",
                token: settings.pkcs11Token ?? "",
                pinFile: settings.pkcs11PinFile.map(Self.url)
            )
        case .hostKey: deviceBackend = .hostKey(file: settings.hostKey.map(Self.url))
        }
        var options = DaemonOptions(
            storeDirectory: Self.url(settings.store),
            socket: SocketConfiguration(
                path: settings.socket ?? KeychainStore.defaultSocketPath,
                group: settings.socketGroup
            ),
            backend: deviceBackend,
            autoLock: settings.noAutoLock ? .never : settings.autoLock.map { .seconds($0) } ?? .stored,
            policyFile: settings.policy.map(Self.url),
            frameTimeout: .seconds(settings.frameTimeout),
            maxUnlocked: settings.maxUnlocked,
            limits: settings.limits
        )
        if let list = tpmPCRs ?? file["tpm-pcrs"] {
            guard settings.backend == .tpm || settings.backend == .swtpm else {
                throw ValidationError("--tpm-pcrs needs --backend tpm")
            }
            options.tpmPCRs = try Self.pcrList(list)
        }
        if let key = tpmPCRPublicKey ?? file["tpm-pcr-public-key"] {
            guard !options.tpmPCRs.isEmpty else {
                throw ValidationError("--tpm-pcr-public-key needs --tpm-pcrs with the PCRs the signed policies cover")
            }
            options.tpmPCRPublicKeyFile = Self.url(key)
        }
        if let directory = tpmPCRSignatures ?? file["tpm-pcr-signatures"] {
            guard settings.backend == .tpm || settings.backend == .swtpm else {
                throw ValidationError("--tpm-pcr-signatures needs --backend tpm")
            }
            options.tpmPCRSignatureDirectory = Self.url(directory)
        }
        if let text = checkpointInterval.map(String.init) ?? file["checkpoint-interval"] {
            guard let seconds = Int(text), seconds >= 0 else {
                throw ValidationError("--checkpoint-interval takes a number of seconds (0: every item write)")
            }
            options.checkpointInterval = TimeInterval(seconds)
        }
        #if DEBUG
        // Test daemons: the smallest Argon2id cost, so that passcode calls cost what they cost in the engine's
        // tests. Release builds never read this variable.
        if environment["KEYSEAL_TESTING_ARGON2"] == "minimal" {
            options.argon2 = Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)
            logger.warning("debug build: KEYSEAL_TESTING_ARGON2=minimal lowers the Argon2id cost of new passcodes")
        }
        // Test daemons: a tenth of the product's delays after failed passcode tries, so that a test can see a delay
        // run out.
        if environment["KEYSEAL_TESTING_PASSCODE_DELAYS"] == "tenth" {
            options.passcodePolicy = PasscodePolicy { PasscodePolicy.standard.delay($0) / 10 }
            logger.warning("debug build: KEYSEAL_TESTING_PASSCODE_DELAYS=tenth shortens the passcode delays")
        }
        // Test daemons: the time within which a key operation counts as fast (KeychainService's placement of key
        // operations), so that a test can make a delayed one fast or slow at will.
        if let text = environment["KEYSEAL_TESTING_KEY_BOUND_MS"], let milliseconds = Int(text), milliseconds > 0 {
            options.keyOperationBound = .milliseconds(milliseconds)
            logger.warning(
                "debug build: KEYSEAL_TESTING_KEY_BOUND_MS=\(milliseconds) sets the fast key operation bound"
            )
        }
        #endif
        // tpm2-abrmd's TCTI (also under tpm2-pkcs11) reports D-Bus failures through GLib, on stderr unless GLib's
        // messages are routed here; tpm2-pkcs11 logs on stderr unless told otherwise.
        var glibCaptured = false
        switch deviceBackend {
        case .tpm(let tcti) where tcti.hasPrefix("tabrmd"): glibCaptured = GLibMessages.capture(into: logger)
        case .pkcs11(let module, _, _) where module.contains("tpm2_pkcs11") || module.contains("tpm2-pkcs11"):
            if level > .debug { setenv("TPM2_PKCS11_LOG_LEVEL", "0", 0) }
            glibCaptured = GLibMessages.capture(into: logger)
        default: break
        }
        // Freed memory is wiped before the heap reuses it (CKeysealHeapWipe): say so once, or loudly that it is not.
        if keyseal_heap_wipe_active() == 1 {
            logger.info("freed memory is wiped")
        } else {
            logger.error("freed memory is not wiped: the C library's free was not replaced in this process")
        }
        do {
            let daemon = try KeysealDaemon(options: options, logger: logger)
            // The store's open (its keybag, row hints and ledger check) runs on glibc's default thresholds, which map
            // and unmap its large temporary blocks, and what it freed on the heap is returned before serving.
            if !Memory.tuneHeap() { logger.warning("the heap thresholds were not set (mallopt)") }
            Memory.returnFreedPages()
            if tpmProtectLockout {
                do {
                    if let tpmLockoutFile {
                        try daemon.protectHardwareLockout { try LockoutValue.write($0, toNewFile: tpmLockoutFile) }
                        logger.notice(
                            "TPM lockout authorization set; its value is in \(tpmLockoutFile) (keep it offline)"
                        )
                    } else {
                        try daemon.protectHardwareLockout { try LockoutValue.show($0) }
                    }
                } catch let error as KeychainError where error.status == KeychainStatus.param {
                    logger.notice("lockout authorization not changed: \(error.message)")
                }
            }
            try await daemon.run()
        } catch let error as KeychainError {
            let hint =
                error.status == KeychainStatus.notAvailable
                ? StackHint.forFailure(of: deviceBackend, glibCaptured: glibCaptured) : nil
            Self.fail(error.description + (hint.map { "; \($0)" } ?? ""))
        } catch {
            Self.fail("\(error)")
        }
    }

    static func url(_ path: String) -> URL { URL(fileURLWithPath: path) }

    /// `--tpm-pcrs`: PCR numbers 0–23, comma-separated, or `none`.
    static func pcrList(_ text: String) throws -> [Int] {
        if text == "none" { return [] }
        let numbers = text.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
        guard !numbers.isEmpty, numbers.allSatisfy({ $0 != nil && (0..<24).contains($0!) }) else {
            throw ValidationError("--tpm-pcrs takes PCR numbers 0 to 23, comma-separated (e.g. 7 or 7,14), or none")
        }
        return Array(Set(numbers.map { $0! })).sorted()
    }

    static func fail(_ message: String) -> Never {
        let line = Array("keyseald: \(message)\n".utf8)
        _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        Glibc.exit(1)
    }
}

extension Keyseald.Settings {
    func validate(tpmProtectLockout: Bool) throws {
        if autoLock != nil && noAutoLock { throw ValidationError("--auto-lock and --no-auto-lock exclude each other") }
        if let autoLock, autoLock <= 0 { throw ValidationError("--auto-lock takes a positive number of seconds") }
        if frameTimeout <= 0 { throw ValidationError("--frame-timeout takes a positive number of seconds") }
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
}

/// Where `--tpm-protect-lockout` puts the new value: exactly the characters `tpm2_dictionarylockout -c -p VALUE`
/// takes (the authorization's own bytes, 32 hex digits), written with one `write(2)` and synced before the TPM is
/// changed, never through a buffered stream or the log.
enum LockoutValue {
    /// On the terminal that is stdout.
    static func show(_ value: SecretBytes) throws {
        try writeLine(
            prefix:
                "TPM lockout authorization (shown once; keep it offline; reset with tpm2_dictionarylockout -c -p VALUE): ",
            value,
            to: STDOUT_FILENO,
            what: "the terminal"
        )
    }

    /// Into a new file, 0600; an existing file is never overwritten.
    static func write(_ value: SecretBytes, toNewFile path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            throw KeychainError(
                KeychainStatus.io,
                "cannot create \(path) for the lockout authorization: \(reason) (the TPM was not changed)"
            )
        }
        defer { close(fd) }
        do {
            try writeLine(prefix: "", value, to: fd, what: path)
            guard fsync(fd) == 0 else {
                throw KeychainError(KeychainStatus.io, "cannot sync \(path): \(String(cString: strerror(errno)))")
            }
            let directory = open(
                URL(fileURLWithPath: path).deletingLastPathComponent().path,
                O_RDONLY | O_DIRECTORY | O_CLOEXEC
            )
            if directory >= 0 {
                _ = fsync(directory)
                close(directory)
            }
        } catch {
            unlink(path)
            throw error
        }
    }

    private static func writeLine(prefix: String, _ value: SecretBytes, to fd: Int32, what: String) throws {
        var line = Array(prefix.utf8)
        line.reserveCapacity(line.count + value.count + 1)
        value.withUnsafeBytes { line.append(contentsOf: $0) }
        line.append(UInt8(ascii: "\n"))
        defer { for index in line.indices { line[index] = 0 } }
        var written = 0
        while written < line.count {
            let result = line.withUnsafeBytes { Posix.write(fd, $0.baseAddress! + written, $0.count - written) }
            guard result > 0 else {
                throw KeychainError(
                    KeychainStatus.io,
                    "cannot write the lockout authorization to \(what) (the TPM was not changed)"
                )
            }
            written += result
        }
    }
}

/// GLib's log messages in keyseald.
///
/// tpm2-tss's tabrmd TCTI runs on GLib and reports D-Bus failures with `g_warning`/`g_critical`, which `TSS2_LOG`
/// does not silence: a user whose bus policy refuses the call would see a multi-line GLib warning before keyseald's
/// own error. keyseald therefore installs a GLib log writer (GLib is loaded anyway when the TCTI is tabrmd) that
/// hands each message to keyseald's logger at debug level, and keeps the last warning so that a start-up failure
/// can say in one line what the bus answered.
///
/// GLib is reached through `dlopen` (no build-time dependency on its headers): `g_log_set_writer_func` and the
/// `GLogField` layout (`key`, `value`, `length`: two pointers and an `ssize_t`) are part of GLib 2.50+'s stable ABI.
enum GLibMessages {
    private static let state = Mutex<(logger: Logger?, lastWarning: String?)>((nil, nil))

    /// Routes every GLib message of this process to `logger`; call before the first TCTI is loaded. Returns false
    /// (and changes nothing) when GLib cannot be loaded, in which case the tabrmd TCTI cannot be loaded either.
    @discardableResult
    static func capture(into logger: Logger) -> Bool {
        guard let glib = dlopen("libglib-2.0.so.0", RTLD_NOW | RTLD_GLOBAL),
            let symbol = dlsym(glib, "g_log_set_writer_func")
        else { return false }
        state.withLock { $0.logger = logger }
        typealias Writer = @convention(c) (Int32, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?) -> Int32
        typealias SetWriter = @convention(c) (Writer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void
        let setWriter = unsafeBitCast(symbol, to: SetWriter.self)
        setWriter(
            { level, fields, count, _ in
                GLibMessages.receive(level: level, fields: fields, count: count)
                return 1  // G_LOG_WRITER_HANDLED
            },
            nil,
            nil
        )
        return true
    }

    /// The last GLib warning or critical message, on one line.
    static var lastWarning: String? { state.withLock { $0.lastWarning } }

    private static func receive(level: Int32, fields: UnsafeRawPointer?, count: Int) {
        guard let fields else { return }
        var message = ""
        var domain = "glib"
        let stride = 2 * MemoryLayout<UnsafeRawPointer>.stride + MemoryLayout<Int>.stride
        for index in 0..<count {
            let field = fields + index * stride
            guard let key = field.load(as: UnsafePointer<CChar>?.self),
                let value = field.load(
                    fromByteOffset: MemoryLayout<UnsafeRawPointer>.stride,
                    as: UnsafeRawPointer?.self
                )
            else { continue }
            let length = field.load(fromByteOffset: 2 * MemoryLayout<UnsafeRawPointer>.stride, as: Int.self)
            let text =
                length < 0
                ? String(cString: value.assumingMemoryBound(to: CChar.self))
                : String(decoding: UnsafeRawBufferPointer(start: value, count: length), as: UTF8.self)
            switch String(cString: key) {
            case "MESSAGE": message = text
            case "GLIB_DOMAIN": domain = text
            default: break
            }
        }
        let line = message.split(whereSeparator: \.isNewline).joined(separator: " ")
        // G_LOG_LEVEL_ERROR 1 << 2, CRITICAL 1 << 3, WARNING 1 << 4.
        let isWarning = level & (1 << 2 | 1 << 3 | 1 << 4) != 0
        let logger = state.withLock { state in
            if isWarning { state.lastWarning = line }
            return state.logger
        }
        logger?.debug("GLib: \(line)", metadata: ["glib.domain": "\(domain)"])
    }

    /// What a start-up failure adds when the bus refused the call: one sentence, or nil.
    static var busRefusal: String? {
        guard let warning = lastWarning else { return nil }
        if warning.contains("AccessDenied") {
            return "the D-Bus policy refused this user's call to tpm2-abrmd (org.freedesktop.DBus.Error.AccessDenied): "
                + "run keyseald as a user tpm2-abrmd's policy allows (Debian's allows root and group tss; add the user "
                + "to group tss)"
        }
        if warning.contains("ServiceUnknown") || warning.contains("NameHasNoOwner") {
            return "tpm2-abrmd is not running on that bus (org.freedesktop.DBus.Error.ServiceUnknown): start it "
                + "(systemctl start tpm2-abrmd)"
        }
        if warning.contains("Could not connect") {
            return "no D-Bus bus answers (\(warning)): the system bus is /run/dbus/system_bus_socket (dbus running?); "
                + "a session bus is found through DBUS_SESSION_BUS_ADDRESS"
        }
        return "tpm2-abrmd's D-Bus call failed: \(warning)"
    }
}

/// What keyseald adds to a start-up failure with errSecNotAvailable, per stack: the cause the TPM or PKCS#11 error
/// alone does not name (a device node missing or not accessible to this user, a bus that refused the call).
enum StackHint {
    static func forFailure(of backend: DaemonOptions.Backend, glibCaptured: Bool) -> String? {
        switch backend {
        case .tpm(let tcti) where tcti.hasPrefix("device"):
            let configured = tcti.split(separator: ":", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
            let path = configured.isEmpty ? "/dev/tpm0" : configured
            if access(path, F_OK) != 0 {
                return "\(path) does not exist: the kernel has no TPM driver for this machine (no TPM, or it is "
                    + "disabled in the firmware); /dev/tpmrm0 is the kernel's resource manager (Linux 4.12 and later)"
            }
            if access(path, R_OK | W_OK) != 0 {
                return "\(path) is not readable and writable by this user (it is tss:tss 0660): add the user to "
                    + "group tss"
            }
            return nil
        case .tpm(let tcti) where tcti.hasPrefix("tabrmd"):
            return glibCaptured ? GLibMessages.busRefusal : nil
        case .pkcs11 where glibCaptured:
            guard let warning = GLibMessages.lastWarning else { return nil }
            return "tpm2-pkcs11 could not reach the TPM (\(warning)): set TPM2_PKCS11_TCTI (device:/dev/tpmrm0, or "
                + "tabrmd:bus_type=system with tpm2-abrmd running) for a user allowed to use it"
        default:
            return nil
        }
    }
}
