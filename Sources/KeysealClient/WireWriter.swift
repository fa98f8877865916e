import FoundationEssentials

/// Appends the encoding to a byte array. The first four bytes are reserved for the frame length.
struct WireWriter {
    var bytes: [UInt8]

    init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(contentsOf: [0, 0, 0, 0])
        bytes.append(Wire.version)
    }

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    mutating func u32(_ value: UInt32) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    mutating func u64(_ value: UInt64) {
        u32(UInt32(truncatingIfNeeded: value >> 32))
        u32(UInt32(truncatingIfNeeded: value))
    }

    mutating func i64(_ value: Int64) { u64(UInt64(bitPattern: value)) }
    mutating func int(_ value: Int) { i64(Int64(value)) }
    mutating func double(_ value: Double) { u64(value.bitPattern) }

    mutating func blob(_ value: some Collection<UInt8>) {
        u32(UInt32(clamping: value.count))
        bytes.append(contentsOf: value)
    }

    mutating func string(_ value: String) { blob(value.utf8) }

    /// A u16 count and the strings.
    mutating func strings(_ values: [String]) {
        u16(UInt16(min(values.count, Int(UInt16.max))))
        for value in values.prefix(Int(UInt16.max)) { string(value) }
    }

    mutating func shortString(_ value: String) {
        let utf8 = value.utf8
        u8(UInt8(clamping: utf8.count))
        bytes.append(contentsOf: utf8.prefix(255))
    }

    mutating func optional<T>(_ value: T?, _ write: (inout WireWriter, T) -> Void) {
        if let value {
            u8(1)
            write(&self, value)
        } else {
            u8(0)
        }
    }

    mutating func value(_ value: AttributeValue) {
        switch value {
        case .string(let text):
            u8(ValueTag.string.rawValue)
            string(text)
        case .data(let data):
            u8(ValueTag.data.rawValue)
            blob(data)
        case .bool(let flag):
            u8(ValueTag.bool.rawValue)
            bool(flag)
        case .int(let number):
            u8(ValueTag.int.rawValue)
            i64(number)
        case .date(let date):
            u8(ValueTag.date.rawValue)
            double(date.timeIntervalSinceReferenceDate)
        }
    }

    mutating func attributes(_ map: [String: AttributeValue]) {
        u16(UInt16(clamping: map.count))
        for (key, value) in map.prefix(Int(UInt16.max)) {
            shortString(key)
            self.value(value)
        }
    }

    mutating func secret(_ secret: SecretBytes) {
        secret.withUnsafeBytes { blob($0) }
    }

    mutating func lockState(_ state: LockState) {
        switch state {
        case .beforeFirstUnlock: u8(0)
        case .unlocked: u8(1)
        case .locked: u8(2)
        }
    }

    /// Fills in the frame length and returns the frame.
    mutating func finish() -> [UInt8] {
        let length = UInt32(truncatingIfNeeded: bytes.count - 4)
        bytes[0] = UInt8(truncatingIfNeeded: length >> 24)
        bytes[1] = UInt8(truncatingIfNeeded: length >> 16)
        bytes[2] = UInt8(truncatingIfNeeded: length >> 8)
        bytes[3] = UInt8(truncatingIfNeeded: length)
        return bytes
    }

    /// Zeroes the buffer (after a frame carrying a passcode was sent).
    mutating func wipe() {
        zeroize(&bytes)
    }
}
