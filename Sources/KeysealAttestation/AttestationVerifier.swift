import Crypto
import FoundationEssentials
import SwiftASN1
import X509

/// Why an attestation does not hold: a named check and a message.
public struct AttestationFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Check: String, Sendable {
        /// The input is not a statement (CBOR, JSON, TPM structures).
        case malformed
        /// `alg` is not ES256 or the AK certificate's key is not P-256.
        case algorithm
        /// The AK certificate does not chain to the given CA, or is not an AK certificate.
        case chain
        /// certInfo's magic is not TPM_GENERATED_VALUE.
        case magic
        /// certInfo is not TPM_ST_ATTEST_CERTIFY.
        case type
        /// The certified Name is not the Name of pubArea.
        case name
        /// pubArea lacks fixedTPM, fixedParent or sensitiveDataOrigin.
        case attributes
        /// extraData is not the hash of this challenge (a replay, or another challenge).
        case challenge
        /// The AK's signature over certInfo does not verify.
        case signature
        /// The certified key is not the expected public key.
        case publicKey
    }

    public var check: Check
    public var message: String

    public init(_ check: Check, _ message: String) {
        self.check = check
        self.message = message
    }

    public var description: String { "\(check.rawValue): \(message)" }
}

/// What a verified attestation establishes.
public struct VerifiedAttestation: Sendable {
    /// The certified key's public area and its P-256 public key.
    public var publicArea: TPMPublicArea
    public var publicKey: P256.Signing.PublicKey
    /// The AK certificate (x5c[0]).
    public var attestationKeyCertificate: Certificate
    /// The Keyseal properties, when the `json` format bound them.
    public var properties: AttestedKeyProperties?
}

