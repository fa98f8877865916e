import Crypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Random bytes drawn from the kernel's generator a few kilobytes at a time, for bulk work (an import seals
/// thousands of items, each needing an item id, an item key and three nonces): one `getrandom` call per refill
/// instead of one per eight bytes. Bytes are wiped from the pool as they are taken, and the rest when it is released.
/// Not thread-safe: one owner.
public final class RandomPool {
    private let buffer: UnsafeMutableRawBufferPointer
    private var offset: Int

    public init(capacity: Int = 16 << 10) {
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(capacity, 64), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        offset = buffer.count
    }

    deinit {
        zeroize(buffer.baseAddress!, buffer.count)
        buffer.deallocate()
    }

    /// One call into the kernel's generator (`arc4random_buf`, which is `getrandom` in glibc 2.36+).
    private func refill() {
        #if canImport(Glibc) || canImport(Darwin)
        arc4random_buf(buffer.baseAddress!, buffer.count)
        #else
        fillRandom(buffer)
        #endif
        offset = 0
    }

    /// Calls `body` with `count` fresh random bytes, wiped afterwards.
    public func withBytes<R>(_ count: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        precondition(count <= buffer.count, "request larger than the pool")
        if buffer.count - offset < count { refill() }
        let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<offset + count])
        offset += count
        defer { zeroize(slice.baseAddress!, slice.count) }
        return try body(UnsafeRawBufferPointer(slice))
    }

    /// Random bytes that are not secret (identifiers).
    public func bytes(_ count: Int) -> [UInt8] { withBytes(count) { Array($0) } }

    /// A fresh AES-GCM nonce.
    public func nonce() -> AES.GCM.Nonce {
        withBytes(12) { try! AES.GCM.Nonce(data: $0) }  // 12 bytes: always a valid nonce.
    }

    /// A fresh 256-bit key.
    public func symmetricKey() -> SymmetricKey { withBytes(32) { SymmetricKey(data: $0) } }
}
