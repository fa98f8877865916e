internal import CP11Kit
internal import Crypto
import FoundationEssentials
import KeysealCore

/// Sealing under the token's keys: format 2 (an HMAC key in the token computes the wrapping key, AES-256-GCM in
/// software), and format 1 (an AES key in the token, CKM_AES_GCM), opened to migrate and sealed only by tests.
extension PKCS11Session {
    // MARK: Format 2

    /// The domain and the key of a role.
    private func hmacKey(_ role: PKCS11DeviceKey.Role, creating: Bool) throws(KeychainError) -> (TokenKey, [UInt8]) {
        if deviceKey == nil && passcodeKey == nil {
            guard creating, legacyKey != nil else { throw keysMissing() }
            // A store provisioned in format 1: its keys for format 2 take the old key's id, so its identity stays.
            try generateHMACKeys(id: legacyKey?.id ?? randomBytes(16))
        }
        switch role {
        case .device: return (deviceKey!, PKCS11DeviceKey.deviceDomain)
        case .passcode: return (passcodeKey!, PKCS11DeviceKey.passcodeDomain)
        case .legacy: preconditionFailure("format-1 keys do not seal in format 2")
        }
    }

    /// W = HMAC-SHA256_token(key, domain ‖ salt ‖ authorization), computed inside the token.
    private func wrappingKey(
        _ key: TokenKey,
        domain: [UInt8],
        salt: [UInt8],
        authorization: SecretBytes?
    )
        throws(KeychainError) -> SymmetricKey
    {
        var parts = [SecretBytes(copying: domain), SecretBytes(copying: salt)]
        if let authorization { parts.append(authorization) }
        let message = SecretBytes.concatenating(parts)
        let session = self.session
        let functions = self.functions
        var failure: PKCS11CallError?
        var length = CK_ULONG(32)
        let mac = SecretBytes(count: 32) { output in
            do throws(PKCS11CallError) {
                var mechanism = CK_MECHANISM(
                    mechanism: CK_MECHANISM_TYPE(CKM_SHA256_HMAC),
                    pParameter: nil,
                    ulParameterLen: 0
                )
                try ck("C_SignInit", functions.C_SignInit!(session, &mechanism, key.handle))
                let rv = message.withUnsafeBytes { bytes in
                    functions.C_Sign!(
                        session,
                        UnsafeMutablePointer(mutating: bytes.bindMemory(to: UInt8.self).baseAddress),
                        CK_ULONG(bytes.count),
                        output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        &length
                    )
                }
                try ck("C_Sign", rv)
            } catch {
                failure = error
            }
        }
        if let failure { throw self.failure(failure, sealing: true) }
        guard length == 32 else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "token \"\(tokenLabel)\" returned a \(length)-byte HMAC-SHA256"
            )
        }
        return mac.withUnsafeBytes { SymmetricKey(data: $0) }
    }

    func seal(
        _ secret: SecretBytes,
        role: PKCS11DeviceKey.Role,
        authorization: SecretBytes?
    ) throws(KeychainError)
        -> Data
    {
        let (key, domain) = try hmacKey(role, creating: true)
        let salt = randomBytes(PKCS11DeviceKey.saltLength)
        let wrapping = try wrappingKey(key, domain: domain, salt: salt, authorization: authorization)
        let aad = [PKCS11DeviceKey.blobVersion] + domain + salt
        do {
            let box = try secret.withUnsafeBytes { plaintext in
                try AES.GCM.seal(plaintext, using: wrapping, nonce: AES.GCM.Nonce(), authenticating: aad)
            }
            return Data([PKCS11DeviceKey.blobVersion] + salt) + box.nonce + box.ciphertext + box.tag
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "sealing under the token's key failed")
        }
    }

    func unseal(
        _ blob: Data,
        role: PKCS11DeviceKey.Role,
        authorization: SecretBytes?,
        badTag: OSStatus
    )
        throws(KeychainError) -> SecretBytes
    {
        let bytes = [UInt8](blob)
        let header = 1 + PKCS11DeviceKey.saltLength + PKCS11DeviceKey.nonceLength
        guard bytes.count >= header + PKCS11DeviceKey.tagLength else {
            throw KeychainError(KeychainStatus.decode, "the sealed blob is too short to come from a PKCS#11 token")
        }
        guard bytes[0] == PKCS11DeviceKey.blobVersion else {
            throw KeychainError(KeychainStatus.decode, "the sealed blob has an unknown version \(bytes[0])")
        }
        let (key, domain) = try hmacKey(role, creating: false)
        let salt = Array(bytes[1..<(1 + PKCS11DeviceKey.saltLength)])
        let wrapping = try wrappingKey(key, domain: domain, salt: salt, authorization: authorization)
        let aad = [PKCS11DeviceKey.blobVersion] + domain + salt
        var plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: bytes[(1 + PKCS11DeviceKey.saltLength)..<header]),
                ciphertext: bytes[header..<(bytes.count - PKCS11DeviceKey.tagLength)],
                tag: bytes[(bytes.count - PKCS11DeviceKey.tagLength)...]
            )
            plaintext = try AES.GCM.open(box, using: wrapping, authenticating: aad)
        } catch {
            throw KeychainError(
                badTag,
                badTag == KeychainStatus.authFailed
                    ? "the passcode authorization does not open this sealed blob"
                    : "the sealed blob does not authenticate under device key \"\(labels.device)\" of token "
                        + "\"\(tokenLabel)\" (edited, or sealed by another token or key)"
            )
        }
        defer { plaintext.resetBytes(in: 0..<plaintext.count) }
        return SecretBytes(copying: plaintext)
    }

    // MARK: Format 1 (opened to migrate; sealed only by tests)

    func legacySeal(_ secret: SecretBytes, aad: SecretBytes) throws(KeychainError) -> Data {
        let key = try handle(.legacy)
        let iv = randomBytes(PKCS11DeviceKey.ivLength)
        var output = [UInt8](repeating: 0, count: secret.count + PKCS11DeviceKey.tagLength)
        var outputLength = CK_ULONG(output.count)
        let session = self.session
        let functions = self.functions
        do {
            try withGCM(iv: iv, aad: aad) { (mechanism) throws(PKCS11CallError) in
                try ck("C_EncryptInit", functions.C_EncryptInit!(session, mechanism, key))
                let rv = secret.withUnsafeBytes { plaintext in
                    output.withUnsafeMutableBufferPointer { buffer in
                        functions.C_Encrypt!(
                            session,
                            UnsafeMutablePointer(mutating: plaintext.bindMemory(to: UInt8.self).baseAddress),
                            CK_ULONG(plaintext.count),
                            buffer.baseAddress,
                            &outputLength
                        )
                    }
                }
                try ck("C_Encrypt", rv)
            }
        } catch {
            throw failure(error, sealing: true)
        }
        return Data([PKCS11DeviceKey.legacyBlobVersion] + iv + output.prefix(Int(outputLength)))
    }

    func legacyUnseal(_ blob: Data, aad: SecretBytes, badTag: OSStatus) throws(KeychainError) -> SecretBytes {
        let bytes = [UInt8](blob)
        let header = 1 + PKCS11DeviceKey.ivLength
        guard bytes.count >= header + PKCS11DeviceKey.tagLength else {
            throw KeychainError(KeychainStatus.decode, "the sealed blob is too short to come from a PKCS#11 token")
        }
        guard legacyKey != nil else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "this store was sealed in format 1 by device key \"\(labels.legacy)\", which is not on token "
                    + "\"\(tokenLabel)\" (removed?)"
            )
        }
        let key = try handle(.legacy)
        let iv = Array(bytes[1..<header])
        var ciphertext = Array(bytes[header...])
        var outputLength = CK_ULONG(ciphertext.count)
        let session = self.session
        let functions = self.functions
        var failure: PKCS11CallError?
        let padded = SecretBytes(count: ciphertext.count) { output in
            do throws(PKCS11CallError) {
                try withGCM(iv: iv, aad: aad) { (mechanism) throws(PKCS11CallError) in
                    try ck("C_DecryptInit", functions.C_DecryptInit!(session, mechanism, key))
                    try ck(
                        "C_Decrypt",
                        functions.C_Decrypt!(
                            session,
                            &ciphertext,
                            CK_ULONG(ciphertext.count),
                            output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                            &outputLength
                        )
                    )
                }
            } catch {
                failure = error
            }
        }
        if let failure {
            if failure.function == "C_Decrypt" && failure.result.meansBadCiphertext {
                throw KeychainError(
                    badTag,
                    badTag == KeychainStatus.authFailed
                        ? "the passcode authorization does not open this sealed blob"
                        : "the sealed blob does not authenticate under device key \"\(labels.legacy)\" of token "
                            + "\"\(tokenLabel)\" (edited, or sealed by another token or key)"
                )
            }
            throw self.failure(failure, sealing: false)
        }
        let length = min(Int(outputLength), padded.count)
        return padded.withUnsafeBytes { SecretBytes(copying: $0.prefix(length)) }
    }
}

