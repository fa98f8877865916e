import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A private software TPM (swtpm 0.7+) on a Unix socket in its own temporary directory, with its own
/// dictionary-attack parameters, for hardware tests that run in parallel.
///
/// swtpm serves one client connection at a time, but tpm2-tss's swtpm TCTI connects for each command, so the
/// tpm2-tools helpers here work while a `TPMDeviceKey` is open on the same TPM. There is no resource manager:
/// every client sees (and can exhaust) the TPM's 3 transient object slots.
///
/// A missing `swtpm` or tpm2-tools is an error (never a skip), with the Debian package to install.
public final class SwtpmFixture: @unchecked Sendable {
    public let directory: TemporaryDirectory
    /// Failures before lockout (TPM2_PT_MAX_AUTH_FAIL), seconds per forgotten failure (TPM2_PT_LOCKOUT_INTERVAL),
    /// seconds the lockout hierarchy is blocked after a wrong lockout authorization (TPM2_PT_LOCKOUT_RECOVERY).
    public let maxTries: Int
    public let recoveryTime: Int
    public let lockoutRecovery: Int

    private let swtpm: String
    private let lock = NSLock()
    private var process: Process?

    /// The folder holding the TPM's state (its seeds, NV and counters): the same folder is the same TPM.
    public var stateDirectory: String { directory.path }
    public var socketPath: String { directory.appending("swtpm.sock").path }
    /// The TCTI configuration for tpm2-tss and tpm2-tools. The control socket is `<path>.ctrl`.
    public var tcti: String { "swtpm:path=\(socketPath)" }

    /// The EK CA's certificates (PEM: swtpm_localca's issuer, then its root) when the TPM was made with an EK
    /// certificate; nil otherwise.
    public private(set) var endorsementCACertificates: String?

    /// Starts a fresh TPM and sets its dictionary-attack parameters (its lockout authorization is empty).
    ///
    /// - Parameter endorsementCA: when given, the TPM is manufactured first with `swtpm_setup --create-ek-cert`: an RSA
    ///   EK (persisted at 0x81010001) whose certificate, signed by `swtpm_localca`'s CA kept in that folder (created on
    ///   first use; share it between fixtures for TPMs of one maker), is in NV at 0x01C00002.
    public init(
        maxTries: Int = 5,
        recoveryTime: Int = 60,
        lockoutRecovery: Int = 2,
        endorsementCA: TemporaryDirectory? = nil
    ) throws {
        self.swtpm = try requireTool("swtpm", package: "swtpm")
        for tool in ["tpm2_dictionarylockout", "tpm2_getcap", "tpm2_flushcontext"] {
            _ = try requireTool(tool, package: "tpm2-tools")
        }
        self.maxTries = maxTries
        self.recoveryTime = recoveryTime
        self.lockoutRecovery = lockoutRecovery
        self.directory = try TemporaryDirectory(prefix: "keyseal-swtpm")
        guard directory.appending("swtpm.sock.ctrl").path.utf8.count < 108 else {
            directory.remove()
            throw FixtureError(
                "the swtpm socket path under \(directory.path) is too long for a Unix socket; set TMPDIR=/tmp"
            )
        }
        do {
            if let endorsementCA { try manufacture(certificateAuthority: endorsementCA) }
            try start()
            try tool(
                "tpm2_dictionarylockout",
                ["-s", "-n", "\(maxTries)", "-t", "\(recoveryTime)", "-l", "\(lockoutRecovery)"]
            )
            try tool("tpm2_dictionarylockout", ["-c"])
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Kills swtpm (if running) and starts it again on the same state: the same TPM after a power loss. Transient
    /// objects and sessions are gone; seeds, NV and the lockout counter remain — and since the shutdown was not
    /// orderly, the TPM counts one more dictionary-attack failure at startup (measured: swtpm 0.7.1).
    public func restart() throws {
        terminate()
        try start()
    }

    /// Kills swtpm and keeps its state: the TPM is unreachable until ``restart()``.
    public func kill() {
        terminate()
    }

    /// Kills swtpm and removes its state. Idempotent.
    public func stop() {
        terminate()
        directory.remove()
    }

    /// `swtpm_setup --tpm2 --create-ek-cert` on the state folder, with a configuration of its own pointing
    /// `swtpm_localca` at `certificateAuthority`.
    private func manufacture(certificateAuthority: TemporaryDirectory) throws {
        let setup = try requireTool("swtpm_setup", package: "swtpm-tools")
        let localCA = try requireTool("swtpm_localca", package: "swtpm-tools")
        let ca = certificateAuthority.path
        let localCAConfig = directory.appending("swtpm-localca.conf").path
        try Data(
            """
            statedir = \(ca)
            signingkey = \(ca)/signkey.pem
            issuercert = \(ca)/issuercert.pem
            certserial = \(ca)/certserial

            """.utf8
        ).write(to: URL(fileURLWithPath: localCAConfig))
        let options = directory.appending("swtpm-localca.options").path
        try Data("--tpm-manufacturer id:00001014\n--tpm-model swtpm\n--tpm-version id:20191023\n".utf8)
            .write(to: URL(fileURLWithPath: options))
        let setupConfig = directory.appending("swtpm_setup.conf").path
        try Data(
            """
            create_certs_tool = \(localCA)
            create_certs_tool_config = \(localCAConfig)
            create_certs_tool_options = \(options)
            active_pcr_banks = sha256

            """.utf8
        ).write(to: URL(fileURLWithPath: setupConfig))
        let result = try runProcess(
            setup,
            [
                "--tpm2", "--tpmstate", stateDirectory, "--create-ek-cert", "--config", setupConfig, "--overwrite",
                "--logfile", directory.appending("swtpm_setup.log").path,
            ],
            environment: ["TSS2_LOG": "all+NONE"]
        )
        guard result.status == 0 else {
            let log = (try? String(contentsOfFile: directory.appending("swtpm_setup.log").path, encoding: .utf8)) ?? ""
            throw FixtureError("swtpm_setup --create-ek-cert failed (\(result.status)): \(result.stderrText) \(log)")
        }
        let issuer = try String(contentsOfFile: "\(ca)/issuercert.pem", encoding: .utf8)
        let root = try String(contentsOfFile: "\(ca)/swtpm-localca-rootca-cert.pem", encoding: .utf8)
        endorsementCACertificates = issuer + root
    }

    private func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: swtpm)
        let dir = stateDirectory
        process.arguments = [
            "socket", "--tpm2", "--tpmstate", "dir=\(dir)",
            "--server", "type=unixio,path=\(socketPath)",
            "--ctrl", "type=unixio,path=\(socketPath).ctrl",
            "--flags", "not-need-init,startup-clear",
            "--log", "file=\(dir)/swtpm.log",
        ]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try? FileManager.default.removeItem(atPath: socketPath)
        try? FileManager.default.removeItem(atPath: socketPath + ".ctrl")
        try process.run()
        lock.withLock { self.process = process }

        let deadline = Date().addingTimeInterval(10)
        while !Self.accepts(socketPath) {
            guard process.isRunning else {
                let log = (try? String(contentsOfFile: "\(dir)/swtpm.log", encoding: .utf8)) ?? ""
                throw FixtureError("swtpm exited with status \(process.terminationStatus) at start: \(log)")
            }
            guard Date() < deadline else {
                terminate()
                throw FixtureError("swtpm did not accept connections on \(socketPath) within 10 s")
            }
            usleep(2_000)
        }
    }

