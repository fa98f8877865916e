#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one type that holds secret bytes: keys, passcodes, PINs and unsealed hardware secrets.
///
/// The bytes live in their own page-aligned allocation that is locked in memory where the system allows it,
/// excluded from core dumps, and overwritten with zeros over its whole capacity when the last copy goes away.
/// `description` never shows the bytes; they reach other code only inside ``withUnsafeBytes(_:)``.
public struct SecretBytes: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    private let storage: Storage

    /// Creates `count` bytes filled in place by `initializer`.
    public init(count: Int, initializingWith initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        let storage = Storage(count: count)
        try initializer(UnsafeMutableRawBufferPointer(start: storage.pointer, count: count))
        self.storage = storage
    }

    /// Copies `bytes` into secret storage. The caller remains responsible for the source.
    public init(copying bytes: some Collection<UInt8>) {
        let storage = Storage(count: bytes.count)
        let buffer = UnsafeMutableRawBufferPointer(start: storage.pointer, count: bytes.count)
        _ = buffer.initializeMemory(as: UInt8.self, from: bytes)
        self.storage = storage
    }

    /// Copies the UTF-8 bytes of `string`.
    public init(utf8 string: String) {
        var string = string
        self = string.withUTF8 { SecretBytes(copying: UnsafeRawBufferPointer($0)) }
    }

    /// `count` bytes from the system's cryptographically secure generator.
    public static func random(count: Int) -> SecretBytes {
        SecretBytes(count: count) { buffer in fillRandom(buffer) }
    }

    /// The concatenation of `parts`, in order.
    public static func concatenating(_ parts: [SecretBytes]) -> SecretBytes {
        let total = parts.reduce(0) { $0 + $1.count }
        return SecretBytes(count: total) { buffer in
            var offset = 0
            for part in parts {
                part.withUnsafeBytes { source in
                    if let base = source.baseAddress, source.count > 0 {
                        buffer.baseAddress!.advanced(by: offset).copyMemory(from: base, byteCount: source.count)
                    }
                    offset += source.count
                }
            }
        }
    }

    public var count: Int { storage.count }
    public var isEmpty: Bool { storage.count == 0 }

    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: storage.pointer, count: storage.count))
    }

    /// Compares in time that depends only on the lengths.
    public func constantTimeEquals(_ other: SecretBytes) -> Bool {
        guard count == other.count else { return false }
        return withUnsafeBytes { a in
            other.withUnsafeBytes { b in
                var difference: UInt8 = 0
                for index in 0..<a.count { difference |= a[index] ^ b[index] }
                return difference == 0
            }
        }
    }

    /// Whether the bytes are valid UTF-8, checked without making a String of them.
    public var isValidUTF8: Bool {
        withUnsafeBytes { raw in
            var bytes = raw.makeIterator()
            var decoder = UTF8()
            while true {
                switch decoder.decode(&bytes) {
                case .scalarValue: continue
                case .emptyInput: return true
                case .error: return false
                }
            }
        }
    }

    /// The bytes as a String (for an API that takes one, such as a passcode); nil when they are not valid UTF-8.
    public var utf8String: String? {
        withUnsafeBytes { String(validating: $0.bindMemory(to: UInt8.self), as: UTF8.self) }
    }

    public var description: String { "<redacted \(count) bytes>" }
    public var debugDescription: String { description }

    private final class Storage: @unchecked Sendable {
        // Written only during `SecretBytes.init`, before the storage is shared; read-only afterwards.
        let pointer: UnsafeMutableRawPointer
        let count: Int
        let capacity: Int
        let locked: Bool

        init(count: Int) {
            precondition(count >= 0, "negative secret size")
            let page = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)
            let capacity = max(page, (count + page - 1) / page * page)
            var raw: UnsafeMutableRawPointer?
            guard posix_memalign(&raw, page, capacity) == 0, let raw else {
                fatalError("out of memory allocating secret storage")
            }
            memset(raw, 0, capacity)
            #if canImport(Glibc)
            _ = madvise(raw, capacity, MADV_DONTDUMP)
            #endif
            self.locked = mlock(raw, capacity) == 0
            self.pointer = raw
            self.count = count
            self.capacity = capacity
        }

        deinit {
            zeroize(pointer, capacity)
            if locked { _ = munlock(pointer, capacity) }
            #if canImport(Glibc)
            _ = madvise(pointer, capacity, MADV_DODUMP)
            #endif
            free(pointer)
        }
    }
}

/// Overwrites `count` bytes at `pointer` with zeros in a way the optimizer does not remove.
public func zeroize(_ pointer: UnsafeMutableRawPointer, _ count: Int) {
    #if canImport(Glibc)
    explicit_bzero(pointer, count)
    #else
    memset_s(pointer, count, 0, count)
    #endif
}

/// Zeroes a byte array in place (a frame that carried a secret) before it is released.
public func zeroize(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { buffer in
        if let base = buffer.baseAddress, buffer.count > 0 { zeroize(base, buffer.count) }
    }
}

/// A secret compares by its bytes in constant time and hashes by its length only, so that no hash of a secret is
/// ever computed (a response that carries one is Hashable).
extension SecretBytes: Hashable {
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool { lhs.constantTimeEquals(rhs) }
    public func hash(into hasher: inout Hasher) { hasher.combine(count) }
}

/// Fills `buffer` from the system's cryptographically secure generator (the kernel's `getrandom` on Linux).
public func fillRandom(_ buffer: UnsafeMutableRawBufferPointer) {
    var generator = SystemRandomNumberGenerator()
    var offset = 0
    while offset < buffer.count {
        var word = generator.next()
        let chunk = min(8, buffer.count - offset)
        withUnsafeBytes(of: &word) { wordBytes in
            for index in 0..<chunk { buffer[offset + index] = wordBytes[index] }
        }
        word = 0
        offset += chunk
    }
}

/// Random bytes that are not secret (identifiers, nonces handed to storage).
public func randomBytes(_ count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { fillRandom($0) }
    return bytes
}
