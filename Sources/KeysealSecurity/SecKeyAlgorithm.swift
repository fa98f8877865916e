import Foundation

// Apple's `SecKeyAlgorithm` names (SecKey.h), every one Apple declares, with Apple's values, all implemented:
// `SecKeyIsAlgorithmSupported` answers true for the keys that can do them (RSA names on RSA keys, ECDSA, ECIES and
// ECDH names on EC keys), false for the others, which are errSecParam "algorithm not supported by the key" when used.

/// An algorithm name (Apple's `SecKeyAlgorithm`, a `CFString`).
public struct SecKeyAlgorithm: RawRepresentable, Hashable, Sendable {
    /// The name, as the engine takes it.
    let name: String
    public var rawValue: CFString { NSString(string: name) }
    public init(rawValue: CFString) { name = rawValue as String }
    public init(_ rawValue: CFString) { name = rawValue as String }

    public static let rsaSignatureRaw = SecKeyAlgorithm("algid:sign:RSA:raw")
    public static let rsaSignatureDigestPKCS1v15Raw = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15")
    public static let rsaSignatureDigestPKCS1v15SHA1 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA1")
    public static let rsaSignatureDigestPKCS1v15SHA224 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA224")
    public static let rsaSignatureDigestPKCS1v15SHA256 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA256")
    public static let rsaSignatureDigestPKCS1v15SHA384 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA384")
    public static let rsaSignatureDigestPKCS1v15SHA512 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA512")
    public static let rsaSignatureMessagePKCS1v15SHA1 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA1")
    public static let rsaSignatureMessagePKCS1v15SHA224 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA224")
    public static let rsaSignatureMessagePKCS1v15SHA256 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA256")
    public static let rsaSignatureMessagePKCS1v15SHA384 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA384")
    public static let rsaSignatureMessagePKCS1v15SHA512 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA512")
    public static let rsaSignatureDigestPSSSHA1 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA1:SHA1:20")
    public static let rsaSignatureDigestPSSSHA224 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA224:SHA224:24")
    public static let rsaSignatureDigestPSSSHA256 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA256:SHA256:32")
    public static let rsaSignatureDigestPSSSHA384 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA384:SHA384:48")
    public static let rsaSignatureDigestPSSSHA512 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA512:SHA512:64")
    public static let rsaSignatureMessagePSSSHA1 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA1:SHA1:20")
    public static let rsaSignatureMessagePSSSHA224 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA224:SHA224:24")
    public static let rsaSignatureMessagePSSSHA256 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA256:SHA256:32")
    public static let rsaSignatureMessagePSSSHA384 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA384:SHA384:48")
    public static let rsaSignatureMessagePSSSHA512 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA512:SHA512:64")
    public static let ecdsaSignatureRFC4754 = SecKeyAlgorithm("algid:sign:ECDSA:RFC4754")
    public static let ecdsaSignatureDigestX962 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962")
    public static let ecdsaSignatureDigestX962SHA1 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA1")
    public static let ecdsaSignatureDigestX962SHA224 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA224")
    public static let ecdsaSignatureDigestX962SHA256 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA256")
    public static let ecdsaSignatureDigestX962SHA384 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA384")
    public static let ecdsaSignatureDigestX962SHA512 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA512")
    public static let ecdsaSignatureMessageX962SHA1 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA1")
    public static let ecdsaSignatureMessageX962SHA224 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA224")
    public static let ecdsaSignatureMessageX962SHA256 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA256")
    public static let ecdsaSignatureMessageX962SHA384 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA384")
    public static let ecdsaSignatureMessageX962SHA512 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA512")
    public static let ecdsaSignatureDigestRFC4754 = SecKeyAlgorithm("algid:sign:ECDSA:digest-RFC4754")
    public static let ecdsaSignatureDigestRFC4754SHA1 = SecKeyAlgorithm("algid:sign:ECDSA:digest-RFC4754:SHA1")
    public static let ecdsaSignatureDigestRFC4754SHA224 = SecKeyAlgorithm("algid:sign:ECDSA:digest-RFC4754:SHA224")
    public static let ecdsaSignatureDigestRFC4754SHA256 = SecKeyAlgorithm("algid:sign:ECDSA:digest-RFC4754:SHA256")
    public static let ecdsaSignatureDigestRFC4754SHA384 = SecKeyAlgorithm("algid:sign:ECDSA:digest-RFC4754:SHA384")
    public static let ecdsaSignatureDigestRFC4754SHA512 = SecKeyAlgorithm("algid:sign:ECDSA:digest-RFC4754:SHA512")
    public static let ecdsaSignatureMessageRFC4754SHA1 = SecKeyAlgorithm("algid:sign:ECDSA:message-RFC4754:SHA1")
    public static let ecdsaSignatureMessageRFC4754SHA224 = SecKeyAlgorithm("algid:sign:ECDSA:message-RFC4754:SHA224")
    public static let ecdsaSignatureMessageRFC4754SHA256 = SecKeyAlgorithm("algid:sign:ECDSA:message-RFC4754:SHA256")
    public static let ecdsaSignatureMessageRFC4754SHA384 = SecKeyAlgorithm("algid:sign:ECDSA:message-RFC4754:SHA384")
    public static let ecdsaSignatureMessageRFC4754SHA512 = SecKeyAlgorithm("algid:sign:ECDSA:message-RFC4754:SHA512")
    public static let rsaEncryptionRaw = SecKeyAlgorithm("algid:encrypt:RSA:raw")
    public static let rsaEncryptionPKCS1 = SecKeyAlgorithm("algid:encrypt:RSA:PKCS1")
    public static let rsaEncryptionOAEPSHA1 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA1")
    public static let rsaEncryptionOAEPSHA224 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA224")
    public static let rsaEncryptionOAEPSHA256 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA256")
    public static let rsaEncryptionOAEPSHA384 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA384")
    public static let rsaEncryptionOAEPSHA512 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA512")
    public static let rsaEncryptionOAEPSHA1AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA1:AESGCM")
    public static let rsaEncryptionOAEPSHA224AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA224:AESGCM")
    public static let rsaEncryptionOAEPSHA256AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA256:AESGCM")
    public static let rsaEncryptionOAEPSHA384AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA384:AESGCM")
    public static let rsaEncryptionOAEPSHA512AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA512:AESGCM")
    public static let eciesEncryptionStandardX963SHA1AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA1:AESGCM"
    )
    public static let eciesEncryptionStandardX963SHA224AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM"
    )
    public static let eciesEncryptionStandardX963SHA256AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM"
    )
    public static let eciesEncryptionStandardX963SHA384AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM"
    )
    public static let eciesEncryptionStandardX963SHA512AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM"
    )
    public static let eciesEncryptionCofactorX963SHA1AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA1:AESGCM"
    )
    public static let eciesEncryptionCofactorX963SHA224AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM"
    )
    public static let eciesEncryptionCofactorX963SHA256AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM"
    )
    public static let eciesEncryptionCofactorX963SHA384AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM"
    )
    public static let eciesEncryptionCofactorX963SHA512AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM"
    )
    public static let eciesEncryptionStandardVariableIVX963SHA224AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM-KDFIV"
    )
    public static let eciesEncryptionStandardVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM-KDFIV"
    )
    public static let eciesEncryptionStandardVariableIVX963SHA384AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM-KDFIV"
    )
    public static let eciesEncryptionStandardVariableIVX963SHA512AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM-KDFIV"
    )
    public static let eciesEncryptionCofactorVariableIVX963SHA224AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM-KDFIV"
    )
    public static let eciesEncryptionCofactorVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV"
    )
    public static let eciesEncryptionCofactorVariableIVX963SHA384AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM-KDFIV"
    )
    public static let eciesEncryptionCofactorVariableIVX963SHA512AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM-KDFIV"
    )
    public static let ecdhKeyExchangeStandard = SecKeyAlgorithm("algid:keyexchange:ECDH")
    public static let ecdhKeyExchangeStandardX963SHA1 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA1")
    public static let ecdhKeyExchangeStandardX963SHA224 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA224")
    public static let ecdhKeyExchangeStandardX963SHA256 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA256")
    public static let ecdhKeyExchangeStandardX963SHA384 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA384")
    public static let ecdhKeyExchangeStandardX963SHA512 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA512")
    public static let ecdhKeyExchangeCofactor = SecKeyAlgorithm("algid:keyexchange:ECDHC")
    public static let ecdhKeyExchangeCofactorX963SHA1 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA1")
    public static let ecdhKeyExchangeCofactorX963SHA224 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA224")
    public static let ecdhKeyExchangeCofactorX963SHA256 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA256")
    public static let ecdhKeyExchangeCofactorX963SHA384 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA384")
    public static let ecdhKeyExchangeCofactorX963SHA512 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA512")
}

