import Crypto
import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// Key and certificate items and identities in the engine (software keys; hardware keys are in HardwareKeyTests).
@Suite(
    "Key and certificate items",
    .disabled(if: TestBackend.throughDaemon, "embedded only; DaemonKeyTests covers keyseald")
)
struct KeyItemTests {
    static func keyQuery(tag: String, returns: ReturnOptions = [.attributes], limit: MatchLimit = .all) -> ItemQuery {
        ItemQuery(
            itemClass: .key,
            attributes: [AttributeKey.applicationTag: .data(Data(tag.utf8))],
            limit: limit,
            returns: returns
        )
    }

    static func generate(
        _ store: KeychainStore,
        tag: String,
        type: KeyType = .p256,
        extractable: Bool = true
    ) throws
        -> KeyDescription
    {
        try store.generateKey(
            KeyGenerationRequest(
                keyType: type,
                attributes: [AttributeKey.applicationTag: .data(Data(tag.utf8))],
                isExtractable: extractable
            )
        )
    }

    static func addKeyAndCertificates(_ store: KeychainStore, certificates: [Data]) throws {
        _ = try store.add(
            NewItem(
                itemClass: .key,
                attributes: [
                    AttributeKey.keyClass: .string("1"), AttributeKey.type: .string("73"),
                    AttributeKey.applicationTag: .data(Data("id".utf8)),
                ],
                data: KeyTestMaterial.privateKey
            )
        )
        for certificate in certificates { _ = try store.add(NewItem(itemClass: .certificate, data: certificate)) }
    }

