import Foundation
import KeysealCore

/// Turns Apple-style query dictionaries into typed requests, with Apple's statuses for bad input, and typed
/// results back into Apple's result shapes.
public enum DictionaryRequests {
    public static let classKey = "class"
    public static let matchLimit = "m_Limit"
    public static let matchLimitOne = "m_LimitOne"
    public static let matchLimitAll = "m_LimitAll"
    public static let matchCaseInsensitive = "m_CaseInsensitive"
    public static let returnData = "r_Data"
    public static let returnAttributes = "r_Attributes"
    public static let returnRef = "r_Ref"
    public static let returnPersistentRef = "r_PersistentRef"
    public static let valueData = "v_Data"
    public static let valueRef = "v_Ref"
    public static let valuePersistentRef = "v_PersistentRef"
    public static let synchronizableAny = "syna"

    // MARK: - Requests

    /// Parses a CopyMatching, Update or Delete query.
    public static func query(_ dictionary: [String: Any]) throws(KeychainError) -> ItemQuery {
        let itemClass = try parseClass(dictionary)
        var query = ItemQuery(itemClass: itemClass)
        query.attributes.reserveCapacity(dictionary.count)
        let kinds = AttributeKey.kinds(for: itemClass)
        for (key, value) in dictionary where key != classKey {
            if isAttributeKey(key) {
                if key == AttributeKey.dataProtectionKeychain { continue }
                guard let kind = kinds[key] else { throw noSuchAttr(key, itemClass) }
                switch key {
                case AttributeKey.accessGroup: query.accessGroup = try string(value, key)
                case AttributeKey.accessible: query.accessibility = try accessibility(value)
                case AttributeKey.accessControl:
                    let control = try accessControl(value)
                    query.accessibility = control.accessibility
                case AttributeKey.synchronizable:
                    if let text = value as? String, text == synchronizableAny {
                        query.synchronizable = .any
                    } else {
                        query.synchronizable = try bool(value, key) ? .yes : .no
                    }
                default: query.attributes[key] = try attributeValue(value, key, kind: kind)
                }
                continue
            }
            switch key.first {
            case "m":
                switch key {
                case matchLimit:
                    query.limit = try limit(value)
                    query.limitGiven = true
                case matchCaseInsensitive:
                    if try bool(value, key) {
                        throw KeychainError(KeychainStatus.unimplemented, "case-insensitive matching is not supported")
                    }
                default: throw KeychainError(KeychainStatus.param, "unknown match key \(key)")
                }
            case "r": query.returns.insert(try returnKey(key, value))
            case "u": continue
            case "v":
                switch key {
                case valuePersistentRef: query.persistentRef = try data(value, key)
                // Apple's securityd parses v_Data in any query and uses it only when adding: a query carrying it
                // (Locksmith passes its add dictionary to SecItemUpdate) matches as if it were absent.
                case valueData: _ = try data(value, key)
                default: throw KeychainError(KeychainStatus.param, "\(key) is not supported in a query")
                }
            default: throw KeychainError(KeychainStatus.param, "unknown key \(key)")
            }
        }
        return query
    }

    /// Parses an Add dictionary.
    public static func add(_ dictionary: [String: Any]) throws(KeychainError) -> NewItem {
        let itemClass = try parseClass(dictionary)
        var item = NewItem(itemClass: itemClass)
        var settable = SettableAttributes(itemClass: itemClass)
        for (key, value) in dictionary where key != classKey {
            if try settable.take(key, value) { continue }
            switch key.first {
            case "r": item.returns.insert(try returnKey(key, value))
            case "u": continue
            case "v":
                switch key {
                case valueData: item.data = try data(value, key)
                case valuePersistentRef, valueRef:
                    throw KeychainError(KeychainStatus.param, "\(key) cannot be given to an add")
                default: throw KeychainError(KeychainStatus.param, "unknown key \(key)")
                }
            case "m": throw KeychainError(KeychainStatus.param, "\(key) has no meaning in an add")
            default: throw KeychainError(KeychainStatus.param, "unknown key \(key)")
            }
        }
        item.attributes = settable.attributes
        item.accessGroup = settable.accessGroup
        item.synchronizable = settable.synchronizable ?? false
        let (accessibility, flags) = try settable.accessibility()
        if let accessibility { item.accessibility = accessibility }
        item.accessControlFlags = flags
        return item
    }