/// Checks a TPM key attestation: the WebAuthn "tpm" statement (CBOR) or Keyseal's `json` document. Runs anywhere (no
/// TPM, no keyseald). Each failing check is named (``AttestationFailure/Check``).
public enum AttestationVerifier {
    /// - Parameters:
    ///   - input: the `webauthn-tpm` CBOR statement or the `json` document, as `keyseal attest` wrote it.
    ///   - challenge: the verifier's challenge (the certified extraData must be derived from it, and for `json` from
    ///     the stated properties: ``attestationQualifyingData(challenge:properties:)``).
    ///   - trustAnchors: the CA(s) that issued the AK certificate.
    ///   - expectedPublicKey: when given, the certified key must be this one.
    ///   - time: the validation time for the certificates.
    public static func verify(
        _ input: [UInt8],
        challenge: [UInt8],
        trustAnchors: [Certificate],
        expectedPublicKey: P256.Signing.PublicKey? = nil,
        time: Date = Date()
    ) throws(AttestationFailure) -> VerifiedAttestation {
        var properties: AttestedKeyProperties?
        var statementBytes = input
        if input.first == UInt8(ascii: "{") {
            let document = try? JSONDecoder().decode(AttestationDocument.self, from: Data(input))
            if let format = document?.format, AttestationDocument.refusedFormatNames.contains(format) {
                throw AttestationFailure(
                    .malformed,
                    "a \(format) document is no longer accepted: its binding of the properties could be made from a "
                        + "webauthn-tpm attestation; attest the key again (\(AttestationDocument.formatName))"
                )
            }
            guard let document, document.format == AttestationDocument.formatName,
                let cbor = Data(base64Encoded: document.statement)
            else {
                throw AttestationFailure(.malformed, "the JSON is not a \(AttestationDocument.formatName) document")
            }
            properties = document.properties
            statementBytes = Array(cbor)
        }
        let statement = try TPMAttestationStatement(cbor: statementBytes)
        guard statement.alg == TPMAttestationStatement.es256 else {
            throw AttestationFailure(.algorithm, "alg \(statement.alg) is not ES256 (-7)")
        }

        // The AK certificate and its chain to the CA.
        let certificates: [Certificate]
        do {
            certificates = try statement.x5c.map { try Certificate(derEncoded: $0) }
        } catch {
            throw AttestationFailure(.malformed, "x5c holds a certificate that does not parse: \(error)")
        }
        let akCertificate = certificates[0]
        try checkAttestationKeyCertificate(akCertificate)
        try checkChain(akCertificate, intermediates: Array(certificates.dropFirst()), to: trustAnchors, time: time)
        guard let akKey = P256.Signing.PublicKey(akCertificate.publicKey) else {
            throw AttestationFailure(.algorithm, "the AK certificate's key is not NIST P-256")
        }

        // certInfo and pubArea.
        let info: TPMCertifyInfo
        let publicArea: TPMPublicArea
        do {
            info = try TPMCertifyInfo(marshalled: statement.certInfo)
            publicArea = try TPMPublicArea(marshalled: statement.pubArea)
        } catch {
            throw AttestationFailure(.malformed, "certInfo or pubArea does not parse: \(error)")
        }
        guard info.magic == TPMConstant.generatedValue else {
            throw AttestationFailure(
                .magic,
                "certInfo's magic is 0x\(String(info.magic, radix: 16)), not TPM_GENERATED_VALUE"
            )
        }
        guard info.type == TPMConstant.attestCertify else {
            throw AttestationFailure(
                .type,
                "certInfo's type is 0x\(String(info.type, radix: 16)), not TPM_ST_ATTEST_CERTIFY"
            )
        }
        let name: [UInt8]
        do {
            name = try publicArea.name
        } catch {
            throw AttestationFailure(.name, "\(error)")
        }
        guard info.name == name else {
            throw AttestationFailure(.name, "the certified Name is not the Name of pubArea")
        }
        for (bit, label) in [
            (TPMConstant.fixedTPM, "fixedTPM"), (TPMConstant.fixedParent, "fixedParent"),
            (TPMConstant.sensitiveDataOrigin, "sensitiveDataOrigin"),
        ] where !publicArea.has(bit) {
            throw AttestationFailure(
                .attributes,
                "pubArea lacks \(label): the key could have left the TPM or been imported"
            )
        }
        guard info.extraData == attestationQualifyingData(challenge: challenge, properties: properties) else {
            throw AttestationFailure(
                .challenge,
                properties == nil
                    ? "extraData is not SHA-256 of this challenge (replayed, or made for another challenge)"
                    : "extraData is not the json binding of this challenge and the stated properties"
            )
        }
        guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: statement.sig),
            akKey.isValidSignature(signature, for: SHA256.hash(data: statement.certInfo))
        else {
            throw AttestationFailure(.signature, "the attestation key's signature over certInfo does not verify")
        }
        guard let publicKey = publicArea.p256PublicKey else {
            throw AttestationFailure(.publicKey, "the certified key is not a NIST P-256 key")
        }
        if let expectedPublicKey, expectedPublicKey.rawRepresentation != publicKey.rawRepresentation {
            throw AttestationFailure(.publicKey, "the certified key is not the expected public key")
        }
        return VerifiedAttestation(
            publicArea: publicArea,
            publicKey: publicKey,
            attestationKeyCertificate: akCertificate,
            properties: properties
        )
    }

    /// tcg-kp-AIKCertificate (2.23.133.8.3).
    public static let attestationKeyUsage: ASN1ObjectIdentifier = [2, 23, 133, 8, 3]

    /// An AK certificate as WebAuthn requires: version 3, empty subject, EKU tcg-kp-AIKCertificate, not a CA.
    static func checkAttestationKeyCertificate(_ certificate: Certificate) throws(AttestationFailure) {
        guard certificate.version == .v3 else { throw AttestationFailure(.chain, "the AK certificate is not X.509 v3") }
        guard certificate.subject.isEmpty else {
            throw AttestationFailure(.chain, "the AK certificate's subject is not empty")
        }
        let usages = (try? certificate.extensions.extendedKeyUsage).flatMap { $0 }.map { Array($0) } ?? []
        guard usages.contains(ExtendedKeyUsage.Usage(oid: attestationKeyUsage)) else {
            throw AttestationFailure(.chain, "the AK certificate lacks the EKU tcg-kp-AIKCertificate (2.23.133.8.3)")
        }
        if let constraints = try? certificate.extensions.basicConstraints, case .isCertificateAuthority = constraints {
            throw AttestationFailure(.chain, "the AK certificate is a CA certificate")
        }
    }

    /// `leaf` chains to one of `anchors`, through `intermediates`: each certificate within its validity period at
    /// `time` and signed by the next (swift-certificates checks each signature), each issuer a CA. A chain check of its
    /// own rather than swift-certificates' `Verifier`, which is async (the command line is synchronous) and refuses
    /// the critical subjectAltName every TPM certificate carries unless a policy claims it.
    static func checkChain(
        _ leaf: Certificate,
        intermediates: [Certificate],
        to anchors: [Certificate],
        time: Date
    ) throws(AttestationFailure) {
        guard !anchors.isEmpty else { throw AttestationFailure(.chain, "no CA certificate was given") }
        func isCA(_ certificate: Certificate) -> Bool {
            if case .isCertificateAuthority = (try? certificate.extensions.basicConstraints) ?? .notCertificateAuthority
            {
                return true
            }
            return false
        }
        func valid(_ certificate: Certificate) -> Bool {
            certificate.notValidBefore <= time && time <= certificate.notValidAfter
        }
        func issues(_ issuer: Certificate, _ certificate: Certificate) -> Bool {
            issuer.subject == certificate.issuer && isCA(issuer) && valid(issuer)
                && issuer.publicKey.isValidSignature(certificate.signature, for: certificate)
        }
        var current = leaf
        var pool = intermediates
        for _ in 0..<8 {
            guard valid(current) else {
                throw AttestationFailure(.chain, "a certificate of the chain is outside its validity period")
            }
            if anchors.contains(where: { issues($0, current) }) { return }
            guard let index = pool.firstIndex(where: { issues($0, current) }) else {
                throw AttestationFailure(.chain, "the certificate does not chain to the given CA")
            }
            current = pool.remove(at: index)
        }
        throw AttestationFailure(.chain, "the certificate chain is longer than 8")
    }
}
