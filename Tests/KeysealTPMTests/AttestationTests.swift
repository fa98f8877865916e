import Crypto
import Foundation
import KeysealAttestation
import KeysealCore
import KeysealTPM
import KeysealTestSupport
import SwiftASN1
import Testing
import X509

/// A CA for attestation keys, in memory: a P-256 key and its self-signed certificate.
struct TestAttestationCA {
    let key = P256.Signing.PrivateKey()
    let certificate: Certificate

    init(name: String = "Keyseal Test AK CA") throws {
        let now = Date()
        certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(86_400 * 365),
            issuer: try DistinguishedName { CommonName(name) },
            subject: try DistinguishedName { CommonName(name) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: Certificate.PrivateKey(key)
        )
    }

    var der: [UInt8] {
        var serializer = DER.Serializer()
        try! serializer.serialize(certificate)
        return serializer.serializedBytes
    }
}

/// A TPM with an EK certificate (swtpm_setup --create-ek-cert), opened as a device key.
final class AttestingTPM {
    let fixture: SwtpmFixture
    let key: TPMDeviceKey

    /// The swtpm's own CA when `eccEndorsementCA` is nil; else no RSA EK certificate, and an ECC P-256 EK (the TCG
    /// default template L-2, made by tpm2_createek) with a certificate from `eccEndorsementCA` at NV 0x01C0000A.
    let eccEndorsementCA: TestAttestationCA?

    init(endorsementCA: TemporaryDirectory) throws {
        fixture = try SwtpmFixture(endorsementCA: endorsementCA)
        eccEndorsementCA = nil
        key = TPMDeviceKey(tcti: fixture.tcti)
        try key.open(provisioning: true)
    }

    init(eccEndorsementCA: TestAttestationCA) throws {
        fixture = try SwtpmFixture()
        self.eccEndorsementCA = eccEndorsementCA
        let directory = fixture.directory
        let pem = directory.appending("ek.pem").path
        try fixture.tool("tpm2_createek", ["-G", "ecc", "-c", directory.appending("ek.ctx").path])
        try fixture.tool("tpm2_readpublic", ["-c", directory.appending("ek.ctx").path, "-f", "pem", "-o", pem])
        try fixture.tool("tpm2_flushcontext", ["-t"])
        let ekKey = try P256.Signing.PublicKey(pemRepresentation: String(contentsOfFile: pem, encoding: .utf8))
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(ekKey),
            notValidBefore: now.addingTimeInterval(-60),
            notValidAfter: now.addingTimeInterval(86_400),
            issuer: eccEndorsementCA.certificate.subject,
            subject: DistinguishedName(),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(
                    SubjectAlternativeNames([
                        .directoryName(
                            try DistinguishedName([
                                RelativeDistinguishedName.Attribute(
                                    type: [2, 23, 133, 2, 1],
                                    utf8String: "id:00001014"
                                ),
                                RelativeDistinguishedName.Attribute(type: [2, 23, 133, 2, 2], utf8String: "swtpm"),
                                RelativeDistinguishedName.Attribute(
                                    type: [2, 23, 133, 2, 3],
                                    utf8String: "id:20191023"
                                ),
                            ])
                        )
                    ])
                )
            },
            issuerPrivateKey: Certificate.PrivateKey(eccEndorsementCA.key)
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        let der = directory.appending("ek.der")
        try Data(serializer.serializedBytes).write(to: der)
        try fixture.tool(
            "tpm2_nvdefine",
            [
                "0x01c0000a", "-C", "o", "-s", "\(serializer.serializedBytes.count)", "-a",
                "ownerwrite|authwrite|ownerread|authread|no_da",
            ]
        )
        try fixture.tool("tpm2_nvwrite", ["0x01c0000a", "-C", "o", "-i", der.path])
        key = TPMDeviceKey(tcti: fixture.tcti)
        try key.open(provisioning: true)
    }

    deinit {
        key.close()
        fixture.stop()
    }

    var endorsementCAs: [Certificate] {
        get throws {
            if let eccEndorsementCA { return [eccEndorsementCA.certificate] }
            let pem = try #require(fixture.endorsementCACertificates)
            return try AttestationKeyCertificates.ders(pem).map { try Certificate(derEncoded: $0) }
        }
    }

    func enrollmentRequest() throws -> EnrollmentRequest {
        EnrollmentRequest(
            ekCertificate: AttestationKeyCertificates.pem([Array(try key.endorsementKeyCertificate())]),
            akPublic: Data(try key.attestationKeyPublicArea()).base64EncodedString()
        )
    }

    /// The whole enrollment with `ca`: the AK certificate then the CA's.
    func enroll(with ca: TestAttestationCA) throws -> [[UInt8]] {
        let (challenge, state) = try AttestationCA.makeChallenge(
            for: try enrollmentRequest(),
            ekTrustAnchors: try endorsementCAs
        )
        let credential = try key.activateCredential(
            credentialBlob: Array(Data(base64Encoded: challenge.credentialBlob)!),
            secret: Array(Data(base64Encoded: challenge.secret)!)
        )
        let certificate = try AttestationCA.issue(
            state: state,
            proof: ActivationProof(credential: Data(credential).base64EncodedString()),
            caKey: Certificate.PrivateKey(ca.key),
            caCertificate: ca.certificate
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return [serializer.serializedBytes, ca.der]
    }

    /// A hardware key and its WebAuthn statement over `challenge`.
    func attestedKey(challenge: [UInt8], chain: [[UInt8]]) throws -> (publicKey: Data, statement: [UInt8]) {
        let hardware = try key.generateP256Key(authorization: secret(7))
        let certification = try key.certify(
            keyBlob: hardware.blob,
            authorization: secret(7),
            qualifyingData: attestationQualifyingData(challenge: challenge, properties: nil)
        )
        let statement = try TPMAttestationStatement(
            certifyInfo: certification.certifyInfo,
            signature: certification.signature,
            publicArea: certification.publicArea,
            chain: chain
        )
        return (hardware.publicKey, statement.cbor())
    }
}

