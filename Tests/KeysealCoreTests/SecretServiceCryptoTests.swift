import Foundation
import KeysealCore
import Testing

/// The dh-ietf1024-sha256-aes128-cbc-pkcs7 session's arithmetic and cipher (docs/OPERATIONS.md, "The Secret Service:
/// keyseal-secret-service").
@Suite("Secret Service session crypto")
struct SecretServiceCryptoTests {
    @Test func bothSidesDeriveTheSameKeyAndItDecryptsWhatTheOtherEncrypts() throws {
        let service = try SecretServiceDH()
        let client = try SecretServiceDH()
        #expect(service.publicKey.count == 128)
        let serviceKey = try service.sharedKey(peer: client.publicKey)
        let clientKey = try client.sharedKey(peer: service.publicKey)
        #expect(serviceKey.count == 16 && serviceKey.constantTimeEquals(clientKey))
        let (iv, ciphertext) = try SecretServiceDH.encrypt(SecretBytes(utf8: "sixteen byte msg"), key: serviceKey)
        // PKCS#7: a whole block of padding after a message of whole blocks.
        #expect(iv.count == 16 && ciphertext.count == 32)
        let opened = try SecretServiceDH.decrypt(ciphertext, iv: iv, key: clientKey)
        #expect(opened.constantTimeEquals(SecretBytes(utf8: "sixteen byte msg")))
    }

    @Test func publicValuesOutsideTheGroupAreRefused() throws {
        let service = try SecretServiceDH()
        for peer: [UInt8] in [[0], [1], [UInt8](repeating: 0xFF, count: 128), [UInt8](repeating: 1, count: 129)] {
            #expect(throws: KeychainError.self) { _ = try service.sharedKey(peer: peer) }
        }
    }

    @Test func aWrongKeyOrBadLengthsAreParameterErrorsNotCrashes() throws {
        let key = SecretBytes.random(count: 16)
        let (iv, ciphertext) = try SecretServiceDH.encrypt(SecretBytes(utf8: "secret"), key: key)
        let other = SecretBytes.random(count: 16)
        for (bytes, vector) in [(ciphertext, [UInt8](iv.prefix(8))), (Array(ciphertext.prefix(15)), iv), ([], iv)] {
            #expect(throws: KeychainError.self) { _ = try SecretServiceDH.decrypt(bytes, iv: vector, key: key) }
        }
        // A wrong key almost always fails the padding check; when it does not, it never yields the plaintext.
        if let wrong = try? SecretServiceDH.decrypt(ciphertext, iv: iv, key: other) {
            #expect(!wrong.constantTimeEquals(SecretBytes(utf8: "secret")))
        }
    }
}
