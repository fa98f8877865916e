import Crypto
import FoundationEssentials
import KeysealCore
import SwiftASN1
import X509
import _CryptoExtras

// The enrollment of an attestation key (AK) with a CA, the TCG way ("credential activation"):
//
// 1. the device sends its EK certificate and its AK's public area (``EnrollmentRequest``);
// 2. the CA checks the EK certificate's chain and the AK's attributes, and makes a credential to the EK bound to the
//    AK's Name (TPM2_MakeCredential, computed here in software: ``CredentialChallenge``, and ``ChallengeState`` kept
//    by the CA);
// 3. the device's TPM releases the credential (TPM2_ActivateCredential) only if the EK is its own and an object of
//    that Name is loaded beside it (``ActivationProof``);
// 4. the CA compares the credential and issues the AK certificate (``AttestationCA/issue(state:proof:caKey:caCertificate:now:)``).

/// What the device gives the CA: its EK certificate (PEM) and its AK's TPMT_PUBLIC (base64).
public struct EnrollmentRequest: Sendable, Codable, Equatable {
    public var ekCertificate: String
    public var akPublic: String

    public init(ekCertificate: String, akPublic: String) {
        self.ekCertificate = ekCertificate
        self.akPublic = akPublic
    }
}

/// TPM2_MakeCredential's outputs for the device: TPM2B_ID_OBJECT and TPM2B_ENCRYPTED_SECRET, marshalled, base64.
public struct CredentialChallenge: Sendable, Codable, Equatable {
    public var credentialBlob: String
    public var secret: String

    public init(credentialBlob: String, secret: String) {
        self.credentialBlob = credentialBlob
        self.secret = secret
    }
}

/// What the CA keeps between the challenge and the issue: the credential (a secret of the CA: the file is 0600),
/// the AK's public area and the EK certificate.
public struct ChallengeState: Sendable, Codable, Equatable {
    public var credential: String
    public var akPublic: String
    public var ekCertificate: String
    /// Where the CA's key and certificate are (paths, set by the command line for `ca-issue`; never the key).
    public var caKey: String?
    public var caCertificate: String?
}

/// The device's answer: the credential its TPM released.
public struct ActivationProof: Sendable, Codable, Equatable {
    public var credential: String

    public init(credential: String) { self.credential = credential }
}

/// An enrollment step that fails: errSecDecode for input that does not hold, errSecParam for bad arguments.
public typealias EnrollmentError = KeychainError

public enum AttestationCA {
    /// The TPM manufacturer, model and version attributes of a TPM certificate's SAN (2.23.133.2.1/2/3).
    static let tpmManufacturer: ASN1ObjectIdentifier = [2, 23, 133, 2, 1]
    static let tpmModel: ASN1ObjectIdentifier = [2, 23, 133, 2, 2]
    static let tpmVersion: ASN1ObjectIdentifier = [2, 23, 133, 2, 3]