    @Test func generatedKeyHasApplesKeyAttributes() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "com.example.key")
        let record = try #require(try fixture.store.copyMatching(Self.keyQuery(tag: "com.example.key")).first)
        #expect(record.attributes[AttributeKey.keyClass] == .string("1"))
        #expect(record.attributes[AttributeKey.type] == .string("73"))
        #expect(record.attributes[AttributeKey.keySizeInBits] == .int(256))
        #expect(
            record.attributes[AttributeKey.applicationLabel]
                == .data(Data(Insecure.SHA1.hash(data: key.publicKey.bytes)))
        )
        #expect(key.publicKey.bytes.count == 65 && key.publicKey.bytes.first == 4)
    }

    @Test func twoKeysUnderOneTagAreTwoItems() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let first = try Self.generate(fixture.store, tag: "shared")
        let second = try Self.generate(fixture.store, tag: "shared")
        let records = try fixture.store.copyMatching(Self.keyQuery(tag: "shared"))
        #expect(records.count == 2)
        #expect(
            Set(records.compactMap { $0.attributes[AttributeKey.applicationLabel] })
                == [.data(first.publicKey.applicationLabel), .data(second.publicKey.applicationLabel)]
        )
    }

    @Test func keyFoundByItsApplicationLabelDigest() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try Self.generate(fixture.store, tag: "a")
        let wanted = try Self.generate(fixture.store, tag: "a")
        let query = ItemQuery(
            itemClass: .key,
            attributes: [AttributeKey.applicationLabel: .data(wanted.publicKey.applicationLabel)],
            returns: [.persistentRef]
        )
        let found = try fixture.store.copyMatching(query)
        #expect(found.count == 1)
        #expect(found.first.flatMap(\.persistentRef).map(KeyReference.item) == wanted.reference)
    }

    @Test func addingTheSameKeyTwiceIsADuplicate() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try Self.addKeyAndCertificates(fixture.store, certificates: [])
        #expect(throws: KeychainError.duplicateItem) { try Self.addKeyAndCertificates(fixture.store, certificates: []) }
    }

    @Test func aPreparedSoftwareKeyRefusesToSignOnceItsClassLocks() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        let key = try Self.generate(fixture.store, tag: "prepared")
        let algorithm = "algid:sign:ECDSA:message-X962:SHA256"
        _ = try fixture.store.sign(key.reference, algorithm: algorithm, data: Data("m".utf8))
        try #require(try fixture.store.preparedKeyCountForTests() == 1)
        try fixture.store.lock()
        #expect(try fixture.store.preparedKeyCountForTests() == 0)
        #expect(throws: KeychainError.interactionNotAllowed) {
            _ = try fixture.store.sign(key.reference, algorithm: algorithm, data: Data("m".utf8))
        }
    }

    @Test func aPreparedSoftwareKeyIsGoneOnceItsItemIsDeleted() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "deleted")
        let algorithm = "algid:sign:ECDSA:message-X962:SHA256"
        _ = try fixture.store.sign(key.reference, algorithm: algorithm, data: Data("m".utf8))
        try fixture.store.delete(Self.keyQuery(tag: "deleted"))
        #expect(throws: KeychainError.itemNotFound) {
            _ = try fixture.store.sign(key.reference, algorithm: algorithm, data: Data("m".utf8))
        }
    }

    @Test func softwareSignatureVerifiesWithSwiftCrypto() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "s")
        let message = Data("message".utf8)
        let signature = try fixture.store.sign(
            key.reference,
            algorithm: "algid:sign:ECDSA:message-X962:SHA256",
            data: message
        )
        let publicKey = try P256.Signing.PublicKey(x963Representation: key.publicKey.bytes)
        #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: signature), for: message))
    }

    @Test(arguments: [KeyType.p384, KeyType.p521, KeyType.rsa(bits: 2048)])
    func otherSoftwareKeyTypesSignAndVerify(type: KeyType) throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "t", type: type)
        let algorithm = type.isEC ? "algid:sign:ECDSA:message-X962:SHA384" : "algid:sign:RSA:message-PSS:SHA256"
        let signature = try fixture.store.sign(key.reference, algorithm: algorithm, data: Data("m".utf8))
        try KeyAlgorithms.verify(key.publicKey, algorithm: algorithm, data: Data("m".utf8), signature: signature)
        #expect(throws: KeychainError(KeychainStatus.verifyFailed)) {
            try KeyAlgorithms.verify(key.publicKey, algorithm: algorithm, data: Data("n".utf8), signature: signature)
        }
    }

    @Test func nonExtractableKeyMaterialNeverLeaves() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "ne", extractable: false)
        #expect(throws: KeychainError(KeychainStatus.dataNotAvailable)) {
            _ = try fixture.store.exportPrivateKey(key.reference)
        }
        #expect(throws: KeychainError(KeychainStatus.dataNotAvailable)) {
            _ = try fixture.store.copyMatching(Self.keyQuery(tag: "ne", returns: [.data]))
        }
    }

    /// The review's attack: an update setting `extr` to true, then a lookup of the data. `extr`, like `tkid`, is
    /// errSecReadOnlyAttr in an update unless it clears it; the key's material still never leaves.
    @Test func aNonExtractableKeyCannotBeMadeExtractable() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "ne", extractable: false)
        #expect(throws: KeychainError.readOnlyAttr) {
            try fixture.store.update(
                Self.keyQuery(tag: "ne"),
                with: ItemChanges(attributes: [AttributeKey.isExtractable: .bool(true)])
            )
        }
        #expect(throws: KeychainError(KeychainStatus.dataNotAvailable)) {
            _ = try fixture.store.copyMatching(Self.keyQuery(tag: "ne", returns: [.data]))
        }
        #expect(throws: KeychainError(KeychainStatus.dataNotAvailable)) {
            _ = try fixture.store.exportPrivateKey(key.reference)
        }
        let record = try #require(try fixture.store.copyMatching(Self.keyQuery(tag: "ne")).first)
        #expect(record.attributes[AttributeKey.isExtractable] == .bool(false))
        // Clearing it is allowed: an extractable key made non-extractable stays so.
        let other = try Self.generate(fixture.store, tag: "ex")
        try fixture.store.update(
            Self.keyQuery(tag: "ex"),
            with: ItemChanges(attributes: [AttributeKey.isExtractable: .bool(false)])
        )
        #expect(throws: KeychainError(KeychainStatus.dataNotAvailable)) {
            _ = try fixture.store.exportPrivateKey(other.reference)
        }
        #expect(throws: KeychainError.readOnlyAttr) {
            try fixture.store.update(
                Self.keyQuery(tag: "ex"),
                with: ItemChanges(attributes: [AttributeKey.isExtractable: .bool(true)])
            )
        }
    }

    @Test func extractableKeyExportsAppleExternalRepresentation() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "ex")
        let exported = try fixture.store.exportPrivateKey(key.reference)
        let parsed = try exported.withUnsafeBytes { try P256.Signing.PrivateKey(x963Representation: Data($0)) }
        #expect(parsed.publicKey.x963Representation == key.publicKey.bytes)
    }

    @Test func signingWhileTheClassIsLockedIsInteractionNotAllowed() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "l")
        try fixture.store.setPasscode("pw")
        try fixture.store.lock()
        #expect(throws: KeychainError.interactionNotAllowed) {
            _ = try fixture.store.sign(key.reference, algorithm: "algid:sign:ECDSA:message-X962:SHA256", data: Data())
        }
    }

    @Test func certificateAttributesAreReadFromTheDER() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(NewItem(itemClass: .certificate, data: KeyTestMaterial.certificate))
        let record = try #require(
            try fixture.store.copyMatching(ItemQuery(itemClass: .certificate, returns: [.attributes])).first
        )
        let fields = try CertificateFields(der: KeyTestMaterial.certificate)
        #expect(record.attributes[AttributeKey.certificateType] == .int(3))
        #expect(record.attributes[AttributeKey.certificateEncoding] == .int(3))
        #expect(record.attributes[AttributeKey.serialNumber] == .data(Data([0x12, 0x34])))
        #expect(record.attributes[AttributeKey.subjectKeyID] == .data(KeyTestMaterial.subjectKeyID))
        #expect(
            record.attributes[AttributeKey.publicKeyHash]
                == .data(Data(Insecure.SHA1.hash(data: KeyTestMaterial.publicKey)))
        )
        #expect(record.attributes[AttributeKey.label] == .string("Keyseal Test"))
        #expect(record.attributes[AttributeKey.issuer] == .data(fields.issuer))
        #expect(fields.commonNames == ["Keyseal Test"])
    }

    @Test func certificateIsFoundByIssuerAndSerialNumber() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try Self.addKeyAndCertificates(
            fixture.store,
            certificates: [KeyTestMaterial.certificate, KeyTestMaterial.secondCertificate]
        )
        let second = try CertificateFields(der: KeyTestMaterial.secondCertificate)
        let query = ItemQuery(
            itemClass: .certificate,
            attributes: [
                AttributeKey.issuer: .data(second.issuer), AttributeKey.serialNumber: .data(second.serialNumber),
                AttributeKey.certificateType: .int(3),
            ],
            returns: [.data]
        )
        #expect(try fixture.store.copyMatching(query).map(\.data) == [KeyTestMaterial.secondCertificate])
    }

    @Test func addingACertificateTwiceIsADuplicate() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(NewItem(itemClass: .certificate, data: KeyTestMaterial.certificate))
        #expect(throws: KeychainError.duplicateItem) {
            _ = try fixture.store.add(NewItem(itemClass: .certificate, data: KeyTestMaterial.certificate))
        }
    }

    @Test func badCertificateDERIsAParameterError() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        #expect(throws: KeychainError.param) {
            _ = try fixture.store.add(NewItem(itemClass: .certificate, data: KeyTestMaterial.certificate.dropLast()))
        }
        #expect(throws: KeychainError.param) {
            _ = try fixture.store.add(NewItem(itemClass: .certificate, data: Data("not a certificate".utf8)))
        }
    }

    @Test func keyWithoutClassOrTypeIsAParameterError() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        #expect(throws: KeychainError.param) {
            _ = try fixture.store.add(
                NewItem(
                    itemClass: .key,
                    attributes: [AttributeKey.type: .string("73")],
                    data: KeyTestMaterial.privateKey
                )
            )
        }
        #expect(throws: KeychainError.param) {
            _ = try fixture.store.add(
                NewItem(
                    itemClass: .key,
                    attributes: [AttributeKey.keyClass: .string("1"), AttributeKey.type: .string("73")],
                    data: Data(repeating: 7, count: 97)
                )
            )
        }
    }

    @Test func identityIsTheCertificateJoinedToItsPrivateKey() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try Self.addKeyAndCertificates(fixture.store, certificates: [KeyTestMaterial.certificate])
        let identities = try fixture.store.copyMatching(
            ItemQuery(itemClass: .identity, limit: .all, returns: [.data, .persistentRef])
        )
        #expect(identities.count == 1)
        #expect(identities.first?.data == KeyTestMaterial.certificate)
        let keyRef = try #require(identities.first?.keyPersistentRef)
        let key = try fixture.store.describeKey(.item(keyRef))
        #expect(key.publicKey.bytes == KeyTestMaterial.publicKey)
    }

    @Test func certificateWithoutItsKeyIsNoIdentity() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(NewItem(itemClass: .certificate, data: KeyTestMaterial.certificate))
        #expect(throws: KeychainError.itemNotFound) {
            _ = try fixture.store.copyMatching(ItemQuery(itemClass: .identity, returns: [.persistentRef]))
        }
    }

    @Test func identityInAnotherGroupThanItsKeyIsNoIdentity() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try Self.addKeyAndCertificates(fixture.store, certificates: [])
        _ = try fixture.store.add(
            NewItem(itemClass: .certificate, accessGroup: "other", data: KeyTestMaterial.certificate)
        )
        #expect(throws: KeychainError.itemNotFound) {
            _ = try fixture.store.copyMatching(ItemQuery(itemClass: .identity, returns: [.persistentRef]))
        }
    }

    @Test func deletingAnIdentityKeepsAKeyAnotherCertificateUses() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try Self.addKeyAndCertificates(
            fixture.store,
            certificates: [KeyTestMaterial.certificate, KeyTestMaterial.secondCertificate]
        )
        let first = try CertificateFields(der: KeyTestMaterial.certificate)
        try fixture.store.delete(
            ItemQuery(itemClass: .identity, attributes: [AttributeKey.serialNumber: .data(first.serialNumber)])
        )
        #expect(try fixture.store.copyMatching(Self.keyQuery(tag: "id")).count == 1)
        try fixture.store.delete(ItemQuery(itemClass: .identity))
        #expect(throws: KeychainError.itemNotFound) { _ = try fixture.store.copyMatching(Self.keyQuery(tag: "id")) }
        #expect(throws: KeychainError.itemNotFound) {
            _ = try fixture.store.copyMatching(ItemQuery(itemClass: .certificate))
        }
    }

    @Test func certificateDataAndDerivedAttributesCannotBeUpdated() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(NewItem(itemClass: .certificate, data: KeyTestMaterial.certificate))
        #expect(throws: KeychainError.param) {
            try fixture.store.update(ItemQuery(itemClass: .certificate), with: ItemChanges(data: Data([1])))
        }
        #expect(throws: KeychainError.readOnlyAttr) {
            try fixture.store.update(
                ItemQuery(itemClass: .certificate),
                with: ItemChanges(attributes: [AttributeKey.serialNumber: .data(Data([1]))])
            )
        }
        try fixture.store.update(
            ItemQuery(itemClass: .certificate),
            with: ItemChanges(attributes: [AttributeKey.label: .string("renamed")])
        )
    }

    @Test func hardwareKeyOnTheHostKeyBackendIsUnimplemented() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        #expect(throws: KeychainError.unimplemented) {
            _ = try fixture.store.generateKey(KeyGenerationRequest(keyType: .p256, inHardware: true))
        }
        #expect(throws: KeychainError.itemNotFound) { _ = try fixture.store.copyMatching(ItemQuery(itemClass: .key)) }
    }

    /// The review's second step: a non-extractable software key exported, imported into another store and flipped
    /// there. It never leaves: the export names it by label and tag (as it names hardware keys), the file does not
    /// hold it, and another store that imports the file has no such key.
    @Test func nonExtractableKeysNeverLeaveInABackup() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let tag = AttributeKey.applicationTag
        _ = try fixture.store.generateKey(
            KeyGenerationRequest(
                keyType: .p256,
                attributes: [tag: .data(Data("ne".utf8)), AttributeKey.label: .string("kept")],
                isExtractable: false
            )
        )
        _ = try Self.generate(fixture.store, tag: "ex")
        let scratch = try TemporaryDirectory(prefix: "export")
        defer { scratch.remove() }
        let file = scratch.appending("backup.ksb")
        let report = try fixture.store.exportBackup(to: file, passphrase: "pp")
        #expect(report.exportedCount == 1)
        #expect(
            report.skippedKeys == [
                ExportReport.SkippedKey(
                    accessGroup: "default",
                    label: "kept",
                    tag: Data("ne".utf8),
                    reason: .notExtractable
                )
            ]
        )
        let other = try StoreFixture()
        defer { other.remove() }
        #expect(try other.store.importBackup(from: file, passphrase: "pp").restoredCount == 1)
        #expect(try other.store.copyMatching(Self.keyQuery(tag: "ex")).count == 1)
        #expect(throws: KeychainError.itemNotFound) { _ = try other.store.copyMatching(Self.keyQuery(tag: "ne")) }
    }

    @Test func softwareKeysAndCertificatesTravelInBackups() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try Self.addKeyAndCertificates(fixture.store, certificates: [KeyTestMaterial.certificate])
        let scratch = try TemporaryDirectory(prefix: "export")
        defer { scratch.remove() }
        let file = scratch.appending("backup.ksb")
        #expect(try fixture.store.exportBackup(to: file, passphrase: "pp").exportedCount == 2)
        try fixture.store.delete(ItemQuery(itemClass: .identity))
        #expect(try fixture.store.importBackup(from: file, passphrase: "pp").restoredCount == 2)
        let identity = try #require(
            try fixture.store.copyMatching(ItemQuery(itemClass: .identity, returns: [.persistentRef])).first
        )
        let key = try fixture.store.describeKey(.item(try #require(identity.keyPersistentRef)))
        #expect(key.publicKey.bytes == KeyTestMaterial.publicKey)
    }
}
