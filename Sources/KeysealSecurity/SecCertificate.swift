import Foundation
import Keyseal
import KeysealCore

/// An X.509 certificate (DER), parsed with swift-asn1.
public final class SecCertificate: @unchecked Sendable {
    let der: Data
    let fields: CertificateFields

    init(der: Data, fields: CertificateFields) {
        self.der = der
        self.fields = fields
    }
}

/// Equal when the DER is, as Core Foundation compares Apple's certificates.
extension SecCertificate: Hashable {
    public static func == (lhs: SecCertificate, rhs: SecCertificate) -> Bool { lhs === rhs || lhs.der == rhs.der }

    public func hash(into hasher: inout Hasher) { hasher.combine(der) }
}

public func SecCertificateGetTypeID() -> CFTypeID { 0x5ec2 }

/// A certificate from its DER; nil when the data is not one DER certificate.
public func SecCertificateCreateWithData(_ allocator: CFAllocator?, _ data: CFData) -> SecCertificate? {
    guard let fields = try? CertificateFields(der: data) else { return nil }
    return SecCertificate(der: data, fields: fields)
}

public func SecCertificateCopyData(_ certificate: SecCertificate) -> CFData { certificate.der }

/// The subject's common name, else its e-mail address, else its organization.
public func SecCertificateCopySubjectSummary(_ certificate: SecCertificate) -> CFString? {
    certificate.fields.subjectSummary.map { NSString(string: $0) }
}

public func SecCertificateCopyCommonName(
    _ certificate: SecCertificate,
    _ commonName: UnsafeMutablePointer<CFString?>
)
    -> OSStatus
{
    commonName.pointee = certificate.fields.commonNames.last.map { NSString(string: $0) }
    return errSecSuccess
}

public func SecCertificateCopyEmailAddresses(
    _ certificate: SecCertificate,
    _ emailAddresses: UnsafeMutablePointer<CFArray?>
) -> OSStatus {
    emailAddresses.pointee = NSArray(array: certificate.fields.emailAddresses)
    return errSecSuccess
}

/// The serial number's content octets.
public func SecCertificateCopySerialNumberData(
    _ certificate: SecCertificate,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    certificate.fields.serialNumber
}

/// The certificate's public key (EC P-256/384/521 or RSA); nil for another kind.
public func SecCertificateCopyKey(_ certificate: SecCertificate) -> SecKey? {
    let fields = certificate.fields
    let material: PublicKeyMaterial?
    switch fields.publicKeyAlgorithm {
    case "1.2.840.10045.2.1": material = try? PublicKeyMaterial(x963: fields.publicKey)
    case "1.2.840.113549.1.1.1":
        material = try? PublicKeyMaterial.of(
            keyClass: kSecAttrKeyClassPublic as String,
            typeCode: kSecAttrKeyTypeRSA as String,
            data: fields.publicKey
        )
    default: material = nil
    }
    return material.map { SecKey(.publicKey($0)) }
}

/// The older name of ``SecCertificateCopyKey(_:)``.
public func SecCertificateCopyPublicKey(_ certificate: SecCertificate) -> SecKey? { SecCertificateCopyKey(certificate) }

/// A certificate and the private key whose public key it certifies.
public final class SecIdentity: @unchecked Sendable {
    let certificate: SecCertificate
    let privateKey: SecKey

    init(certificate: SecCertificate, privateKey: SecKey) {
        self.certificate = certificate
        self.privateKey = privateKey
    }
}

/// Equal when the certificates and the private keys are, as Security's `SecIdentityCompare` decides.
extension SecIdentity: Hashable {
    public static func == (lhs: SecIdentity, rhs: SecIdentity) -> Bool {
        lhs === rhs || (lhs.certificate == rhs.certificate && lhs.privateKey == rhs.privateKey)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(certificate)
        hasher.combine(privateKey)
    }
}

public func SecIdentityGetTypeID() -> CFTypeID { 0x5ec3 }

public func SecIdentityCopyCertificate(
    _ identityRef: SecIdentity,
    _ certificateRef: UnsafeMutablePointer<SecCertificate?>
) -> OSStatus {
    certificateRef.pointee = identityRef.certificate
    return errSecSuccess
}

public func SecIdentityCopyPrivateKey(
    _ identityRef: SecIdentity,
    _ privateKeyRef: UnsafeMutablePointer<SecKey?>
)
    -> OSStatus
{
    privateKeyRef.pointee = identityRef.privateKey
    return errSecSuccess
}