    /// Step 2: checks the EK certificate against `ekTrustAnchors` (nil: not checked — the caller says so) and the AK's
    /// public area, and makes a credential to the EK bound to the AK's Name.
    public static func makeChallenge(
        for request: EnrollmentRequest,
        ekTrustAnchors: [Certificate]?,
        now: Date = Date()
    ) throws -> (challenge: CredentialChallenge, state: ChallengeState) {
        let ekCertificate: Certificate
        do {
            ekCertificate = try Certificate(pemEncoded: request.ekCertificate)
        } catch {
            throw EnrollmentError(KeychainStatus.decode, "the EK certificate does not parse: \(error)")
        }
        if let ekTrustAnchors {
            do {
                try AttestationVerifier.checkChain(ekCertificate, intermediates: [], to: ekTrustAnchors, time: now)
            } catch {
                throw EnrollmentError(KeychainStatus.decode, "the EK certificate does not chain to the EK CA (--ek-ca)")
            }
        }
        _ = try tpmAttributes(of: ekCertificate)
        let akPublic = try attestationKeyPublicArea(request.akPublic)
        let credential = Array(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
        let (blob, secret) = try makeCredential(
            credential: credential,
            objectName: try akPublic.name,
            endorsementKey: ekCertificate.publicKey
        )
        return (
            CredentialChallenge(
                credentialBlob: Data(blob).base64EncodedString(),
                secret: Data(secret).base64EncodedString()
            ),
            ChallengeState(
                credential: Data(credential).base64EncodedString(),
                akPublic: request.akPublic,
                ekCertificate: request.ekCertificate
            )
        )
    }

    /// Step 4: compares the proof with the credential and issues the AK certificate: X.509 v3, empty subject, the
    /// TPM's manufacturer, model and version (from the EK certificate) in a critical SAN directoryName, EKU
    /// tcg-kp-AIKCertificate, basicConstraints CA false, keyUsage digitalSignature; valid for 10 years or until the
    /// CA certificate expires.
    public static func issue(
        state: ChallengeState,
        proof: ActivationProof,
        caKey: Certificate.PrivateKey,
        caCertificate: Certificate,
        now: Date = Date()
    ) throws -> Certificate {
        guard let expected = Data(base64Encoded: state.credential), let given = Data(base64Encoded: proof.credential),
            expected.count == 32
        else {
            throw EnrollmentError(KeychainStatus.decode, "the state or the proof is not in the expected format")
        }
        // Constant time: the comparison must not tell how many leading bytes were right.
        guard given.count == expected.count, zip(given, expected).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0 else {
            throw EnrollmentError(
                KeychainStatus.decode,
                "the proof does not hold the credential: the AK is not beside this EK in one TPM"
            )
        }
        guard caCertificate.publicKey == caKey.publicKey else {
            throw EnrollmentError(KeychainStatus.param, "the CA key is not the CA certificate's key")
        }
        let akPublic = try attestationKeyPublicArea(state.akPublic)
        guard let akKey = akPublic.p256PublicKey else {
            throw EnrollmentError(KeychainStatus.decode, "the AK is not a NIST P-256 key")
        }
        let ekCertificate = try Certificate(pemEncoded: state.ekCertificate)
        let tpm = try tpmAttributes(of: ekCertificate)
        let signatureAlgorithm: Certificate.SignatureAlgorithm =
            P256.Signing.PublicKey(caKey.publicKey) != nil
            ? .ecdsaWithSHA256
            : P384.Signing.PublicKey(caKey.publicKey) != nil ? .ecdsaWithSHA384 : .sha256WithRSAEncryption
        var extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            try ExtendedKeyUsage([ExtendedKeyUsage.Usage(oid: AttestationVerifier.attestationKeyUsage)])
            Critical(SubjectAlternativeNames([.directoryName(try DistinguishedName(tpm))]))
        }
        if let identifier = try? caCertificate.extensions.subjectKeyIdentifier {
            try extensions.append(
                Certificate.Extension(AuthorityKeyIdentifier(keyIdentifier: identifier.keyIdentifier), critical: false)
            )
        }
        let notAfter = min(now.addingTimeInterval(10 * 365 * 86_400), caCertificate.notValidAfter)
        return try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(akKey),
            notValidBefore: now.addingTimeInterval(-300),
            notValidAfter: notAfter,
            issuer: caCertificate.subject,
            subject: DistinguishedName(),
            signatureAlgorithm: signatureAlgorithm,
            extensions: extensions,
            issuerPrivateKey: caKey
        )
    }

    /// The AK's public area from base64, checked: NIST P-256 ECDSA, SHA-256 names, restricted signing only, and
    /// generated in and bound to its TPM (fixedTPM, fixedParent, sensitiveDataOrigin).
    static func attestationKeyPublicArea(_ base64: String) throws -> TPMPublicArea {
        guard let bytes = Data(base64Encoded: base64) else {
            throw EnrollmentError(KeychainStatus.decode, "the AK public area is not base64")
        }
        let area: TPMPublicArea
        do {
            area = try TPMPublicArea(marshalled: Array(bytes))
        } catch {
            throw EnrollmentError(KeychainStatus.decode, "the AK public area does not parse: \(error)")
        }
        let required =
            TPMConstant.fixedTPM | TPMConstant.fixedParent | TPMConstant.sensitiveDataOrigin | TPMConstant.restricted
            | TPMConstant.sign
        guard area.nameAlg == TPMConstant.algSHA256, area.p256PublicKey != nil, area.has(required),
            !area.has(TPMConstant.decrypt)
        else {
            throw EnrollmentError(
                KeychainStatus.decode,
                "the AK is not a restricted P-256 signing key generated in its TPM (fixedTPM, fixedParent, "
                    + "sensitiveDataOrigin, restricted, sign, not decrypt)"
            )
        }
        return area
    }

    /// The TPM manufacturer, model and version of a TPM certificate's SAN directoryName.
    static func tpmAttributes(of certificate: Certificate) throws -> [RelativeDistinguishedName.Attribute] {
        var found: [RelativeDistinguishedName.Attribute] = []
        for name in (try? certificate.extensions.subjectAlternativeNames).flatMap({ $0 }).map({ Array($0) }) ?? [] {
            guard case .directoryName(let directory) = name else { continue }
            for rdn in directory {
                for attribute in rdn where [tpmManufacturer, tpmModel, tpmVersion].contains(attribute.type) {
                    found.append(attribute)
                }
            }
        }
        guard Set(found.map(\.type)).count == 3 else {
            throw EnrollmentError(
                KeychainStatus.decode,
                "the EK certificate's subjectAltName lacks the TPM manufacturer, model or version (2.23.133.2.1-3)"
            )
        }
        return found
    }

    // MARK: TPM2_MakeCredential (TPM 2.0 Part 1, §24; Part 3, §12.6)

    /// The CA's half of credential activation for an EK of the TCG default templates (SHA-256 names, AES-128-CFB): a
    /// seed encrypted to the EK — an RSA EK: a random seed with RSA-OAEP and label "IDENTITY"; an ECC P-256 EK: the
    /// seed is KDFe(ECDH(ephemeral, EK), "IDENTITY", ephemeral.x, EK.x) and the secret is the ephemeral point —; the
    /// credential encrypted with KDFa(seed, "STORAGE", name) and authenticated with an HMAC keyed by KDFa(seed,
    /// "INTEGRITY"), both over the object's Name. Returns TPM2B_ID_OBJECT and TPM2B_ENCRYPTED_SECRET, marshalled.
    public static func makeCredential(
        credential: [UInt8],
        objectName: [UInt8],
        endorsementKey: Certificate.PublicKey,
        seed givenSeed: [UInt8]? = nil
    ) throws -> (credentialBlob: [UInt8], secret: [UInt8]) {
        let seed: [UInt8]
        let encryptedSeed: [UInt8]
        if let rsa = _RSA.Signing.PublicKey(endorsementKey) {
            seed = givenSeed ?? Array(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
            encryptedSeed = try Array(
                RSAOperations.encrypt(
                    publicKey: rsa.pkcs1DERRepresentation,
                    data: Data(seed),
                    padding: .oaep(.sha256, label: Array("IDENTITY".utf8) + [0])
                )
            )
        } else if let ecc = P256.Signing.PublicKey(endorsementKey) {
            let ephemeral = P256.KeyAgreement.PrivateKey()
            let peer = try P256.KeyAgreement.PublicKey(x963Representation: ecc.x963Representation)
            let z = try ephemeral.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Array($0) }
            let point = Array(ephemeral.publicKey.x963Representation.dropFirst())
            let ekX = Array(ecc.x963Representation.dropFirst().prefix(32))
            // KDFe (TPM 2.0 Part 1, §11.4.10.3): H(counter ‖ Z ‖ label ‖ 0 ‖ partyU ‖ partyV), one block for 256 bits.
            let kdfeInput = TPMConstant.bigEndian32(1) + z + Array("IDENTITY".utf8) + [0] + point[0..<32] + ekX
            seed = Array(SHA256.hash(data: kdfeInput))
            encryptedSeed = TPMConstant.sized(Array(point[0..<32])) + TPMConstant.sized(Array(point[32..<64]))
        } else {
            throw EnrollmentError(
                KeychainStatus.unimplemented,
                "the EK is neither RSA nor NIST P-256: only the TCG default EK templates are supported"
            )
        }
        let symmetricKey = kdfa(key: seed, label: "STORAGE", contextU: objectName, contextV: [], bits: 128)
        let encryptedIdentity = Array(
            try AES._CFB.encrypt(
                TPMConstant.sized(credential),
                using: SymmetricKey(data: symmetricKey),
                iv: AES._CFB.IV(ivBytes: [UInt8](repeating: 0, count: 16))
            )
        )
        let hmacKey = kdfa(key: seed, label: "INTEGRITY", contextU: [], contextV: [], bits: 256)
        let integrity = Array(
            HMAC<SHA256>.authenticationCode(for: encryptedIdentity + objectName, using: SymmetricKey(data: hmacKey))
        )
        let idObject = TPMConstant.sized(integrity) + encryptedIdentity
        return (TPMConstant.sized(idObject), TPMConstant.sized(encryptedSeed))
    }

    /// KDFa with HMAC-SHA256 (TPM 2.0 Part 1, §11.4.10.2; SP 800-108 counter mode): blocks of
    /// HMAC(key, i ‖ label ‖ 0 ‖ contextU ‖ contextV ‖ bits), truncated to `bits`.
    static func kdfa(key: [UInt8], label: String, contextU: [UInt8], contextV: [UInt8], bits: Int) -> [UInt8] {
        var out: [UInt8] = []
        var counter: UInt32 = 1
        let hmacKey = SymmetricKey(data: key)
        while out.count * 8 < bits {
            let message =
                TPMConstant.bigEndian32(counter) + Array(label.utf8) + [0] + contextU + contextV
                + TPMConstant.bigEndian32(UInt32(bits))
            out += HMAC<SHA256>.authenticationCode(for: message, using: hmacKey)
            counter += 1
        }
        return Array(out.prefix(bits / 8))
    }
}

