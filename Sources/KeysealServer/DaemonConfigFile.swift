import FoundationEssentials
import Glibc
import KeysealCore

/// keyseald's configuration file (`--config FILE`, docs/OPERATIONS.md): one `key = value` a line, the keys being
/// keyseald's long option names without the dashes; `#` starts a comment. Options given on the command line win
/// over the file. Paths must be absolute. The file must be owned by root or the daemon's user and writable by
/// nobody else, since it decides which store, key file and policy the daemon uses.
public struct DaemonConfigFile: Sendable, Equatable {
    /// Keys that take a value, as the options of the same name.
    public static let valueKeys: Set<String> = [
        "store", "socket", "backend", "tcti", "pkcs11-module", "pkcs11-token", "pkcs11-pin-file", "host-key",
        "auto-lock", "policy", "socket-group", "log-level", "frame-timeout", "max-unlocked", "max-connections",
        "max-pending-bytes", "quota-items", "quota-bytes", "idle-timeout", "max-response", "response-memory-per-uid",
        "response-memory", "checkpoint-interval", "tpm-pcrs", "tpm-pcr-public-key", "tpm-pcr-signatures",
        "quota-hardware-keys",
    ]
    /// Keys that are switches: `true` or `false` (also `yes`/`no`, `1`/`0`).
    public static let flagKeys: Set<String> = ["no-auto-lock"]
    /// Keys whose value must be an absolute path.
    static let pathKeys: Set<String> = [
        "store", "socket", "pkcs11-pin-file", "host-key", "policy", "tpm-pcr-public-key", "tpm-pcr-signatures",
    ]

    public private(set) var values: [String: String] = [:]
    public private(set) var flags: [String: Bool] = [:]

    public init() {}

    public subscript(key: String) -> String? { values[key] }

    /// Reads and parses `file`, refusing one that another user could have written.
    public static func load(file: URL, daemonUID: UInt32 = getuid()) throws -> DaemonConfigFile {
        var info = stat()
        guard stat(file.path, &info) == 0 else {
            throw KeychainError(
                KeychainStatus.param,
                "cannot read the configuration file \(file.path): \(String(cString: strerror(errno)))"
            )
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw KeychainError(KeychainStatus.param, "the configuration file \(file.path) is not a regular file")
        }
        guard info.st_uid == 0 || info.st_uid == daemonUID else {
            throw KeychainError(
                KeychainStatus.param,
                "the configuration file \(file.path) must be owned by root or uid \(daemonUID)"
            )
        }
        guard info.st_mode & 0o022 == 0 else {
            throw KeychainError(
                KeychainStatus.param,
                "the configuration file \(file.path) must not be writable by group or others"
            )
        }
        let text: String
        do {
            text = try String(contentsOf: file, encoding: .utf8)
        } catch {
            throw KeychainError(KeychainStatus.param, "cannot read the configuration file \(file.path) as UTF-8 text")
        }
        return try parse(text, source: file.path)
    }

    /// Parses configuration text; every error names `source` and the line.
    public static func parse(_ text: String, source: String = "config") throws -> DaemonConfigFile {
        var config = DaemonConfigFile()
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = (rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
                .trimmed()
            if line.isEmpty { continue }
            func fail(_ why: String) -> KeychainError {
                KeychainError(KeychainStatus.param, "\(source):\(index + 1): \(why)")
            }
            guard let equals = line.firstIndex(of: "=") else { throw fail("expected `key = value`") }
            let key = line[..<equals].trimmed()
            let value = line[line.index(after: equals)...].trimmed()
            guard !key.isEmpty else { throw fail("expected `key = value`") }
            guard config.values[key] == nil && config.flags[key] == nil else { throw fail("\(key) is given twice") }
            guard !value.isEmpty else { throw fail("\(key) has no value") }
            if flagKeys.contains(key) {
                switch value.lowercased() {
                case "true", "yes", "1": config.flags[key] = true
                case "false", "no", "0": config.flags[key] = false
                default: throw fail("\(key) takes true or false, not \(value)")
                }
            } else if valueKeys.contains(key) {
                if pathKeys.contains(key) && !value.hasPrefix("/") { throw fail("\(key) must be an absolute path") }
                config.values[key] = value
            } else if key == "config" || key == "tpm-protect-lockout" {
                throw fail("\(key) can only be given on the command line")
            } else {
                throw fail("unknown key \(key)")
            }
        }
        return config
    }
}
