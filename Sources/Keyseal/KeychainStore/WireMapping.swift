import Crypto
import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

// What is left between the library and the wire: key descriptions (the library's `PublicKeyMaterial` is checked
// and converted with swift-crypto, which the command line must not link) and certificate descriptions (parsed and
// hashed by the engine). Items, key generation, statuses and reports are KeysealModel's own types on both sides.

package enum WireMapping {
    package static func wire(_ key: KeyDescription) throws(KeychainError) -> WireKey {
        guard case .item(let reference) = key.reference else {
            throw KeychainError(KeychainStatus.param, "a transient key lives in the process that made it")
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
