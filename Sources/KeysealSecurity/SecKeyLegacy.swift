import Foundation
import KeysealCore

// The SecKey functions Apple deprecated but older code still calls, mapped to the algorithm Apple maps each padding
// to: RSA by its padding, EC always ECDSA over a digest (X9.62 DER, or RFC 4754's r ‖ s with `sigRaw`).

/// Apple's paddings for ``SecKeyRawSign(_:_:_:_:_:_:)`` and the other legacy calls.
public struct SecPadding: OptionSet, Hashable, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let PKCS1 = SecPadding(rawValue: 1)
    public static let OAEP = SecPadding(rawValue: 2)
    public static let sigRaw = SecPadding(rawValue: 0x4000)
    public static let PKCS1MD2 = SecPadding(rawValue: 0x8000)
    public static let PKCS1MD5 = SecPadding(rawValue: 0x8001)
    public static let PKCS1SHA1 = SecPadding(rawValue: 0x8002)
    public static let PKCS1SHA224 = SecPadding(rawValue: 0x8003)
    public static let PKCS1SHA256 = SecPadding(rawValue: 0x8004)
    public static let PKCS1SHA384 = SecPadding(rawValue: 0x8005)
    public static let PKCS1SHA512 = SecPadding(rawValue: 0x8006)
}

/// The algorithm Apple's legacy call uses for `padding` on `key`, or nil (errSecParam).
private func legacyAlgorithm(_ key: SecKey, _ padding: SecPadding, signing: Bool) -> SecKeyAlgorithm? {
    if key.keyType.isEC {
        guard signing else { return nil }
        return padding == .sigRaw ? .ecdsaSignatureDigestRFC4754 : .ecdsaSignatureDigestX962
    }
    switch padding {
    case []: return signing ? .rsaSignatureRaw : .rsaEncryptionRaw
    case .PKCS1: return signing ? .rsaSignatureDigestPKCS1v15Raw : .rsaEncryptionPKCS1
    case .OAEP: return signing ? nil : .rsaEncryptionOAEPSHA1
    case .PKCS1SHA1: return signing ? .rsaSignatureDigestPKCS1v15SHA1 : nil
    case .PKCS1SHA224: return signing ? .rsaSignatureDigestPKCS1v15SHA224 : nil
    case .PKCS1SHA256: return signing ? .rsaSignatureDigestPKCS1v15SHA256 : nil
    case .PKCS1SHA384: return signing ? .rsaSignatureDigestPKCS1v15SHA384 : nil
    case .PKCS1SHA512: return signing ? .rsaSignatureDigestPKCS1v15SHA512 : nil
    default: return nil
    }
}

/// Runs a legacy call as the modern `operation`: over the `inputLength` bytes at `input` (a negative length is
/// errSecParam), with the algorithm Apple maps `padding` on `key` to (none: errSecParam). Its result is copied into `out` (room for `*outLength` bytes, set to the
/// length written; a longer result is errSecBufferTooSmall), its error is the status.
private func legacyCall(
    _ key: SecKey,
    _ padding: SecPadding,
    signing: Bool,
    _ input: UnsafePointer<UInt8>,
    _ inputLength: Int,
    _ out: UnsafeMutablePointer<UInt8>,
    _ outLength: UnsafeMutablePointer<Int>,
    _ operation: (SecKey, SecKeyAlgorithm, CFData, UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData?
) -> OSStatus {
    guard inputLength >= 0, outLength.pointee >= 0 else { return errSecParam }
    let data = Data(bytes: input, count: inputLength)
    guard let algorithm = legacyAlgorithm(key, padding, signing: signing) else { return errSecParam }
    var error: Unmanaged<CFError>?
    guard let result = operation(key, algorithm, data, &error) else {
        return OSStatus(truncatingIfNeeded: error?.takeRetainedValue().code ?? Int(errSecParam))
    }
    guard result.count <= outLength.pointee else { return errSecBufferTooSmall }
    result.copyBytes(to: out, count: result.count)
    outLength.pointee = result.count
    return errSecSuccess
}

/// Signs a digest (`dataToSign`) as Apple's `SecKeyRawSign`: EC keys ECDSA (X9.62 DER; RFC 4754 with `.sigRaw`),
/// RSA keys by `padding`. A signature longer than `*sigLen` is errSecBufferTooSmall.
public func SecKeyRawSign(
    _ key: SecKey,
    _ padding: SecPadding,
    _ dataToSign: UnsafePointer<UInt8>,
    _ dataToSignLen: Int,
    _ sig: UnsafeMutablePointer<UInt8>,
    _ sigLen: UnsafeMutablePointer<Int>
) -> OSStatus {
    legacyCall(key, padding, signing: true, dataToSign, dataToSignLen, sig, sigLen, SecKeyCreateSignature)
}

/// Verifies a signature over a digest as Apple's `SecKeyRawVerify`; a bad signature is errSecVerifyFailed.
public func SecKeyRawVerify(
    _ key: SecKey,
    _ padding: SecPadding,
    _ signedData: UnsafePointer<UInt8>,
    _ signedDataLen: Int,
    _ sig: UnsafePointer<UInt8>,
    _ sigLen: Int
) -> OSStatus {
    guard signedDataLen >= 0, sigLen >= 0 else { return errSecParam }
    var error: Unmanaged<CFError>?
    guard let algorithm = legacyAlgorithm(key, padding, signing: true) else { return errSecParam }
    let verified = SecKeyVerifySignature(
        key,
        algorithm,
        Data(bytes: signedData, count: signedDataLen),
        Data(bytes: sig, count: sigLen),
        &error
    )
    if verified { return errSecSuccess }
    return OSStatus(truncatingIfNeeded: error?.takeRetainedValue().code ?? Int(errSecVerifyFailed))
}

/// Encrypts with an RSA public key as Apple's `SecKeyEncrypt` (`.OAEP`: OAEP with SHA-1).
public func SecKeyEncrypt(
    _ key: SecKey,
    _ padding: SecPadding,
    _ plainText: UnsafePointer<UInt8>,
    _ plainTextLen: Int,
    _ cipherText: UnsafeMutablePointer<UInt8>,
    _ cipherTextLen: UnsafeMutablePointer<Int>
) -> OSStatus {
    legacyCall(
        key,
        padding,
        signing: false,
        plainText,
        plainTextLen,
        cipherText,
        cipherTextLen,
        SecKeyCreateEncryptedData
    )
}

/// Decrypts with an RSA private key as Apple's `SecKeyDecrypt`.
public func SecKeyDecrypt(
    _ key: SecKey,
    _ padding: SecPadding,
    _ cipherText: UnsafePointer<UInt8>,
    _ cipherTextLen: Int,
    _ plainText: UnsafeMutablePointer<UInt8>,
    _ plainTextLen: UnsafeMutablePointer<Int>
) -> OSStatus {
    legacyCall(
        key,
        padding,
        signing: false,
        cipherText,
        cipherTextLen,
        plainText,
        plainTextLen,
        SecKeyCreateDecryptedData
    )
}
