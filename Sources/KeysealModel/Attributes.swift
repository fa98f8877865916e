import FoundationEssentials
import Glibc

/// The value of one item attribute.
public enum AttributeValue: Sendable, Hashable, CustomStringConvertible {
    case string(String)
    case data(Data)
    case bool(Bool)
    case int(Int64)
    case date(Date)

    /// The bytes that digests and blob comparisons use: String and Data both as their bytes.
    public var matchBytes: [UInt8] {
        switch self {
        case .string(let text): Array(text.utf8)
        case .data(let data): Array(data)
        case .bool(let flag): [flag ? 1 : 0]
        case .int(let number): withUnsafeBytes(of: number.bigEndian) { Array($0) }
        case .date(let date):
            withUnsafeBytes(of: date.timeIntervalSinceReferenceDate.bitPattern.bigEndian) { Array($0) }
        }
    }

    /// Whether `self` (a stored value) matches `query` (a queried value) the way Apple compares them:
    /// blobs by their bytes whether given as String or Data, everything else by value.
    public func matches(_ query: AttributeValue) -> Bool {
        switch (self, query) {
        case (.string, .string), (.data, .data), (.string, .data), (.data, .string): matchBytes == query.matchBytes
        case (.bool(let a), .bool(let b)): a == b
        case (.int(let a), .int(let b)): a == b
        case (.date(let a), .date(let b)): a == b
        default: false
        }
    }

    public var description: String {
        switch self {
        case .string: "string"
        case .data: "data"
        case .bool: "bool"
        case .int: "int"
        case .date: "date"
        }
    }
}

/// What kind of value an attribute takes.
public enum AttributeKind: Sendable {
    case string
    /// Apple's blob attributes: a String or a Data, compared by bytes.
    case blob
    /// Apple declares Data; a String is accepted as its UTF-8 bytes.
    case dataPreferred
    case bool
    case int
    case date
    /// `accc`: a SecAccessControl; recorded as its flags.
    case accessControl
    /// ``StringAttributes``: string pairs encoded as data.
    case stringMap
    /// Apple's four-character codes (`crtr`, `type` of the password and certificate classes, `CFNumber`s there): a
    /// number in 0...UInt32.max, or a string, as Keyseal took them before.
    case fourCharCode
}

/// Attribute keys (Apple's four-character names) and the per-class schema.
public enum AttributeKey {
    public static let accessible = "pdmn"
    public static let accessControl = "accc"
    public static let accessGroup = "agrp"
    public static let creationDate = "cdat"
    public static let modificationDate = "mdat"
    public static let description = "desc"
    public static let comment = "icmt"
    public static let creator = "crtr"
    public static let type = "type"
    public static let label = "labl"
    public static let isInvisible = "invi"
    public static let isNegative = "nega"
    public static let account = "acct"
    public static let service = "svce"
    public static let generic = "gena"
    public static let securityDomain = "sdmn"
    public static let server = "srvr"
    public static let `protocol` = "ptcl"
    public static let authenticationType = "atyp"
    public static let port = "port"
    public static let path = "path"
    public static let synchronizable = "sync"
    /// `kSecUseDataProtectionKeychain`: four characters but a use flag, accepted and ignored.
    public static let dataProtectionKeychain = "nleg"
    /// Arbitrary string attributes of a generic password (``StringAttributes``), a Keyseal extension.
    public static let stringAttributes = "ksat"

    // Keys (docs/STORE-FORMAT.md, "Keys and certificates").
    public static let keyClass = "kcls"
    public static let applicationLabel = "klbl"
    public static let applicationTag = "atag"
    public static let keySizeInBits = "bsiz"
    public static let effectiveKeySize = "esiz"
    public static let startDate = "sdat"
    public static let endDate = "edat"
    public static let isPermanent = "perm"
    public static let isSensitive = "sens"
    public static let isExtractable = "extr"
    public static let canEncrypt = "encr"
    public static let canDecrypt = "decr"
    public static let canDerive = "drve"
    public static let canSign = "sign"
    public static let canVerify = "vrfy"
    public static let canWrap = "wrap"
    public static let canUnwrap = "unwp"
    public static let tokenID = "tkid"

