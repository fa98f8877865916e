import Foundation
import Keyseal
import KeysealCore

/// Requests every entry point must refuse, each with the status `KeysealSecurity` gives for the same input: the
/// same list is sent to an embedded engine and through keyseald, which must answer alike.
public enum BadRequest: String, CaseIterable, Sendable, CustomStringConvertible {
    case addKey, addCertificate, addIdentity, addUnknownAttribute, addAttributeOfAnotherClass, addWrongType,
        addOversizedLabel, addOversizedGroup, addGroupAsAttribute, addCreationDate, addEnforcedAccessControl,
        findKeyWrongType, findUnknownAttribute, findWrongType, addKeyWithToken, updateCertificateData,
        updateUnknownAttribute, updateReadOnly, updateOversizedData, replacingAddWithoutStringAttributes,
        replacingAddUnknownAttribute, replacingAddOversizedValue

    public var description: String { rawValue }

    static let label = String(repeating: "l", count: RequestValidation.attributeLimit + 1)

    /// The status the request gets.
    public var expected: OSStatus {
        switch self {
        case .addEnforcedAccessControl: KeychainStatus.unimplemented
        // A key without its class and type, a certificate that is not DER, an identity (added as its parts), a key
        // that claims a token (hardware keys are generated, never imported), a certificate's DER changed.
        case .addKey, .addCertificate, .addIdentity, .findKeyWrongType, .addKeyWithToken, .updateCertificateData:
            KeychainStatus.param
        case .replacingAddWithoutStringAttributes: KeychainStatus.param
        case .replacingAddUnknownAttribute: KeychainStatus.noSuchAttr
        case .replacingAddOversizedValue: KeychainStatus.dataTooLarge
        case .addUnknownAttribute, .addAttributeOfAnotherClass, .findUnknownAttribute, .updateUnknownAttribute:
            KeychainStatus.noSuchAttr
        case .addWrongType, .addGroupAsAttribute, .findWrongType: KeychainStatus.param
        case .addOversizedLabel, .addOversizedGroup, .updateOversizedData: KeychainStatus.dataTooLarge
        case .addCreationDate, .updateReadOnly: KeychainStatus.readOnlyAttr
        }
    }

    /// Sends the request to `store`; the status it got (0 when it succeeded).
    public func status(on store: KeychainStore) -> OSStatus {
        func add(
            _ itemClass: ItemClass = .genericPassword,
            _ attributes: [String: AttributeValue] = [:],
            group: String? = nil,
            flags: UInt? = nil
        ) -> OSStatus {
            var all: [String: AttributeValue] = [AttributeKey.account: .string("bad-\(rawValue)")]
            if itemClass != .genericPassword { all = [:] }
            all.merge(attributes) { _, new in new }
            let item = NewItem(
                itemClass: itemClass,
                attributes: all,
                accessGroup: group,
                accessControlFlags: flags,
                data: Data("s".utf8)
            )
            return KeysealTestSupport.status { _ = try store.add(item) }
        }
        func find(_ itemClass: ItemClass = .genericPassword, _ attributes: [String: AttributeValue] = [:]) -> OSStatus {
            KeysealTestSupport.status {
                _ = try store.copyMatching(ItemQuery(itemClass: itemClass, attributes: attributes))
            }
        }
        func update(_ changes: ItemChanges) -> OSStatus {
            KeysealTestSupport.status { try store.update(.password(account: "anyone"), with: changes) }
        }
        func replacingAdd(_ attributes: [String: AttributeValue], data: Data = Data("s".utf8)) -> OSStatus {
            var all: [String: AttributeValue] = [AttributeKey.account: .string("bad-\(rawValue)")]
            all.merge(attributes) { _, new in new }
            let item = NewItem(itemClass: .genericPassword, attributes: all, data: data)
            return KeysealTestSupport.status { _ = try store.addReplacingAttributes(item, caller: .owner) }
        }
        let pairs: AttributeValue = .data(StringAttributes.encode(["k": "v"]))
        switch self {
        case .replacingAddWithoutStringAttributes: return replacingAdd([:])
        case .replacingAddUnknownAttribute:
            return replacingAdd([AttributeKey.stringAttributes: pairs, "zzzz": .string("x")])
        case .replacingAddOversizedValue:
            return replacingAdd([AttributeKey.stringAttributes: pairs], data: Data(count: (1 << 20) + 1))
        case .addKey: return add(.key, [AttributeKey.label: .string("k")])
        case .addCertificate: return add(.certificate)
        case .addIdentity: return add(.identity)
        case .addUnknownAttribute: return add(.genericPassword, ["zzzz": .string("x")])
        case .addAttributeOfAnotherClass: return add(.genericPassword, [AttributeKey.server: .string("example.com")])
        case .addWrongType: return add(.genericPassword, [AttributeKey.label: .bool(true)])
        case .addOversizedLabel: return add(.genericPassword, [AttributeKey.label: .string(Self.label)])
        case .addOversizedGroup:
            return add(.genericPassword, group: String(repeating: "g", count: RequestValidation.groupLimit + 1))
        case .addGroupAsAttribute: return add(.genericPassword, [AttributeKey.accessGroup: .string("other")])
        case .addCreationDate: return add(.genericPassword, [AttributeKey.creationDate: .date(Date())])
        case .addEnforcedAccessControl: return add(.genericPassword, flags: AccessControlFlag.applicationPassword)
        case .findKeyWrongType: return find(.key, [AttributeKey.keySizeInBits: .string("256")])
        case .findUnknownAttribute: return find(.genericPassword, ["zzzz": .string("x")])
        case .findWrongType: return find(.genericPassword, [AttributeKey.modificationDate: .string("yesterday")])
        case .addKeyWithToken:
            return add(
                .key,
                [
                    AttributeKey.keyClass: .string("1"), AttributeKey.type: .string("73"),
                    AttributeKey.tokenID: .string("com.apple.setoken"),
                ]
            )
        case .updateCertificateData:
            return KeysealTestSupport.status {
                try store.update(ItemQuery(itemClass: .certificate), with: ItemChanges(data: Data([1])))
            }
        case .updateUnknownAttribute: return update(ItemChanges(attributes: ["zzzz": .string("x")]))
        case .updateReadOnly: return update(ItemChanges(attributes: [AttributeKey.modificationDate: .date(Date())]))
        case .updateOversizedData: return update(ItemChanges(data: Data(count: (1 << 20) + 1)))
        }
    }
}
