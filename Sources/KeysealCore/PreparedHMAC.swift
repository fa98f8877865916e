internal import CLibCrypto
import FoundationEssentials

/// HMAC-SHA256 (RFC 2104) with the key's inner and outer SHA-256 states prepared once. A MAC then costs the
/// message's compression rounds and one outer block: the prepared states are copied onto the stack (plain
/// libcrypto `SHA256_CTX` structs), not into a fresh heap digest object as swift-crypto's copy-on-write `SHA256`
/// does. The output is byte-for-byte that of `HMAC<SHA256>` (tested), so stored digests and keys derived with it
/// do not change.
///
/// The prepared states are equivalent to the key, so they live in ``SecretBytes``; the stack copies are cleared
/// after each MAC.
struct PreparedHMAC: Sendable {
    static let byteCount = 32

    private let states: SecretBytes

    /// `key`: at most one SHA-256 block (64 bytes); Keyseal's keys are 32.
    init(key: UnsafeRawBufferPointer) {
        precondition(key.count <= 64, "HMAC keys longer than a block are hashed first; not used here")
        states = SecretBytes(count: keyseal_hmac_states_size()) { states in
            let prepared = keyseal_hmac_prepare(
                key.baseAddress?.assumingMemoryBound(to: UInt8.self),
                key.count,
                states.baseAddress
            )
            precondition(prepared == 1, "HMAC key preparation failed")
        }
    }

    init(key: SecretBytes) {
        self = key.withUnsafeBytes { PreparedHMAC(key: $0) }
    }

    /// HMAC(key, first ‖ second ‖ third) into `out` (32 bytes), without concatenating.
    func authenticate(
        _ first: UnsafeRawBufferPointer,
        _ second: UnsafeRawBufferPointer = .init(start: nil, count: 0),
        _ third: UnsafeRawBufferPointer = .init(start: nil, count: 0),
        into out: UnsafeMutableRawBufferPointer
    ) {
        precondition(out.count == Self.byteCount, "an HMAC-SHA256 output is 32 bytes")
        states.withUnsafeBytes { states in
            keyseal_hmac_sha256(
                states.baseAddress,
                first.baseAddress?.assumingMemoryBound(to: UInt8.self),
                first.count,
                second.baseAddress?.assumingMemoryBound(to: UInt8.self),
                second.count,
                third.baseAddress?.assumingMemoryBound(to: UInt8.self),
                third.count,
                out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            )
        }
    }

    /// HMAC(key, message) into a fresh 32-byte array.
    func authenticate(_ message: UnsafeRawBufferPointer) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Self.byteCount) { buffer, count in
            authenticate(message, into: UnsafeMutableRawBufferPointer(buffer))
            count = Self.byteCount
        }
    }

    /// HMAC(key, first ‖ second ‖ third) into a fresh 32-byte array.
    func authenticate(_ first: [UInt8], _ second: [UInt8], _ third: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Self.byteCount) { buffer, count in
            first.withUnsafeBytes { first in
                second.withUnsafeBytes { second in
                    third.withUnsafeBytes { third in
                        authenticate(first, second, third, into: UnsafeMutableRawBufferPointer(buffer))
                    }
                }
            }
            count = Self.byteCount
        }
    }

    /// HMAC(key, message) as a 32-byte `Data`, written in place.
    func authenticateData(_ message: UnsafeRawBufferPointer) -> Data {
        var result = Data(count: Self.byteCount)
        result.withUnsafeMutableBytes { authenticate(message, into: $0) }
        return result
    }
}

/// SHA-224 of `data` (swift-crypto has none): Apple's `…SHA224` key algorithms.
public func sha224(_ data: Data) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 28)
    data.withUnsafeBytes { bytes in
        out.withUnsafeMutableBufferPointer {
            keyseal_sha224(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, $0.baseAddress)
        }
    }
    return out
}

/// SHA-256 of `bytes` into the first 32 bytes of `out`.
func sha256(_ bytes: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
    precondition(out.count >= 32, "SHA-256 needs 32 bytes")
    keyseal_sha256(
        bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
        bytes.count,
        out.baseAddress!.assumingMemoryBound(to: UInt8.self)
    )
}
