/// When an item's secret may be used: the iOS Keychain's accessibility classes (`kSecAttrAccessible…`).
///
/// The raw value is Apple's stored code (`pdmn`), which is also what the store records in clear.
public enum Accessibility: String, CaseIterable, Sendable, Codable, Hashable {
    case whenUnlocked = "ak"
    case afterFirstUnlock = "ck"
    case always = "dk"
    case whenUnlockedThisDeviceOnly = "aku"
    case afterFirstUnlockThisDeviceOnly = "cku"
    case alwaysThisDeviceOnly = "dku"
    case whenPasscodeSetThisDeviceOnly = "akpu"

    // Compared and hashed by case: the default for a raw-value enum hashes and compares its string, and this type
    // keys the class-key table every item read consults.
    private var ordinal: Int {
        switch self {
        case .whenUnlocked: 0
        case .afterFirstUnlock: 1
        case .always: 2
        case .whenUnlockedThisDeviceOnly: 3
        case .afterFirstUnlockThisDeviceOnly: 4
        case .alwaysThisDeviceOnly: 5
        case .whenPasscodeSetThisDeviceOnly: 6
        }
    }

    public static func == (lhs: Accessibility, rhs: Accessibility) -> Bool { lhs.ordinal == rhs.ordinal }
    public func hash(into hasher: inout Hasher) { hasher.combine(ordinal) }

    /// The class's key is wrapped with the passcode (while one is set).
    public var isPasscodeProtected: Bool {
        switch self {
        case .always, .alwaysThisDeviceOnly: false
        default: true
        }
    }

    /// Usable while the store is locked (after the first unlock since start).
    public var isAvailableWhenLocked: Bool {
        switch self {
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly, .always, .alwaysThisDeviceOnly: true
        default: false
        }
    }

    /// Usable before the first unlock since start.
    public var isAvailableBeforeFirstUnlock: Bool { !isPasscodeProtected }

    /// Restorable only on the same hardware.
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly,
            .whenPasscodeSetThisDeviceOnly:
            true
        default: false
        }
    }

    /// The command line's name: `when-unlocked`, `after-first-unlock-this-device-only`, …
    public var name: String {
        switch self {
        case .whenUnlocked: "when-unlocked"
        case .afterFirstUnlock: "after-first-unlock"
        case .always: "always"
        case .whenUnlockedThisDeviceOnly: "when-unlocked-this-device-only"
        case .afterFirstUnlockThisDeviceOnly: "after-first-unlock-this-device-only"
        case .alwaysThisDeviceOnly: "always-this-device-only"
        case .whenPasscodeSetThisDeviceOnly: "when-passcode-set-this-device-only"
        }
    }

    /// Apple's constant name: `kSecAttrAccessibleWhenUnlocked`, …
    public var appleConstantName: String {
        switch self {
        case .whenUnlocked: "kSecAttrAccessibleWhenUnlocked"
        case .afterFirstUnlock: "kSecAttrAccessibleAfterFirstUnlock"
        case .always: "kSecAttrAccessibleAlways"
        case .whenUnlockedThisDeviceOnly: "kSecAttrAccessibleWhenUnlockedThisDeviceOnly"
        case .afterFirstUnlockThisDeviceOnly: "kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly"
        case .alwaysThisDeviceOnly: "kSecAttrAccessibleAlwaysThisDeviceOnly"
        case .whenPasscodeSetThisDeviceOnly: "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly"
        }
    }

    /// Parses a stored code (`ak`), a command-line name (`when-unlocked`) or an Apple constant name.
    public init?(parsing text: String) {
        if let value = Accessibility(rawValue: text) {
            self = value
            return
        }
        guard let value = Accessibility.allCases.first(where: { $0.name == text || $0.appleConstantName == text })
        else { return nil }
        self = value
    }
}

/// The store's lock state, as the iOS lock-state manager sees the device.
public enum LockState: String, Sendable, Codable, Hashable {
    /// Started with a passcode set and not yet unlocked: only the always classes are usable.
    case beforeFirstUnlock = "before-first-unlock"
    /// Every class is usable.
    case unlocked
    /// Locked after an unlock: the after-first-unlock and always classes stay usable.
    case locked

    /// Whether items of `accessibility` can be used in this state, given whether a passcode is set.
    public func allows(_ accessibility: Accessibility, passcodeSet: Bool) -> Bool {
        if accessibility == .whenPasscodeSetThisDeviceOnly && !passcodeSet { return false }
        switch self {
        case .unlocked: return true
        case .locked: return accessibility.isAvailableWhenLocked
        case .beforeFirstUnlock: return accessibility.isAvailableBeforeFirstUnlock
        }
    }
}

/// Item classes (`kSecClass`). Certificates, keys and identities are recognised and answer
/// `errSecUnimplemented` for now.
public enum ItemClass: String, CaseIterable, Sendable, Codable, Hashable {
    case genericPassword = "genp"
    case internetPassword = "inet"
    case certificate = "cert"
    case key = "keys"
    case identity = "idnt"

    // Compared and hashed by case, not by raw string (see ``Accessibility``): it keys per-class tables on lookups.
    private var ordinal: Int {
        switch self {
        case .genericPassword: 0
        case .internetPassword: 1
        case .certificate: 2
        case .key: 3
        case .identity: 4
        }
    }

    public static func == (lhs: ItemClass, rhs: ItemClass) -> Bool { lhs.ordinal == rhs.ordinal }
    public func hash(into hasher: inout Hasher) { hasher.combine(ordinal) }

    /// Every class is implemented; an identity is a join of a certificate and a private key, never a row.
    public var isImplemented: Bool { true }

    /// Whether items of this class are rows of their own (an identity is not).
    public var isStored: Bool { self != .identity }
}