    // Certificates: read from the DER, never set by a caller.
    public static let certificateType = "ctyp"
    public static let certificateEncoding = "cenc"
    public static let subject = "subj"
    public static let issuer = "issr"
    public static let serialNumber = "slnr"
    public static let subjectKeyID = "skid"
    public static let publicKeyHash = "pkhh"

    public static let kinds: [String: AttributeKind] = [
        accessible: .string, accessControl: .accessControl, accessGroup: .string, creationDate: .date,
        modificationDate: .date, description: .string, comment: .string, creator: .fourCharCode, type: .fourCharCode,
        label: .string, isInvisible: .bool, isNegative: .bool, account: .blob, service: .blob,
        generic: .dataPreferred, securityDomain: .string, server: .string, `protocol`: .string,
        authenticationType: .string, port: .int, path: .string, synchronizable: .bool,
        stringAttributes: .stringMap,
        keyClass: .string, applicationLabel: .blob, applicationTag: .blob, keySizeInBits: .int, effectiveKeySize: .int,
        startDate: .date, endDate: .date, isPermanent: .bool, isSensitive: .bool, isExtractable: .bool,
        canEncrypt: .bool, canDecrypt: .bool, canDerive: .bool, canSign: .bool, canVerify: .bool, canWrap: .bool,
        canUnwrap: .bool, tokenID: .string, certificateType: .int, certificateEncoding: .int, subject: .blob,
        issuer: .blob, serialNumber: .blob, subjectKeyID: .blob, publicKeyHash: .blob,
    ]

    static let common: Set<String> = [
        accessible, accessControl, accessGroup, creationDate, modificationDate, description, comment, creator, type,
        label, isInvisible, isNegative, synchronizable,
    ]

    private static let genericPasswordAttributes = common.union([account, service, generic, stringAttributes])
    private static let internetPasswordAttributes =
        common.union([account, securityDomain, server, `protocol`, authenticationType, port, path])
    private static let keyAttributes = common.union([
        keyClass, applicationLabel, applicationTag, keySizeInBits, effectiveKeySize, startDate, endDate, isPermanent,
        isSensitive, isExtractable, canEncrypt, canDecrypt, canDerive, canSign, canVerify, canWrap, canUnwrap, tokenID,
    ])
    /// The attributes read from a certificate's DER.
    public static let certificateDerived: Set<String> = [
        certificateType, certificateEncoding, subject, issuer, serialNumber, subjectKeyID, publicKeyHash,
    ]
    private static let certificateAttributes = common.union(certificateDerived)
    /// An identity is matched by its certificate's attributes and its private key's.
    private static let identityAttributes = certificateAttributes.union(keyAttributes)

    /// Attributes an item of `itemClass` has.
    public static func allowed(for itemClass: ItemClass) -> Set<String> {
        switch itemClass {
        case .genericPassword: genericPasswordAttributes
        case .internetPassword: internetPasswordAttributes
        case .key: keyAttributes
        case .certificate: certificateAttributes
        case .identity: identityAttributes
        }
    }

    /// Whether `key` is an attribute of keys (on an identity query: matched against the private key, not the
    /// certificate).
    public static func isKeyOnly(_ key: String) -> Bool { keyAttributes.contains(key) && !common.contains(key) }

    /// The attributes of `itemClass` (``allowed(for:)``) with their kinds (``kinds``; a string where none is listed):
    /// one lookup tells whether a query key belongs to the class and how to read its value.
    public static func kinds(for itemClass: ItemClass) -> [String: AttributeKind] {
        switch itemClass {
        case .genericPassword: genericPasswordKinds
        case .internetPassword: internetPasswordKinds
        case .key: keyKinds
        case .certificate: certificateKinds
        case .identity: identityKinds
        }
    }

