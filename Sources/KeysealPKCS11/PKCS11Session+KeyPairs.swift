internal import CP11Kit
import KeysealCore

/// The token's P-256 key pairs (``PKCS11DeviceKey``'s `HardwareKeyProvider`): generation, signing, ECDH, deletion.
extension PKCS11Session {
    /// Generates the pair; returns the public point `04 ‖ X ‖ Y`. A pair whose point cannot be read is destroyed.
    func generateKeyPair(id: [UInt8], label: String) throws(KeychainError) -> [UInt8] {
        let publicTemplate = Templates.p256PublicKey(label: label, id: id)
        let privateTemplate = Templates.p256PrivateKey(label: label, id: id)
        let session = self.session
        let functions = self.functions
        var publicKey = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
        var privateKey = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
        do {
            try withTemplate(publicTemplate) { (publicPointer, publicCount) throws(PKCS11CallError) in
                try withTemplate(privateTemplate) { (privatePointer, privateCount) throws(PKCS11CallError) in
                    var mechanism = CK_MECHANISM(
                        mechanism: CK_MECHANISM_TYPE(CKM_EC_KEY_PAIR_GEN),
                        pParameter: nil,
                        ulParameterLen: 0
                    )
                    try ck(
                        "C_GenerateKeyPair",
                        functions.C_GenerateKeyPair!(
                            session,
                            &mechanism,
                            publicPointer,
                            publicCount,
                            privatePointer,
                            privateCount,
                            &publicKey,
                            &privateKey
                        )
                    )
                }
            }
        } catch {
            throw keyFailure(error, "cannot generate a P-256 key pair on")
        }
        let value: [UInt8]?
        do {
            value = try attribute(CK_ATTRIBUTE_TYPE(CKA_EC_POINT), of: publicKey)
        } catch {
            _ = functions.C_DestroyObject!(session, privateKey)
            _ = functions.C_DestroyObject!(session, publicKey)
            throw keyFailure(error, "cannot read the public key from")
        }
        guard let point = Self.uncompressedPoint(value) else {
            _ = functions.C_DestroyObject!(session, privateKey)
            _ = functions.C_DestroyObject!(session, publicKey)
            throw KeychainError(
                KeychainStatus.internalComponent,
                "token \"\(tokenLabel)\" returned no P-256 public point"
            )
        }
        return point
    }

    /// `04 ‖ X ‖ Y` from a `CKA_EC_POINT`: DER-wrapped in an OCTET STRING (PKCS#11 2.40), or raw (some tokens).
    static func uncompressedPoint(_ value: [UInt8]?) -> [UInt8]? {
        guard let value else { return nil }
        if value.count == 67, value[0] == 0x04, value[1] == 0x41, value[2] == 0x04 { return Array(value.dropFirst(2)) }
        if value.count == 65, value[0] == 0x04 { return value }
        return nil
    }

    /// The objects of class `objectClass` whose `CKA_ID` is `id`.
    private func keyObjects(_ objectClass: UInt, id: [UInt8]) throws(KeychainError) -> [CK_OBJECT_HANDLE] {
        do {
            return try findObjects(Templates.ecKey(objectClass, id: id))
        } catch {
            throw keyFailure(error, "cannot search for the key on")
        }
    }

    /// The private key of a blob; none is `errSecDecode` (a blob of another token, or a key deleted).
    private func privateKey(id: [UInt8]) throws(KeychainError) -> CK_OBJECT_HANDLE {
        if let handle = hardwareKeyHandles[id] { return handle }
        let found = try keyObjects(CKO_PRIVATE_KEY, id: id)
        guard found.count == 1 else {
            throw KeychainError(
                KeychainStatus.decode,
                found.isEmpty
                    ? "token \"\(tokenLabel)\" holds no private key with this key's id (another token's key, or deleted)"
                    : "token \"\(tokenLabel)\" holds \(found.count) private keys with this key's id"
            )
        }
        if hardwareKeyHandles.count >= 64 { hardwareKeyHandles.removeAll() }
        hardwareKeyHandles[id] = found[0]
        return found[0]
    }

    /// Runs `body` with the private key of `id`; when a remembered handle is no longer valid (the object was
    /// destroyed through another session), looks the key up again once.
    private func withPrivateKey<Result>(
        id: [UInt8],
        _ body: (CK_OBJECT_HANDLE) throws(PKCS11CallError) -> Result,
        failure what: String
    ) throws(KeychainError) -> Result {
        let remembered = hardwareKeyHandles[id] != nil
        let key = try privateKey(id: id)
        do {
            return try body(key)
        } catch  where remembered && (error.result == .keyHandleInvalid || error.result == .objectHandleInvalid) {
            hardwareKeyHandles[id] = nil
            let again = try privateKey(id: id)
            do {
                return try body(again)
            } catch {
                throw keyFailure(error, what)
            }
        } catch {
            throw keyFailure(error, what)
        }
    }