public let kSecKeyAlgorithmRSASignatureRaw: SecKeyAlgorithm = .rsaSignatureRaw
public let kSecKeyAlgorithmRSASignatureDigestPKCS1v15Raw: SecKeyAlgorithm = .rsaSignatureDigestPKCS1v15Raw
public let kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA1: SecKeyAlgorithm = .rsaSignatureDigestPKCS1v15SHA1
public let kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA224: SecKeyAlgorithm = .rsaSignatureDigestPKCS1v15SHA224
public let kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA256: SecKeyAlgorithm = .rsaSignatureDigestPKCS1v15SHA256
public let kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA384: SecKeyAlgorithm = .rsaSignatureDigestPKCS1v15SHA384
public let kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA512: SecKeyAlgorithm = .rsaSignatureDigestPKCS1v15SHA512
public let kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA1: SecKeyAlgorithm = .rsaSignatureMessagePKCS1v15SHA1
public let kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA224: SecKeyAlgorithm = .rsaSignatureMessagePKCS1v15SHA224
public let kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA256: SecKeyAlgorithm = .rsaSignatureMessagePKCS1v15SHA256
public let kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA384: SecKeyAlgorithm = .rsaSignatureMessagePKCS1v15SHA384
public let kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA512: SecKeyAlgorithm = .rsaSignatureMessagePKCS1v15SHA512
public let kSecKeyAlgorithmRSASignatureDigestPSSSHA1: SecKeyAlgorithm = .rsaSignatureDigestPSSSHA1
public let kSecKeyAlgorithmRSASignatureDigestPSSSHA224: SecKeyAlgorithm = .rsaSignatureDigestPSSSHA224
public let kSecKeyAlgorithmRSASignatureDigestPSSSHA256: SecKeyAlgorithm = .rsaSignatureDigestPSSSHA256
public let kSecKeyAlgorithmRSASignatureDigestPSSSHA384: SecKeyAlgorithm = .rsaSignatureDigestPSSSHA384
public let kSecKeyAlgorithmRSASignatureDigestPSSSHA512: SecKeyAlgorithm = .rsaSignatureDigestPSSSHA512
public let kSecKeyAlgorithmRSASignatureMessagePSSSHA1: SecKeyAlgorithm = .rsaSignatureMessagePSSSHA1
public let kSecKeyAlgorithmRSASignatureMessagePSSSHA224: SecKeyAlgorithm = .rsaSignatureMessagePSSSHA224
public let kSecKeyAlgorithmRSASignatureMessagePSSSHA256: SecKeyAlgorithm = .rsaSignatureMessagePSSSHA256
public let kSecKeyAlgorithmRSASignatureMessagePSSSHA384: SecKeyAlgorithm = .rsaSignatureMessagePSSSHA384
public let kSecKeyAlgorithmRSASignatureMessagePSSSHA512: SecKeyAlgorithm = .rsaSignatureMessagePSSSHA512
public let kSecKeyAlgorithmECDSASignatureRFC4754: SecKeyAlgorithm = .ecdsaSignatureRFC4754
public let kSecKeyAlgorithmECDSASignatureDigestX962: SecKeyAlgorithm = .ecdsaSignatureDigestX962
public let kSecKeyAlgorithmECDSASignatureDigestX962SHA1: SecKeyAlgorithm = .ecdsaSignatureDigestX962SHA1
public let kSecKeyAlgorithmECDSASignatureDigestX962SHA224: SecKeyAlgorithm = .ecdsaSignatureDigestX962SHA224
public let kSecKeyAlgorithmECDSASignatureDigestX962SHA256: SecKeyAlgorithm = .ecdsaSignatureDigestX962SHA256
public let kSecKeyAlgorithmECDSASignatureDigestX962SHA384: SecKeyAlgorithm = .ecdsaSignatureDigestX962SHA384
public let kSecKeyAlgorithmECDSASignatureDigestX962SHA512: SecKeyAlgorithm = .ecdsaSignatureDigestX962SHA512
public let kSecKeyAlgorithmECDSASignatureMessageX962SHA1: SecKeyAlgorithm = .ecdsaSignatureMessageX962SHA1
public let kSecKeyAlgorithmECDSASignatureMessageX962SHA224: SecKeyAlgorithm = .ecdsaSignatureMessageX962SHA224
public let kSecKeyAlgorithmECDSASignatureMessageX962SHA256: SecKeyAlgorithm = .ecdsaSignatureMessageX962SHA256
public let kSecKeyAlgorithmECDSASignatureMessageX962SHA384: SecKeyAlgorithm = .ecdsaSignatureMessageX962SHA384
public let kSecKeyAlgorithmECDSASignatureMessageX962SHA512: SecKeyAlgorithm = .ecdsaSignatureMessageX962SHA512
public let kSecKeyAlgorithmECDSASignatureDigestRFC4754: SecKeyAlgorithm = .ecdsaSignatureDigestRFC4754
public let kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA1: SecKeyAlgorithm = .ecdsaSignatureDigestRFC4754SHA1
public let kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA224: SecKeyAlgorithm = .ecdsaSignatureDigestRFC4754SHA224
public let kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA256: SecKeyAlgorithm = .ecdsaSignatureDigestRFC4754SHA256
public let kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA384: SecKeyAlgorithm = .ecdsaSignatureDigestRFC4754SHA384
public let kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA512: SecKeyAlgorithm = .ecdsaSignatureDigestRFC4754SHA512
public let kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA1: SecKeyAlgorithm = .ecdsaSignatureMessageRFC4754SHA1
public let kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA224: SecKeyAlgorithm = .ecdsaSignatureMessageRFC4754SHA224
public let kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA256: SecKeyAlgorithm = .ecdsaSignatureMessageRFC4754SHA256
public let kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA384: SecKeyAlgorithm = .ecdsaSignatureMessageRFC4754SHA384
public let kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA512: SecKeyAlgorithm = .ecdsaSignatureMessageRFC4754SHA512
public let kSecKeyAlgorithmRSAEncryptionRaw: SecKeyAlgorithm = .rsaEncryptionRaw
public let kSecKeyAlgorithmRSAEncryptionPKCS1: SecKeyAlgorithm = .rsaEncryptionPKCS1
public let kSecKeyAlgorithmRSAEncryptionOAEPSHA1: SecKeyAlgorithm = .rsaEncryptionOAEPSHA1
public let kSecKeyAlgorithmRSAEncryptionOAEPSHA224: SecKeyAlgorithm = .rsaEncryptionOAEPSHA224
public let kSecKeyAlgorithmRSAEncryptionOAEPSHA256: SecKeyAlgorithm = .rsaEncryptionOAEPSHA256
public let kSecKeyAlgorithmRSAEncryptionOAEPSHA384: SecKeyAlgorithm = .rsaEncryptionOAEPSHA384
public let kSecKeyAlgorithmRSAEncryptionOAEPSHA512: SecKeyAlgorithm = .rsaEncryptionOAEPSHA512
public let kSecKeyAlgorithmRSAEncryptionOAEPSHA1AESGCM: SecKeyAlgorithm = .rsaEncryptionOAEPSHA1AESGCM
public let kSecKeyAlgorithmRSAEncryptionOAEPSHA224AESGCM: SecKeyAlgorithm = .rsaEncryptionOAEPSHA224AESGCM
public let kSecKeyAlgorithmRSAEncryptionOAEPSHA256AESGCM: SecKeyAlgorithm = .rsaEncryptionOAEPSHA256AESGCM
public let kSecKeyAlgorithmRSAEncryptionOAEPSHA384AESGCM: SecKeyAlgorithm = .rsaEncryptionOAEPSHA384AESGCM
public let kSecKeyAlgorithmRSAEncryptionOAEPSHA512AESGCM: SecKeyAlgorithm = .rsaEncryptionOAEPSHA512AESGCM
public let kSecKeyAlgorithmECIESEncryptionStandardX963SHA1AESGCM: SecKeyAlgorithm =
    .eciesEncryptionStandardX963SHA1AESGCM
