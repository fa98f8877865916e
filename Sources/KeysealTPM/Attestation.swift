internal import CTSS2
import KeysealCore

import struct FoundationEssentials.Data

// Key attestation on the TPM (docs/TPM.md, "Key attestation"): the attestation key (AK), the EK certificate,
// credential activation and TPM2_Certify.

/// The AK: a primary in the endorsement hierarchy, re-created from this template at each use (deterministic for one
/// endorsement seed, so nothing is persisted and no owner authorization is needed): ECC NIST P-256, ECDSA-SHA256,
/// `fixedTPM | fixedParent | sensitiveDataOrigin | userWithAuth | noDA | restricted | sign`, empty authValue and
/// policy, `unique.x` = SHA-256("keyseal attestation key") as a diversifier.
let attestationKeyTemplate: [UInt8] = {
    let x: [UInt8] = [
        0x22, 0x9d, 0x05, 0x95, 0x62, 0x1d, 0x1f, 0x4c, 0xd2, 0xc1, 0x6d, 0x29, 0x0c, 0x66, 0x98, 0x43,
        0x74, 0xd7, 0xe3, 0xd4, 0x3a, 0x4b, 0xa2, 0xd5, 0xf2, 0x19, 0x38, 0x11, 0xc1, 0x51, 0x83, 0xc8,
    ]
    let area: [UInt8] =
        [0x00, 0x23, 0x00, 0x0B, 0x00, 0x05, 0x04, 0x72, 0x00, 0x00]  // ECC, SHA-256, attributes, no policy
        + [0x00, 0x10, 0x00, 0x18, 0x00, 0x0B, 0x00, 0x03, 0x00, 0x10]  // no symmetric, ECDSA-SHA256, P-256, no KDF
        + [0x00, 0x20] + x + [0x00, 0x00]
    return [UInt8(area.count >> 8), UInt8(area.count & 0xFF)] + area
}()

/// The TCG EK Credential Profile's default RSA 2048 EK template (L-1): `fixedTPM | fixedParent |
/// sensitiveDataOrigin | adminWithPolicy | restricted | decrypt`, policy PolicySecret(TPM_RH_ENDORSEMENT),
/// AES-128-CFB, a zero unique of 256 bytes. CreatePrimary with it re-creates the EK whose certificate is in NV.
let endorsementKeyTemplate: [UInt8] = {
    let policy: [UInt8] = [
        0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xb3, 0xf8, 0x1a, 0x90, 0xcc, 0x8d, 0x46, 0xa5, 0xd7, 0x24,
        0xfd, 0x52, 0xd7, 0x6e, 0x06, 0x52, 0x0b, 0x64, 0xf2, 0xa1, 0xda, 0x1b, 0x33, 0x14, 0x69, 0xaa,
    ]
    let area: [UInt8] =
        [0x00, 0x01, 0x00, 0x0B, 0x00, 0x03, 0x00, 0xB2, 0x00, 0x20] + policy
        + [0x00, 0x06, 0x00, 0x80, 0x00, 0x43, 0x00, 0x10, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00]
        + [0x01, 0x00] + [UInt8](repeating: 0, count: 256)
    return [UInt8(area.count >> 8), UInt8(area.count & 0xFF)] + area
}()

/// The profile's default ECC NIST P-256 EK template (L-2): the same attributes, policy and symmetric algorithm as
/// L-1, a zero unique of 32 + 32 bytes.
let eccEndorsementKeyTemplate: [UInt8] = {
    let policy: [UInt8] = Array(endorsementKeyTemplate[12..<44])
    let area: [UInt8] =
        [0x00, 0x23, 0x00, 0x0B, 0x00, 0x03, 0x00, 0xB2, 0x00, 0x20] + policy
        + [0x00, 0x06, 0x00, 0x80, 0x00, 0x43, 0x00, 0x10, 0x00, 0x03, 0x00, 0x10]
        + [0x00, 0x20] + [UInt8](repeating: 0, count: 32) + [0x00, 0x20] + [UInt8](repeating: 0, count: 32)
    return [UInt8(area.count >> 8), UInt8(area.count & 0xFF)] + area
}()

/// The NV indexes of the EK certificates (TCG EK Credential Profile), each with the template of its EK: RSA 2048
/// first, then ECC NIST P-256. The first one present is the EK Keyseal uses.
let endorsementKeys: [(certificateIndex: UInt32, template: [UInt8])] = [
    (0x01C0_0002, endorsementKeyTemplate),
    (0x01C0_000A, eccEndorsementKeyTemplate),
]

