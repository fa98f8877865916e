import Crypto
import FoundationEssentials
import Glibc

/// HMAC-SHA256 (RFC 2104) with the key's inner and outer hash states prepared once. A MAC then costs the message's
/// compression rounds and one outer block, fed through raw buffers rather than swift-crypto's generic
/// `DataProtocol` walk. The output is byte-for-byte that of `HMAC<SHA256>` (tested), so stored digests and keys
/// derived with it do not change.
struct PreparedHMAC: @unchecked Sendable {
    // Immutable after init; swift-crypto's digest contexts are never shared mutably (copy on write).
    private let inner: SHA256
    private let outer: SHA256

    /// `key`: at most one SHA-256 block (64 bytes); Keyseal's keys are 32.
    init(key: UnsafeRawBufferPointer) {
        precondition(key.count <= 64, "HMAC keys longer than a block are hashed first; not used here")
        var ipad = [UInt8](repeating: 0x36, count: 64)
        var opad = [UInt8](repeating: 0x5c, count: 64)
        for index in 0..<key.count {
            ipad[index] ^= key[index]
            opad[index] ^= key[index]
        }
        var inner = SHA256()
        var outer = SHA256()
        ipad.withUnsafeBytes { inner.update(bufferPointer: $0) }
        opad.withUnsafeBytes { outer.update(bufferPointer: $0) }
        for index in 0..<64 {
            ipad[index] = 0
            opad[index] = 0
        }
        self.inner = inner
        self.outer = outer
    }

    init(key: SecretBytes) {
        self = key.withUnsafeBytes { PreparedHMAC(key: $0) }
    }

    /// HMAC(key, message) into a fresh 32-byte array.
    func authenticate(_ message: UnsafeRawBufferPointer) -> [UInt8] {
        var hash = inner
        hash.update(bufferPointer: message)
        return finish(hash)
    }

    /// HMAC(key, first ‖ second ‖ third) without concatenating.
    func authenticate(_ first: [UInt8], _ second: [UInt8], _ third: [UInt8]) -> [UInt8] {
        var hash = inner
        first.withUnsafeBytes { hash.update(bufferPointer: $0) }
        second.withUnsafeBytes { hash.update(bufferPointer: $0) }
        third.withUnsafeBytes { hash.update(bufferPointer: $0) }
        return finish(hash)
    }

    private func finish(_ hash: SHA256) -> [UInt8] {
        var outerHash = outer
        hash.finalize().withUnsafeBytes { outerHash.update(bufferPointer: $0) }
        return outerHash.finalize().withUnsafeBytes { Array($0) }
    }
}
