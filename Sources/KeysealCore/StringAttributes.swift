import FoundationEssentials

/// Arbitrary string attributes of a generic password (the freedesktop Secret Service's item attributes), kept
/// as the value of one attribute, ``AttributeKey/stringAttributes``, so that they are sealed with the item like
/// every other attribute. Each (name, value) pair is searchable through its own keyed digest
/// (``IndexKey/pairDigest(group:itemClass:name:value:)``), kept in the store's pair index.
///
/// Encoding: the pairs sorted by name, each as two length-prefixed fields (tag 1 name, tag 2 value; 32-bit
/// big-endian lengths), so that equal maps have equal bytes. A query's map matches an item whose map holds
/// every queried pair.
public enum StringAttributes {
    /// The most pairs one item carries.
    public static let pairLimit = 256

    public static func encode(_ pairs: [String: String]) -> Data {
        var buffer: [UInt8] = []
        for (name, value) in pairs.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            appendField(&buffer, tag: 1, name.utf8)
            appendField(&buffer, tag: 2, value.utf8)
        }
        return Data(buffer)
    }

    /// The pairs of an encoded map; a malformed one (bad tags or lengths, invalid UTF-8, a name twice, names out
    /// of order, more than ``pairLimit`` pairs) is errSecParam.
    public static func decode(_ data: Data) throws(KeychainError) -> [String: String] {
        let bytes = [UInt8](data)
        var pairs: [String: String] = [:]
        var index = 0
        var previous: [UInt8]?
        func field(_ tag: UInt8) throws(KeychainError) -> [UInt8] {
            guard bytes.count - index >= 5, bytes[index] == tag else { throw malformed }
            let length = bytes[index + 1..<index + 5].reduce(0) { $0 << 8 | Int($1) }
            index += 5
            guard bytes.count - index >= length else { throw malformed }
            defer { index += length }
            return Array(bytes[index..<index + length])
        }
        while index < bytes.count {
            let name = try field(1)
            let value = try field(2)
            if let previous, !previous.lexicographicallyPrecedes(name) { throw malformed }
            previous = name
            guard let nameText = String(validating: name, as: UTF8.self),
                let valueText = String(validating: value, as: UTF8.self)
            else { throw malformed }
            pairs[nameText] = valueText
            guard pairs.count <= pairLimit else {
                throw KeychainError(KeychainStatus.param, "an item carries at most \(pairLimit) string attributes")
            }
        }
        return pairs
    }

    /// The pairs of an attribute value (``AttributeKey/stringAttributes``): data in this encoding.
    public static func pairs(_ value: AttributeValue?) throws(KeychainError) -> [String: String] {
        switch value {
        case nil: return [:]
        case .data(let data)?: return try decode(data)
        default: throw KeychainError(KeychainStatus.param, "\(AttributeKey.stringAttributes) must be data")
        }
    }

    /// Whether `stored` holds every pair of `wanted`.
    public static func contains(_ stored: [String: String], _ wanted: [String: String]) -> Bool {
        wanted.allSatisfy { stored[$0.key] == $0.value }
    }

    private static var malformed: KeychainError {
        KeychainError(KeychainStatus.param, "\(AttributeKey.stringAttributes) is not a well-formed attribute map")
    }
}

extension IndexKey {
    /// The digest of one string attribute pair: an attribute digest whose key is the pair's name under a prefix no
    /// Apple attribute has (the fields are length-prefixed, so no two (name, value) pairs share bytes).
    public func pairDigest(group: String, itemClass: ItemClass, name: String, value: String) -> Data {
        attributeDigest(
            group: group,
            itemClass: itemClass,
            key: AttributeKey.stringAttributes + ":" + name,
            value: .string(value)
        )
    }

    /// The digests of every pair of `attributes`' ``AttributeKey/stringAttributes`` (none when it has none).
    public func pairDigests(group: String, itemClass: ItemClass, attributes: [String: AttributeValue]) -> [Data] {
        guard let value = attributes[AttributeKey.stringAttributes], let pairs = try? StringAttributes.pairs(value)
        else { return [] }
        return pairs.map { pairDigest(group: group, itemClass: itemClass, name: $0.key, value: $0.value) }
    }
}
