import FoundationEssentials
import Glibc
import KeysealClient
import KeysealStatus

/// A JSON document built in order (keys print in the order they were added).
indirect enum JSON {
    case object([(String, JSON)])
    case array([JSON])
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case null

    func render(into out: inout String) {
        switch self {
        case .object(let members):
            out += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { out += "," }
                JSON.string(member.0).render(into: &out)
                out += ":"
                member.1.render(into: &out)
            }
            out += "}"
        case .array(let elements):
            out += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { out += "," }
                element.render(into: &out)
            }
            out += "]"
        case .string(let text):
            out += "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case _ where scalar.value < 0x20:
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: out.unicodeScalars.append(scalar)
                }
            }
            out += "\""
        case .int(let number): out += String(number)
        case .double(let number): out += number.isFinite ? String(number) : "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .null: out += "null"
        }
    }

    var rendered: String {
        var out = ""
        render(into: &out)
        return out
    }
}

/// Standard output and error, unbuffered by Foundation.
enum Console {
    static func write(_ text: String, to fd: Int32 = STDOUT_FILENO) {
        var text = text
        text.withUTF8 { writeAll(fd, UnsafeRawBufferPointer($0)) }
    }

    static func out(_ line: String) { write(line + "\n") }
    static func err(_ line: String) { write(line + "\n", to: STDERR_FILENO) }

    /// Writes raw bytes (a secret) to standard output, then a newline.
    /// The bytes alone on standard output (a signature), no newline.
    static func rawBytes(_ bytes: Data) {
        bytes.withUnsafeBytes { writeAll(STDOUT_FILENO, $0) }
    }

    static func outBytes(_ bytes: Data) {
        bytes.withUnsafeBytes { writeAll(STDOUT_FILENO, $0) }
        write("\n")
    }

    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let written = Posix.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 { return }
            offset += written
        }
    }

    static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }
    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}

/// A failed command: what to print and the exit status.
struct CommandFailure: Error {
    var status: Int32
    var message: String
    var hint: String?
    var retryAfterSeconds: Int?
    var triesLeft: Int?

    init(status: Int32, message: String, hint: String? = nil, retryAfterSeconds: Int? = nil, triesLeft: Int? = nil) {
        self.status = status
        self.message = message
        self.hint = hint
        self.retryAfterSeconds = retryAfterSeconds
        self.triesLeft = triesLeft
    }

    init(_ error: KeychainError) {
        self.init(
            status: error.status,
            message: error.message,
            retryAfterSeconds: error.retryAfterSeconds,
            triesLeft: error.triesLeft
        )
        switch error.status {
        case -25308: hint = "run keyseal unlock"
        case -25294: hint = "is keyseald running? start it, or give --socket PATH"
        case -34018: hint = "only the daemon's user and root may do this"
        default: break
        }
    }

    /// The OSStatus's low byte, as macOS `security` exits; 1 when that byte is 0.
    var exitCode: Int32 {
        let low = Int32(UInt32(bitPattern: status) & 0xFF)
        return low == 0 ? 1 : low
    }

    var name: String { OSStatusTable.name(status) ?? "OSStatus \(status)" }

    /// Prints the failure: one line on stderr, and with `--json` the error document on stdout.
    func report(command: String, json: Bool) {
        var line = "keyseal: \(command): \(message)"
        var extras: [String] = []
        // The daemon's sentence usually says both already; add only what it leaves out.
        if let retryAfterSeconds, !message.contains("try again") {
            extras.append("try again in \(WaitTime.describe(seconds: retryAfterSeconds))")
        }
        if let triesLeft, !message.contains("left"), !message.contains("more tr") {
            extras.append("\(triesLeft) \(triesLeft == 1 ? "try" : "tries") left")
        }
        if !extras.isEmpty { line += "; " + extras.joined(separator: ", ") }
        line += " (\(status))"
        if let hint { line += "; \(hint)" }
        Console.err(line)
        if json {
            var members: [(String, JSON)] = [
                ("status", .int(Int64(status))), ("name", .string(name)), ("message", .string(message)),
            ]
            if let retryAfterSeconds { members.append(("retryAfterSeconds", .int(Int64(retryAfterSeconds)))) }
            if let triesLeft { members.append(("triesLeft", .int(Int64(triesLeft)))) }
            if let hint { members.append(("hint", .string(hint))) }
            Console.out(JSON.object([("error", .object(members))]).rendered)
        }
    }
}

enum WaitTime {
    /// "45 s", "5 min", "1 h 15 min".
    static func describe(seconds: Int) -> String {
        if seconds < 120 { return "\(seconds) s" }
        let minutes = (seconds + 59) / 60
        if minutes < 120 { return "\(minutes) min" }
        return "\(minutes / 60) h" + (minutes % 60 == 0 ? "" : " \(minutes % 60) min")
    }
}

enum Formatting {
    /// Seconds since 2001-01-01 as an ISO 8601 UTC timestamp.
    static func iso8601(referenceSeconds: Double) -> String {
        iso8601(unixSeconds: referenceSeconds + 978_307_200)
    }

    static func iso8601(unixSeconds: Double) -> String {
        var time = time_t(unixSeconds.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}
