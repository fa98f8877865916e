import Crypto
import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

// What is left between the library and the wire: key descriptions (the library's `PublicKeyMaterial` is checked
// and converted with swift-crypto, which the command line must not link) and certificate descriptions (parsed and
// hashed by the engine). Items, key generation, statuses and reports are KeysealModel's own types on both sides.

package enum WireMapping {
    /// A key keyseald holds for one connection and never stores (a PKCS#11 session key: `kSecAttrIsPermanent` false)
    /// travels as this prefix and the engine's 16-byte id; keyseald lets only the connection that made it use it.
    package static let sessionKeyPrefix = Data("keyseal-session-key/".utf8)

    /// Whether `reference` names a key held for a connection rather than a stored item.
    package static func isSessionReference(_ reference: Data) -> Bool {
        reference.count == sessionKeyPrefix.count + 16 && reference.starts(with: sessionKeyPrefix)
    }

    /// The engine's reference for a reference that came over the wire.
    package static func reference(_ wire: Data) -> KeyReference {
        isSessionReference(wire) ? .transient(Data(wire.dropFirst(sessionKeyPrefix.count))) : .item(wire)
    }

    package static func wire(_ key: KeyDescription) throws(KeychainError) -> WireKey {
        let reference: Data
        switch key.reference {
        case .item(let item): reference = item
        case .transient(let id): reference = sessionKeyPrefix + id
        }
        return WireKey(
            reference: reference,
            keyType: key.publicKey.keyType.typeCode,
            bits: key.publicKey.keyType.bits,
            publicKey: key.publicKey.bytes,
            isPrivate: key.isPrivate,
            inHardware: key.inHardware,
            extractable: key.isExtractable,
            attributes: key.attributes,
            subjectPublicKeyInfo: key.publicKey.subjectPublicKeyInfo
        )
    }

    package static func key(_ wire: WireKey) throws(KeychainError) -> KeyDescription {
        KeyDescription(
            reference: .item(wire.reference),
            publicKey: try PublicKeyMaterial(
                keyType: KeyType(typeCode: wire.keyType, bits: wire.bits),
                bytes: wire.publicKey
            ),
            isPrivate: wire.isPrivate,
            inHardware: wire.inHardware,
            isExtractable: wire.extractable,
            attributes: wire.attributes
        )
    }

    /// A found certificate or identity (returned with its data, attributes and references) described for printing.
    package static func certificate(_ record: ItemRecord) throws(KeychainError) -> WireCertificate {
        guard let der = record.data, let reference = record.persistentRef else {
            throw KeychainError(KeychainStatus.internalComponent, "a certificate record without its data")
        }
        let fields = try CertificateFields(der: der)
        return WireCertificate(
            reference: reference,
            keyReference: record.keyPersistentRef,
            der: der,
            sha1: Data(Insecure.SHA1.hash(data: der)),
            sha256: Data(SHA256.hash(data: der)),
            subjectSummary: fields.subjectSummary,
            commonNames: fields.commonNames,
            emailAddresses: fields.emailAddresses,
            notBefore: fields.notBefore,
            notAfter: fields.notAfter,
            attributes: record.attributes
        )
    }
}
