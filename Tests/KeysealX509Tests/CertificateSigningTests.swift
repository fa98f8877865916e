import Crypto
import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import KeysealX509
import SwiftASN1
import Testing
import X509

/// swift-certificates signing with a key that stays in the store's hardware (the software double on the host-key
/// backend, swtpm and SoftHSM2 on theirs): a CSR, a certificate from a test CA, stored, found back as an identity.
@Suite(
    "KeysealX509",
    .disabled(if: TestBackend.throughDaemon, "embedded only; DaemonKeyTests covers keyseald")
)
struct CertificateSigningTests {
    static func issue(for csr: CertificateSigningRequest, caKey: P256.Signing.PrivateKey) throws -> Certificate {
        let caName = try DistinguishedName { CommonName("Keyseal Test CA") }
        let now = Date()
        return try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: csr.publicKey,
            notValidBefore: now.addingTimeInterval(-60),
            notValidAfter: now.addingTimeInterval(3600),
            issuer: caName,
            subject: csr.subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions { Critical(BasicConstraints.notCertificateAuthority) },
            issuerPrivateKey: Certificate.PrivateKey(caKey)
        )
    }

    @Test func hardwareKeySignsACSRAndIsFoundBackAsAnIdentity() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let store = fixture.store
        let key = try store.generateHardwareP256Key(tag: Data("device-identity".utf8))
        let signer = try KeychainPrivateKey(key)
        let subject = try DistinguishedName { CommonName("device-42") }
        let csr = try CertificateSigningRequest(
            version: .v1,
            subject: subject,
            privateKey: Certificate.PrivateKey(signer),
            attributes: CertificateSigningRequest.Attributes(),
            signatureAlgorithm: .ecdsaWithSHA256
        )
        #expect(csr.publicKey == Certificate.PublicKey(key.publicKey))
        #expect(csr.publicKey.isValidSignature(csr.signature, for: csr))

        let caKey = P256.Signing.PrivateKey()
        let certificate = try Self.issue(for: csr, caKey: caKey)
        try store.addCertificate(certificate)

        let identities = try store.identities()
        #expect(identities.count == 1)
        let identity = try #require(identities.first)
        #expect(identity.certificate == certificate)
        #expect(identity.privateKey.reference == key.reference)

        // The identity's key signs; swift-crypto verifies against the certificate's public key.
        let message = Data("mutual TLS transcript".utf8)
        let signature = try identity.privateKey.signSynchronously(bytes: message, signatureAlgorithm: .ecdsaWithSHA256)
        let p256 = try #require(P256.Signing.PublicKey(identity.certificate.publicKey))
        let der = Data(signature.rawRepresentation)
        #expect(p256.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: der), for: message))
        #expect(p256.isValidSignature(try key.signature(for: message), for: message))
    }

    @Test func aKeyInTheKeychainIsNeverSerialized() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try fixture.store.generateHardwareP256Key(tag: Data("k".utf8))
        #expect(throws: KeychainError.unimplemented) {
            _ = try Certificate.PrivateKey(KeychainPrivateKey(key)).serializeAsPEM()
        }
    }
}
