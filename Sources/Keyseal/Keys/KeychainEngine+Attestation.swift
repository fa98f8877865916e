import FoundationEssentials
import Glibc
import KeysealAttestation
import KeysealCore

// Key attestation (docs/TPM.md, "Key attestation"): the device side of the attestation key's enrollment, and
// TPM2_Certify of a hardware key emitted as the WebAuthn "tpm" statement.
extension KeychainEngine {
    /// The file beside the store that holds the AK certificate and its CA chain (PEM, 0600).
    static let attestationCertificatesFile = "attestation-key.pem"

    func attestationProvider() throws(KeychainError) -> any KeyAttestationProvider {
        guard let provider = device.keyAttestation else {
            throw KeychainError(
                KeychainStatus.unimplemented,
                "key attestation needs the TPM backend: the \(device.backendName) backend has no attestation key"
            )
        }
        return provider
    }

    /// The EK certificate (PEM) and the AK's public area (base64), as JSON for the CA.
    func attestationEnrollmentRequest() throws -> Data {
        let provider = try attestationProvider()
        let request = EnrollmentRequest(
            ekCertificate: AttestationKeyCertificates.pem([Array(try provider.endorsementKeyCertificate())]),
            akPublic: Data(try provider.attestationKeyPublicArea()).base64EncodedString()
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(request)
    }

    /// TPM2_ActivateCredential of a CA's challenge: the credential.
    func activateAttestationCredential(credentialBlob: Data, secret: Data) throws -> Data {
        Data(try attestationProvider().activateCredential(credentialBlob: Array(credentialBlob), secret: Array(secret)))
    }

    /// Stores the AK certificate and its chain after checking that the certificate is for this TPM's AK.
    func installAttestationCertificates(_ chain: [Data]) throws {
        let provider = try attestationProvider()
        let ders = chain.map { Array($0) }
        try AttestationKeyCertificates.check(ders, attestationKeyPublicArea: try provider.attestationKeyPublicArea())
        let path = directory.appendingPathComponent(Self.attestationCertificatesFile).path
        let temporary = path + ".new"
        unlink(temporary)
        let fd = Glibc.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw KeychainError(KeychainStatus.io, "cannot write \(temporary)") }
        let bytes = Array(AttestationKeyCertificates.pem(ders).utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        Glibc.close(fd)
        guard written == bytes.count, synced == 0, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw KeychainError(KeychainStatus.io, "cannot write \(path)")
        }
    }

    /// The stored AK certificate and chain (DER, leaf first).
    func attestationCertificates() throws -> [[UInt8]] {
        let path = directory.appendingPathComponent(Self.attestationCertificatesFile).path
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
        else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "no attestation key certificate is installed: enroll the AK with a CA first (keyseal attestation "
                    + "enroll-request, then install)"
            )
        }
        return try AttestationKeyCertificates.ders(text)
    }

    /// TPM2_Certify of the hardware key `persistentRef` by the AK over `challenge`: the WebAuthn "tpm" statement
    /// (CBOR; extraData = SHA-256(challenge)) or, for `json`, Keyseal's document binding the key's accessibility
    /// class, this-device-only and non-exportable properties (extraData of its own encoding, never equal to a
    /// `webauthn-tpm` one: ``attestationQualifyingData(challenge:properties:)``). The key
    /// is found as a lookup finds it (the caller's groups; a locked class is errSecInteractionNotAllowed).
    func attest(_ persistentRef: Data, challenge: Data, format: String, caller: Caller) throws -> Data {
        guard format == "webauthn-tpm" || format == "json" else {
            throw KeychainError(KeychainStatus.param, "the attestation format is webauthn-tpm or json, not \(format)")
        }
        guard (1...4096).contains(challenge.count) else {
            throw KeychainError(KeychainStatus.param, "the challenge is 1 to 4096 bytes")
        }
        let provider = try attestationProvider()
        let record = try keyRecord(persistentRef, caller: caller)
        guard record.string(AttributeKey.tokenID) == Self.hardwareTokenID else {
            throw KeychainError(
                KeychainStatus.param,
                "only a key generated in the TPM can be attested; this one is a software key"
            )
        }
        guard let accessibility = record.accessibility else {
            throw KeychainError(KeychainStatus.internalComponent, "the key item has no accessibility class")
        }
        let chain = try attestationCertificates()
        let properties =
            format == "json"
            ? AttestedKeyProperties(
                accessibility: accessibility.name,
                thisDeviceOnly: accessibility.isThisDeviceOnly,
                nonExportable: true
            ) : nil
        let certification = try withPrivateKey(.item(persistentRef), caller: caller) { handle in
            guard case .hardware(let key) = handle else {
                throw KeychainError(KeychainStatus.param, "only a key generated in the TPM can be attested")
            }
            return try provider.certify(
                keyBlob: key.blob,
                authorization: key.authorization,
                qualifyingData: attestationQualifyingData(challenge: Array(challenge), properties: properties)
            )
        }
        let statement: TPMAttestationStatement
        do {
            statement = try TPMAttestationStatement(
                certifyInfo: certification.certifyInfo,
                signature: certification.signature,
                publicArea: certification.publicArea,
                chain: chain
            )
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "the TPM's attestation does not parse: \(error)")
        }
        guard let properties else { return Data(statement.cbor()) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(AttestationDocument(properties: properties, statement: statement))
    }
}
