/// Apple's status code type: 0 is success, negative values are errors.
public typealias OSStatus = Int32

/// The status codes Keyseal returns, with Apple's values, names and meanings.
public enum KeychainStatus {
    public static let success: OSStatus = 0
    public static let unimplemented: OSStatus = -4
    public static let io: OSStatus = -36
    public static let param: OSStatus = -50
    public static let allocate: OSStatus = -108
    public static let userCanceled: OSStatus = -128
    public static let badReq: OSStatus = -909
    public static let internalComponent: OSStatus = -2070
    public static let notAvailable: OSStatus = -25291
    public static let readOnly: OSStatus = -25292
    public static let authFailed: OSStatus = -25293
    public static let noSuchKeychain: OSStatus = -25294
    public static let invalidKeychain: OSStatus = -25295
    public static let duplicateItem: OSStatus = -25299
    public static let itemNotFound: OSStatus = -25300
    public static let bufferTooSmall: OSStatus = -25301
    public static let dataTooLarge: OSStatus = -25302
    public static let noSuchAttr: OSStatus = -25303
    public static let invalidItemRef: OSStatus = -25304
    public static let noSuchClass: OSStatus = -25306
    public static let noDefaultKeychain: OSStatus = -25307
    public static let interactionNotAllowed: OSStatus = -25308
    public static let readOnlyAttr: OSStatus = -25309
    public static let dataNotAvailable: OSStatus = -25316
    public static let decode: OSStatus = -26275
    public static let missingEntitlement: OSStatus = -34018
    public static let verifyFailed: OSStatus = -67808
    /// Keyseal's own (no Apple status means it): the device secret is bound to PCR values the TPM no longer has;
    /// nothing that needs it is served until `keyseal recover` (docs/TPM.md "Boot binding"). Exit status 156.
    public static let recoveryRequired: OSStatus = -25700
    /// Keyseal's own: the store is older than the TPM's anti-rollback counter says (an older copy was put back);
    /// the passcode classes are not served until an administrator decides (docs/OPERATIONS.md). Exit status 155.
    public static let rolledBack: OSStatus = -25701

    /// Name and meaning of every status Keyseal knows (shared with the command line): Apple's constant name and
    /// wording, and Keyseal's own in a range Apple's Security framework does not use (-25700…-25709).
    public static let table: [OSStatus: (name: String, message: String)] = [
        success: ("errSecSuccess", "No error."),
        unimplemented: ("errSecUnimplemented", "Function or operation not implemented."),
        io: ("errSecIO", "I/O error."),
        param: ("errSecParam", "One or more parameters passed to a function were not valid."),
        allocate: ("errSecAllocate", "Failed to allocate memory."),
        userCanceled: ("errSecUserCanceled", "User canceled the operation."),
        badReq: ("errSecBadReq", "Bad parameter or invalid state for operation."),
        internalComponent: ("errSecInternalComponent", "An internal component failed."),
        notAvailable: ("errSecNotAvailable", "No keychain is available."),
        readOnly: ("errSecReadOnly", "This keychain cannot be modified."),
        authFailed: ("errSecAuthFailed", "The user name or passphrase you entered is not correct."),
        noSuchKeychain: ("errSecNoSuchKeychain", "The specified keychain could not be found."),
        invalidKeychain: ("errSecInvalidKeychain", "The specified keychain is not a valid keychain file."),
        duplicateItem: ("errSecDuplicateItem", "The specified item already exists in the keychain."),
        itemNotFound: ("errSecItemNotFound", "The specified item could not be found in the keychain."),
        bufferTooSmall: ("errSecBufferTooSmall", "There is not enough memory available to use the specified item."),
        dataTooLarge: (
            "errSecDataTooLarge",
            "This item contains information which is too large or in a format that cannot be displayed."
        ),
        noSuchAttr: ("errSecNoSuchAttr", "The specified attribute does not exist."),
        invalidItemRef: (
            "errSecInvalidItemRef", "The specified item is no longer valid. It may have been deleted from the keychain."
        ),
        noSuchClass: ("errSecNoSuchClass", "The specified item class does not exist."),
        noDefaultKeychain: ("errSecNoDefaultKeychain", "A default keychain could not be found."),
        interactionNotAllowed: ("errSecInteractionNotAllowed", "User interaction is not allowed."),
        readOnlyAttr: ("errSecReadOnlyAttr", "The specified attribute could not be modified."),
        dataNotAvailable: ("errSecDataNotAvailable", "The contents of this item cannot be retrieved."),
        decode: ("errSecDecode", "Unable to decode the provided data."),
        missingEntitlement: ("errSecMissingEntitlement", "A required entitlement isn't present."),
        verifyFailed: ("errSecVerifyFailed", "A cryptographic verification failure has occurred."),
        // Keyseal's own, in a range Apple's Security framework does not use (-25700…-25709).
        recoveryRequired: (
            "errKeysealRecoveryRequired",
            "The TPM's PCRs no longer match the values the store was sealed to; recovery is required."
        ),
        rolledBack: (
            "errKeysealRolledBack",
            "The store is older than the TPM's anti-rollback counter: an older copy was put back."
        ),
    ]