    /// Parses the attributes-to-update dictionary of an Update.
    public static func changes(
        _ dictionary: [String: Any],
        for itemClass: ItemClass
    ) throws(KeychainError)
        -> ItemChanges
    {
        var changes = ItemChanges()
        var settable = SettableAttributes(itemClass: itemClass)
        for (key, value) in dictionary {
            if key == classKey {
                throw KeychainError(KeychainStatus.noSuchAttr, "the class of an item cannot be changed")
            }
            if try settable.take(key, value) { continue }
            switch key.first {
            case "u": continue
            case "v":
                guard key == valueData else {
                    throw KeychainError(KeychainStatus.param, "\(key) cannot be changed by an update")
                }
                changes.data = try data(value, key)
            case "r", "m":
                throw KeychainError(KeychainStatus.param, "\(key) is not allowed in the attributes to update")
            default: throw KeychainError(KeychainStatus.param, "unknown key \(key)")
            }
        }
        changes.attributes = settable.attributes
        changes.accessGroup = settable.accessGroup
        changes.synchronizable = settable.synchronizable
        (changes.accessibility, changes.accessControlFlags) = try settable.accessibility()
        return changes
    }

    /// The attributes an add or an update sets, collected key by key.
    struct SettableAttributes {
        let itemClass: ItemClass
        let allowed: Set<String>
        let kinds: [String: AttributeKind]
        var attributes: [String: AttributeValue] = [:]
        var accessGroup: String?
        var synchronizable: Bool?
        var pdmn: Accessibility?
        var control: (accessibility: Accessibility, flags: UInt)?

        init(itemClass: ItemClass) {
            self.itemClass = itemClass
            allowed = AttributeKey.allowed(for: itemClass)
            kinds = AttributeKey.kinds(for: itemClass)
        }

        /// Takes `key` if it is an attribute; false for other keys.
        mutating func take(_ key: String, _ value: Any) throws(KeychainError) -> Bool {
            guard isAttributeKey(key) else { return false }
            if key == AttributeKey.dataProtectionKeychain { return true }
            guard allowed.contains(key) else { throw noSuchAttr(key, itemClass) }
            if AttributeKey.readOnly.contains(key) {
                throw KeychainError(KeychainStatus.readOnlyAttr, "\(key) is set by the keychain")
            }
            switch key {
            case AttributeKey.accessGroup: accessGroup = try string(value, key)
            case AttributeKey.accessible: pdmn = try DictionaryRequests.accessibility(value)
            case AttributeKey.accessControl: control = try accessControl(value)
            case AttributeKey.synchronizable: synchronizable = try bool(value, key)
            default: attributes[key] = try attributeValue(value, key, kind: kinds[key] ?? .string)
            }
            return true
        }

        /// The class `pdmn` or `accc` names (they must agree), and the access-control flags.
        func accessibility() throws(KeychainError) -> (Accessibility?, UInt?) {
            guard let control else { return (pdmn, nil) }
            if let pdmn, pdmn != control.accessibility {
                throw KeychainError(KeychainStatus.param, "pdmn and accc name different accessibility classes")
            }
            return (control.accessibility, control.flags)
        }
    }

    // MARK: - Results