public let kSecKeyAlgorithmECIESEncryptionStandardX963SHA224AESGCM: SecKeyAlgorithm =
    .eciesEncryptionStandardX963SHA224AESGCM
public let kSecKeyAlgorithmECIESEncryptionStandardX963SHA256AESGCM: SecKeyAlgorithm =
    .eciesEncryptionStandardX963SHA256AESGCM
public let kSecKeyAlgorithmECIESEncryptionStandardX963SHA384AESGCM: SecKeyAlgorithm =
    .eciesEncryptionStandardX963SHA384AESGCM
public let kSecKeyAlgorithmECIESEncryptionStandardX963SHA512AESGCM: SecKeyAlgorithm =
    .eciesEncryptionStandardX963SHA512AESGCM
public let kSecKeyAlgorithmECIESEncryptionCofactorX963SHA1AESGCM: SecKeyAlgorithm =
    .eciesEncryptionCofactorX963SHA1AESGCM
public let kSecKeyAlgorithmECIESEncryptionCofactorX963SHA224AESGCM: SecKeyAlgorithm =
    .eciesEncryptionCofactorX963SHA224AESGCM
public let kSecKeyAlgorithmECIESEncryptionCofactorX963SHA256AESGCM: SecKeyAlgorithm =
    .eciesEncryptionCofactorX963SHA256AESGCM
