import CP11Kit
import Crypto
import Foundation
import KeysealCore
import KeysealTestSupport
import Testing

@testable import KeysealPKCS11

/// One SoftHSM2 token for this suite (the process's token pool is small): each test opens its own device key on it
/// and makes its own key pairs.
private let sharedSoftHSMToken = Result { try SoftHSMFixture() }

extension PKCS11Stack {
    /// The token the hardware-key tests share (each makes its own key pairs), or a second one.
    func keyToken(second: Bool = false) throws -> PKCS11TokenFixture {
        switch (self, second) {
        case (.softhsm2, false): try sharedSoftHSMToken.get()
        case (.softhsm2, true): try SoftHSMFixture()
        case (.tpm2pkcs11, _): try token(second ? .second : .shared)
        }
    }
}

/// Opens a device key on `stack`'s shared token (or on `fixture`), runs `body`, closes the key.
func withToken<Result>(
    _ stack: PKCS11Stack,
    _ fixture: PKCS11TokenFixture? = nil,
    _ body: (PKCS11TokenFixture, PKCS11DeviceKey) throws -> Result
) throws -> Result {
    let leased = fixture == nil && stack == .tpm2pkcs11 ? try stack.keyToken() : nil
    // A tpm2-pkcs11 lease ends this test's turn on the shared token when removed (TPM2PKCS11Pool).
    defer { leased?.remove() }
    let fixture = try fixture ?? leased ?? stack.keyToken()
    let key = try openDeviceKey(fixture, provisioning: stack == .softhsm2)
    defer { key.close() }
    return try body(fixture, key)
}

private let authorization = SecretBytes(copying: [UInt8](repeating: 0x42, count: 32))