extension ESYSConnection {
    /// TPM2_CreatePrimary under the endorsement hierarchy (empty endorsement authorization) from a marshalled
    /// TPM2B_PUBLIC. Returns the handle and the object's TPMT_PUBLIC.
    func createEndorsementPrimary(template bytes: [UInt8]) throws(TSS2Error) -> (handle: ESYS_TR, publicArea: [UInt8]) {
        var template = TPM2B_PUBLIC()
        try unmarshal(bytes, into: &template, Tss2_MU_TPM2B_PUBLIC_Unmarshal)
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        let handle = try createPrimary(in: ESYS_TR(ESYS_TR_RH_ENDORSEMENT), template: template, outPublic: &outPublic)
        defer { Esys_Free(outPublic) }
        do throws(TSS2Error) {
            guard let outPublic else {
                throw TSS2Error(function: "Esys_CreatePrimary", code: TSS2ResultCode(rawValue: 0x7_0000 | 5))
            }
            return (handle, Array(try marshalled(outPublic, Tss2_MU_TPM2B_PUBLIC_Marshal).dropFirst(2)))
        } catch {
            flush(handle)
            throw error
        }
    }

    /// The contents of the NV index `index` (read with its own empty authorization), or nil when it is not defined.
    func readNV(_ index: UInt32) throws(TSS2Error) -> [UInt8]? {
        var object = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_TR_FromTPMPublic(
            context,
            index,
            ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE),
            &object
        )
        if rc != 0 {
            let code = TSS2ResultCode(rawValue: rc)
            if code.isCommunicationFailure { try tss2("Esys_TR_FromTPMPublic", rc) }
            return nil  // TPM_RC_HANDLE: no such index
        }
        defer { _ = Esys_TR_Close(context, &object) }
        var nvPublic: UnsafeMutablePointer<TPM2B_NV_PUBLIC>?
        try tss2(
            "Esys_NV_ReadPublic",
            Esys_NV_ReadPublic(
                context,
                object,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &nvPublic,
                nil
            )
        )
        let size = Int(nvPublic?.pointee.nvPublic.dataSize ?? 0)
        Esys_Free(nvPublic)
        var contents: [UInt8] = []
        while contents.count < size {
            let chunk = UInt16(min(512, size - contents.count))
            var data: UnsafeMutablePointer<TPM2B_MAX_NV_BUFFER>?
            try tss2(
                "Esys_NV_Read",
                Esys_NV_Read(
                    context,
                    object,
                    object,
                    ESYS_TR(ESYS_TR_PASSWORD),
                    ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE),
                    chunk,
                    UInt16(contents.count),
                    &data
                )
            )
            defer { Esys_Free(data) }
            guard let data, data.pointee.size > 0 else { break }
            contents += withUnsafeBytes(of: &data.pointee.buffer) { Array($0.prefix(Int(data.pointee.size))) }
        }
        return contents
    }

    /// TPM2_ActivateCredential: the AK (password, empty) beside the EK (a policy session with
    /// PolicySecret(TPM_RH_ENDORSEMENT), the EK's policy). Returns the credential.
    func activateCredential(
        attestationKey: ESYS_TR,
        endorsementKey: ESYS_TR,
        credentialBlob: [UInt8],
        secret: [UInt8]
    ) throws(TSS2Error) -> [UInt8] {
        var blob = TPM2B_ID_OBJECT()
        var encryptedSecret = TPM2B_ENCRYPTED_SECRET()
        try unmarshal(credentialBlob, into: &blob, Tss2_MU_TPM2B_ID_OBJECT_Unmarshal)
        try unmarshal(secret, into: &encryptedSecret, Tss2_MU_TPM2B_ENCRYPTED_SECRET_Unmarshal)
        let session = try startSession(.policy)
        defer { flush(session) }  // ESAPI starts sessions with continueSession: it stays loaded until flushed
        try tss2(
            "Esys_PolicySecret",
            Esys_PolicySecret(
                context,
                ESYS_TR(ESYS_TR_RH_ENDORSEMENT),
                session,
                ESYS_TR(ESYS_TR_PASSWORD),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                nil,
                nil,
                nil,
                0,
                nil,
                nil
            )
        )
        var certInfo: UnsafeMutablePointer<TPM2B_DIGEST>?
        try tss2(
            "Esys_ActivateCredential",
            Esys_ActivateCredential(
                context,
                attestationKey,
                endorsementKey,
                ESYS_TR(ESYS_TR_PASSWORD),
                session,
                ESYS_TR(ESYS_TR_NONE),
                &blob,
                &encryptedSecret,
                &certInfo
            )
        )
        defer { Esys_Free(certInfo) }
        guard let certInfo else { return [] }
        return withUnsafeBytes(of: &certInfo.pointee.buffer) { Array($0.prefix(Int(certInfo.pointee.size))) }
    }

    /// TPM2_Certify of `object` (authorized by `session`, whose authValue ESAPI holds) by `attestationKey`
    /// (password, empty), with the AK's own scheme. Returns the TPMS_ATTEST and the TPMT_SIGNATURE, marshalled.
    func certify(
        _ object: ESYS_TR,
        session: ESYS_TR,
        attestationKey: ESYS_TR,
        qualifyingData: [UInt8]
    ) throws(TSS2Error) -> (certifyInfo: [UInt8], signature: [UInt8]) {
        var data = TPM2B_DATA()
        try unmarshal(
            [UInt8(qualifyingData.count >> 8), UInt8(qualifyingData.count & 0xFF)] + qualifyingData,
            into: &data,
            Tss2_MU_TPM2B_DATA_Unmarshal
        )
        var scheme = TPMT_SIG_SCHEME()
        try unmarshal([0x00, 0x10], into: &scheme, Tss2_MU_TPMT_SIG_SCHEME_Unmarshal)
        var attest: UnsafeMutablePointer<TPM2B_ATTEST>?
        var signature: UnsafeMutablePointer<TPMT_SIGNATURE>?
        try tss2(
            "Esys_Certify",
            Esys_Certify(
                context,
                object,
                attestationKey,
                session,
                ESYS_TR(ESYS_TR_PASSWORD),
                ESYS_TR(ESYS_TR_NONE),
                &data,
                &scheme,
                &attest,
                &signature
            )
        )
        defer {
            Esys_Free(attest)
            Esys_Free(signature)
        }
        guard let attest, let signature else {
            throw TSS2Error(function: "Esys_Certify", code: TSS2ResultCode(rawValue: 0x7_0000 | 5))
        }
        return (
            Array(try marshalled(attest, Tss2_MU_TPM2B_ATTEST_Marshal).dropFirst(2)),
            try marshalled(signature, Tss2_MU_TPMT_SIGNATURE_Marshal)
        )
    }
}