public let kSecKeyAlgorithmECIESEncryptionCofactorX963SHA384AESGCM: SecKeyAlgorithm =
    .eciesEncryptionCofactorX963SHA384AESGCM
public let kSecKeyAlgorithmECIESEncryptionCofactorX963SHA512AESGCM: SecKeyAlgorithm =
    .eciesEncryptionCofactorX963SHA512AESGCM
public let kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA224AESGCM: SecKeyAlgorithm =
    .eciesEncryptionStandardVariableIVX963SHA224AESGCM
public let kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA256AESGCM: SecKeyAlgorithm =
    .eciesEncryptionStandardVariableIVX963SHA256AESGCM
public let kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA384AESGCM: SecKeyAlgorithm =
    .eciesEncryptionStandardVariableIVX963SHA384AESGCM
public let kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA512AESGCM: SecKeyAlgorithm =
    .eciesEncryptionStandardVariableIVX963SHA512AESGCM
public let kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA224AESGCM: SecKeyAlgorithm =
    .eciesEncryptionCofactorVariableIVX963SHA224AESGCM
public let kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA256AESGCM: SecKeyAlgorithm =
    .eciesEncryptionCofactorVariableIVX963SHA256AESGCM
public let kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA384AESGCM: SecKeyAlgorithm =
    .eciesEncryptionCofactorVariableIVX963SHA384AESGCM
