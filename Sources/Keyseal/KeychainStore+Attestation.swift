import FoundationEssentials
import KeysealClient
import KeysealCore

// Key attestation through the store: in this process (embedded) or in keyseald (docs/TPM.md, "Key attestation").
extension KeychainStore {
    /// The enrollment request for a CA (JSON: the EK certificate and the AK's public area).
    public func attestationEnrollmentRequest() throws -> Data {
        try route({ try $0.attestationEnrollmentRequest() }) { connection throws(KeychainError) -> Data in
            try Self.result(try Self.request(connection, .attestation(.enrollmentRequest)))
        }
    }

    /// TPM2_ActivateCredential of a CA's challenge: the credential, the proof for the CA.
    public func activateAttestationCredential(credentialBlob: Data, secret: Data) throws -> Data {
        try route({ try $0.activateAttestationCredential(credentialBlob: credentialBlob, secret: secret) }) {
            connection throws(KeychainError) -> Data in
            try Self.result(
                try Self.request(connection, .attestation(.activate(credentialBlob: credentialBlob, secret: secret)))
            )
        }
    }

    /// Stores the AK certificate and its CA chain (DER, leaf first) beside the store.
    public func installAttestationCertificates(_ chain: [Data]) throws {
        try route({ try $0.installAttestationCertificates(chain) }) { connection throws(KeychainError) in
            try Self.expectOK(try Self.request(connection, .attestation(.install(certificates: chain))))
        }
    }

    /// The attestation of a hardware key: `format` `webauthn-tpm` (the WebAuthn "tpm" statement, CBOR) or `json`
    /// (the key's Keyseal properties bound too).
    public func attest(_ key: KeyReference, challenge: Data, format: String = "webauthn-tpm") throws -> Data {
        try attest(key, challenge: challenge, format: format, caller: .owner)
    }

    package func attest(_ key: KeyReference, challenge: Data, format: String, caller: Caller) throws -> Data {
        guard case .item(let reference) = key else {
            throw KeychainError(KeychainStatus.param, "only a stored hardware key can be attested")
        }
        return try route({ try $0.attest(reference, challenge: challenge, format: format, caller: caller) }) {
            connection throws(KeychainError) -> Data in
            let operation = WireKeyOperation(reference: reference, kind: .attest, algorithm: format, data: challenge)
            return try Self.result(try Self.request(connection, .keyOperation(operation)))
        }
    }

    private static func result(_ response: WireResponse) throws(KeychainError) -> Data {
        guard case .keyResult(let data) = response else { throw unexpected(response) }
        return data
    }
}
