import FoundationEssentials
import Glibc

/// Which synchronizable items a query matches.
public enum SyncMatch: Sendable, Hashable {
    /// Only items with `sync` false: a query without a `sync` key.
    case no
    /// Only items with `sync` true.
    case yes
    /// Both (`kSecAttrSynchronizableAny`).
    case any
}

/// How many items a query returns.
public enum MatchLimit: Sendable, Hashable {
    case one
    case all
    case count(Int)

    /// Whether results come back as an array.
    public var returnsArray: Bool {
        switch self {
        case .one: false
        case .all: true
        case .count(let n): n > 1
        }
    }

    /// The largest number of items to collect, or nil for no bound.
    public var bound: Int? {
        switch self {
        case .one: 1
        case .all: nil
        case .count(let n): n
        }
    }
}

/// What a find (or an add) returns for each item.
public struct ReturnOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let data = ReturnOptions(rawValue: 1)
    public static let attributes = ReturnOptions(rawValue: 2)
    public static let persistentRef = ReturnOptions(rawValue: 4)
    /// Accepted on password classes; adds nothing to the result.
    public static let ref = ReturnOptions(rawValue: 8)

    /// The return keys that produce something for password classes.
    public var effective: ReturnOptions { intersection([.data, .attributes, .persistentRef]) }
}

/// A parsed query: what CopyMatching, Update and Delete match.
public struct ItemQuery: Sendable, Hashable {
    public var itemClass: ItemClass
    /// Attributes to match, other than the access group, accessibility and `sync`.
    public var attributes: [String: AttributeValue]
    public var accessGroup: String?
    public var accessibility: Accessibility?
    public var synchronizable: SyncMatch
    /// `v_PersistentRef`: find exactly this item.
    public var persistentRef: Data?
    public var limit: MatchLimit
    /// Whether the caller gave `m_Limit` (Delete refuses any limit but all).
    public var limitGiven: Bool
    public var returns: ReturnOptions

    public init(
        itemClass: ItemClass,
        attributes: [String: AttributeValue] = [:],
        accessGroup: String? = nil,
        accessibility: Accessibility? = nil,
        synchronizable: SyncMatch = .no,
        persistentRef: Data? = nil,
        limit: MatchLimit = .one,
        limitGiven: Bool = false,
        returns: ReturnOptions = []
    ) {
        self.itemClass = itemClass
        self.attributes = attributes
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.synchronizable = synchronizable
        self.persistentRef = persistentRef
        self.limit = limit
        self.limitGiven = limitGiven
        self.returns = returns
    }
}

/// A parsed add.
public struct NewItem: Sendable, Hashable {
    public var itemClass: ItemClass
    /// Attributes other than the access group, accessibility and `sync`.
    public var attributes: [String: AttributeValue]
    public var accessGroup: String?
    public var accessibility: Accessibility
    /// Flags of a `SecAccessControl` given as `accc`, recorded with the item.
    public var accessControlFlags: UInt?
    public var synchronizable: Bool
    public var data: Data
    public var returns: ReturnOptions

    public init(
        itemClass: ItemClass,
        attributes: [String: AttributeValue] = [:],
        accessGroup: String? = nil,
        accessibility: Accessibility = .whenUnlocked,
        accessControlFlags: UInt? = nil,
        synchronizable: Bool = false,
        data: Data = Data(),
        returns: ReturnOptions = []
    ) {
        self.itemClass = itemClass
        self.attributes = attributes
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.accessControlFlags = accessControlFlags
        self.synchronizable = synchronizable
        self.data = data
        self.returns = returns
    }
}

/// A parsed update: the attributes (and data) to change on every matched item.
public struct ItemChanges: Sendable, Hashable {
    /// Attributes other than the access group, accessibility and `sync`.
    public var attributes: [String: AttributeValue]
    public var accessGroup: String?
    public var accessibility: Accessibility?
    public var accessControlFlags: UInt?
    public var synchronizable: Bool?
    public var data: Data?

