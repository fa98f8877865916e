internal import CLibCrypto
import FoundationEssentials
import Glibc

/// AES-256-GCM opening through libcrypto's EVP interface, for boxes in the combined form nonce ‖ ciphertext ‖ tag
/// that swift-crypto sealed.
///
/// Every open in Keyseal goes through here; every seal stays with swift-crypto, so each read of a stored box
/// checks one implementation against the other. The reason is the lookup's cost: swift-crypto's `AES.GCM.open` is
/// not inlinable, so it runs its generic `DataProtocol` path unspecialized and takes the key only as a heap
/// `SymmetricKey`. Here a class key's context is keyed once per unlock (0.9 µs an open against swift-crypto's
/// 1.4 µs, `keyseal-bench --only engine`), and an item key stays in a stack buffer. docs/DECISIONS.md
/// ("AES-GCM boxes are sealed by swift-crypto and opened by libcrypto") has the measurements.
///
/// A keyed context holds the key's schedule: it lives exactly as long as its owner (a ``ClassKey``, dropped when
/// its class locks), and libcrypto clears it when it is freed.
package final class GCMContext: @unchecked Sendable {
    // The context is used under `lock` only; the pointer itself never changes.
    private let context: OpaquePointer
    private let lock = ConditionLock()

    static let nonceSize = 12
    static let tagSize = 16

    /// The cipher, fetched once for the process (fetching per call costs a provider lookup).
    nonisolated(unsafe) private static let cipher: OpaquePointer = {
        guard let cipher = keyseal_gcm_fetch() else {
            fatalError("libcrypto has no AES-256-GCM (is its default provider available?)")
        }
        return cipher
    }()

    /// A context keyed with the 32 bytes of `key`.
    package init(key: UnsafeRawBufferPointer) {
        precondition(key.count == 32, "AES-256 keys are 32 bytes")
        guard let context = keyseal_gcm_context(Self.cipher, key.baseAddress!.assumingMemoryBound(to: UInt8.self))
        else {
            fatalError("libcrypto could not key an AES-256-GCM context (out of memory)")
        }
        self.context = context
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    /// The plaintext of `combined` into a new `Data`; `errSecDecode` unless it is authentic under `aad`.
    package func open(_ combined: Data, aad: UnsafeRawBufferPointer) throws(KeychainError) -> Data {
        try combined.withBytes { box throws(KeychainError) in
            let length = try Self.plaintextLength(box)
            var plain = Data(count: length)
            let authentic = plain.withUnsafeMutableBytes { out in open(box, aad: aad, into: out) }
            guard authentic else { throw Self.failure }
            return plain
        }
    }

    /// The plaintext of `combined` into `out`, which must be exactly its size; `errSecDecode` (with `out` zeroed)
    /// unless it is authentic under `aad`.
    func open(
        _ combined: UnsafeRawBufferPointer,
        aad: UnsafeRawBufferPointer,
        exactlyInto out: UnsafeMutableRawBufferPointer
    )
        throws(KeychainError)
    {
        guard try Self.plaintextLength(combined) == out.count, open(combined, aad: aad, into: out) else {
            if let base = out.baseAddress { zeroize(base, out.count) }
            throw Self.failure
        }
    }

    /// One open with a context keyed for it alone (a per-item key), freed before returning.
    package static func open(
        _ combined: Data,
        key: UnsafeRawBufferPointer,
        aad: UnsafeRawBufferPointer
    )
        throws(KeychainError)
        -> Data
    {
        try combined.withBytes { box throws(KeychainError) in try open(box, key: key, aad: aad) }
    }

    /// ``open(_:key:aad:)`` of a box read in place.
    package static func open(
        _ combined: UnsafeRawBufferPointer,
        key: UnsafeRawBufferPointer,
        aad: UnsafeRawBufferPointer
    )
        throws(KeychainError)
        -> Data
    {
        precondition(key.count == 32, "AES-256 keys are 32 bytes")
        let length = try plaintextLength(combined)
        var plain = Data(count: length)
        let authentic = plain.withUnsafeMutableBytes { out in
            withPointers(combined, aad: aad, out: out) { nonce, associated, ciphertext, length, tag, output in
                keyseal_gcm_open_once(
                    cipher,
                    key.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    nonce,
                    associated,
                    aad.count,
                    ciphertext,
                    length,
                    tag,
                    output
                ) == 1
            }
        }
        guard authentic else { throw failure }
        return plain
    }

    private func open(
        _ combined: UnsafeRawBufferPointer,
        aad: UnsafeRawBufferPointer,
        into out: UnsafeMutableRawBufferPointer
    )
        -> Bool
    {
        Self.withPointers(combined, aad: aad, out: out) { nonce, associated, ciphertext, length, tag, output in
            lock.withLock {
                keyseal_gcm_open(context, nonce, associated, aad.count, ciphertext, length, tag, output) == 1
            }
        }
    }

    /// The nonce, associated data, ciphertext (and its length), tag and output pointers of an open. `combined` is at
    /// least a nonce and a tag long. libcrypto wants pointers even for empty inputs; nothing is read or written
    /// through the placeholder then.
    private static func withPointers(
        _ box: UnsafeRawBufferPointer,
        aad: UnsafeRawBufferPointer,
        out: UnsafeMutableRawBufferPointer,
        _ body: (
            _ nonce: UnsafePointer<UInt8>, _ aad: UnsafePointer<UInt8>, _ ciphertext: UnsafePointer<UInt8>,
            _ length: Int,
            _ tag: UnsafePointer<UInt8>, _ out: UnsafeMutablePointer<UInt8>
        ) -> Bool
    ) -> Bool {
        var empty: UInt8 = 0
        let base = box.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let length = box.count - nonceSize - tagSize
        return withUnsafeMutablePointer(to: &empty) { placeholder in
            body(
                base,
                aad.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(placeholder),
                base + nonceSize,
                length,
                base + nonceSize + length,
                out.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? placeholder
            )
        }
    }

    private static func plaintextLength(_ combined: UnsafeRawBufferPointer) throws(KeychainError) -> Int {
        guard combined.count >= nonceSize + tagSize else { throw failure }
        return combined.count - nonceSize - tagSize
    }

    private static var failure: KeychainError {
        KeychainError(KeychainStatus.decode, "stored data failed authentication")
    }
}

extension Data {
    /// `withUnsafeBytes` for a body that throws only ``KeychainError`` (the standard one rethrows `any Error`).
    package func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(KeychainError) -> R) throws(KeychainError) -> R {
        try withUnsafeBytes { raw in Result { () throws(KeychainError) in try body(raw) } }.get()
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body that throws only ``KeychainError`` (the standard one rethrows `any Error`).
    package func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(KeychainError) -> R) throws(KeychainError) -> R {
        try withUnsafeBytes { raw in Result { () throws(KeychainError) in try body(raw) } }.get()
    }
}

extension ArraySlice where Element == UInt8 {
    /// `withUnsafeBytes` for a body that throws only ``KeychainError`` (the standard one rethrows `any Error`).
    package func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(KeychainError) -> R) throws(KeychainError) -> R {
        try withUnsafeBytes { raw in Result { () throws(KeychainError) in try body(raw) } }.get()
    }
}