/// Calls `body` with a CKM_AES_GCM mechanism (128-bit tag); the mechanism, its parameters, IV and AAD are valid
/// only inside `body`.
private func withGCM<Result>(
    iv: [UInt8],
    aad: SecretBytes,
    _ body: (UnsafeMutablePointer<CK_MECHANISM>) throws(PKCS11CallError) -> Result
) throws(PKCS11CallError) -> Result {
    let outcome = iv.withUnsafeBufferPointer { ivBuffer in
        aad.withUnsafeBytes { aadBytes in
            Swift.Result { () throws(PKCS11CallError) -> Result in
                var parameters = CK_GCM_PARAMS(
                    pIv: UnsafeMutablePointer(mutating: ivBuffer.baseAddress),
                    ulIvLen: CK_ULONG(ivBuffer.count),
                    ulIvBits: CK_ULONG(ivBuffer.count * 8),
                    pAAD: UnsafeMutablePointer(mutating: aadBytes.bindMemory(to: UInt8.self).baseAddress),
                    ulAADLen: CK_ULONG(aadBytes.count),
                    ulTagBits: CK_ULONG(PKCS11DeviceKey.tagLength * 8)
                )
                return try withUnsafeMutablePointer(to: &parameters) { (parameters) throws(PKCS11CallError) -> Result in
                    var mechanism = CK_MECHANISM(
                        mechanism: CK_MECHANISM_TYPE(CKM_AES_GCM),
                        pParameter: UnsafeMutableRawPointer(parameters),
                        ulParameterLen: CK_ULONG(MemoryLayout<CK_GCM_PARAMS>.size)
                    )
                    return try withUnsafeMutablePointer(to: &mechanism) {
                        (mechanism) throws(PKCS11CallError) -> Result in try body(mechanism)
                    }
                }
            }
        }
    }
    return try outcome.get()
}
