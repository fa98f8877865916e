internal import CP11Kit

/// A PKCS#11 return value (`CK_RV`). Open: a module may return vendor codes that have no name here.
struct CKResult: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    let rawValue: UInt
    init(rawValue: UInt) { self.rawValue = rawValue }

    static let ok = CKResult(rawValue: UInt(CKR_OK))
    static let generalError = CKResult(rawValue: UInt(CKR_GENERAL_ERROR))
    static let argumentsBad = CKResult(rawValue: UInt(CKR_ARGUMENTS_BAD))
    static let deviceError = CKResult(rawValue: UInt(CKR_DEVICE_ERROR))
    static let deviceRemoved = CKResult(rawValue: UInt(CKR_DEVICE_REMOVED))
    static let encryptedDataInvalid = CKResult(rawValue: UInt(CKR_ENCRYPTED_DATA_INVALID))
    static let encryptedDataLenRange = CKResult(rawValue: UInt(CKR_ENCRYPTED_DATA_LEN_RANGE))
    static let keyHandleInvalid = CKResult(rawValue: UInt(CKR_KEY_HANDLE_INVALID))
    static let mechanismInvalid = CKResult(rawValue: UInt(CKR_MECHANISM_INVALID))
    static let mechanismParamInvalid = CKResult(rawValue: UInt(CKR_MECHANISM_PARAM_INVALID))
    static let objectHandleInvalid = CKResult(rawValue: UInt(CKR_OBJECT_HANDLE_INVALID))
    static let operationActive = CKResult(rawValue: UInt(CKR_OPERATION_ACTIVE))
    static let pinIncorrect = CKResult(rawValue: UInt(CKR_PIN_INCORRECT))
    static let pinLocked = CKResult(rawValue: UInt(CKR_PIN_LOCKED))
    static let pinExpired = CKResult(rawValue: UInt(CKR_PIN_EXPIRED))
    static let sessionClosed = CKResult(rawValue: UInt(CKR_SESSION_CLOSED))
    static let sessionHandleInvalid = CKResult(rawValue: UInt(CKR_SESSION_HANDLE_INVALID))
    static let tokenNotPresent = CKResult(rawValue: UInt(CKR_TOKEN_NOT_PRESENT))
    static let tokenNotRecognized = CKResult(rawValue: UInt(CKR_TOKEN_NOT_RECOGNIZED))
    static let userAlreadyLoggedIn = CKResult(rawValue: UInt(CKR_USER_ALREADY_LOGGED_IN))
    static let userNotLoggedIn = CKResult(rawValue: UInt(CKR_USER_NOT_LOGGED_IN))
    static let userPINNotInitialized = CKResult(rawValue: UInt(CKR_USER_PIN_NOT_INITIALIZED))
    static let bufferTooSmall = CKResult(rawValue: UInt(CKR_BUFFER_TOO_SMALL))
    static let cryptokiNotInitialized = CKResult(rawValue: UInt(CKR_CRYPTOKI_NOT_INITIALIZED))
    static let attributeTypeInvalid = CKResult(rawValue: UInt(CKR_ATTRIBUTE_TYPE_INVALID))
    static let attributeSensitive = CKResult(rawValue: UInt(CKR_ATTRIBUTE_SENSITIVE))
    static let functionNotSupported = CKResult(rawValue: UInt(CKR_FUNCTION_NOT_SUPPORTED))
    static let keyFunctionNotPermitted = CKResult(rawValue: UInt(CKR_KEY_FUNCTION_NOT_PERMITTED))
    static let keyTypeInconsistent = CKResult(rawValue: UInt(CKR_KEY_TYPE_INCONSISTENT))
    static let templateInconsistent = CKResult(rawValue: UInt(CKR_TEMPLATE_INCONSISTENT))
    static let attributeValueInvalid = CKResult(rawValue: UInt(CKR_ATTRIBUTE_VALUE_INVALID))

    private static let names: [CKResult: String] = [
        .ok: "CKR_OK", .generalError: "CKR_GENERAL_ERROR", .argumentsBad: "CKR_ARGUMENTS_BAD",
        .deviceError: "CKR_DEVICE_ERROR", .deviceRemoved: "CKR_DEVICE_REMOVED",
        .encryptedDataInvalid: "CKR_ENCRYPTED_DATA_INVALID", .encryptedDataLenRange: "CKR_ENCRYPTED_DATA_LEN_RANGE",
        .keyHandleInvalid: "CKR_KEY_HANDLE_INVALID", .mechanismInvalid: "CKR_MECHANISM_INVALID",
        .mechanismParamInvalid: "CKR_MECHANISM_PARAM_INVALID", .objectHandleInvalid: "CKR_OBJECT_HANDLE_INVALID",
        .operationActive: "CKR_OPERATION_ACTIVE", .pinIncorrect: "CKR_PIN_INCORRECT", .pinLocked: "CKR_PIN_LOCKED",
        .pinExpired: "CKR_PIN_EXPIRED", .sessionClosed: "CKR_SESSION_CLOSED",
        .sessionHandleInvalid: "CKR_SESSION_HANDLE_INVALID", .tokenNotPresent: "CKR_TOKEN_NOT_PRESENT",
        .tokenNotRecognized: "CKR_TOKEN_NOT_RECOGNIZED", .userAlreadyLoggedIn: "CKR_USER_ALREADY_LOGGED_IN",
        .userNotLoggedIn: "CKR_USER_NOT_LOGGED_IN", .userPINNotInitialized: "CKR_USER_PIN_NOT_INITIALIZED",
        .bufferTooSmall: "CKR_BUFFER_TOO_SMALL", .cryptokiNotInitialized: "CKR_CRYPTOKI_NOT_INITIALIZED",
        .attributeTypeInvalid: "CKR_ATTRIBUTE_TYPE_INVALID", .attributeSensitive: "CKR_ATTRIBUTE_SENSITIVE",
        .functionNotSupported: "CKR_FUNCTION_NOT_SUPPORTED", .keyFunctionNotPermitted: "CKR_KEY_FUNCTION_NOT_PERMITTED",
        .keyTypeInconsistent: "CKR_KEY_TYPE_INCONSISTENT", .templateInconsistent: "CKR_TEMPLATE_INCONSISTENT",
        .attributeValueInvalid: "CKR_ATTRIBUTE_VALUE_INVALID",
    ]

    var name: String { Self.names[self] ?? "CKR_0x" + String(rawValue, radix: 16) }
    var description: String { "\(name) (0x\(String(rawValue, radix: 16)))" }

    /// The token or its key went away under an open session.
    var meansKeyGone: Bool { self == .keyHandleInvalid || self == .objectHandleInvalid }
    var meansTokenGone: Bool {
        self == .deviceRemoved || self == .tokenNotPresent || self == .sessionHandleInvalid
            || self == .sessionClosed || self == .tokenNotRecognized || self == .userNotLoggedIn
    }
    /// What a GCM authentication failure looks like: SoftHSM2 answers a bad tag with CKR_GENERAL_ERROR.
    var meansBadCiphertext: Bool {
        self == .generalError || self == .encryptedDataInvalid || self == .encryptedDataLenRange
    }
}

/// A failed PKCS#11 call: the function's name and its return value. Turned into a ``KeychainError`` with
/// context by the device key.
struct PKCS11CallError: Error, CustomStringConvertible {
    let function: String
    let result: CKResult
    var description: String { "\(function) failed: \(result)" }
}

/// The one checking function for PKCS#11 calls: records the function name and throws on anything but CKR_OK.
/// Codes that can only mean a bug in this file (bad arguments) stop the process.
@inline(__always)
func ck(_ function: String, _ rv: CK_RV) throws(PKCS11CallError) {
    guard rv != CK_RV(CKR_OK) else { return }
    let result = CKResult(rawValue: UInt(rv))
    precondition(result != .argumentsBad, "\(function): CKR_ARGUMENTS_BAD (a bug in KeysealPKCS11)")
    throw PKCS11CallError(function: function, result: result)
}