    /// Apple's result shape for `records` under `returns` and `limit`, as the `CFTypeRef` a SecItem call hands
    /// back: nil when nothing is to be returned. `accessControl` makes the `accc` value for an item recorded with one.
    public static func result(
        _ records: [ItemRecord],
        returns: ReturnOptions,
        limit: MatchLimit,
        accessControl: (Accessibility, UInt) -> Any
    ) -> AnyObject? {
        let wanted = returns.effective
        guard !wanted.isEmpty else { return nil }
        // The common lookup, one value alone, is already an object: no trip through the bridging machinery.
        if wanted == .data && !limit.returnsArray {
            return records.first.map { ResultData(copying: $0.data ?? Data()) }
        }
        func render(_ record: ItemRecord) -> Any {
            if wanted == .data { return ResultData(copying: record.data ?? Data()) }
            if wanted == .persistentRef { return record.persistentRef ?? Data() }
            var dictionary: [String: Any] = [:]
            if wanted.contains(.attributes) {
                dictionary = attributesDictionary(record, accessControl: accessControl)
            }
            // Apple's dictionary has no v_Data for an item added without kSecValueData (securityd sets only the values
            // an item has; OneTimePassword's testMissingSecret relies on it). Keyseal stores no value as an empty one,
            // so an item added with an empty value reads back without v_Data too (docs/COMPATIBILITY.md).
            if wanted.contains(.data), let data = record.data, !data.isEmpty {
                dictionary[valueData] = ResultData(copying: data)
            }
            if wanted.contains(.persistentRef) { dictionary[valuePersistentRef] = record.persistentRef ?? Data() }
            return dictionary
        }
        if limit.returnsArray { return records.map(render) as AnyObject }
        return records.first.map(render) as AnyObject?
    }

    /// An item's attributes as Apple returns them, with `class`.
    public static func attributesDictionary(
        _ record: ItemRecord,
        accessControl: (Accessibility, UInt) -> Any
    )
        -> [String: Any]
    {
        var dictionary: [String: Any] = [classKey: record.itemClass.rawValue]
        for (key, value) in record.attributes {
            if key == AttributeKey.accessControl {
                if case .int(let flags) = value, let accessibility = record.accessibility {
                    dictionary[key] = accessControl(accessibility, UInt(truncatingIfNeeded: flags))
                }
                continue
            }
            // Apple's four-character codes are `CFNumber`s, which Apple code reads `as? UInt`.
            if case .int(let code) = value, let kind = AttributeKey.kinds(for: record.itemClass)[key],
                kind == .fourCharCode
            {
                dictionary[key] = NSNumber(value: UInt32(truncatingIfNeeded: code))
                continue
            }
            dictionary[key] = plain(value)
        }
        return dictionary
    }

    /// The Swift value Apple's APIs carry for `value`.
    public static func plain(_ value: AttributeValue) -> Any {
        switch value {
        case .string(let text): text
        case .data(let data): data
        case .bool(let flag): flag
        case .int(let number): Int(number)
        case .date(let date): date
        }
    }

    // MARK: - Values

    static func isAttributeKey(_ key: String) -> Bool { key.utf8.count == 4 }

    static func parseClass(_ dictionary: [String: Any]) throws(KeychainError) -> ItemClass {
        guard let raw = dictionary[classKey] else {
            throw KeychainError(KeychainStatus.param, "the query has no class (kSecClass)")
        }
        guard let code = raw as? String else { throw KeychainError(KeychainStatus.param, "kSecClass must be a string") }
        guard let itemClass = ItemClass(rawValue: code) else {
            throw KeychainError(KeychainStatus.noSuchClass, "unknown item class \(code)")
        }
        guard itemClass.isImplemented else {
            throw KeychainError(KeychainStatus.unimplemented, "item class \(code) is not supported yet")
        }
        return itemClass
    }

    static func noSuchAttr(_ key: String, _ itemClass: ItemClass) -> KeychainError {
        KeychainError(KeychainStatus.noSuchAttr, "\(key) is not an attribute of class \(itemClass.rawValue)")
    }

    static func limit(_ value: Any) throws(KeychainError) -> MatchLimit {
        if let text = value as? String {
            switch text {
            case matchLimitOne: return .one
            case matchLimitAll: return .all
            default: throw KeychainError(KeychainStatus.param, "unknown match limit \(text)")
            }
        }
        if let number = integer(value), number > 0 { return number == 1 ? .one : .count(number) }
        throw KeychainError(KeychainStatus.param, "m_Limit must be m_LimitOne, m_LimitAll or a positive number")
    }