extension TPMDeviceKey: KeyAttestationProvider {
    public func endorsementKeyCertificate() throws -> Data {
        try withConnection { connection in Data(try endorsementKey(connection).certificate) }
    }

    /// The EK certificate and the EK's template: RSA 2048 (NV 0x01C00002) if the TPM has its certificate, else
    /// ECC NIST P-256 (NV 0x01C0000A).
    private func endorsementKey(_ connection: ESYSConnection) throws -> (certificate: [UInt8], template: [UInt8]) {
        for key in endorsementKeys {
            if let certificate = try connection.readNV(key.certificateIndex), !certificate.isEmpty {
                return (certificate, key.template)
            }
        }
        throw KeychainError(
            KeychainStatus.notAvailable,
            "the TPM holds no EK certificate (NV index 0x01C00002 for RSA 2048, 0x01C0000A for ECC P-256)"
        )
    }

    public func attestationKeyPublicArea() throws -> [UInt8] {
        try withConnection { connection in
            dropKept(connection)
            let ak = try connection.createEndorsementPrimary(template: attestationKeyTemplate)
            connection.flush(ak.handle)
            return ak.publicArea
        }
    }

    public func activateCredential(credentialBlob: [UInt8], secret: [UInt8]) throws -> [UInt8] {
        try withConnection { connection in
            dropKept(connection)  // the AK and the EK take two of the three object slots
            let ak = try connection.createEndorsementPrimary(template: attestationKeyTemplate)
            defer { connection.flush(ak.handle) }
            let ek = try connection.createEndorsementPrimary(template: try endorsementKey(connection).template)
            defer { connection.flush(ek.handle) }
            do {
                return try connection.activateCredential(
                    attestationKey: ak.handle,
                    endorsementKey: ek.handle,
                    credentialBlob: credentialBlob,
                    secret: secret
                )
            } catch let error as TSS2Error where !error.code.isCommunicationFailure {
                throw KeychainError(
                    KeychainStatus.decode,
                    "the TPM refused the credential (\(error.code)): it was made for another TPM's EK or another AK"
                )
            }
        }
    }

    public func certify(keyBlob: Data, authorization: SecretBytes, qualifyingData: [UInt8]) throws -> KeyCertification {
        guard qualifyingData.count <= 64 else {
            throw KeychainError(KeychainStatus.param, "the qualifying data is at most 64 bytes")
        }
        return try withConnection { connection in
            // The kept primary, the key and the AK: evict every other kept key first.
            for kept in connection.keys where kept.blob != Array(keyBlob) { connection.flush(kept.handle) }
            let key = try loadedKey(connection, keyBlob: keyBlob)
            let ak = try connection.createEndorsementPrimary(template: attestationKeyTemplate)
            defer { connection.flush(ak.handle) }
            let session = try keptSession(connection, attributes: 0)
            try connection.setAuthorization(authorization, for: key.handle)
            defer { connection.clearAuthorization(for: key.handle) }
            let blob = try SealedBlob(decoding: keyBlob, expecting: .key)
            var publicArea = blob.publicArea
            let area = Array(try connection.marshalled(&publicArea, Tss2_MU_TPM2B_PUBLIC_Marshal).dropFirst(2))
            do {
                let (info, signature) = try connection.certify(
                    key.handle,
                    session: session,
                    attestationKey: ak.handle,
                    qualifyingData: qualifyingData
                )
                return KeyCertification(certifyInfo: info, signature: signature, publicArea: area)
            } catch let error as TSS2Error
                where error.code.isTPM(TSS2ResultCode.TPM.badAuth) || error.code.isTPM(TSS2ResultCode.TPM.authFail)
            {
                throw KeychainError(KeychainStatus.authFailed, "wrong authorization for the hardware key")
            }
        }
    }
}
