import FoundationEssentials

/// Reads the encoding from a payload (without the length prefix). Any overrun, bad tag, bad UTF-8 or
/// trailing byte is an `errSecDecode` error.
struct WireReader: ~Copyable {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    static func malformed(_ what: String) -> KeychainError {
        KeychainError(status: KeychainStatus.decode, message: "malformed frame: \(what)")
    }

    var remaining: Int { bytes.count - offset }

    mutating func take(_ count: Int) throws(KeychainError) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw Self.malformed("truncated") }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    mutating func u8() throws(KeychainError) -> UInt8 {
        guard remaining >= 1 else { throw Self.malformed("truncated") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func bool() throws(KeychainError) -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        default: throw Self.malformed("bad boolean")
        }
    }

    mutating func u16() throws(KeychainError) -> UInt16 {
        let raw = try take(2)
        return UInt16(raw[0]) << 8 | UInt16(raw[1])
    }

    mutating func u32() throws(KeychainError) -> UInt32 {
        let raw = try take(4)
        return UInt32(raw[0]) << 24 | UInt32(raw[1]) << 16 | UInt32(raw[2]) << 8 | UInt32(raw[3])
    }

    mutating func u64() throws(KeychainError) -> UInt64 {
        let high = try u32()
        return UInt64(high) << 32 | UInt64(try u32())
    }

    mutating func i64() throws(KeychainError) -> Int64 { Int64(bitPattern: try u64()) }

    mutating func int() throws(KeychainError) -> Int {
        let value = try i64()
        guard let result = Int(exactly: value) else { throw Self.malformed("integer out of range") }
        return result
    }

    mutating func double() throws(KeychainError) -> Double { Double(bitPattern: try u64()) }

    /// Seconds since 1970 of a point in time (a certificate's validity, the next passcode try): finite and no further
    /// from 1970 than 9999-12-31T23:59:59Z, the last second X.509 and ISO 8601 write, so that a reader may convert it
    /// to `time_t` or `Int`.
    mutating func time() throws(KeychainError) -> Double {
        let seconds = try double()
        guard seconds.isFinite, seconds.magnitude <= 253_402_300_799 else { throw Self.malformed("bad time") }
        return seconds
    }

    mutating func blob() throws(KeychainError) -> UnsafeRawBufferPointer { try take(Int(try u32())) }

    mutating func data() throws(KeychainError) -> Data { Data(try blob()) }

    mutating func string() throws(KeychainError) -> String { try Self.text(try blob()) }

    mutating func strings() throws(KeychainError) -> [String] {
        let count = Int(try u16())
        // A string takes at least its 4-byte length.
        guard count <= remaining / 4 else { throw Self.malformed("string count over the payload") }
        var values: [String] = []
        for _ in 0..<count { values.append(try string()) }
        return values
    }

    mutating func shortString() throws(KeychainError) -> String { try Self.text(try take(Int(try u8()))) }

    static func text(_ raw: UnsafeRawBufferPointer) throws(KeychainError) -> String {
        guard let text = String(validating: raw.bindMemory(to: UInt8.self), as: UTF8.self) else {
            throw malformed("invalid UTF-8")
        }
        return text
    }

    mutating func optional<T>(_ read: (inout WireReader) throws(KeychainError) -> T) throws(KeychainError) -> T? {
        switch try u8() {
        case 0: return nil
        case 1: return try read(&self)
        default: throw Self.malformed("bad optional")
        }
    }

    mutating func value() throws(KeychainError) -> AttributeValue {
        guard let tag = ValueTag(rawValue: try u8()) else { throw Self.malformed("unknown value tag") }
        switch tag {
        case .string: return .string(try string())
        case .data: return .data(try data())
        case .bool: return .bool(try bool())
        case .int: return .int(try i64())
        case .date:
            let seconds = try double()
            guard seconds.isFinite else { throw Self.malformed("bad date") }
            return .date(Date(timeIntervalSinceReferenceDate: seconds))
        }
    }

    mutating func attributes() throws(KeychainError) -> [String: AttributeValue] {
        let count = Int(try u16())
        // Each entry takes at least 3 bytes (key length, tag, one value byte): a count the frame cannot hold is
        // rejected before anything is allocated.
        guard count * 3 <= remaining else { throw Self.malformed("attribute count exceeds the frame") }
        var map: [String: AttributeValue] = [:]
        map.reserveCapacity(count)
        for _ in 0..<count {
            let key = try shortString()
            let value = try self.value()
            guard map.updateValue(value, forKey: key) == nil else { throw Self.malformed("duplicate attribute") }
        }
        return map
    }

    mutating func secret() throws(KeychainError) -> SecretBytes { SecretBytes(copying: try blob()) }

    mutating func lockState() throws(KeychainError) -> LockState {
        switch try u8() {
        case 0: return .beforeFirstUnlock
        case 1: return .unlocked
        case 2: return .locked
        default: throw Self.malformed("unknown lock state")
        }
    }

    // Codes a well-formed frame may carry that name nothing the engine knows: refused with the engine's statuses
    // (the connection stays open, as for any refused request).

    mutating func itemClass() throws(KeychainError) -> ItemClass {
        let code = try shortString()
        guard let itemClass = ItemClass(rawValue: code) else {
            throw KeychainError(KeychainStatus.noSuchClass, "unknown item class \(code)")
        }
        return itemClass
    }

    mutating func accessibility() throws(KeychainError) -> Accessibility {
        let code = try shortString()
        guard let accessibility = Accessibility(rawValue: code) else {
            throw KeychainError(KeychainStatus.param, "unknown accessibility \(code)")
        }
        return accessibility
    }

    mutating func accessControlFlags() throws(KeychainError) -> UInt? {
        try optional { r throws(KeychainError) -> UInt in
            guard let flags = UInt(exactly: try r.u64()) else {
                throw KeychainError(KeychainStatus.param, "bad access control flags")
            }
            return flags
        }
    }

    func finish() throws(KeychainError) {
        guard remaining == 0 else { throw Self.malformed("trailing bytes") }
    }
}