    static func returnKey(_ key: String, _ value: Any) throws(KeychainError) -> ReturnOptions {
        let option: ReturnOptions
        switch key {
        case returnData: option = .data
        case returnAttributes: option = .attributes
        case returnPersistentRef: option = .persistentRef
        case returnRef: option = .ref
        default: throw KeychainError(KeychainStatus.param, "unknown return key \(key)")
        }
        return try bool(value, key) ? option : []
    }

    static func attributeValue(_ value: Any, _ key: String, kind: AttributeKind) throws(KeychainError) -> AttributeValue
    {
        switch kind {
        case .string: return .string(try string(value, key))
        case .blob, .dataPreferred:
            if let text = value as? String { return .string(text) }
            return .data(try data(value, key))
        case .bool: return .bool(try bool(value, key))
        case .int:
            guard let number = integer(value) else { throw typeError(key, "a number") }
            return .int(Int64(number))
        case .date:
            guard let date = value as? Date else { throw typeError(key, "a date") }
            return .date(date)
        case .accessControl: throw typeError(key, "a SecAccessControl")
        case .stringMap:
            if let pairs = value as? [String: String] { return .data(StringAttributes.encode(pairs)) }
            return .data(try data(value, key))
        case .fourCharCode:
            guard let number = integer(value) else { return .string(try string(value, key)) }
            guard UInt32(exactly: number) != nil else {
                throw KeychainError(KeychainStatus.param, "\(key) must be a four-character code (0...0xFFFFFFFF)")
            }
            return .int(Int64(number))
        }
    }

    static func string(_ value: Any, _ key: String) throws(KeychainError) -> String {
        guard let text = value as? String else { throw typeError(key, "a string") }
        return text
    }

    static func data(_ value: Any, _ key: String) throws(KeychainError) -> Data {
        if let data = value as? Data { return data }
        if let bytes = value as? [UInt8] { return Data(bytes) }
        throw typeError(key, "data")
    }

    static func bool(_ value: Any, _ key: String) throws(KeychainError) -> Bool {
        if let flag = value as? Bool { return flag }
        if let number = value as? NSNumber, number.int64Value == 0 || number.int64Value == 1 {
            return number.boolValue
        }
        throw typeError(key, "a boolean")
    }

    static func integer(_ value: Any) -> Int? {
        switch value {
        case is Bool: return nil
        case let number as Int: return number
        case let number as Int32: return Int(number)
        case let number as Int64: return Int(exactly: number)
        case let number as UInt16: return Int(number)
        case let number as UInt32: return Int(number)
        case let number as UInt: return Int(exactly: number)
        case let number as NSNumber: return number.intValue
        default: return nil
        }
    }

    static func accessibility(_ value: Any) throws(KeychainError) -> Accessibility {
        guard let code = value as? String, let accessibility = Accessibility(rawValue: code) else {
            throw KeychainError(KeychainStatus.param, "pdmn must be one of ak, ck, dk, aku, cku, dku, akpu")
        }
        return accessibility
    }

    static func accessControl(_ value: Any) throws(KeychainError) -> (accessibility: Accessibility, flags: UInt) {
        guard let control = value as? any AccessControlConvertible else {
            throw typeError(AttributeKey.accessControl, "a SecAccessControl")
        }
        guard let accessibility = Accessibility(rawValue: control.accessibilityCode) else {
            throw KeychainError(KeychainStatus.param, "the access control's protection is not an accessibility class")
        }
        // The engine's check (RequestValidation) decides which constraints it enforces.
        return (accessibility, control.flagsRawValue)
    }

    static func typeError(_ key: String, _ expected: String) -> KeychainError {
        KeychainError(KeychainStatus.param, "\(key) must be \(expected)")
    }
}