/// On SoftHSM2 and on tpm2-pkcs11 behind tpm2-abrmd; tpm2-pkcs11 1.9 has no `C_DeriveKey`, so ECDH runs on
/// SoftHSM2 and is errSecUnimplemented on tpm2-pkcs11. Serialized: tpm2-pkcs11 1.9 loses sessions when several
/// threads of one process use one of its tokens at once (CKR_OPERATION_ACTIVE, CKR_SESSION_HANDLE_INVALID).
@Suite("PKCS#11 hardware keys", .serialized)
struct PKCS11HardwareKeyTests {
    @Test(
        "a signature verifies with swift-crypto's P-256 public key, for digests of 20 to 64 bytes",
        arguments: PKCS11Stack.allCases
    )
    func signatureVerifies(stack: PKCS11Stack) throws {
        try withToken(stack) { _, key in
            let made = try key.generateP256Key(authorization: authorization)
            let publicKey = try P256.Signing.PublicKey(x963Representation: made.publicKey)
            let message = Data("attest this".utf8)
            func signature(_ digest: some Digest) throws -> P256.Signing.ECDSASignature {
                let der = try key.sign(digest: Array(digest), keyBlob: made.blob, authorization: authorization)
                return try P256.Signing.ECDSASignature(derRepresentation: der)
            }
            let sha256 = SHA256.hash(data: message)
            let sha1 = Insecure.SHA1.hash(data: message)
            let sha512 = SHA512.hash(data: message)
            #expect(publicKey.isValidSignature(try signature(sha256), for: sha256))
            #expect(publicKey.isValidSignature(try signature(sha1), for: sha1))
            #expect(publicKey.isValidSignature(try signature(sha512), for: sha512))
            #expect(throws: KeychainError.param) {
                try key.sign(digest: [UInt8](repeating: 1, count: 65), keyBlob: made.blob, authorization: authorization)
            }
        }
    }

    @Test("ECDH gives what swift-crypto computes with the key's public half, and leaves no derived object")
    func keyExchangeMatchesSwiftCrypto() throws {
        try withToken(.softhsm2) { _, key in
            let made = try key.generateP256Key(authorization: authorization)
            let peer = P256.KeyAgreement.PrivateKey()
            let z = try key.keyExchange(
                peerPublicKey: peer.publicKey.x963Representation,
                keyBlob: made.blob,
                authorization: authorization
            )
            let expected = try peer.sharedSecretFromKeyAgreement(
                with: P256.KeyAgreement.PublicKey(x963Representation: made.publicKey)
            )
            #expect(z.withUnsafeBytes { Array($0) } == expected.withUnsafeBytes { Array($0) })
            let secretObjects = try key.withRawSession(.device) { functions, session, _ in
                try countObjects(functions, session, objectClass: CKO_SECRET_KEY)
            }
            #expect(secretObjects == 2)  // the device key's two HMAC keys: no derived secret left behind
            var offCurve = peer.publicKey.x963Representation
            offCurve[64] ^= 1
            #expect(throws: KeychainError.param) {
                try key.keyExchange(peerPublicKey: offCurve, keyBlob: made.blob, authorization: authorization)
            }
        }
    }

    @Test(
        "the private key is a private, sensitive, never-extractable token object that signs and derives only",
        arguments: PKCS11Stack.allCases
    )
    func privateKeyAttributes(stack: PKCS11Stack) throws {
        try withToken(stack) { _, key in
            let made = try key.generateP256Key(authorization: authorization)
            let attributes = try key.hardwareKeyAttributes(made.blob)
            #expect(attributes.keyType == UInt(CKK_EC))
            #expect(attributes.token == true)
            #expect(attributes.isPrivate == true)
            #expect(attributes.sensitive == true)
            #expect(attributes.extractable == false)
            #expect(attributes.alwaysSensitive == true)
            #expect(attributes.neverExtractable == true)
            #expect(attributes.sign == true)
            #expect(attributes.derive == true)
            #expect(attributes.decrypt == false)
            #expect(attributes.unwrap == false)
            #expect(made.blob.count == 4 + 16)
        }
    }

    @Test(
        "the token refuses to reveal the private value, even to a session logged in with the PIN",
        arguments: PKCS11Stack.allCases
    )
    func privateValueIsNeverReadable(stack: PKCS11Stack) throws {
        try withToken(stack) { _, key in
            let made = try key.generateP256Key(authorization: authorization)
            let id = [UInt8](made.blob.dropFirst(4))
            let result = try key.withRawSession(.device) { functions, session, _ in
                let handle = try findObject(functions, session, objectClass: CKO_PRIVATE_KEY, id: id)
                var buffer = [UInt8](repeating: 0, count: 64)
                return buffer.withUnsafeMutableBytes { bytes in
                    var attribute = CK_ATTRIBUTE(
                        type: CK_ATTRIBUTE_TYPE(CKA_VALUE),
                        pValue: bytes.baseAddress,
                        ulValueLen: CK_ULONG(bytes.count)
                    )
                    return functions.C_GetAttributeValue!(session, handle, &attribute, 1)
                }
            }
            // SoftHSM2: CKR_ATTRIBUTE_SENSITIVE; tpm2-pkcs11 keeps no CKA_VALUE at all: CKR_ATTRIBUTE_TYPE_INVALID.
            #expect([CK_RV(CKR_ATTRIBUTE_SENSITIVE), CK_RV(CKR_ATTRIBUTE_TYPE_INVALID)].contains(result))
        }
    }

    @Test(
        "deleteKey destroys the private and the public object; the blob is then errSecDecode",
        arguments: PKCS11Stack.allCases
    )
    func deleteDestroysBothObjects(stack: PKCS11Stack) throws {
        try withToken(stack) { _, key in
            let made = try key.generateP256Key(authorization: authorization)
            let id = [UInt8](made.blob.dropFirst(4))
            let count = {
                try key.withRawSession(.device) { functions, session, _ in
                    try objects(functions, session, objectClass: CKO_PRIVATE_KEY, id: id).count
                        + objects(functions, session, objectClass: CKO_PUBLIC_KEY, id: id).count
                }
            }
            #expect(try count() == 2)
            try key.deleteKey(keyBlob: made.blob)
            #expect(try count() == 0)
            #expect(throws: KeychainError.decode) {
                try key.sign(digest: [UInt8](repeating: 1, count: 32), keyBlob: made.blob, authorization: authorization)
            }
        }
    }

    @Test("a key blob from another token, or not a key blob, is errSecDecode", arguments: PKCS11Stack.allCases)
    func foreignBlobIsRefused(stack: PKCS11Stack) throws {
        let made = try withToken(stack) { _, key in try key.generateP256Key(authorization: authorization) }
        let other = try stack.keyToken(second: true)
        defer { other.remove() }
        try withToken(stack, other) { _, key in
            let digest = [UInt8](repeating: 1, count: 32)
            #expect(throws: KeychainError.decode) {
                try key.sign(digest: digest, keyBlob: made.blob, authorization: authorization)
            }
            #expect(throws: KeychainError.decode) {
                try key.sign(digest: digest, keyBlob: made.blob.dropLast(), authorization: authorization)
            }
        }
    }

    @Test("on tpm2-pkcs11, which has no C_DeriveKey, ECDH is errSecUnimplemented")
    func keyExchangeUnimplementedOnTPM2PKCS11() throws {
        try withToken(.tpm2pkcs11) { _, key in
            let made = try key.generateP256Key(authorization: authorization)
            let peer = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
            let error = #expect(throws: KeychainError.unimplemented) {
                try key.keyExchange(peerPublicKey: peer, keyBlob: made.blob, authorization: authorization)
            }
            #expect(error?.message.contains("CKR_FUNCTION_NOT_SUPPORTED") == true)
        }
    }

    @Test(
        "the token ignores the authorization: any value signs (keyseald is the only gate)",
        arguments: PKCS11Stack.allCases
    )
    func authorizationIsNotChecked(stack: PKCS11Stack) throws {
        try withToken(stack) { _, key in
            let made = try key.generateP256Key(authorization: authorization)
            let other = SecretBytes(copying: [UInt8](repeating: 0x43, count: 32))
            _ = try key.sign(digest: [UInt8](repeating: 1, count: 32), keyBlob: made.blob, authorization: other)
        }
    }
}

