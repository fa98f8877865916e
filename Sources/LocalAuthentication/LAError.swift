import Foundation

/// LocalAuthentication's error domain, Apple's string.
public let LAErrorDomain = "com.apple.LocalAuthentication"

/// LocalAuthentication's errors (`LAError`), with Apple's codes. Thrown by the async calls, given as `NSError`s in
/// ``LAErrorDomain`` by the callback ones (a `catch let error as LAError` matches either).
public struct LAError: Error, Sendable, Hashable, CustomNSError, LocalizedError {
    public enum Code: Int, Sendable, Hashable {
        case authenticationFailed = -1
        case userCancel = -2
        case userFallback = -3
        case systemCancel = -4
        case passcodeNotSet = -5
        case biometryNotAvailable = -6
        case biometryNotEnrolled = -7
        case biometryLockout = -8
        case appCancel = -9
        case invalidContext = -10
        case companionNotAvailable = -11
        case biometryNotPaired = -12
        case biometryDisconnected = -13
        case invalidDimensions = -14
        case notInteractive = -1004

        public static let watchNotAvailable = Code.companionNotAvailable
        public static let touchIDNotAvailable = Code.biometryNotAvailable
        public static let touchIDNotEnrolled = Code.biometryNotEnrolled
        public static let touchIDLockout = Code.biometryLockout
    }

    public let code: Code
    /// What went wrong, in words (never a secret).
    public let message: String

    public init(_ code: Code, _ message: String = "") {
        self.code = code
        self.message = message
    }

    /// Apple's initializer; `NSLocalizedDescriptionKey` becomes the message.
    public init(_ code: Code, userInfo: [String: Any]) {
        self.init(code, userInfo[NSLocalizedDescriptionKey] as? String ?? "")
    }

    /// Apple's bridged-error initializer: the error of an `NSError` in ``LAErrorDomain``, its
    /// `NSLocalizedDescriptionKey` as the message. A code LocalAuthentication does not declare, or another domain,
    /// is `authenticationFailed` (Apple traps there; a failure is the safe reading).
    public init(_nsError error: NSError) {
        let code = error.domain == LAErrorDomain ? Code(rawValue: error.code) : nil
        self.init(code ?? .authenticationFailed, userInfo: error.userInfo)
    }

    public static var errorDomain: String { LAErrorDomain }
    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] {
        [NSLocalizedDescriptionKey: message.isEmpty ? "\(code)" : message]
    }
    public var errorDescription: String? { message.isEmpty ? "\(code)" : message }

    public static let authenticationFailed = Code.authenticationFailed
    public static let userCancel = Code.userCancel
    public static let userFallback = Code.userFallback
    public static let systemCancel = Code.systemCancel
    public static let passcodeNotSet = Code.passcodeNotSet
    public static let biometryNotAvailable = Code.biometryNotAvailable
    public static let biometryNotEnrolled = Code.biometryNotEnrolled
    public static let biometryLockout = Code.biometryLockout
    public static let appCancel = Code.appCancel
    public static let invalidContext = Code.invalidContext
    public static let companionNotAvailable = Code.companionNotAvailable
    public static let watchNotAvailable = Code.companionNotAvailable
    public static let biometryNotPaired = Code.biometryNotPaired
    public static let biometryDisconnected = Code.biometryDisconnected
    public static let invalidDimensions = Code.invalidDimensions
    public static let notInteractive = Code.notInteractive
    public static let touchIDNotAvailable = Code.biometryNotAvailable
    public static let touchIDNotEnrolled = Code.biometryNotEnrolled
    public static let touchIDLockout = Code.biometryLockout

}

/// Pattern matching `catch LAError.userCancel` (an ``LAError``, or an `NSError` in ``LAErrorDomain``).
public func ~= (code: LAError.Code, error: any Error) -> Bool {
    if let error = error as? LAError { return error.code == code }
    let error = error as NSError
    return error.domain == LAErrorDomain && error.code == code.rawValue
}

/// Apple's `NSErrorPointer` (Foundation on Linux has none): `var error: NSError?` passed as `&error`.
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

// Apple's C names of the codes.
public let kLAErrorAuthenticationFailed: Int32 = -1
public let kLAErrorUserCancel: Int32 = -2
public let kLAErrorUserFallback: Int32 = -3
public let kLAErrorSystemCancel: Int32 = -4
public let kLAErrorPasscodeNotSet: Int32 = -5
public let kLAErrorBiometryNotAvailable: Int32 = -6
public let kLAErrorBiometryNotEnrolled: Int32 = -7
public let kLAErrorBiometryLockout: Int32 = -8
public let kLAErrorAppCancel: Int32 = -9
public let kLAErrorInvalidContext: Int32 = -10
public let kLAErrorCompanionNotAvailable: Int32 = -11
public let kLAErrorWatchNotAvailable: Int32 = -11
public let kLAErrorBiometryNotPaired: Int32 = -12
public let kLAErrorBiometryDisconnected: Int32 = -13
public let kLAErrorInvalidDimensions: Int32 = -14
public let kLAErrorNotInteractive: Int32 = -1004
public let kLAErrorTouchIDNotAvailable: Int32 = -6
public let kLAErrorTouchIDNotEnrolled: Int32 = -7
public let kLAErrorTouchIDLockout: Int32 = -8

/// Policies (`LAPolicy`), Apple's raw values.
public enum LAPolicy: Int, Sendable, Hashable {
    /// Biometry only (fprintd on Linux).
    case deviceOwnerAuthenticationWithBiometrics = 1
    /// Biometry or the device passcode (the store's passcode on Linux).
    case deviceOwnerAuthentication = 2
    /// A paired companion device (a watch): never available on Linux.
    case deviceOwnerAuthenticationWithCompanion = 3
    /// Biometry or a companion device.
    case deviceOwnerAuthenticationWithBiometricsOrCompanion = 4
    /// A watch on the wrist: never available on Linux.
    case deviceOwnerAuthenticationWithWristDetection = 5

    public static let deviceOwnerAuthenticationWithWatch = LAPolicy.deviceOwnerAuthenticationWithCompanion
    public static let deviceOwnerAuthenticationWithBiometricsOrWatch =
        LAPolicy.deviceOwnerAuthenticationWithBiometricsOrCompanion
}

/// Kinds of biometry (`LABiometryType`), Apple's raw values. On Linux only `.none` or `.touchID` (a fingerprint
/// reader through fprintd).
public enum LABiometryType: Int, Sendable, Hashable {
    case none = 0
    case touchID = 1
    case faceID = 2
    case opticID = 4

    public static let LABiometryNone = LABiometryType.none
}

/// What an access control is evaluated for (`LAAccessControlOperation`), Apple's raw values.
public enum LAAccessControlOperation: Int, Sendable, Hashable {
    case createItem = 0
    case useItem = 1
    case createKeySign = 2
    case useKeySign = 3
    case useKeyDecrypt = 4
    case useKeyKeyExchange = 5
}

/// The longest `touchIDAuthenticationAllowableReuseDuration`, seconds (Apple's value).
public let LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval = 300
