import Foundation
import Keyseal
import KeysealCore

/// `kSecValueRef` and `kSecReturnRef` for keys, certificates and identities: refs in requests become what the
/// engine matches or stores, and results become `SecKey`, `SecCertificate` and `SecIdentity` objects.
enum ValueRefs {
    /// The dictionary's `kSecValueRef` and the dictionary without it; nil when it has none.
    private static func takeReference(_ dictionary: [String: Any]) -> (reference: Any, rest: [String: Any])? {
        guard let reference = dictionary[kSecValueRef] else { return nil }
        var rest = dictionary
        rest[kSecValueRef] = nil
        return (reference, rest)
    }

    /// An add with `kSecValueRef`: the object's data and key attributes in the dictionary (a software key, a public
    /// key, a certificate), or the add done here (a key the store holds unstored, stored with its access control; an
    /// identity, as its parts).
    /// Returns the dictionary to add, or nil when nothing is left to add.
    static func add(_ dictionary: [String: Any], store: KeychainStore) throws -> [String: Any]? {
        guard let taken = takeReference(dictionary) else { return dictionary }
        var rest = taken.rest
        switch taken.reference {
        case let key as SecKey:
            try requireClass(&rest, kSecClassKey)
            switch key.backing {
            case .publicKey(let material):
                rest[kSecValueData] = material.bytes
                rest[kSecAttrKeyClass] = kSecAttrKeyClassPublic
                rest[kSecAttrKeyType] = material.keyType.typeCode
            case .software(let software):
                rest[kSecValueData] = software.externalRepresentation.withUnsafeBytes { Data($0) }
                rest[kSecAttrKeyClass] = kSecAttrKeyClassPrivate
                rest[kSecAttrKeyType] = software.keyType.typeCode
            case .stored(let owner, let description):
                guard case .transient = description.reference else { throw KeychainError.duplicateItem }
                let item = try DictionaryRequests.add(rest)
                let stored = try owner.storeTransientKey(
                    description.reference,
                    attributes: item.attributes,
                    accessGroup: item.accessGroup,
                    accessibility: dictionary[kSecAttrAccessible] == nil && dictionary[kSecAttrAccessControl] == nil
                        ? nil : item.accessibility,
                    accessControlFlags: item.accessControlFlags,
                    synchronizable: item.synchronizable
                )
                key.replace(.stored(owner, stored))
                return nil
            }
            return rest
        case let certificate as SecCertificate:
            try requireClass(&rest, kSecClassCertificate)
            rest[kSecValueData] = certificate.der
            return rest
        case let identity as SecIdentity:
            try requireClass(&rest, kSecClassIdentity)
            var certificate = rest
            certificate[kSecClass] = kSecClassCertificate
            certificate[kSecValueRef] = identity.certificate
            if let remaining = try add(certificate, store: store) {
                _ = try store.add(DictionaryRequests.add(remaining))
            }
            var key = rest
            key[kSecClass] = kSecClassKey
            key[kSecAttrLabel] = nil
            key[kSecValueRef] = identity.privateKey
            do {
                if let remaining = try add(key, store: store) { _ = try store.add(DictionaryRequests.add(remaining)) }
            } catch let error as KeychainError where error.status == KeychainStatus.duplicateItem {
                // The key is stored already (a stored key, or another identity's): the certificate joins it.
            }
            return nil
        default:
            throw KeychainError(KeychainStatus.param, "kSecValueRef must be a SecKey, SecCertificate or SecIdentity")
        }
    }

    private static func requireClass(_ dictionary: inout [String: Any], _ itemClass: CFString) throws {
        guard let given = dictionary[kSecClass] else {
            dictionary[kSecClass] = itemClass
            return
        }
        guard given as? String == itemClass else {
            throw KeychainError(KeychainStatus.param, "kSecValueRef is not an item of class \(given)")
        }
    }