    private func terminate() {
        let process = lock.withLock { () -> Process? in
            defer { self.process = nil }
            return self.process
        }
        guard let process else { return }
        if process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)
        }
        process.waitForExit()
    }

    /// Whether something accepts connections on the Unix socket at `path` (connects and closes at once).
    /// Whether a Unix socket at `path` accepts a connection.
    public static func accepts(_ path: String) -> Bool {
        guard FileManager.default.fileExists(atPath: path) else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }

    // MARK: tpm2-tools

    /// Runs a tpm2-tools command against this TPM (`-T` is added). Throws when it fails unless `check` is false.
    @discardableResult
    public func tool(_ name: String, _ arguments: [String], check: Bool = true) throws -> ProcessResult {
        let path = try requireTool(name, package: "tpm2-tools")
        let result = try runProcess(path, arguments + ["-T", tcti], environment: ["TSS2_LOG": "all+NONE"])
        if check, result.status != 0 {
            throw FixtureError(
                "\(name) \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.stderrText)"
            )
        }
        return result
    }

    /// The TPM's variable properties as tpm2_getcap prints them (`TPM2_PT_LOCKOUT_COUNTER` → value, …).
    public func variableProperties() throws -> [String: UInt64] {
        let output = try tool("tpm2_getcap", ["properties-variable"]).stdoutText
        var values: [String: UInt64] = [:]
        var current: String?
        for line in output.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if !line.hasPrefix(" "), trimmed.hasSuffix(":") {
                current = String(trimmed.dropLast())
            } else if trimmed.hasPrefix("raw:"), let name = current {
                let hex = trimmed.dropFirst(4).trimmingCharacters(in: .whitespaces)
                values[name] = UInt64(hex.replacingOccurrences(of: "0x", with: ""), radix: 16)
            } else if let colon = trimmed.firstIndex(of: ":"), !line.hasPrefix(" ") {
                let name = String(trimmed[..<colon])
                let value = trimmed[trimmed.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                if let number = value.hasPrefix("0x")
                    ? UInt64(value.dropFirst(2), radix: 16) : UInt64(value)
                {
                    values[name] = number
                }
            }
        }
        return values
    }

    /// TPM2_PT_LOCKOUT_COUNTER: counted authorization failures not yet forgotten.
    public func lockoutCounter() throws -> Int {
        guard let value = try variableProperties()["TPM2_PT_LOCKOUT_COUNTER"] else {
            throw FixtureError("tpm2_getcap printed no TPM2_PT_LOCKOUT_COUNTER")
        }
        return Int(value)
    }

    /// Transient objects, loaded sessions and saved sessions present in the TPM, as tpm2_getcap lists them.
    public func handlesInUse() throws -> [String] {
        var handles: [String] = []
        for capability in ["handles-transient", "handles-loaded-session", "handles-saved-session"] {
            let output = try tool("tpm2_getcap", [capability]).stdoutText
            handles += output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { $0.hasPrefix("- ") }
        }
        return handles
    }

    /// Makes `count` counted authorization failures with tpm2-tools: a dictionary-attack protected sealed object
    /// of its own, unsealed with a wrong password. Flushes every transient object afterwards.
    public func spendAuthorizationFailures(_ count: Int) throws {
        let dir = stateDirectory
        defer { _ = try? tool("tpm2_flushcontext", ["-t"], check: false) }
        try tool("tpm2_createprimary", ["-Q", "-C", "o", "-c", "\(dir)/tools-primary.ctx"])
        try tool("tpm2_flushcontext", ["-t"])
        let path = try requireTool("tpm2_create", package: "tpm2-tools")
        let created = try runProcess(
            path,
            [
                "-Q", "-C", "\(dir)/tools-primary.ctx", "-p", "right", "-i", "-", "-u", "\(dir)/tools-da.pub", "-r",
                "\(dir)/tools-da.priv", "-T", tcti,
            ],
            environment: ["TSS2_LOG": "all+NONE"],
            input: Data("fixture".utf8)
        )
        guard created.status == 0 else { throw FixtureError("tpm2_create failed: \(created.stderrText)") }
        try tool("tpm2_flushcontext", ["-t"])
        try tool(
            "tpm2_load",
            [
                "-Q", "-C", "\(dir)/tools-primary.ctx", "-u", "\(dir)/tools-da.pub", "-r", "\(dir)/tools-da.priv", "-c",
                "\(dir)/tools-da.ctx",
            ]
        )
        // Without a resource manager the tools leave what they load in the TPM's 3 slots: flush after each.
        try tool("tpm2_flushcontext", ["-t"])
        for _ in 0..<count {
            let result = try tool("tpm2_unseal", ["-c", "\(dir)/tools-da.ctx", "-p", "wrong"], check: false)
            try tool("tpm2_flushcontext", ["-t"])
            guard result.status != 0 else { throw FixtureError("tpm2_unseal with a wrong password succeeded") }
            guard result.stderrText.contains("0x98E") || result.stderrText.contains("0x921") else {
                throw FixtureError(
                    "tpm2_unseal failed otherwise than with an authorization failure: \(result.stderrText)"
                )
            }
        }
    }
}