    /// `CKM_ECDSA` over a 32-byte digest: r ‖ s, 64 bytes.
    func signECDSA(_ digest: [UInt8], id: [UInt8]) throws(KeychainError) -> [UInt8] {
        let session = self.session
        let functions = self.functions
        var signature = [UInt8](repeating: 0, count: 64)
        var length = CK_ULONG(signature.count)
        var input = digest
        try withPrivateKey(
            id: id,
            { (key) throws(PKCS11CallError) in
                var mechanism = CK_MECHANISM(
                    mechanism: CK_MECHANISM_TYPE(CKM_ECDSA),
                    pParameter: nil,
                    ulParameterLen: 0
                )
                try ck("C_SignInit", functions.C_SignInit!(session, &mechanism, key))
                length = CK_ULONG(signature.count)
                try ck("C_Sign", functions.C_Sign!(session, &input, CK_ULONG(input.count), &signature, &length))
            },
            failure: "cannot sign with the key on"
        )
        guard length == 64 else {
            throw KeychainError(
                KeychainStatus.internalComponent,
                "token \"\(tokenLabel)\" returned a \(length)-byte P-256 signature"
            )
        }
        return signature
    }

    /// ECDH: the shared x-coordinate, derived into a non-sensitive, extractable session object that is read and
    /// destroyed at once.
    func deriveECDH(_ peer: [UInt8], id: [UInt8]) throws(KeychainError) -> SecretBytes {
        let key = try privateKey(id: id)
        let session = self.session
        let functions = self.functions
        let template = Templates.ecdhSecret
        var derived = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
        var publicData = peer
        var failure: PKCS11CallError?
        publicData.withUnsafeMutableBufferPointer { buffer in
            var parameters = CK_ECDH1_DERIVE_PARAMS(
                kdf: ck_ec_kdf_t(CKD_NULL),
                ulSharedDataLen: 0,
                pSharedData: nil,
                ulPublicDataLen: CK_ULONG(buffer.count),
                pPublicData: buffer.baseAddress
            )
            withUnsafeMutablePointer(to: &parameters) { parameters in
                var mechanism = CK_MECHANISM(
                    mechanism: CK_MECHANISM_TYPE(CKM_ECDH1_DERIVE),
                    pParameter: UnsafeMutableRawPointer(parameters),
                    ulParameterLen: CK_ULONG(MemoryLayout<CK_ECDH1_DERIVE_PARAMS>.size)
                )
                do throws(PKCS11CallError) {
                    try withTemplate(template) { (pointer, count) throws(PKCS11CallError) in
                        try ck(
                            "C_DeriveKey",
                            functions.C_DeriveKey!(session, &mechanism, key, pointer, count, &derived)
                        )
                    }
                } catch {
                    failure = error
                }
            }
        }
        if let failure { throw keyFailure(failure, "cannot derive an ECDH secret with the key on") }
        defer { _ = functions.C_DestroyObject!(session, derived) }
        var length = CK_ULONG(32)
        var rv = CK_RV(CKR_OK)
        let z = SecretBytes(count: 32) { output in
            var attribute = CK_ATTRIBUTE(
                type: CK_ATTRIBUTE_TYPE(CKA_VALUE),
                pValue: output.baseAddress,
                ulValueLen: CK_ULONG(output.count)
            )
            rv = functions.C_GetAttributeValue!(session, derived, &attribute, 1)
            length = attribute.ulValueLen
        }
        do {
            try ck("C_GetAttributeValue", rv)
        } catch {
            throw keyFailure(error, "cannot read the ECDH secret from")
        }
        guard length == 32 else {
            throw KeychainError(
                KeychainStatus.internalComponent,
                "token \"\(tokenLabel)\" derived a \(length)-byte ECDH secret"
            )
        }
        return z
    }

    /// Destroys the private and public key objects with this id.
    func destroyKeyPair(id: [UInt8]) throws(KeychainError) {
        hardwareKeyHandles[id] = nil
        let objects = try keyObjects(CKO_PRIVATE_KEY, id: id) + keyObjects(CKO_PUBLIC_KEY, id: id)
        for object in objects {
            do {
                try ck("C_DestroyObject", functions.C_DestroyObject!(session, object))
            } catch {
                throw keyFailure(error, "cannot delete the key from")
            }
        }
    }

    func hardwareKeyAttributes(id: [UInt8]) throws(KeychainError) -> PKCS11DeviceKey.KeyAttributes {
        try keyAttributes(privateKey(id: id))
    }

    private func keyFailure(_ error: PKCS11CallError, _ what: String) -> KeychainError {
        if error.result.meansTokenGone {
            return KeychainError(
                KeychainStatus.notAvailable,
                "the token \"\(tokenLabel)\" is no longer available (removed, or logged out): \(error)"
            )
        }
        if error.result == .mechanismInvalid || error.result == .functionNotSupported {
            return KeychainError(KeychainStatus.unimplemented, "\(what) token \"\(tokenLabel)\": \(error)")
        }
        return KeychainError(KeychainStatus.internalComponent, "\(what) token \"\(tokenLabel)\": \(error)")
    }
}
