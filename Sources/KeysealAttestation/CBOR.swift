/// A CBOR data item (RFC 8949): the subset the W3C WebAuthn attestation statement uses — unsigned and negative
/// integers, byte and text strings, arrays, maps, booleans and null, all of definite length.
///
/// No Swift CBOR package is among the project's dependencies (docs/ARCHITECTURE.md, "CBOR"); the statement needs
/// these few types only, so the encoder and decoder are here, side by side.
public indirect enum CBOR: Sendable, Equatable {
    case unsigned(UInt64)
    /// The integer −1 − n.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBOR])
    /// Entries in their encoded order (the encoder writes them as given).
    case map([Entry])
    case bool(Bool)
    case null

    public struct Entry: Sendable, Equatable {
        public var key: CBOR
        public var value: CBOR
        public init(_ key: CBOR, _ value: CBOR) {
            self.key = key
            self.value = value
        }
    }

    /// An integer item: unsigned for 0 and above, negative below.
    public static func int(_ value: Int) -> CBOR {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value))
    }

    /// The value of an integer item that fits an `Int`.
    public var int: Int? {
        switch self {
        case .unsigned(let n) where n <= UInt64(Int.max): Int(n)
        case .negative(let n) where n < UInt64(Int.max): -1 - Int(n)
        default: nil
        }
    }

    /// The value of a map entry whose key is the text `key`.
    public subscript(text key: String) -> CBOR? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == .text(key) }?.value
    }

    // MARK: Encoding

    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    private static func head(_ major: UInt8, _ value: UInt64, into out: inout [UInt8]) {
        let type = major << 5
        switch value {
        case 0..<24: out.append(type | UInt8(value))
        case 24...0xFF: out += [type | 24, UInt8(value)]
        case 0x100...0xFFFF: out += [type | 25, UInt8(value >> 8), UInt8(value & 0xFF)]
        case 0x1_0000...0xFFFF_FFFF:
            out.append(type | 26)
            out += (0..<4).map { UInt8(value >> (24 - 8 * $0) & 0xFF) }
        default:
            out.append(type | 27)
            out += (0..<8).map { UInt8(value >> (56 - 8 * $0) & 0xFF) }
        }
    }

    private func encode(into out: inout [UInt8]) {
        switch self {
        case .unsigned(let n): Self.head(0, n, into: &out)
        case .negative(let n): Self.head(1, n, into: &out)
        case .bytes(let bytes):
            Self.head(2, UInt64(bytes.count), into: &out)
            out += bytes
        case .text(let text):
            let bytes = Array(text.utf8)
            Self.head(3, UInt64(bytes.count), into: &out)
            out += bytes
        case .array(let items):
            Self.head(4, UInt64(items.count), into: &out)
            for item in items { item.encode(into: &out) }
        case .map(let entries):
            Self.head(5, UInt64(entries.count), into: &out)
            for entry in entries {
                entry.key.encode(into: &out)
                entry.value.encode(into: &out)
            }
        case .bool(let flag): out.append(flag ? 0xF5 : 0xF4)
        case .null: out.append(0xF6)
        }
    }

    // MARK: Decoding

    /// Why bytes are not one CBOR item of the supported subset.
    public struct DecodingError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Decodes exactly one item from `bytes` (trailing bytes are an error). Nesting is limited to 16 levels and every
    /// length is checked against the bytes left, so no input crashes or allocates more than it holds.
    public init(decoding bytes: [UInt8]) throws(DecodingError) {
        var offset = 0
        self = try Self.decode(bytes, &offset, depth: 0)
        guard offset == bytes.count else { throw DecodingError(description: "trailing bytes after the CBOR item") }
    }

    private static func decode(_ bytes: [UInt8], _ offset: inout Int, depth: Int) throws(DecodingError) -> CBOR {
        guard depth < 16 else { throw DecodingError(description: "CBOR nested too deeply") }
        guard offset < bytes.count else { throw DecodingError(description: "CBOR item truncated") }
        let initial = bytes[offset]
        offset += 1
        let major = initial >> 5
        let info = initial & 0x1F
        if major == 7 {
            switch info {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            default: throw DecodingError(description: "unsupported CBOR simple value or float (\(info))")
            }
        }
        let argument: UInt64
        switch info {
        case 0..<24: argument = UInt64(info)
        case 24...27:
            let size = 1 << Int(info - 24)
            guard bytes.count - offset >= size else { throw DecodingError(description: "CBOR item truncated") }
            argument = bytes[offset..<offset + size].reduce(0) { $0 << 8 | UInt64($1) }
            offset += size
        default: throw DecodingError(description: "indefinite or reserved CBOR length")
        }
        func length() throws(DecodingError) -> Int {
            guard argument <= UInt64(bytes.count - offset) else {
                throw DecodingError(description: "CBOR length beyond the input")
            }
            return Int(argument)
        }
        switch major {
        case 0: return .unsigned(argument)
        case 1: return .negative(argument)
        case 2:
            let count = try length()
            defer { offset += count }
            return .bytes(Array(bytes[offset..<offset + count]))
        case 3:
            let count = try length()
            defer { offset += count }
            guard let text = String(validating: bytes[offset..<offset + count], as: UTF8.self) else {
                throw DecodingError(description: "CBOR text is not UTF-8")
            }
            return .text(text)
        case 4:
            let count = try length()  // each item takes at least one byte
            var items: [CBOR] = []
            for _ in 0..<count { items.append(try decode(bytes, &offset, depth: depth + 1)) }
            return .array(items)
        case 5:
            let count = try length()
            var entries: [Entry] = []
            for _ in 0..<count {
                let key = try decode(bytes, &offset, depth: depth + 1)
                entries.append(Entry(key, try decode(bytes, &offset, depth: depth + 1)))
            }
            return .map(entries)
        default:
            throw DecodingError(description: "unsupported CBOR major type \(major) (tags are not used here)")
        }
    }
}
