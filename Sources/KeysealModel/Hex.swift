import FoundationEssentials

/// Hex digits and PEM armour: the one codec of each for every module (the command line, the engine, the Secret
/// Service's constants, the test fixtures).
public enum Hex {
    /// Lowercase hex digits, two a byte.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of hex digits (either case, two a byte); nil for an odd count or anything but a hex digit.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

public enum PEM {
    /// DER in PEM armour: `-----BEGIN LABEL-----`, the base64 in lines of 64 characters, `-----END LABEL-----` (no
    /// newline after the last line).
    public static func encode(_ der: Data, label: String) -> String {
        let text = der.base64EncodedString()
        var lines = ["-----BEGIN \(label)-----"]
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 64, limitedBy: text.endIndex) ?? text.endIndex
            lines.append(String(text[index..<next]))
            index = next
        }
        lines.append("-----END \(label)-----")
        return lines.joined(separator: "\n")
    }
}