/// The number of objects of `objectClass` a session sees.
func countObjects(_ functions: CK_FUNCTION_LIST, _ session: CK_SESSION_HANDLE, objectClass: UInt) throws -> Int {
    try objects(functions, session, objectClass: objectClass, id: nil).count
}

/// The one object of `objectClass` with `id`.
func findObject(
    _ functions: CK_FUNCTION_LIST,
    _ session: CK_SESSION_HANDLE,
    objectClass: UInt,
    id: [UInt8]
) throws
    -> CK_OBJECT_HANDLE
{
    let found = try objects(functions, session, objectClass: objectClass, id: id)
    guard found.count == 1 else { throw FixtureError("\(found.count) objects with that id") }
    return found[0]
}

func objects(
    _ functions: CK_FUNCTION_LIST,
    _ session: CK_SESSION_HANDLE,
    objectClass: UInt,
    id: [UInt8]?
)
    throws -> [CK_OBJECT_HANDLE]
{
    var classValue = CK_OBJECT_CLASS(objectClass)
    var idBytes = id ?? []
    let rv = withUnsafeMutablePointer(to: &classValue) { classPointer in
        idBytes.withUnsafeMutableBytes { idPointer in
            var template = [
                CK_ATTRIBUTE(
                    type: CK_ATTRIBUTE_TYPE(CKA_CLASS),
                    pValue: classPointer,
                    ulValueLen: CK_ULONG(MemoryLayout<CK_OBJECT_CLASS>.size)
                ),
                CK_ATTRIBUTE(
                    type: CK_ATTRIBUTE_TYPE(CKA_ID),
                    pValue: idPointer.baseAddress,
                    ulValueLen: CK_ULONG(idPointer.count)
                ),
            ]
            return functions.C_FindObjectsInit!(session, &template, id == nil ? 1 : 2)
        }
    }
    guard rv == CK_RV(CKR_OK) else { throw FixtureError("C_FindObjectsInit: \(rv)") }
    defer { _ = functions.C_FindObjectsFinal!(session) }
    var handles = [CK_OBJECT_HANDLE](repeating: 0, count: 64)
    var found: CK_ULONG = 0
    guard functions.C_FindObjects!(session, &handles, CK_ULONG(handles.count), &found) == CK_RV(CKR_OK) else {
        throw FixtureError("C_FindObjects failed")
    }
    return Array(handles.prefix(Int(found)))
}