/// What root does, with the empty owner authorization, in place of a store's anti-rollback counter: `tpm2_nvundefine`,
/// then `tpm2_nvdefine` of another index at the same handle (the outside review's attack on the counter).
public enum NVIndexReplacement: String, CaseIterable, Sendable, CustomStringConvertible {
    /// An ordinary 8-byte index, written with the value the attacker wants read.
    case ordinaryIndex
    /// A counter whose attributes differ from Keyseal's (OWNERWRITE added: the owner increments it).
    case counterOtherAttributes
    /// A counter with Keyseal's attributes and an authPolicy.
    case counterOtherPolicy

    public var description: String { rawValue }
}

extension SwtpmFixture {
    /// Undefines the NV index `index` and defines `replacement` at the same handle; an ordinary index is written
    /// with `value` (8 bytes, big-endian, as a counter reads), a counter is incremented once (a new counter starts
    /// above every value any counter of the TPM had, whatever the attacker wants).
    public func replaceNVIndex(_ index: UInt32, with replacement: NVIndexReplacement, holding value: UInt64) throws {
        let handle = "0x" + String(index, radix: 16)
        let file = directory.appending("replacement-\(replacement.rawValue)").path
        try tool("tpm2_nvundefine", [handle, "-C", "o"])
        switch replacement {
        case .ordinaryIndex:
            try tool(
                "tpm2_nvdefine",
                [handle, "-C", "o", "-s", "8", "-a", "ownerwrite|ownerread|authread|authwrite|no_da"]
            )
            let bytes = (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            try tool("tpm2_nvwrite", [handle, "-C", "o", "-i", file])
        case .counterOtherAttributes:
            try tool(
                "tpm2_nvdefine",
                [handle, "-C", "o", "-s", "8", "-a", "nt=counter|ownerwrite|ownerread|authread|authwrite|no_da"]
            )
            try tool("tpm2_nvincrement", [handle, "-C", "o"])
        case .counterOtherPolicy:
            try Data(repeating: 0x5A, count: 32).write(to: URL(fileURLWithPath: file))
            try tool(
                "tpm2_nvdefine",
                [handle, "-C", "o", "-s", "8", "-L", file, "-a", "nt=counter|ownerread|authread|authwrite|no_da"]
            )
            try tool("tpm2_nvincrement", [handle, "-C", handle])
        }
    }
}