/// Key attestation on swtpm with an EK certificate: the AK's enrollment with a CA and TPM2_Certify of hardware keys,
/// checked by Keyseal's verifier (docs/TPM.md, "Key attestation").
@Suite("TPM key attestation on swtpm", .serialized)
struct AttestationTests {
    static let challenge = Array("a verifier's fresh challenge".utf8)

    static func failure(_ body: () throws -> Void) -> AttestationFailure.Check? {
        do {
            try body()
            return nil
        } catch let error as AttestationFailure {
            return error.check
        } catch {
            return nil
        }
    }

    @Test("the enrollment round trip issues an AK certificate for this TPM's AK, as WebAuthn requires it")
    func enrollment() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer { ekCA.remove() }
        let tpm = try AttestingTPM(endorsementCA: ekCA)
        let ca = try TestAttestationCA()
        let chain = try tpm.enroll(with: ca)
        let certificate = try Certificate(derEncoded: chain[0])
        #expect(certificate.subject.isEmpty)
        #expect(
            try certificate.extensions.extendedKeyUsage.map(Array.init)?.contains(
                ExtendedKeyUsage.Usage(oid: [2, 23, 133, 8, 3])
            )
                == true
        )
        let san = try #require(try certificate.extensions.subjectAlternativeNames)
        #expect("\(san)".contains("swtpm"))
        try AttestationKeyCertificates.check(chain, attestationKeyPublicArea: try tpm.key.attestationKeyPublicArea())
        // The activation's policy session is flushed (policy sessions are 0x03xxxxxx).
        #expect(try !tpm.fixture.handlesInUse().contains { $0.hasPrefix("- 0x3") })
    }

    @Test("an ECC P-256 EK (certificate at 0x01C0000A) enrolls the AK too, and its credential opens in no other TPM")
    func eccEndorsementKey() throws {
        let ekCA = try TestAttestationCA(name: "ECC EK CA")
        let tpm = try AttestingTPM(eccEndorsementCA: ekCA)
        let other = try AttestingTPM(eccEndorsementCA: ekCA)
        let ca = try TestAttestationCA()
        let chain = try tpm.enroll(with: ca)
        let (_, statement) = try tpm.attestedKey(challenge: Self.challenge, chain: chain)
        _ = try AttestationVerifier.verify(statement, challenge: Self.challenge, trustAnchors: [ca.certificate])
        let (challenge, _) = try AttestationCA.makeChallenge(
            for: try tpm.enrollmentRequest(),
            ekTrustAnchors: [ekCA.certificate]
        )
        let error = try #require(throws: KeychainError.self) {
            _ = try other.key.activateCredential(
                credentialBlob: Array(Data(base64Encoded: challenge.credentialBlob)!),
                secret: Array(Data(base64Encoded: challenge.secret)!)
            )
        }
        #expect(error.status == KeychainStatus.decode)
    }

    @Test("a credential made for another TPM's EK does not activate: the TPM refuses it (errSecDecode)")
    func activationOnAnotherTPM() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer { ekCA.remove() }
        let first = try AttestingTPM(endorsementCA: ekCA)
        let second = try AttestingTPM(endorsementCA: ekCA)
        let (challenge, _) = try AttestationCA.makeChallenge(
            for: try first.enrollmentRequest(),
            ekTrustAnchors: try first.endorsementCAs
        )
        let error = try #require(throws: KeychainError.self) {
            _ = try second.key.activateCredential(
                credentialBlob: Array(Data(base64Encoded: challenge.credentialBlob)!),
                secret: Array(Data(base64Encoded: challenge.secret)!)
            )
        }
        #expect(error.status == KeychainStatus.decode)
        // Bytes that are no TPM2B_ID_OBJECT at all: refused the same way, before the TPM is asked.
        let malformed = try #require(throws: KeychainError.self) {
            _ = try second.key.activateCredential(credentialBlob: [0x00, 0x40, 0x01], secret: [])
        }
        #expect(malformed.status == KeychainStatus.decode)
    }

    @Test("an EK certificate that does not chain to the given EK CA gets no challenge")
    func endorsementCertificateOfAnotherMaker() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        let otherCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer {
            ekCA.remove()
            otherCA.remove()
        }
        let tpm = try AttestingTPM(endorsementCA: ekCA)
        let other = try AttestingTPM(endorsementCA: otherCA)
        let error = try #require(throws: KeychainError.self) {
            _ = try AttestationCA.makeChallenge(
                for: try tpm.enrollmentRequest(),
                ekTrustAnchors: try other.endorsementCAs
            )
        }
        #expect(error.status == KeychainStatus.decode)
    }

    @Test(
        "an attestation of a hardware key verifies; a replayed challenge, a tampered certInfo, another CA are refused"
    )
    func attestationAndItsRefusals() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer { ekCA.remove() }
        let tpm = try AttestingTPM(endorsementCA: ekCA)
        let ca = try TestAttestationCA()
        let chain = try tpm.enroll(with: ca)
        let (publicKey, statement) = try tpm.attestedKey(challenge: Self.challenge, chain: chain)
        let verified = try AttestationVerifier.verify(
            statement,
            challenge: Self.challenge,
            trustAnchors: [ca.certificate]
        )
        #expect(verified.publicKey.x963Representation == publicKey)

        // Replayed: verified against another challenge.
        #expect(
            Self.failure {
                _ = try AttestationVerifier.verify(
                    statement,
                    challenge: Array("another challenge".utf8),
                    trustAnchors: [ca.certificate]
                )
            } == .challenge
        )
        // Tampered certInfo: a byte of the clock changed, everything else intact.
        var decoded = try TPMAttestationStatement(cbor: statement)
        let clockOffset = 6 + 2 + Int(decoded.certInfo[6]) << 8 + Int(decoded.certInfo[7]) + 2 + 32
        decoded.certInfo[clockOffset + 7] ^= 0x01
        #expect(
            Self.failure {
                _ = try AttestationVerifier.verify(
                    decoded.cbor(),
                    challenge: Self.challenge,
                    trustAnchors: [ca.certificate]
                )
            } == .signature
        )
        // Another CA.
        #expect(
            Self.failure {
                _ = try AttestationVerifier.verify(
                    statement,
                    challenge: Self.challenge,
                    trustAnchors: [try TestAttestationCA(name: "Another CA").certificate]
                )
            } == .chain
        )
    }

    @Test("a key of another TPM: not the expected key, and its public area does not match the certified Name")
    func keyOfAnotherTPM() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer { ekCA.remove() }
        let ca = try TestAttestationCA()
        let first = try AttestingTPM(endorsementCA: ekCA)
        let second = try AttestingTPM(endorsementCA: ekCA)
        let (firstKey, firstStatement) = try first.attestedKey(
            challenge: Self.challenge,
            chain: try first.enroll(with: ca)
        )
        let (_, secondStatement) = try second.attestedKey(challenge: Self.challenge, chain: try second.enroll(with: ca))
        let expected = try P256.Signing.PublicKey(x963Representation: firstKey)
        #expect(
            Self.failure {
                _ = try AttestationVerifier.verify(
                    secondStatement,
                    challenge: Self.challenge,
                    trustAnchors: [ca.certificate],
                    expectedPublicKey: expected
                )
            } == .publicKey
        )
        // The first TPM's key put in place of the second's certified one.
        var swapped = try TPMAttestationStatement(cbor: secondStatement)
        swapped.pubArea = try TPMAttestationStatement(cbor: firstStatement).pubArea
        #expect(
            Self.failure {
                _ = try AttestationVerifier.verify(
                    swapped.cbor(),
                    challenge: Self.challenge,
                    trustAnchors: [ca.certificate]
                )
            } == .name
        )
    }
}