public let kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA512AESGCM: SecKeyAlgorithm =
    .eciesEncryptionCofactorVariableIVX963SHA512AESGCM
public let kSecKeyAlgorithmECDHKeyExchangeStandard: SecKeyAlgorithm = .ecdhKeyExchangeStandard
public let kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA1: SecKeyAlgorithm = .ecdhKeyExchangeStandardX963SHA1
public let kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA224: SecKeyAlgorithm = .ecdhKeyExchangeStandardX963SHA224
public let kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA256: SecKeyAlgorithm = .ecdhKeyExchangeStandardX963SHA256
public let kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA384: SecKeyAlgorithm = .ecdhKeyExchangeStandardX963SHA384
public let kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA512: SecKeyAlgorithm = .ecdhKeyExchangeStandardX963SHA512
public let kSecKeyAlgorithmECDHKeyExchangeCofactor: SecKeyAlgorithm = .ecdhKeyExchangeCofactor
public let kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA1: SecKeyAlgorithm = .ecdhKeyExchangeCofactorX963SHA1
public let kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA224: SecKeyAlgorithm = .ecdhKeyExchangeCofactorX963SHA224
public let kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA256: SecKeyAlgorithm = .ecdhKeyExchangeCofactorX963SHA256
public let kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA384: SecKeyAlgorithm = .ecdhKeyExchangeCofactorX963SHA384
public let kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA512: SecKeyAlgorithm = .ecdhKeyExchangeCofactorX963SHA512
