import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// An identity found through keyseald: the record the daemon sends names the private key's item, so that the
/// `SecIdentity` holds a key that signs in keyseald.
@Suite("SecIdentity through keyseald", .serialized)
struct SecIdentityDaemonTests {
    @Test("an identity looked up through keyseald with kSecReturnRef has a private key that signs")
    func identityThroughKeysealdSigns() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let store = try daemon.client()
        defer { store.close() }
        try KeychainStore.withDefault(store) {
            var error: Unmanaged<CFError>?
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
            ]
            let key = try #require(
                SecKeyCreateWithData(KeyTestMaterial.privateKey as CFData, attributes as CFDictionary, &error)
            )
            let certificate = try #require(SecCertificateCreateWithData(nil, KeyTestMaterial.certificate as CFData))
            #expect(SecItemAdd([kSecValueRef: key] as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemAdd([kSecValueRef: certificate] as CFDictionary, nil) == errSecSuccess)

            var result: CFTypeRef?
            let query: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let identity = try #require(result as? SecIdentity)
            var privateKey: SecKey?
            #expect(SecIdentityCopyPrivateKey(identity, &privateKey) == errSecSuccess)
            let signingKey = try #require(privateKey)
            let message = Data("signed in keyseald".utf8) as CFData
            let signature = try #require(
                SecKeyCreateSignature(signingKey, .ecdsaSignatureMessageX962SHA256, message, &error)
            )
            #expect(
                SecKeyVerifySignature(
                    SecCertificateCopyKey(certificate)!,
                    .ecdsaSignatureMessageX962SHA256,
                    message,
                    signature,
                    &error
                )
            )
        }
    }
}