/// The statement's CBOR codec (KeysealAttestation/CBOR.swift): what it writes it reads back, and input that is not
/// one well-formed item is an error, never a crash.
@Suite("Attestation statement CBOR")
struct AttestationCBORTests {
    static let statement = TPMAttestationStatement(
        x5c: [[1, 2, 3], [4]],
        sig: [0x30, 0x06],
        certInfo: Array(repeating: 0xAB, count: 300),
        pubArea: Array(repeating: 0xCD, count: 24)
    )

    @Test("a statement decodes to what was encoded")
    func roundTrip() throws {
        #expect(try TPMAttestationStatement(cbor: Self.statement.cbor()) == Self.statement)
    }

    @Test("every truncation, trailing bytes and an indefinite length are refused as malformed")
    func malformedInput() throws {
        let bytes = Self.statement.cbor()
        for length in 0..<bytes.count {
            #expect(throws: AttestationFailure.self) { try TPMAttestationStatement(cbor: Array(bytes.prefix(length))) }
        }
        #expect(throws: CBOR.DecodingError.self) { try CBOR(decoding: bytes + [0]) }
        #expect(throws: CBOR.DecodingError.self) { try CBOR(decoding: [0x5F, 0x41, 0x00, 0xFF]) }
        #expect(throws: CBOR.DecodingError.self) { try CBOR(decoding: [0x9B] + [UInt8](repeating: 0xFF, count: 8)) }
    }
}