    /// A query with `kSecValueRef`: the object as the attributes that find it.
    static func query(_ dictionary: [String: Any]) throws -> [String: Any] {
        guard let taken = takeReference(dictionary) else { return dictionary }
        var rest = taken.rest
        switch taken.reference {
        case let key as SecKey:
            try requireClass(&rest, kSecClassKey)
            if case .stored(_, let description) = key.backing, case .item(let persistentRef) = description.reference {
                rest[kSecValuePersistentRef] = persistentRef
            } else {
                rest[kSecAttrApplicationLabel] = try key.publicMaterial().applicationLabel
                rest[kSecAttrKeyClass] = key.isPrivate ? kSecAttrKeyClassPrivate : kSecAttrKeyClassPublic
            }
        case let certificate as SecCertificate:
            try requireClass(&rest, kSecClassCertificate)
            rest[kSecAttrIssuer] = certificate.fields.issuer
            rest[kSecAttrSerialNumber] = certificate.fields.serialNumber
        case let identity as SecIdentity:
            try requireClass(&rest, kSecClassIdentity)
            rest[kSecAttrIssuer] = identity.certificate.fields.issuer
            rest[kSecAttrSerialNumber] = identity.certificate.fields.serialNumber
        default:
            throw KeychainError(KeychainStatus.param, "kSecValueRef must be a SecKey, SecCertificate or SecIdentity")
        }
        return rest
    }

    /// The return options the engine is asked for so that refs can be made.
    static func engineReturns(_ query: ItemQuery) -> ReturnOptions {
        guard query.returns.contains(.ref) else { return query.returns }
        switch query.itemClass {
        case .key: return query.returns.union(.persistentRef)
        case .certificate: return query.returns.union(.data)
        case .identity: return query.returns.union([.data, .persistentRef])
        default: return query.returns
        }
    }

    /// The object `kSecReturnRef` gives for a record, or nil for the password classes.
    static func object(_ record: ItemRecord, store: KeychainStore) throws -> AnyObject? {
        switch record.itemClass {
        case .key:
            guard let reference = record.persistentRef else { return nil }
            return SecKey(.stored(store, try store.describeKey(.item(reference))))
        case .certificate:
            return try certificate(record.data)
        case .identity:
            guard let keyReference = record.keyPersistentRef else { return nil }
            return SecIdentity(
                certificate: try certificate(record.data),
                privateKey: SecKey(.stored(store, try store.describeKey(.item(keyReference))))
            )
        default:
            return nil
        }
    }

    private static func certificate(_ data: Data?) throws -> SecCertificate {
        guard let data, let certificate = SecCertificateCreateWithData(nil, data) else {
            throw KeychainError(KeychainStatus.decode, "a stored certificate is not DER")
        }
        return certificate
    }

    /// Apple's result shape when refs were asked for on a key class: the object alone, or one dictionary per item
    /// with the object under `v_Ref`; an array for a limit above one.
    static func result(
        _ records: [ItemRecord],
        returns: ReturnOptions,
        limit: MatchLimit,
        store: KeychainStore,
        accessControl: (Accessibility, UInt) -> Any
    ) throws -> AnyObject? {
        func render(_ record: ItemRecord) throws -> Any {
            let object = try self.object(record, store: store) as Any
            if returns == .ref { return object }
            var trimmed = record
            if !returns.contains(.data) { trimmed.data = nil }
            if !returns.contains(.persistentRef) { trimmed.persistentRef = nil }
            var dictionary: [String: Any] = [:]
            if returns.contains(.attributes) {
                dictionary = DictionaryRequests.attributesDictionary(trimmed, accessControl: accessControl)
            }
            if let data = trimmed.data, !data.isEmpty { dictionary[kSecValueData] = data }
            if let reference = trimmed.persistentRef { dictionary[kSecValuePersistentRef] = reference }
            dictionary[kSecValueRef] = object
            return dictionary
        }
        if limit.returnsArray { return try records.map(render) as AnyObject }
        return try records.first.map(render) as AnyObject?
    }
}