    public init(
        attributes: [String: AttributeValue] = [:],
        accessGroup: String? = nil,
        accessibility: Accessibility? = nil,
        accessControlFlags: UInt? = nil,
        synchronizable: Bool? = nil,
        data: Data? = nil
    ) {
        self.attributes = attributes
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.accessControlFlags = accessControlFlags
        self.synchronizable = synchronizable
        self.data = data
    }

    public var isEmpty: Bool {
        attributes.isEmpty && accessGroup == nil && accessibility == nil && accessControlFlags == nil
            && synchronizable == nil && data == nil
    }
}

/// One item as a find returns it.
public struct ItemRecord: Sendable, Hashable {
    public var itemClass: ItemClass
    /// Every attribute, including `agrp`, `pdmn`, `sync`, `cdat`, `mdat` and primary-key defaults.
    public var attributes: [String: AttributeValue]
    /// Present when the data was asked for.
    public var data: Data?
    /// Present when a persistent reference was asked for.
    public var persistentRef: Data?
    /// An identity's private key: that key item's persistent reference (the record's own is its certificate's).
    public var keyPersistentRef: Data?

    public init(
        itemClass: ItemClass,
        attributes: [String: AttributeValue],
        data: Data? = nil,
        persistentRef: Data? = nil,
        keyPersistentRef: Data? = nil
    ) {
        self.itemClass = itemClass
        self.attributes = attributes
        self.data = data
        self.persistentRef = persistentRef
        self.keyPersistentRef = keyPersistentRef
    }

    public var accessibility: Accessibility? {
        if case .string(let code)? = attributes[AttributeKey.accessible] { return Accessibility(rawValue: code) }
        return nil
    }

    public func string(_ key: String) -> String? {
        switch attributes[key] {
        case .string(let text)?: text
        case .data(let data)?: String(data: data, encoding: .utf8)
        default: nil
        }
    }
}

/// Who is calling, and which access groups it holds.
public struct Caller: Sendable, Hashable {
    /// The groups the caller holds, in order; nil means every group (administrators, embedded mode).
    public var accessGroups: [String]?
    /// Where an add without `agrp` goes.
    public var defaultGroup: String
    /// Administrators may lock, unlock, change the passcode and settings, and export.
    public var isAdministrator: Bool
    /// The client's uid through keyseald (nil: the process that owns an embedded store), which an authentication
    /// token is bound to.
    public var uid: UInt32?
    /// The authentication the request carries (``ItemAuthentication``).
    public var authentication: ItemAuthentication?

    public init(accessGroups: [String]?, defaultGroup: String, isAdministrator: Bool) {
        self.accessGroups = accessGroups
        self.defaultGroup = defaultGroup
        self.isAdministrator = isAdministrator
    }

    /// The process that owns an embedded store: every group, default group `default`.
    public static let owner = Caller(accessGroups: nil, defaultGroup: "default", isAdministrator: true)

    public func holds(_ group: String) -> Bool { accessGroups?.contains(group) ?? true }
}

/// A `SecAccessControl`-like value: its protection (an accessibility code) and its flags.
public protocol AccessControlConvertible {
    var accessibilityCode: String { get }
    var flagsRawValue: UInt { get }
}

/// `SecAccessControlCreateFlags` bits Keyseal knows.
public enum AccessControlFlag {
    public static let userPresence: UInt = 1 << 0
    public static let biometryAny: UInt = 1 << 1
    public static let biometryCurrentSet: UInt = 1 << 3
    public static let devicePasscode: UInt = 1 << 4
    public static let watch: UInt = 1 << 5
    public static let or: UInt = 1 << 14
    public static let and: UInt = 1 << 15
    public static let privateKeyUsage: UInt = 1 << 30
    public static let applicationPassword: UInt = 1 << 31

    /// Conjunctions that constrain nothing by themselves, and `privateKeyUsage` (the private key may be used, which
    /// is what a key item is for: Apple requires it for Secure Enclave keys).
    public static let combinators: UInt = or | and | privateKeyUsage
}