    public static func name(_ status: OSStatus) -> String? { table[status]?.name }
    public static func message(_ status: OSStatus) -> String? { table[status]?.message }
}

/// The status table under the name the command line reads it by (``KeychainStatus/table``).
public enum OSStatusTable {
    /// Status → (Apple's constant name, Apple's message).
    public static var entries: [Int32: (name: String, message: String)] { KeychainStatus.table }

    public static func name(_ status: Int32) -> String? { KeychainStatus.name(status) }
    public static func message(_ status: Int32) -> String? { KeychainStatus.message(status) }
}

/// A failed keychain operation: an OSStatus and a message that never contains a secret.
///
/// Equality compares the status only, so `#expect(throws: KeychainError.itemNotFound)` reads naturally.
public struct KeychainError: Error, Sendable, Equatable, Hashable, CustomStringConvertible {
    public var status: OSStatus
    public var message: String
    /// Seconds until the next passcode try is allowed (escalating delay or hardware lockout).
    public var retryAfterSeconds: Int?
    /// Passcode tries left before a hardware lockout or a wipe, where a limit exists.
    public var triesLeft: Int?
    /// True when a passcode check was refused before the passcode was tried (a hardware lockout, or the TPM's last
    /// try kept in reserve): no try was spent, so it is not a failed attempt. Not sent on the wire.
    public var notTried: Bool

    public init(
        _ status: OSStatus,
        _ message: String? = nil,
        retryAfterSeconds: Int? = nil,
        triesLeft: Int? = nil,
        notTried: Bool = false
    ) {
        self.status = status
        self.message = message ?? KeychainStatus.message(status) ?? "OSStatus \(status)"
        self.retryAfterSeconds = retryAfterSeconds
        self.triesLeft = triesLeft
        self.notTried = notTried
    }

    /// The wire's spelling: a status and the message the other side sent.
    public init(status: OSStatus, message: String, retryAfterSeconds: Int? = nil, triesLeft: Int? = nil) {
        self.init(status, message, retryAfterSeconds: retryAfterSeconds, triesLeft: triesLeft)
    }

    public var name: String { KeychainStatus.name(status) ?? "OSStatus \(status)" }
    public var description: String { "\(message) (\(status))" }

    public static func == (lhs: KeychainError, rhs: KeychainError) -> Bool { lhs.status == rhs.status }
    public func hash(into hasher: inout Hasher) { hasher.combine(status) }

    public static let param = KeychainError(KeychainStatus.param)
    public static let unimplemented = KeychainError(KeychainStatus.unimplemented)
    public static let duplicateItem = KeychainError(KeychainStatus.duplicateItem)
    public static let itemNotFound = KeychainError(KeychainStatus.itemNotFound)
    public static let dataTooLarge = KeychainError(KeychainStatus.dataTooLarge)
    public static let noSuchAttr = KeychainError(KeychainStatus.noSuchAttr)
    public static let noSuchClass = KeychainError(KeychainStatus.noSuchClass)
    public static let interactionNotAllowed = KeychainError(KeychainStatus.interactionNotAllowed)
    public static let authFailed = KeychainError(KeychainStatus.authFailed)
    public static let decode = KeychainError(KeychainStatus.decode)
    public static let missingEntitlement = KeychainError(KeychainStatus.missingEntitlement)

    /// The refusal of a group the caller does not hold (−34018), naming it.
    public static func missingEntitlement(_ group: String) -> KeychainError {
        KeychainError(KeychainStatus.missingEntitlement, "the caller does not hold the access group \(group)")
    }
    public static let notAvailable = KeychainError(KeychainStatus.notAvailable)
    public static let readOnlyAttr = KeychainError(KeychainStatus.readOnlyAttr)
    public static let io = KeychainError(KeychainStatus.io)
    public static let internalComponent = KeychainError(KeychainStatus.internalComponent)
}
