import Crypto
import Foundation
import KeysealCore

// CommonCrypto's one-shot SHA digests (CommonDigest.h), with Apple's names and C signatures. Key code for Apple
// hashes before it signs with `import CommonCrypto`; with these in KeysealSecurity, code that uses CommonCrypto only
// for a digest ports by the same import change as the rest (docs/COMPATIBILITY.md). Nothing else of CommonCrypto
// (CCCrypt, CCHmac, key derivation, MD5) is declared.

/// CommonCrypto's length type.
public typealias CC_LONG = UInt32

public var CC_SHA1_DIGEST_LENGTH: Int32 { 20 }
public var CC_SHA224_DIGEST_LENGTH: Int32 { 28 }
public var CC_SHA256_DIGEST_LENGTH: Int32 { 32 }
public var CC_SHA384_DIGEST_LENGTH: Int32 { 48 }
public var CC_SHA512_DIGEST_LENGTH: Int32 { 64 }

/// The SHA-1 of `len` bytes at `data`, written to the 20 bytes at `md`, which is returned.
@discardableResult
public func CC_SHA1(
    _ data: UnsafeRawPointer?,
    _ len: CC_LONG,
    _ md: UnsafeMutablePointer<UInt8>?
) -> UnsafeMutablePointer<UInt8>! {
    commonDigest(data, len, md) { Array(Insecure.SHA1.hash(data: $0)) }
}

/// The SHA-224 of `len` bytes at `data`, written to the 28 bytes at `md`, which is returned.
@discardableResult
public func CC_SHA224(
    _ data: UnsafeRawPointer?,
    _ len: CC_LONG,
    _ md: UnsafeMutablePointer<UInt8>?
) -> UnsafeMutablePointer<UInt8>! {
    commonDigest(data, len, md) { sha224(Data($0)) }
}

/// The SHA-256 of `len` bytes at `data`, written to the 32 bytes at `md`, which is returned.
@discardableResult
public func CC_SHA256(
    _ data: UnsafeRawPointer?,
    _ len: CC_LONG,
    _ md: UnsafeMutablePointer<UInt8>?
) -> UnsafeMutablePointer<UInt8>! {
    commonDigest(data, len, md) { Array(SHA256.hash(data: $0)) }
}

/// The SHA-384 of `len` bytes at `data`, written to the 48 bytes at `md`, which is returned.
@discardableResult
public func CC_SHA384(
    _ data: UnsafeRawPointer?,
    _ len: CC_LONG,
    _ md: UnsafeMutablePointer<UInt8>?
) -> UnsafeMutablePointer<UInt8>! {
    commonDigest(data, len, md) { Array(SHA384.hash(data: $0)) }
}

/// The SHA-512 of `len` bytes at `data`, written to the 64 bytes at `md`, which is returned.
@discardableResult
public func CC_SHA512(
    _ data: UnsafeRawPointer?,
    _ len: CC_LONG,
    _ md: UnsafeMutablePointer<UInt8>?
) -> UnsafeMutablePointer<UInt8>! {
    commonDigest(data, len, md) { Array(SHA512.hash(data: $0)) }
}

/// Hashes `len` bytes at `data` (none when `data` is nil, as CommonCrypto reads none for a zero length) into `md`.
/// A nil `md` computes nothing and returns nil, as CommonCrypto does.
private func commonDigest(
    _ data: UnsafeRawPointer?,
    _ len: CC_LONG,
    _ md: UnsafeMutablePointer<UInt8>?,
    _ hash: (UnsafeRawBufferPointer) -> [UInt8]
) -> UnsafeMutablePointer<UInt8>? {
    guard let md else { return nil }
    let input = UnsafeRawBufferPointer(start: len == 0 ? nil : data, count: data == nil ? 0 : Int(len))
    let digest = hash(input)
    digest.withUnsafeBufferPointer { md.update(from: $0.baseAddress!, count: $0.count) }
    return md
}