/// The AK certificate and its CA chain as a device stores them (docs/TPM.md).
public enum AttestationKeyCertificates {
    /// Checks a chain before a device stores it: every certificate parses, the first is an AK certificate (empty
    /// subject, EKU tcg-kp-AIKCertificate, not a CA) whose key is the AK in `attestationKeyPublicArea`.
    public static func check(_ chain: [[UInt8]], attestationKeyPublicArea: [UInt8]) throws {
        guard !chain.isEmpty else { throw EnrollmentError(KeychainStatus.param, "no AK certificate was given") }
        let certificates: [Certificate]
        do {
            certificates = try chain.map { try Certificate(derEncoded: $0) }
        } catch {
            throw EnrollmentError(KeychainStatus.decode, "a certificate does not parse: \(error)")
        }
        do {
            try AttestationVerifier.checkAttestationKeyCertificate(certificates[0])
        } catch {
            throw EnrollmentError(KeychainStatus.decode, "not an AK certificate: \(error.message)")
        }
        let area = try TPMPublicArea(marshalled: attestationKeyPublicArea)
        guard let key = area.p256PublicKey,
            P256.Signing.PublicKey(certificates[0].publicKey)?.rawRepresentation
                == key.rawRepresentation
        else {
            throw EnrollmentError(
                KeychainStatus.param,
                "the certificate is not for this TPM's attestation key (another device's, or an older enrollment)"
            )
        }
    }

    /// PEM text of DER certificates, in order.
    public static func pem(_ chain: [[UInt8]]) -> String {
        chain.map { PEMDocument(type: "CERTIFICATE", derBytes: $0).pemString + "\n" }.joined()
    }

    /// The DER certificates of PEM text, in order.
    public static func ders(_ pem: String) throws -> [[UInt8]] {
        do {
            return try PEMDocument.parseMultiple(pemString: pem).filter { $0.discriminator == "CERTIFICATE" }.map(
                \.derBytes
            )
        } catch {
            throw EnrollmentError(KeychainStatus.decode, "the PEM does not parse: \(error)")
        }
    }
}
