import Crypto
import FoundationEssentials
import KeysealCore
import SwiftASN1

/// What the keychain reads from an X.509 certificate's DER (RFC 5280), parsed with swift-asn1: the certificate
/// item's attributes (docs/STORE-FORMAT.md, "Keys and certificates") and the parts Apple's `SecCertificateCopy…`
/// functions return.
public struct CertificateFields: Sendable {
    /// Apple's `kSecAttrCertificateType`: 1, 2 or 3 for X.509 v1, v2, v3.
    public var certificateType: Int
    /// The serial number's content octets, as encoded.
    public var serialNumber: Data
    /// The issuer's and the subject's `Name`, DER.
    public var issuer: Data
    public var subject: Data
    /// The subject public key: the BIT STRING's octets (EC: `04 ‖ X ‖ Y`; RSA: PKCS#1 `RSAPublicKey`).
    public var publicKey: Data
    /// The subject public key's algorithm: `1.2.840.10045.2.1` (EC) or `1.2.840.113549.1.1.1` (RSA).
    public var publicKeyAlgorithm: String
    /// The named curve of an EC key, when given.
    public var curve: String?
    /// The subject key identifier extension, when present.
    public var subjectKeyID: Data?
    /// The subject's common names and e-mail addresses, in order.
    public var commonNames: [String]
    public var emailAddresses: [String]
    /// Apple's subject summary: the common name, else the e-mail address, else the organization or unit.
    public var subjectSummary: String?
    /// The validity period's ends, in seconds since 1970.
    public var notBefore: Double = 0
    public var notAfter: Double = 0

    /// SHA-1 of the public key octets: the certificate's `pkhh`, equal to its private key's `klbl`.
    public var publicKeyHash: Data { Data(Insecure.SHA1.hash(data: publicKey)) }

