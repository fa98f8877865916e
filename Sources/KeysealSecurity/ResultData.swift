import Foundation
import KeysealCore

/// The `NSData` that carries a secret in a SecItem result (`kSecReturnData`, alone or as `kSecValueData` in a
/// result dictionary).
///
/// Two reasons for a class of its own rather than `Data`'s bridge:
/// - **Its copy is wiped.** The bytes live in a buffer of this object's own, zeroed when the result is released.
///   That is this copy only: the engine's decrypted value it was copied from, and whatever the caller copies out,
///   are released as any `Data` is.
/// - **`as? Data` takes the contiguous path.** swift-corelibs-foundation bridges a plain `NSData` back to `Data`
///   through `Data.init<S: Sequence>`, which walks an `NSData` byte by byte through its indexing iterator; a
///   `ContiguousBytes` conformance makes that one copy. Measured in isolation, `Data` → result → `as? Data`
///   fell from about 3.3 µs to 0.9 µs (a 19-byte value).
///
/// corelibs requires a subclass to override the storage funnel (`length` and `bytes`), and its CF initializer
/// casts any subclass that passes bytes to it to `NSMutableData`; so this class initializes `NSData` empty and
/// answers both itself.
final class ResultData: NSData, ContiguousBytes {
    private let storage: UnsafeMutableRawBufferPointer
    private let count: Int

    init(copying data: Data) {
        // One byte at least, so that `bytes` is never a dangling or null pointer for an empty value.
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: Swift.max(data.count, 1), alignment: 16)
        data.withUnsafeBytes { source in
            // A plain copy: `copyBytes(to:)` walks `DataProtocol`'s regions generically, several times slower here.
            if let base = source.baseAddress, source.count > 0 {
                storage.baseAddress!.copyMemory(from: base, byteCount: source.count)
            } else {
                storage.baseAddress!.storeBytes(of: 0, as: UInt8.self)
            }
        }
        self.storage = storage
        count = data.count
        super.init()
    }

    /// Archived as a plain `NSData` (``classForCoder``), so an archived result decodes as one; this class is never
    /// decoded itself.
    required init?(coder: NSCoder) { return nil }

    override var classForCoder: AnyClass { NSData.self }

    deinit {
        zeroize(storage.baseAddress!, storage.count)
        storage.deallocate()
    }

    override var length: Int { count }

    override var bytes: UnsafeRawPointer { UnsafeRawPointer(storage.baseAddress!) }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: storage.baseAddress, count: count))
    }
}
