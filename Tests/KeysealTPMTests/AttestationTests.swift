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
    /// default template L-2, made by tpm2_createek) with a certificate from `eccEndorsementCA` at NV 0x01C0000A, whose
    /// TPM manufacturer and version are what the TPM reports (``reportedIdentity(_:)``) and whose model is "swtpm".
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
        let reported = try Self.reportedIdentity(fixture)
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
                                    utf8String: reported.manufacturer
                                ),
                                RelativeDistinguishedName.Attribute(type: [2, 23, 133, 2, 2], utf8String: "swtpm"),
                                RelativeDistinguishedName.Attribute(
                                    type: [2, 23, 133, 2, 3],
                                    utf8String: reported.version
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

    /// TPM2_PT_MANUFACTURER and TPM2_PT_FIRMWARE_VERSION_1 as the TPM reports them (tpm2_getcap), in the form of the
    /// TCG EK Credential Profile's TPMManufacturer and TPMVersion attributes: "id:" and eight hex digits.
    static func reportedIdentity(_ fixture: SwtpmFixture) throws -> (manufacturer: String, version: String) {
        var raw: [String: String] = [:]
        var current: String?
        for line in try fixture.tool("tpm2_getcap", ["properties-fixed"]).stdoutText.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if !line.hasPrefix(" "), trimmed.hasSuffix(":") {
                current = String(trimmed.dropLast())
            } else if trimmed.hasPrefix("raw: 0x"), let current {
                raw[current] = String(trimmed.dropFirst("raw: 0x".count))
            }
        }
        func id(_ property: String) throws -> String {
            let hex = try #require(
                raw[property].flatMap { UInt32($0, radix: 16) },
                "tpm2_getcap printed no \(property)"
            )
            return "id:" + String(format: "%08X", hex)
        }
        return (try id("TPM2_PT_MANUFACTURER"), try id("TPM2_PT_FIRMWARE_VERSION_1"))
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

    /// A hardware key of `key` (this TPM's opened key by default) and its WebAuthn statement over `challenge`.
    func attestedKey(
        challenge: [UInt8],
        chain: [[UInt8]],
        by key: TPMDeviceKey? = nil
    ) throws -> (publicKey: Data, statement: [UInt8]) {
        let key = key ?? self.key
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
        #expect(certificate.version == .v3)
        #expect(certificate.subject.isEmpty)
        #expect(
            try certificate.extensions.extendedKeyUsage.map(Array.init) == [
                ExtendedKeyUsage.Usage(oid: [2, 23, 133, 8, 3])
            ]
        )
        let constraints = try #require(certificate.extensions[oid: .X509ExtensionID.basicConstraints])
        #expect(constraints.critical)
        #expect(try BasicConstraints(constraints) == .notCertificateAuthority)
        // The SAN: critical, one directoryName of exactly the TPM's manufacturer, model and version, with the values
        // of the EK certificate (the maker's signed word; what the TPM reports is not authenticated). swtpm_setup
        // writes the manufacturer as "id:00001014" (IBM's PCI vendor ID) although the TPM reports TPM2_PT_MANUFACTURER
        // "IBM" (0x49424D00); the version agrees (eccEndorsementKey checks all of it against a certificate made from
        // the TPM's report).
        let tpmAttributes = try Self.tpmDirectoryName(of: certificate)
        #expect(tpmAttributes.critical)
        #expect(
            tpmAttributes.attributes.map(\.type) == [[2, 23, 133, 2, 1], [2, 23, 133, 2, 2], [2, 23, 133, 2, 3]]
        )
        let ek = try Self.tpmDirectoryName(of: Certificate(derEncoded: Array(tpm.key.endorsementKeyCertificate())))
        #expect(tpmAttributes.attributes.map { String($0.value) } == ek.attributes.map { String($0.value) })
        let version = tpmAttributes.attributes.first { $0.type == [2, 23, 133, 2, 3] }.flatMap { String($0.value) }
        #expect(version == (try AttestingTPM.reportedIdentity(tpm.fixture)).version)
        try AttestationKeyCertificates.check(chain, attestationKeyPublicArea: try tpm.key.attestationKeyPublicArea())
        // The activation's policy session is flushed (policy sessions are 0x03xxxxxx).
        #expect(try !tpm.fixture.handlesInUse().contains { $0.hasPrefix("- 0x3") })
    }

    /// The attributes of the one directoryName that is `certificate`'s subjectAltName, and whether the extension is
    /// critical. Fails when the SAN holds anything else.
    static func tpmDirectoryName(
        of certificate: Certificate
    ) throws -> (critical: Bool, attributes: [RelativeDistinguishedName.Attribute]) {
        let san = try #require(certificate.extensions[oid: .X509ExtensionID.subjectAlternativeName])
        let names = Array(try SubjectAlternativeNames(san))
        try #require(names.count == 1, "the SAN holds \(names)")
        guard case .directoryName(let directory) = names[0] else {
            throw FixtureError("the SAN's name is no directoryName: \(names[0])")
        }
        return (san.critical, directory.flatMap { Array($0) })
    }

    @Test("an ECC P-256 EK (certificate at 0x01C0000A) enrolls the AK too, and its credential opens in no other TPM")
    func eccEndorsementKey() throws {
        let ekCA = try TestAttestationCA(name: "ECC EK CA")
        let tpm = try AttestingTPM(eccEndorsementCA: ekCA)
        let other = try AttestingTPM(eccEndorsementCA: ekCA)
        let ca = try TestAttestationCA()
        let chain = try tpm.enroll(with: ca)
        // The AK certificate's SAN: the EK certificate's manufacturer, model and version, which agree with the TPM's.
        let reported = try AttestingTPM.reportedIdentity(tpm.fixture)
        #expect(
            try Self.tpmDirectoryName(of: Certificate(derEncoded: chain[0])).attributes.map { String($0.value) } == [
                reported.manufacturer, "swtpm", reported.version,
            ]
        )
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

    @Test(
        "the AK is in the endorsement hierarchy: after TPM2_Clear it is the same key and its certificate verifies new attestations"
    )
    func akSurvivesOwnerClear() throws {
        let ekCA = try TemporaryDirectory(prefix: "keyseal-ekca")
        defer { ekCA.remove() }
        let tpm = try AttestingTPM(endorsementCA: ekCA)
        let ca = try TestAttestationCA()
        let chain = try tpm.enroll(with: ca)
        let before = try tpm.key.attestationKeyPublicArea()
        let earlier = try tpm.key.generateP256Key(authorization: secret(7))
        tpm.key.close()

        try tpm.fixture.tool("tpm2_clear", ["-c", "l"])
        // What a store opens after the clear: the same TPM, a new owner hierarchy. Keys made under the old storage
        // primary are lost (docs/TPM.md, "What a TPM clear means"), which shows the clear took place.
        let key = TPMDeviceKey(tcti: tpm.fixture.tcti)
        defer { key.close() }
        try key.open(provisioning: true)
        let lost = try #require(throws: KeychainError.self) {
            _ = try key.certify(keyBlob: earlier.blob, authorization: secret(7), qualifyingData: [1])
        }
        #expect(lost.status == KeychainStatus.decode)

        let after = try key.attestationKeyPublicArea()
        #expect(after == before)
        // The certificate installed before the clear is still this TPM's AK certificate, and verifies an attestation
        // of a key made after it.
        try AttestationKeyCertificates.check(chain, attestationKeyPublicArea: after)
        let (publicKey, statement) = try tpm.attestedKey(challenge: Self.challenge, chain: chain, by: key)
        let verified = try AttestationVerifier.verify(
            statement,
            challenge: Self.challenge,
            trustAnchors: [ca.certificate]
        )
        #expect(verified.publicKey.x963Representation == publicKey)
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
        akCertificate = try Self.attestationKeyCertificate(
            ca: ca,
            key: Certificate.PublicKey(attestationKey.publicKey)
        )
    }

    /// An AK certificate for `key` from `ca`: by default one the verifier accepts (v3, empty subject, EKU
    /// tcg-kp-AIKCertificate, basicConstraints CA false); each argument changes one property and nothing else.
    static func attestationKeyCertificate(
        ca: TestAttestationCA,
        key: Certificate.PublicKey,
        version: Certificate.Version = .v3,
        subject: DistinguishedName = DistinguishedName(),
        usages: [ExtendedKeyUsage.Usage]? = [ExtendedKeyUsage.Usage(oid: [2, 23, 133, 8, 3])],
        constraints: BasicConstraints = .notCertificateAuthority
    ) throws -> [UInt8] {
        let now = Date()
        var extensions = try Certificate.Extensions { Critical(constraints) }
        if let usages { try extensions.append(Certificate.Extension(ExtendedKeyUsage(usages), critical: false)) }
        let certificate = try Certificate(
            version: version,
            serialNumber: Certificate.SerialNumber(),
            publicKey: key,
            notValidBefore: now.addingTimeInterval(-60),
            notValidAfter: now.addingTimeInterval(3600),
            issuer: ca.certificate.subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(ca.key)
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
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

    /// The statement for `area`, with the certInfo's magic, type and Name as given, `alg`, and `certificate` as the AK
    /// certificate (this suite's by default) with `sign` as its key.
    func statement(
        area: [UInt8],
        magic: UInt32 = TPMConstant.generatedValue,
        type: UInt16 = TPMConstant.attestCertify,
        alg: Int = TPMAttestationStatement.es256,
        certificate: [UInt8]? = nil,
        extraData: [UInt8]? = nil,
        sign: (([UInt8]) throws -> [UInt8])? = nil
    ) throws -> [UInt8] {
        let name = [0x00, 0x0B] + Array(SHA256.hash(data: area))
        let extra = extraData ?? Array(SHA256.hash(data: Self.challenge))
        let certInfo =
            Self.be32(magic) + Self.be16(Int(type)) + Self.be16(0) + Self.be16(extra.count) + extra
            + [UInt8](repeating: 0, count: 17 + 8) + Self.be16(name.count) + name + Self.be16(0)
        let signature = try sign?(certInfo) ?? Array(attestationKey.signature(for: certInfo).derRepresentation)
        return TPMAttestationStatement(
            alg: alg,
            x5c: [certificate ?? akCertificate, ca.der],
            sig: signature,
            certInfo: certInfo,
            pubArea: area
        ).cbor()
    }

    func check(_ statement: [UInt8]) -> AttestationFailure.Check? { refusal(statement)?.check }

    /// The verifier's failure for `statement`, nil when it verifies.
    func refusal(_ statement: [UInt8]) -> AttestationFailure? {
        do {
            _ = try AttestationVerifier.verify(statement, challenge: Self.challenge, trustAnchors: [ca.certificate])
            return nil
        } catch {
            return error
        }
    }

    /// The verifier's failure for the statement of a well-formed key whose AK certificate, issued by this suite's CA,
    /// differs from the accepted one only where an argument says.
    func refusalOfCertificate(
        version: Certificate.Version = .v3,
        subject: DistinguishedName = DistinguishedName(),
        usages: [ExtendedKeyUsage.Usage]? = [ExtendedKeyUsage.Usage(oid: [2, 23, 133, 8, 3])],
        constraints: BasicConstraints = .notCertificateAuthority
    ) throws -> AttestationFailure? {
        let certificate = try Self.attestationKeyCertificate(
            ca: ca,
            key: Certificate.PublicKey(attestationKey.publicKey),
            version: version,
            subject: subject,
            usages: usages,
            constraints: constraints
        )
        return refusal(try statement(area: publicArea(attributes: Self.all), certificate: certificate))
    }

    /// A `json` document of `format` stating `properties` over `statement`.
    static func document(format: String, properties: [String: Any], statement: [UInt8]) throws -> [UInt8] {
        Array(
            try JSONSerialization.data(withJSONObject: [
                "format": format, "properties": properties, "statement": Data(statement).base64EncodedString(),
            ])
        )
    }

    static var statedProperties: [String: Any] {
        ["accessibility": "when-unlocked-this-device-only", "thisDeviceOnly": true, "nonExportable": true]
    }
    static let statedBinding = "accessibility=when-unlocked-this-device-only\nthis-device-only=1\nnon-exportable=1\n"

    /// The `json` format's preimage (docs/TPM.md, "Attesting a key"): the domain tag, a zero byte, the challenge's
    /// length (8 bytes, big-endian), the challenge, the properties' text.
    static var statedPreimage: [UInt8] {
        Array("keyseal-key-properties/v2".utf8) + [0] + [0, 0, 0, 0, 0, 0, 0, UInt8(challenge.count)] + challenge
            + Array(statedBinding.utf8)
    }

    @Test(
        "a json document verifies when extraData is 0x02 followed by SHA-256 of its preimage, and states its properties"
    )
    func jsonDocumentOfVersion2() throws {
        let made = try statement(
            area: publicArea(attributes: Self.all),
            extraData: [0x02] + Array(SHA256.hash(data: Self.statedPreimage))
        )
        let verified = try AttestationVerifier.verify(
            try Self.document(
                format: "keyseal-tpm-attestation-v2",
                properties: Self.statedProperties,
                statement: made
            ),
            challenge: Self.challenge,
            trustAnchors: [ca.certificate]
        )
        #expect(verified.properties?.accessibility == "when-unlocked-this-device-only")
    }

    @Test("a webauthn-tpm statement (extraData SHA-256 of its challenge) over a json preimage fails challenge as json")
    func webauthnStatementOverAJSONPreimage() throws {
        // What an honest device certifies as webauthn-tpm for the challenge a forger chose: the json preimage.
        let made = try statement(
            area: publicArea(attributes: Self.all),
            extraData: Array(SHA256.hash(data: Self.statedPreimage))
        )
        for format in ["keyseal-tpm-attestation-v2", AttestationDocument.formatName] {
            let document = try Self.document(format: format, properties: Self.statedProperties, statement: made)
            #expect(check(document) == .challenge, "\(format)")
        }
    }

    @Test("a keyseal-tpm-attestation-v1 document is refused (malformed), its message naming the version")
    func jsonDocumentOfVersion1() throws {
        // v1's extraData: SHA-256(challenge ‖ text), the preimage any webauthn-tpm challenge could be.
        let made = try statement(
            area: publicArea(attributes: Self.all),
            extraData: Array(
                SHA256.hash(data: Self.challenge + Array(("keyseal-key-properties/v1\n" + Self.statedBinding).utf8))
            )
        )
        let failure = refusal(
            try Self.document(
                format: "keyseal-tpm-attestation-v1",
                properties: Self.statedProperties,
                statement: made
            )
        )
        #expect(
            failure?.check == .malformed && failure?.message.contains("keyseal-tpm-attestation-v1") == true,
            "\(String(describing: failure))"
        )
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

    @Test("an alg other than ES256 (-7) is refused (algorithm), before anything else is looked at")
    func algorithmOtherThanES256() throws {
        let area = publicArea(attributes: Self.all)
        for alg in [-257, -35, -8, 0] {  // RS256, ES384, EdDSA, none
            let failure = refusal(try statement(area: area, alg: alg))
            #expect(
                failure?.check == .algorithm && failure?.message.contains("ES256") == true,
                "\(String(describing: failure))"
            )
        }
    }

    @Test("an AK certificate whose key is not NIST P-256 is refused (algorithm), even from the trusted CA")
    func attestationKeyNotP256() throws {
        let p384 = P384.Signing.PrivateKey()
        let certificate = try Self.attestationKeyCertificate(ca: ca, key: Certificate.PublicKey(p384.publicKey))
        let failure = refusal(
            try statement(
                area: publicArea(attributes: Self.all),
                certificate: certificate,
                sign: { Array(try p384.signature(for: $0).derRepresentation) }
            )
        )
        #expect(
            failure?.check == .algorithm && failure?.message.contains("P-256") == true,
            "\(String(describing: failure))"
        )
    }

    @Test("an AK certificate that is X.509 v1, and otherwise the accepted one, is refused (chain: not v3)")
    func attestationKeyCertificateNotV3() throws {
        #expect(try refusalOfCertificate() == nil)
        let failure = try refusalOfCertificate(version: .v1)
        #expect(
            failure?.check == .chain && failure?.message.contains("not X.509 v3") == true,
            "\(String(describing: failure))"
        )
    }

    @Test("an AK certificate with a subject, and otherwise the accepted one, is refused (chain: subject not empty)")
    func attestationKeyCertificateWithSubject() throws {
        let failure = try refusalOfCertificate(subject: try DistinguishedName { CommonName("device-17") })
        #expect(
            failure?.check == .chain && failure?.message.contains("subject is not empty") == true,
            "\(String(describing: failure))"
        )
    }

    @Test("an AK certificate without the EKU tcg-kp-AIKCertificate (none, or serverAuth only) is refused (chain)")
    func attestationKeyCertificateWithoutAIKUsage() throws {
        for usages in [nil, [ExtendedKeyUsage.Usage.serverAuth]] {
            let failure = try refusalOfCertificate(usages: usages)
            #expect(
                failure?.check == .chain && failure?.message.contains("lacks the EKU tcg-kp-AIKCertificate") == true,
                "\(String(describing: failure))"
            )
        }
    }

    @Test("an AK certificate with basicConstraints CA true, and otherwise the accepted one, is refused (chain)")
    func attestationKeyCertificateOfACA() throws {
        let failure = try refusalOfCertificate(constraints: .isCertificateAuthority(maxPathLength: nil))
        #expect(
            failure?.check == .chain && failure?.message.contains("is a CA certificate") == true,
            "\(String(describing: failure))"
        )
    }
}
