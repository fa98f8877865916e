import Crypto
import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// Keys generated inside the device key's hardware (`kSecAttrTokenIDSecureEnclave`). On the host-key backend the
/// hardware is a software double (HardwareKeyStoreFixture); on the TPM and PKCS#11 backends swtpm and SoftHSM2.
@Suite(
    "Hardware keys", .disabled(if: TestBackend.throughDaemon, "embedded only; DaemonKeyTests covers keyseald"))
struct HardwareKeyTests {
    static let sha256Message = "algid:sign:ECDSA:message-X962:SHA256"

    static func generate(
        _ store: KeychainStore, tag: String = "hw", accessibility: Accessibility = .whenUnlocked,
        permanent: Bool = true
    ) throws -> KeyDescription {
        try store.generateKey(
            KeyGenerationRequest(
                keyType: .p256, inHardware: true, isPermanent: permanent,
                attributes: [AttributeKey.applicationTag: .data(Data(tag.utf8))], accessibility: accessibility))
    }

    @Test func hardwareSignatureVerifiesWithSwiftCrypto() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store)
        let message = Data("attest me".utf8)
        let signature = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: message)
        let publicKey = try P256.Signing.PublicKey(x963Representation: key.publicKey.bytes)
        #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: signature), for: message))
        #expect(key.inHardware && !key.isExtractable)
        #expect(key.attributes[AttributeKey.tokenID] == .string("com.apple.setoken"))
    }

    @Test func hardwareKeyExchangeAgreesWithThePeer() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store)
        let peer = P256.KeyAgreement.PrivateKey()
        let ours = try fixture.store.keyExchange(
            key.reference, algorithm: "algid:keyexchange:ECDH", peer: peer.publicKey.x963Representation)
        let theirs = try peer.sharedSecretFromKeyAgreement(
            with: P256.KeyAgreement.PublicKey(x963Representation: key.publicKey.bytes))
        #expect(ours.withUnsafeBytes { Data($0) } == theirs.withUnsafeBytes { Data($0) })
    }

    @Test func hardwareKeyCannotSignWhileItsClassIsLocked() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store)
        try fixture.store.setPasscode("pw")
        try fixture.store.lock()
        #expect(throws: KeychainError.interactionNotAllowed) {
            _ = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: Data())
        }
        try fixture.store.unlock(passcode: "pw")
        _ = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: Data())
    }

    @Test func transientHardwareKeyFollowsItsClassToo() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        let key = try Self.generate(fixture.store, permanent: false)
        try fixture.store.lock()
        #expect(throws: KeychainError.interactionNotAllowed) {
            _ = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: Data())
        }
        #expect(throws: KeychainError.itemNotFound) { _ = try fixture.store.copyMatching(ItemQuery(itemClass: .key)) }
    }

    @Test func hardwarePrivateKeyIsNeverExported() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "x")
        #expect(throws: KeychainError.unimplemented) { _ = try fixture.store.exportPrivateKey(key.reference) }
        #expect(throws: KeychainError(KeychainStatus.dataNotAvailable)) {
            _ = try fixture.store.copyMatching(
                ItemQuery(
                    itemClass: .key, attributes: [AttributeKey.applicationTag: .data(Data("x".utf8))], returns: [.data])
            )
        }
    }

    @Test func onlyP256KeysAreMadeInHardware() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        #expect(throws: KeychainError.param) {
            _ = try fixture.store.generateKey(KeyGenerationRequest(keyType: .p384, inHardware: true))
        }
    }

    @Test func deletingTheItemDeletesTheHardwareKey() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "d")
        try fixture.store.delete(
            ItemQuery(itemClass: .key, attributes: [AttributeKey.applicationTag: .data(Data("d".utf8))]))
        if let log = fixture.log {
            #expect(log.deletedBlobs.count == 1)
            #expect(log.liveKeys == 0)
        }
        #expect(throws: KeychainError.itemNotFound) {
            _ = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: Data())
        }
    }

    @Test(.disabled(if: TestBackend.current != .hostKey, "only the software double reports the authorization it gets"))
    func theAuthorizationIsDerivedAndNeverStored() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store)
        _ = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: Data())
        let log = try #require(fixture.log, "the authorization is visible only to the software double")
        let authorizations = Set(log.authorizations)
        #expect(authorizations.count == 1, "the same authorization at generation and at each use")
        let authorization = try #require(authorizations.first)
        fixture.store.close()
        for file in try FileManager.default.contentsOfDirectory(atPath: fixture.storeDirectory.path) {
            let contents = try Data(contentsOf: fixture.storeDirectory.appendingPathComponent(file))
            #expect(contents.range(of: authorization) == nil, "\(file) holds a hardware key's authorization")
        }
    }

    @Test func anExportLeavesHardwareKeysOutAndNamesThem() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.generateKey(
            KeyGenerationRequest(
                keyType: .p256, inHardware: true,
                attributes: [
                    AttributeKey.applicationTag: .data(Data("tag".utf8)), AttributeKey.label: .string("id key"),
                ]))
        _ = try fixture.store.add(.password(account: "a"))
        let scratch = try TemporaryDirectory(prefix: "export")
        defer { scratch.remove() }
        let report = try fixture.store.exportBackup(to: scratch.appending("backup.ksb"), passphrase: "pp")
        #expect(report.exportedCount == 1)
        #expect(
            report.skippedHardwareKeys
                == [ExportReport.HardwareKeyName(accessGroup: "default", label: "id key", tag: Data("tag".utf8))])
    }
}
