/// Names and meanings of the OSStatus values Keyseal returns, with Apple's numbers and wording.
///
/// A leaf module with no dependencies, so that both the engine (`KeysealCore`) and the command line (which
/// links only the thin client) print the same names without either pulling in the other.
public enum OSStatusTable {
    /// Status → (Apple's constant name, Apple's message).
    public static let entries: [Int32: (name: String, message: String)] = [
        0: ("errSecSuccess", "No error."),
        -4: ("errSecUnimplemented", "Function or operation not implemented."),
        -36: ("errSecIO", "I/O error."),
        -50: ("errSecParam", "One or more parameters passed to a function were not valid."),
        -108: ("errSecAllocate", "Failed to allocate memory."),
        -128: ("errSecUserCanceled", "User canceled the operation."),
        -909: ("errSecBadReq", "Bad parameter or invalid state for operation."),
        -2070: ("errSecInternalComponent", "An internal component failed."),
        -25291: ("errSecNotAvailable", "No keychain is available."),
        -25292: ("errSecReadOnly", "This keychain cannot be modified."),
        -25293: ("errSecAuthFailed", "The user name or passphrase you entered is not correct."),
        -25294: ("errSecNoSuchKeychain", "The specified keychain could not be found."),
        -25295: ("errSecInvalidKeychain", "The specified keychain is not a valid keychain file."),
        -25299: ("errSecDuplicateItem", "The specified item already exists in the keychain."),
        -25300: ("errSecItemNotFound", "The specified item could not be found in the keychain."),
        -25301: ("errSecBufferTooSmall", "There is not enough memory available to use the specified item."),
        -25302: (
            "errSecDataTooLarge",
            "This item contains information which is too large or in a format that cannot be displayed."
        ),
        -25303: ("errSecNoSuchAttr", "The specified attribute does not exist."),
        -25304: (
            "errSecInvalidItemRef", "The specified item is no longer valid. It may have been deleted from the keychain."
        ),
        -25306: ("errSecNoSuchClass", "The specified item class does not exist."),
        -25307: ("errSecNoDefaultKeychain", "A default keychain could not be found."),
        -25308: ("errSecInteractionNotAllowed", "User interaction is not allowed."),
        -25309: ("errSecReadOnlyAttr", "The specified attribute could not be modified."),
        -25316: ("errSecDataNotAvailable", "The contents of this item cannot be retrieved."),
        -26275: ("errSecDecode", "Unable to decode the provided data."),
        -34018: ("errSecMissingEntitlement", "A required entitlement isn't present."),
        -67808: ("errSecVerifyFailed", "A cryptographic verification failure has occurred."),
        // Keyseal's own, in a range Apple's Security framework does not use (-25700…-25709).
        -25700: (
            "errKeysealRecoveryRequired",
            "The TPM's PCRs no longer match the values the store was sealed to; recovery is required."
        ),
        -25701: (
            "errKeysealRolledBack",
            "The store is older than the TPM's anti-rollback counter: an older copy was put back."
        ),
    ]

    public static func name(_ status: Int32) -> String? { entries[status]?.name }
    public static func message(_ status: Int32) -> String? { entries[status]?.message }
}
