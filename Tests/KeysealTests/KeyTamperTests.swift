import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// Key blobs and certificates are authenticated like every item value (issue 16, "Backup, tampering, the store"): a
/// key's sealed material (on the TPM and PKCS#11 backends a hardware key's wrapped blob) or a certificate's DER
/// moved to another row, or brought from another store, is refused with errSecDecode, and only that row is affected.
@Suite(
    "Tamper detection: keys and certificates",
    .disabled(if: TestBackend.throughDaemon, "edits the store file under an embedded engine")
)
struct KeyTamperTests {
    static let sha256Message = "algid:sign:ECDSA:message-X962:SHA256"

    /// A key on the fixture's backend: inside the TPM or token where there is one, else a software key.
    static func generate(_ fixture: StoreFixture, tag: String) throws -> KeyDescription {
        try fixture.store.generateKey(
            KeyGenerationRequest(
                keyType: .p256,
                inHardware: fixture.backend != .hostKey,
                attributes: [AttributeKey.applicationTag: .data(Data(tag.utf8))]
            )
        )
    }

    static func signStatus(_ fixture: StoreFixture, _ key: KeyDescription) -> OSStatus {
        status { _ = try fixture.store.sign(key.reference, algorithm: sha256Message, data: Data("m".utf8)) }
    }

    /// The row ids of a class's items, in the order they were added.
    static func rowIDs(_ fixture: StoreFixture, itemClass: String) throws -> [String] {
        try fixture.sql("SELECT id FROM items WHERE class = '\(itemClass)' ORDER BY id").split(separator: "\n")
            .map(String.init)
    }

    /// Swaps the sealed material (wrapped item key and value) of two rows.
    static func swapSealedMaterial(_ fixture: StoreFixture, _ a: String, _ b: String) throws {
        try fixture.sql(
            """
            CREATE TEMP TABLE t AS SELECT id, wkey, value FROM items WHERE id IN (\(a), \(b));
            UPDATE items SET
              wkey = (SELECT wkey FROM t WHERE t.id = CASE items.id WHEN \(a) THEN \(b) ELSE \(a) END),
              value = (SELECT value FROM t WHERE t.id = CASE items.id WHEN \(a) THEN \(b) ELSE \(a) END)
              WHERE id IN (\(a), \(b));
            """
        )
    }

    @Test func keyBlobsSwappedBetweenTwoKeyItemsAreRefused() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let a = try Self.generate(fixture, tag: "a")
        let b = try Self.generate(fixture, tag: "b")
        let c = try Self.generate(fixture, tag: "c")
        fixture.close()
        let rows = try Self.rowIDs(fixture, itemClass: "keys")
        try #require(rows.count == 3)
        try Self.swapSealedMaterial(fixture, rows[0], rows[1])
        try fixture.reopen()
        #expect(Self.signStatus(fixture, a) == KeychainStatus.decode)
        #expect(Self.signStatus(fixture, b) == KeychainStatus.decode)
        #expect(Self.signStatus(fixture, c) == KeychainStatus.success)
    }

    @Test func keyBlobFromAnotherStoreIsRefused() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let other = try StoreFixture()
        defer { other.remove() }
        let a = try Self.generate(fixture, tag: "a")
        let b = try Self.generate(fixture, tag: "b")
        _ = try Self.generate(other, tag: "a")
        fixture.close()
        other.close()
        let target = try Self.rowIDs(fixture, itemClass: "keys")[0]
        let source = try Self.rowIDs(other, itemClass: "keys")[0]
        let material = try other.sql("SELECT hex(wkey) || ' ' || hex(value) FROM items WHERE id = \(source)")
            .split(separator: " ")
        try #require(material.count == 2)
        try fixture.sql("UPDATE items SET wkey = x'\(material[0])', value = x'\(material[1])' WHERE id = \(target)")
        try fixture.reopen()
        #expect(Self.signStatus(fixture, a) == KeychainStatus.decode)
        #expect(Self.signStatus(fixture, b) == KeychainStatus.success)
    }

    @Test func certificateDERSwappedBetweenItemsIsRefused() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        for certificate in [KeyTestMaterial.certificate, KeyTestMaterial.secondCertificate] {
            _ = try fixture.store.add(NewItem(itemClass: .certificate, data: certificate))
        }
        _ = try fixture.store.add(.password(service: "svc", account: "kept", secret: "kept"))
        fixture.close()
        let rows = try Self.rowIDs(fixture, itemClass: "cert")
        try #require(rows.count == 2)
        try Self.swapSealedMaterial(fixture, rows[0], rows[1])
        try fixture.reopen()
        let certificates = ItemQuery(itemClass: .certificate, limit: .all, returns: [.data, .attributes])
        #expect(status { _ = try fixture.store.copyMatching(certificates) } == KeychainStatus.decode)
        for certificate in [KeyTestMaterial.certificate, KeyTestMaterial.secondCertificate] {
            let fields = try CertificateFields(der: certificate)
            let one = ItemQuery(
                itemClass: .certificate,
                attributes: [
                    AttributeKey.issuer: .data(fields.issuer), AttributeKey.serialNumber: .data(fields.serialNumber),
                ],
                returns: .data
            )
            #expect(status { _ = try fixture.store.copyMatching(one) } == KeychainStatus.decode)
        }
        let kept = try fixture.store.copyMatching(.password(service: "svc", account: "kept", returns: .data))
        #expect(kept.first?.data == Data("kept".utf8))
    }
}