    private static func kinds(
        of keys: Set<String>,
        _ overrides: [String: AttributeKind] = [:]
    )
        -> [String: AttributeKind]
    {
        Dictionary(uniqueKeysWithValues: keys.map { ($0, overrides[$0] ?? kinds[$0] ?? .string) })
    }

    /// A key's `type` is its key type ("73", "42") and its `crtr` a string, as Keyseal has always stored them.
    private static let keyStrings: [String: AttributeKind] = [type: .string, creator: .string]

    private static let genericPasswordKinds = kinds(of: genericPasswordAttributes)
    private static let internetPasswordKinds = kinds(of: internetPasswordAttributes)
    private static let keyKinds = kinds(of: keyAttributes, keyStrings)
    private static let certificateKinds = kinds(of: certificateAttributes)
    private static let identityKinds = kinds(of: identityAttributes, keyStrings)

    private static let genericPasswordPrimaryKey = [account, service]
    private static let internetPasswordPrimaryKey = [
        account, securityDomain, server, `protocol`, authenticationType, port, path,
    ]

    private static let keyPrimaryKey = [
        keyClass, applicationLabel, applicationTag, type, creator, keySizeInBits, effectiveKeySize, startDate, endDate,
    ]
    private static let certificatePrimaryKey = [certificateType, issuer, serialNumber]

    /// The primary-key attributes besides the access group and `sync`, in digest order. (Stored arrays: every
    /// lookup asks, and a literal here would allocate each time.) An identity is keyed as its certificate.
    public static func primaryKey(for itemClass: ItemClass) -> [String] {
        switch itemClass {
        case .genericPassword: genericPasswordPrimaryKey
        case .internetPassword: internetPasswordPrimaryKey
        case .key: keyPrimaryKey
        case .certificate, .identity: certificatePrimaryKey
        }
    }

    /// The value a primary-key attribute has when an add leaves it out.
    public static func defaultValue(_ key: String) -> AttributeValue {
        switch key {
        case port, keySizeInBits, effectiveKeySize, certificateType: .int(0)
        default: .string("")
        }
    }

    /// Attributes the engine maintains; callers cannot set them.
    public static let readOnly: Set<String> = [creationDate, modificationDate]

    /// Every attribute that has a search digest column in the store.
    public static let digested: [String] = [
        account, service, server, securityDomain, `protocol`, authenticationType,
        port, path, synchronizable,
    ]

    /// For each digest column (``digested`` order), the attribute of `itemClass` whose digest it holds, or nil.
    /// Keys and certificates reuse the password classes' columns (the digest binds the attribute's own name, so a
    /// column holds whatever its class puts there): no schema change, and the indexed columns (`acct`, `svce`)
    /// get the most selective attributes (docs/STORE-FORMAT.md).
    public static func digestSlots(for itemClass: ItemClass) -> [String?] {
        switch itemClass {
        case .genericPassword: genericPasswordSlots
        case .internetPassword: internetPasswordSlots
        case .key: keySlots
        case .certificate, .identity: certificateSlots
        }
    }

    /// The digest column (an entry of ``digested``) that holds `key`'s digest for `itemClass`, or nil.
    public static func digestColumn(for key: String, itemClass: ItemClass) -> String? {
        guard let index = digestSlots(for: itemClass).firstIndex(of: key) else { return nil }
        return digested[index]
    }

    private static func passwordSlots(_ itemClass: ItemClass) -> [String?] {
        let primaryKey = primaryKey(for: itemClass)
        return digested.map { $0 == synchronizable || primaryKey.contains($0) ? $0 : nil }
    }

    private static let genericPasswordSlots = passwordSlots(.genericPassword)
    private static let internetPasswordSlots = passwordSlots(.internetPassword)
    // acct, svce, srvr, sdmn, ptcl, atyp, port, path, sync
    private static let keySlots: [String?] = [
        applicationLabel, applicationTag, keyClass, type, creator, effectiveKeySize, keySizeInBits, nil, synchronizable,
    ]
    private static let certificateSlots: [String?] = [
        serialNumber, issuer, nil, nil, nil, nil, certificateType, nil, synchronizable,
    ]
}
