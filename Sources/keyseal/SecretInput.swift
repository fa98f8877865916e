import ArgumentParser
import Glibc
import KeysealClient

import struct FoundationEssentials.Data

/// Reads passcodes and secrets from standard input or a terminal without echo. Every buffer that held one is
/// wiped before it is released; what is kept is a `SecretBytes` (zeroized on release, never printed).
enum SecretInput {
    /// Reads standard input to its end, at most `limit` bytes (one more tells the caller it was too long).
    static func readStandardInput(limit: Int) throws(CommandFailure) -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        defer { wipe(&chunk) }
        // Reserved once so that the buffer never moves (a moved buffer would leave an unwiped copy behind).
        var bytes = [UInt8]()
        bytes.reserveCapacity(limit + chunk.count + 1)
        while bytes.count <= limit {
            let count = chunk.withUnsafeMutableBytes { Posix.read(STDIN_FILENO, $0.baseAddress!, $0.count) }
            if count < 0 {
                wipe(&bytes)
                throw CommandFailure(
                    status: -36,
                    message: "cannot read standard input: \(String(cString: strerror(errno)))"
                )
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return bytes
    }

    /// `count` lines of standard input (a trailing carriage return is dropped), each non-empty.
    static func lines(_ count: Int, what: [String]) throws(CommandFailure) -> [SecretBytes] {
        var input = try readStandardInput(limit: 64 << 10)
        defer { wipe(&input) }
        var lines: [SecretBytes] = []
        var start = 0
        var index = 0
        while lines.count < count && start <= input.count {
            index = input[start...].firstIndex(of: UInt8(ascii: "\n")) ?? input.count
            var end = index
            if end > start && input[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            if start == input.count && index == input.count { break }
            lines.append(SecretBytes(copying: input[start..<end]))
            start = index + 1
        }
        guard lines.count == count else {
            throw CommandFailure(
                status: -50,
                message: "expected \(what.joined(separator: " then ")) on standard input, one per line"
            )
        }
        for (line, name) in zip(lines, what) where line.count == 0 {
            throw CommandFailure(status: -50, message: "the \(name) is empty")
        }
        return lines
    }

    /// A secret typed on the terminal without echo.
    static func prompt(_ label: String) throws -> SecretBytes {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard tty >= 0 else {
            throw ValidationError(
                "no terminal to prompt on for the \(label); use the --…-stdin flag and write it to standard input"
            )
        }
        defer { close(tty) }
        write(tty, "\(label.prefix(1).uppercased())\(label.dropFirst()): ")
        var saved = termios()
        let hasTermios = tcgetattr(tty, &saved) == 0
        if hasTermios {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(tty, TCSANOW, &quiet)
        }
        defer {
            if hasTermios { _ = tcsetattr(tty, TCSANOW, &saved) }
            write(tty, "\n")
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity(256)
        defer { wipe(&bytes) }
        var byte: UInt8 = 0
        while true {
            let count = Posix.read(tty, &byte, 1)
            if count <= 0 || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") { break }
            guard bytes.count < 64 << 10 else { break }
            if bytes.count == bytes.capacity {
                var grown = [UInt8]()
                grown.reserveCapacity(bytes.capacity * 2)
                grown.append(contentsOf: bytes)
                wipe(&bytes)
                bytes = grown
            }
            bytes.append(byte)
        }
        byte = 0
        return SecretBytes(copying: bytes)
    }

    /// A non-empty passcode: one line of standard input, or typed on the terminal (twice when `confirm`).
    static func passcode(_ label: String, fromStandardInput: Bool, confirm: Bool = false) throws -> SecretBytes {
        if fromStandardInput { return try lines(1, what: [label])[0] }
        let first = try prompt(label)
        guard first.count > 0 else { throw CommandFailure(status: -50, message: "the \(label) is empty") }
        if confirm {
            let again = try prompt("repeat the \(label)")
            let same = first.withUnsafeBytes { a in again.withUnsafeBytes { b in a.elementsEqual(b) } }
            guard same else { throw CommandFailure(status: -50, message: "the two entries differ") }
        }
        return first
    }

    /// Hexadecimal digits (whitespace ignored, an optional `0x` prefix) decoded straight into `Data`; nil when
    /// a character is not a digit or the count is odd. No intermediate string holds the secret.
    static func decodeHex(_ text: [UInt8]) -> Data? {
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var start = 0
        while start < text.count, [0x20, 0x09, 0x0A, 0x0D].contains(text[start]) { start += 1 }
        if text.count - start >= 2, text[start] == UInt8(ascii: "0"), text[start + 1] | 0x20 == UInt8(ascii: "x") {
            start += 2
        }
        var data = Data(capacity: text.count / 2)
        var high: UInt8?
        for c in text[start...] where ![0x20, 0x09, 0x0A, 0x0D].contains(c) {
            guard let digit = value(c) else { return nil }
            if let h = high {
                data.append(h << 4 | digit)
                high = nil
            } else {
                high = digit
            }
        }
        return high == nil ? data : nil
    }

    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            for index in raw.indices { raw[index] = 0 }
        }
    }

    private static func write(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { _ = Posix.write(fd, $0.baseAddress, $0.count) }
    }
}

/// The strength floor for new passcodes and backup passphrases: refuses what is obviously weak (too short, one
/// character repeated, a straight run such as `123456` or `abcdef`, a handful of the most common choices). It
/// checks only what the command line sets; the override flag (`--allow-weak-passcode`,
/// `--allow-weak-passphrase`) skips it. Works on the bytes in place: no copy of the secret is made.
enum SecretStrength {
    /// Characters a new passcode needs at least.
    static let passcodeMinimum = 6
    /// Characters a backup passphrase needs at least: a backup file can be attacked offline, without the device.
    static let passphraseMinimum = 10

    private static let common = [
        "password", "passcode", "passphrase", "qwerty", "qwertyuiop", "azerty", "letmein", "iloveyou", "123123",
        "123321", "abc123", "password1", "keychain", "changeme", "secret",
    ]

    /// Throws errSecParam naming the weakness and the override unless `allowWeak`.
    static func check(
        _ secret: SecretBytes,
        what: String,
        minimum: Int,
        overrideFlag: String,
        allowWeak: Bool
    )
        throws(CommandFailure)
    {
        guard !allowWeak else { return }
        let weakness: String? = secret.withUnsafeBytes { bytes in
            let characters = bytes.reduce(0) { $0 + ($1 & 0xC0 == 0x80 ? 0 : 1) }
            if characters < minimum { return "it has fewer than \(minimum) characters" }
            if bytes.allSatisfy({ $0 == bytes[0] }) { return "it is one character repeated" }
            let steps = zip(bytes.dropFirst(), bytes).map { Int($0) - Int($1) }
            if bytes.allSatisfy({ $0 < 0x80 }), steps.allSatisfy({ $0 == 1 }) || steps.allSatisfy({ $0 == -1 }) {
                return "it is a straight run of characters"
            }
            let lowered = bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
            if common.contains(where: { lowered.elementsEqual($0.utf8) }) {
                return "it is one of the most common choices"
            }
            return nil
        }
        guard let weakness else { return }
        throw CommandFailure(
            status: -50,
            message:
                "the \(what) is too weak: \(weakness); choose a stronger one, or give \(overrideFlag) to use it anyway"
        )
    }
}
