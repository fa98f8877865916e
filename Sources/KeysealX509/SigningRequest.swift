import FoundationEssentials
import Keyseal
import KeysealCore
import SwiftASN1
import X509

/// PKCS#10 requests signed by a stored key (`keyseal create-csr`): built and signed where the key is used, so the
/// key never leaves the store or its hardware.
package enum SigningRequest {
    /// The attribute types `create-csr --subject` understands (RFC 4514 names and OpenSSL's `emailAddress`).
    static let types: [String: ASN1ObjectIdentifier] = [
        "CN": .RDNAttributeType.commonName, "O": .RDNAttributeType.organizationName,
        "OU": .RDNAttributeType.organizationalUnitName, "C": .RDNAttributeType.countryName,
        "L": .RDNAttributeType.localityName, "ST": .RDNAttributeType.stateOrProvinceName,
        "STREET": .RDNAttributeType.streetAddress, "SERIALNUMBER": [2, 5, 4, 5],
        "DC": .RDNAttributeType.domainComponent, "EMAILADDRESS": [1, 2, 840, 113549, 1, 9, 1],
        "E": [1, 2, 840, 113549, 1, 9, 1],
    ]

    /// Parses `CN=…,O=…` (`\,` escapes a comma); errSecParam for anything else.
    package static func distinguishedName(_ text: String) throws(KeychainError) -> DistinguishedName {
        var parts: [String] = []
        var current = ""
        var escaped = false
        for character in text {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "," {
                parts.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        parts.append(current)
        var names: [RelativeDistinguishedName] = []
        for part in parts {
            let pair = part.split(separator: "=", maxSplits: 1).map {
                String($0.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            }
            guard pair.count == 2, !pair[1].isEmpty, let type = types[pair[0].uppercased()] else {
                throw KeychainError(
                    KeychainStatus.param,
                    "the subject is not NAME=VALUE,… with names among CN, O, OU, C, L, ST, STREET, DC, E: \(part)"
                )
            }
            do {
                let attribute =
                    type == .RDNAttributeType.countryName || type == [2, 5, 4, 5]
                    ? try RelativeDistinguishedName.Attribute(type: type, printableString: pair[1])
                    : type == [1, 2, 840, 113549, 1, 9, 1] || type == .RDNAttributeType.domainComponent
                        ? try RelativeDistinguishedName.Attribute(type: type, ia5String: pair[1])
                        : RelativeDistinguishedName.Attribute(type: type, utf8String: pair[1])
                names.append(RelativeDistinguishedName(attribute))
            } catch {
                throw KeychainError(KeychainStatus.param, "the subject's \(pair[0]) cannot be encoded: \(pair[1])")
            }
        }
        return DistinguishedName(names)
    }

    /// A PKCS#10 request (DER) for `subject`, signed by the stored key `reference` as `caller`.
    package static func create(
        store: KeychainStore,
        reference: KeyReference,
        subject: String,
        caller: Caller
    ) throws -> Data {
        let name = try distinguishedName(subject)
        let key = try KeychainPrivateKey(store: store, reference: reference, caller: caller)
        let request = try CertificateSigningRequest(
            version: .v1,
            subject: name,
            privateKey: Certificate.PrivateKey(key),
            attributes: CertificateSigningRequest.Attributes(),
            signatureAlgorithm: key.defaultSignatureAlgorithm
        )
        var serializer = DER.Serializer()
        try serializer.serialize(request)
        return Data(serializer.serializedBytes)
    }
}