    static let ecPublicKey: ASN1ObjectIdentifier = [1, 2, 840, 10045, 2, 1]
    static let rsaEncryption: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 1, 1]
    static let commonName: ASN1ObjectIdentifier = [2, 5, 4, 3]
    static let organization: ASN1ObjectIdentifier = [2, 5, 4, 10]
    static let organizationalUnit: ASN1ObjectIdentifier = [2, 5, 4, 11]
    static let email: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 1]
    static let subjectKeyIdentifier: ASN1ObjectIdentifier = [2, 5, 29, 14]

    /// Parses `der`; errSecParam unless it is one DER certificate and nothing else.
    public init(der: Data) throws(KeychainError) {
        do {
            self = try Self.parse([UInt8](der))
        } catch {
            throw KeychainError(KeychainStatus.param, "the data is not a DER X.509 certificate")
        }
    }

    private init() {
        certificateType = 1
        serialNumber = Data()
        issuer = Data()
        subject = Data()
        publicKey = Data()
        publicKeyAlgorithm = ""
        commonNames = []
        emailAddresses = []
    }

    private static func parse(_ bytes: [UInt8]) throws -> CertificateFields {
        let root = try DER.parse(bytes)
        var fields = CertificateFields()
        try DER.sequence(root, identifier: .sequence) { nodes in
            guard let tbs = nodes.next(), nodes.next() != nil, let signature = nodes.next() else {
                throw ASN1Error.invalidASN1Object(reason: "a certificate has three parts")
            }
            _ = try ASN1BitString(derEncoded: signature)
            try DER.sequence(tbs, identifier: .sequence) { nodes in
                let version = try DER.decodeDefaultExplicitlyTagged(
                    &nodes,
                    tagNumber: 0,
                    tagClass: .contextSpecific,
                    defaultValue: 0
                ) { try Int(derEncoded: $0) }
                guard (0...2).contains(version) else {
                    throw ASN1Error.invalidASN1Object(reason: "unknown certificate version")
                }
                fields.certificateType = version + 1
                guard let serial = nodes.next(), serial.identifier == .integer,
                    case .primitive(let serialBytes) = serial.content, !serialBytes.isEmpty
                else { throw ASN1Error.invalidASN1Object(reason: "no serial number") }
                fields.serialNumber = Data(serialBytes)
                guard nodes.next() != nil, let issuer = nodes.next(), let validity = nodes.next(),
                    let subject = nodes.next(), let publicKeyInfo = nodes.next()
                else { throw ASN1Error.invalidASN1Object(reason: "a TBSCertificate is incomplete") }
                try DER.sequence(validity, identifier: .sequence) { nodes in
                    guard let start = nodes.next(), let end = nodes.next() else {
                        throw ASN1Error.invalidASN1Object(reason: "a validity has two times")
                    }
                    fields.notBefore = try seconds(start)
                    fields.notAfter = try seconds(end)
                }
                fields.issuer = Data(issuer.encodedBytes)
                fields.subject = Data(subject.encodedBytes)
                _ = try names(issuer)
                for (type, value) in try names(subject) {
                    if type == commonName { fields.commonNames.append(value) }
                    if type == email { fields.emailAddresses.append(value) }
                    if fields.subjectSummary == nil, type == organization || type == organizationalUnit {
                        fields.subjectSummary = value
                    }
                }
                fields.subjectSummary = fields.commonNames.first ?? fields.emailAddresses.first ?? fields.subjectSummary
                try DER.sequence(publicKeyInfo, identifier: .sequence) { nodes in
                    guard let algorithm = nodes.next(), let key = nodes.next() else {
                        throw ASN1Error.invalidASN1Object(reason: "no subject public key")
                    }
                    try DER.sequence(algorithm, identifier: .sequence) { nodes in
                        guard let oid = nodes.next() else { throw ASN1Error.invalidASN1Object(reason: "no algorithm") }
                        let identifier = try ASN1ObjectIdentifier(derEncoded: oid)
                        fields.publicKeyAlgorithm = identifier.description
                        if let parameters = nodes.next(), parameters.identifier == .objectIdentifier {
                            fields.curve = try ASN1ObjectIdentifier(derEncoded: parameters).description
                        }
                    }
                    fields.publicKey = Data(try ASN1BitString(derEncoded: key).bytes)
                }
                while let node = nodes.next() {
                    guard node.identifier == ASN1Identifier(tagWithNumber: 3, tagClass: .contextSpecific) else {
                        continue  // issuer and subject unique identifiers
                    }
                    guard case .constructed(let wrapped) = node.content,
                        let extensions = wrapped.first(where: { _ in true })
                    else { throw ASN1Error.invalidASN1Object(reason: "empty extensions") }
                    try DER.sequence(extensions, identifier: .sequence) { nodes in
                        while let node = nodes.next() {
                            try DER.sequence(node, identifier: .sequence) { nodes in
                                guard let oid = nodes.next(), var value = nodes.next() else {
                                    throw ASN1Error.invalidASN1Object(reason: "an incomplete extension")
                                }
                                if value.identifier == .boolean, let next = nodes.next() { value = next }
                                let octets = try ASN1OctetString(derEncoded: value)
                                if try ASN1ObjectIdentifier(derEncoded: oid) == subjectKeyIdentifier {
                                    let inner = try ASN1OctetString(derEncoded: DER.parse(octets.bytes))
                                    fields.subjectKeyID = Data(inner.bytes)
                                }
                            }
                        }
                    }
                }
            }
        }
        return fields
    }

    /// A `Time` (UTCTime or GeneralizedTime) in seconds since 1970.
    private static func seconds(_ node: ASN1Node) throws -> Double {
        let parts: (year: Int, month: Int, day: Int, hours: Int, minutes: Int, seconds: Int)
        switch node.identifier {
        case .utcTime:
            let time = try UTCTime(derEncoded: node)
            parts = (time.year, time.month, time.day, time.hours, time.minutes, time.seconds)
        case .generalizedTime:
            let time = try GeneralizedTime(derEncoded: node)
            parts = (time.year, time.month, time.day, time.hours, time.minutes, time.seconds)
        default:
            throw ASN1Error.invalidASN1Object(reason: "a validity time is neither UTCTime nor GeneralizedTime")
        }
        // Days from the civil date (proleptic Gregorian calendar).
        let year = parts.month <= 2 ? parts.year - 1 : parts.year
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (parts.month + (parts.month > 2 ? -3 : 9)) + 2) / 5 + parts.day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Double(days * 86_400 + parts.hours * 3_600 + parts.minutes * 60 + parts.seconds)
    }

    /// The attribute types and values of a `Name`, in order (strings decoded; other values skipped).
    private static func names(_ name: ASN1Node) throws -> [(ASN1ObjectIdentifier, String)] {
        var result: [(ASN1ObjectIdentifier, String)] = []
        try DER.sequence(name, identifier: .sequence) { nodes in
            while let set = nodes.next() {
                guard set.identifier == .set, case .constructed(let attributes) = set.content else {
                    throw ASN1Error.invalidASN1Object(reason: "a name's part is not a SET")
                }
                for attribute in attributes {
                    try DER.sequence(attribute, identifier: .sequence) { nodes in
                        guard let type = nodes.next(), let value = nodes.next() else {
                            throw ASN1Error.invalidASN1Object(reason: "an incomplete name attribute")
                        }
                        let oid = try ASN1ObjectIdentifier(derEncoded: type)
                        if let text = string(value) { result.append((oid, text)) }
                    }
                }
            }
        }
        return result
    }

    private static func string(_ node: ASN1Node) -> String? {
        guard case .primitive(let bytes) = node.content else { return nil }
        switch node.identifier {
        case .utf8String, .printableString, .ia5String, .teletexString, .visibleString:
            return String(decoding: bytes, as: UTF8.self)
        case .bmpString:
            guard bytes.count % 2 == 0 else { return nil }
            let units = stride(from: bytes.startIndex, to: bytes.endIndex, by: 2).map {
                UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1])
            }
            return String(decoding: units, as: UTF16.self)
        default:
            return nil
        }
    }
}
