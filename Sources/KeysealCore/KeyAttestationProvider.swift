import struct FoundationEssentials.Data

/// What TPM2_Certify returns for a hardware key: the TPMS_ATTEST and the attestation key's TPMT_SIGNATURE (both
/// marshalled, without a TPM2B size) and the certified key's TPMT_PUBLIC.
public struct KeyCertification: Sendable, Equatable {
    public var certifyInfo: [UInt8]
    public var signature: [UInt8]
    public var publicArea: [UInt8]

    public init(certifyInfo: [UInt8], signature: [UInt8], publicArea: [UInt8]) {
        self.certifyInfo = certifyInfo
        self.signature = signature
        self.publicArea = publicArea
    }
}

/// Key attestation by the device key's hardware: an attestation key (AK) beside the endorsement key (EK), the EK
/// certificate, credential activation, and certification of hardware keys (docs/TPM.md, "Key attestation").
///
/// Called like ``DeviceKeyProvider``: under the engine's lock. Errors are ``KeychainError``s.
public protocol KeyAttestationProvider: AnyObject {
    /// The EK certificate (DER) from the TPM's NV (RSA: 0x01C00002).
    func endorsementKeyCertificate() throws -> Data

    /// The attestation key's TPMT_PUBLIC (marshalled).
    func attestationKeyPublicArea() throws -> [UInt8]

    /// TPM2_ActivateCredential with the AK and the EK: the credential a CA made for the AK's Name.
    func activateCredential(credentialBlob: [UInt8], secret: [UInt8]) throws -> [UInt8]

    /// TPM2_Certify of the hardware key in `keyBlob` by the AK, with `qualifyingData` as the attestation's extraData.
    func certify(keyBlob: Data, authorization: SecretBytes, qualifyingData: [UInt8]) throws -> KeyCertification
}

extension DeviceKeyProvider {
    /// The hardware's key attestation, or nil where the backend has none (PKCS#11, the host key file).
    public var keyAttestation: (any KeyAttestationProvider)? { self as? any KeyAttestationProvider }
}