/// The verifier's checks of what the TPM signed, on statements made in software (a P-256 key standing for the AK, with
/// an AK certificate from a test CA): a statement the verifier accepts, then one field changed at a time and signed
/// again, as a TPM would sign it for such a key.
@Suite("Attestation verifier checks")
struct AttestationVerifierTests {
    static let challenge = Array("challenge".utf8)
    static let all = TPMConstant.fixedTPM | TPMConstant.fixedParent | TPMConstant.sensitiveDataOrigin

    let ca: TestAttestationCA
    let attestationKey = P256.Signing.PrivateKey()
    let akCertificate: [UInt8]
    let certified = P256.Signing.PrivateKey()

    init() throws {
        ca = try TestAttestationCA()
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(attestationKey.publicKey),
            notValidBefore: now.addingTimeInterval(-60),
            notValidAfter: now.addingTimeInterval(3600),
            issuer: ca.certificate.subject,
            subject: DistinguishedName(),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                try ExtendedKeyUsage([ExtendedKeyUsage.Usage(oid: [2, 23, 133, 8, 3])])
            },
            issuerPrivateKey: Certificate.PrivateKey(ca.key)
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        akCertificate = serializer.serializedBytes
    }

    static func be16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    static func be32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(value >> (24 - 8 * $0) & 0xFF) } }

    /// A TPMT_PUBLIC of an ECC P-256 key with `attributes`.
    func publicArea(attributes: UInt32) -> [UInt8] {
        let point = Array(certified.publicKey.x963Representation.dropFirst())
        return [0x00, 0x23, 0x00, 0x0B] + Self.be32(attributes | TPMConstant.sign) + [0x00, 0x00]
            + [0x00, 0x10, 0x00, 0x10, 0x00, 0x03, 0x00, 0x10] + Self.be16(32) + point[0..<32] + Self.be16(32)
            + point[32..<64]
    }

    /// The statement for `area`, with the certInfo's magic, type and Name as given.
    func statement(
        area: [UInt8],
        magic: UInt32 = TPMConstant.generatedValue,
        type: UInt16 = TPMConstant.attestCertify
    ) throws -> [UInt8] {
        let name = [0x00, 0x0B] + Array(SHA256.hash(data: area))
        let extra = Array(SHA256.hash(data: Self.challenge))
        let certInfo =
            Self.be32(magic) + Self.be16(Int(type)) + Self.be16(0) + Self.be16(32) + extra
            + [UInt8](repeating: 0, count: 17 + 8) + Self.be16(name.count) + name + Self.be16(0)
        let signature = try attestationKey.signature(for: certInfo)
        return TPMAttestationStatement(
            x5c: [akCertificate, ca.der],
            sig: Array(signature.derRepresentation),
            certInfo: certInfo,
            pubArea: area
        ).cbor()
    }

    func check(_ statement: [UInt8]) -> AttestationFailure.Check? {
        do {
            _ = try AttestationVerifier.verify(statement, challenge: Self.challenge, trustAnchors: [ca.certificate])
            return nil
        } catch {
            return error.check
        }
    }

    @Test("a key with fixedTPM, fixedParent and sensitiveDataOrigin verifies")
    func accepted() throws {
        #expect(check(try statement(area: publicArea(attributes: Self.all))) == nil)
    }

    @Test(
        "a key missing fixedTPM, fixedParent or sensitiveDataOrigin is refused (attributes)",
        arguments: [TPMConstant.fixedTPM, TPMConstant.fixedParent, TPMConstant.sensitiveDataOrigin]
    )
    func missingAttribute(_ attribute: UInt32) throws {
        #expect(check(try statement(area: publicArea(attributes: Self.all & ~attribute))) == .attributes)
    }

    @Test("another magic or another attestation type is refused (magic, type)")
    func magicAndType() throws {
        let area = publicArea(attributes: Self.all)
        #expect(check(try statement(area: area, magic: 0xFF54_4348)) == .magic)
        #expect(check(try statement(area: area, type: 0x8018)) == .type)
    }
}
