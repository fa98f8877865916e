import FoundationEssentials

/// What an export wrote (DESIGN §7).
public struct ExportReport: Sendable, Hashable {
    /// Items written, by accessibility class.
    public var exported: [Accessibility: Int]
    /// When-passcode-set-this-device-only items: never exported.
    public var skippedPasscodeOnly: Int
    /// Items of classes that were locked, left out because `availableOnly` was given.
    public var skippedUnavailable: [Accessibility: Int]
    /// Seconds spent deriving the passphrase key (Argon2id, once per file).
    public var keyDerivationSeconds: Double
    /// Rows left out because no SecItem call can reach them (see `KeychainStore.undecryptableItems()`); the rest
    /// of the store is in the backup.
    public var undecryptable: [UndecryptableItem]

    public init(
        exported: [Accessibility: Int] = [:],
        skippedPasscodeOnly: Int = 0,
        skippedUnavailable: [Accessibility: Int] = [:],
        keyDerivationSeconds: Double = 0,
        undecryptable: [UndecryptableItem] = [],
        skippedKeys: [SkippedKey] = []
    ) {
        self.skippedKeys = skippedKeys
        self.exported = exported
        self.skippedPasscodeOnly = skippedPasscodeOnly
        self.skippedUnavailable = skippedUnavailable
        self.keyDerivationSeconds = keyDerivationSeconds
        self.undecryptable = undecryptable
    }

    /// Every item written.
    public var exportedCount: Int { exported.values.reduce(0, +) }

    /// Keys whose private or secret material may not leave the device — keys in the device key's hardware, and
    /// software keys that are not extractable (`kSecAttrIsExtractable` false) — are never exported; named here.
    public var skippedKeys: [SkippedKey] = []

    /// A key left out of a backup, by its label and application tag.
    public struct SkippedKey: Sendable, Equatable, Hashable {
        public enum Reason: String, Sendable, Hashable, CaseIterable {
            /// In the device key's hardware (`kSecAttrTokenIDSecureEnclave`).
            case hardware
            /// A software key created or added with `kSecAttrIsExtractable` false.
            case notExtractable = "not-extractable"
        }

        public var accessGroup: String
        public var label: String?
        /// The application tag's bytes (`kSecAttrApplicationTag`).
        public var tag: Data?
        public var reason: Reason

        public init(accessGroup: String, label: String?, tag: Data?, reason: Reason) {
            self.accessGroup = accessGroup
            self.label = label
            self.tag = tag
            self.reason = reason
        }
    }
}

/// What an import restored and what it left out, and why (DESIGN §7).
public struct ImportReport: Sendable, Hashable {
    /// Why an item of the backup was not restored.
    public enum SkipReason: String, Sendable, Hashable, CaseIterable {
        /// A this-device-only item, and this is not the device that made the backup.
        case otherDevice = "other-device"
        /// An item with the same primary key is already in the store (and `replace` was not given).
        case exists
        /// The backup holds two items with the same primary key; the first was restored.
        case duplicateInBackup = "duplicate-in-backup"
    }

    /// One item not restored, named by service (or server) and account.
    public struct SkippedItem: Sendable, Equatable, Hashable {
        /// The item class code (`genp`, `inet`).
        public var itemClass: String
        public var accessibility: Accessibility
        public var accessGroup: String
        public var service: String?
        public var account: String?
        public var reason: SkipReason
        /// A sentence for people.
        public var detail: String

        public init(
            itemClass: String,
            accessibility: Accessibility,
            accessGroup: String,
            service: String?,
            account: String?,
            reason: SkipReason,
            detail: String
        ) {
            self.itemClass = itemClass
            self.accessibility = accessibility
            self.accessGroup = accessGroup
            self.service = service
            self.account = account
            self.reason = reason
            self.detail = detail
        }
    }

    /// Items in the backup.
    public var total: Int
    /// Items restored, by accessibility class (replacements included).
    public var restored: [Accessibility: Int]
    /// Existing items replaced (`replace`).
    public var replaced: Int
    /// Items not restored, in the backup's order.
    public var skipped: [SkippedItem]
    /// Seconds spent deriving the passphrase key (Argon2id, once per file).
    public var keyDerivationSeconds: Double

    public init(
        total: Int = 0,
        restored: [Accessibility: Int] = [:],
        replaced: Int = 0,
        skipped: [SkippedItem] = [],
        keyDerivationSeconds: Double = 0
    ) {
        self.total = total
        self.restored = restored
        self.replaced = replaced
        self.skipped = skipped
        self.keyDerivationSeconds = keyDerivationSeconds
    }

    /// Every item restored.
    public var restoredCount: Int { restored.values.reduce(0, +) }

    /// Skipped items by reason.
    public func skippedCount(_ reason: SkipReason) -> Int { skipped.count { $0.reason == reason } }
}

/// A row of the store that no SecItem call can reach: it cannot be decrypted, or it is of an item class Keyseal
/// does not implement. Administrators list such rows and delete them by id without decrypting them.
public struct UndecryptableItem: Sendable, Equatable, Hashable {
    public enum Reason: String, Sendable, Hashable, CaseIterable {
        /// An item class Keyseal does not implement (`keys`, `cert`, `idnt`, or an unknown code).
        case unsupportedClass = "unsupported-class"
        /// An accessibility code Keyseal does not know.
        case unknownAccessibility = "unknown-accessibility"
        /// The store holds no key for the row's accessibility class.
        case noClassKey = "no-class-key"
        /// The row's generation disagrees with the ledger (rolled back or edited).
        case generation
        /// The row fails authentication under its class key (edited, or sealed under a key the store no longer has).
        case authentication
    }

    /// The item id in hex (the last 16 bytes of its persistent reference).
    public var id: String
    /// The item class code as stored.
    public var itemClass: String
    /// The accessibility code as stored.
    public var accessibility: String
    public var accessGroup: String
    public var reason: Reason
    /// A sentence for people.
    public var detail: String

    public init(
        id: String,
        itemClass: String,
        accessibility: String,
        accessGroup: String,
        reason: Reason,
        detail: String
    ) {
        self.id = id
        self.itemClass = itemClass
        self.accessibility = accessibility
        self.accessGroup = accessGroup
        self.reason = reason
        self.detail = detail
    }
}
