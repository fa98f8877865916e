import Crypto
import Foundation
import KeysealTestSupport
import SwiftASN1
import Testing
import X509

/// `keyseal add-certificates`, `find-certificate`, `delete-certificate`, `find-identity` and `create-csr` against a
/// real keyseald (docs/COMMAND-LINE.md, "Keys, certificates, identities").
@Suite("CLI certificates and identities")
struct CLICertificateTests {
    static func upperHex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02X", $0) }.joined() }

    static func pem(_ der: Data, _ label: String = "CERTIFICATE") -> String {
        let base64 = der.base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN \(label)-----\n\(base64)\n-----END \(label)-----\n"
    }

    static func write(_ data: Data, _ name: String, in directory: TemporaryDirectory) throws -> String {
        let path = directory.appending(name).path
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func aPEMBundleAddsEachCertificateAndFindPrintsTheirHashes() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let files = try TemporaryDirectory()
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let bundle = Self.pem(KeyTestMaterial.certificate) + Self.pem(KeyTestMaterial.secondCertificate)
        let added = try cli("add-certificates", try Self.write(Data(bundle.utf8), "bundle.pem", in: files))
        #expect(added.status == 0, "\(added.stderrText)")

        let found = try cli("find-certificate", "-a", "-Z")
        #expect(found.status == 0, "\(found.stderrText)")
        for der in [KeyTestMaterial.certificate, KeyTestMaterial.secondCertificate] {
            #expect(found.stdoutText.contains("SHA-256 hash: \(Self.upperHex(SHA256.hash(data: der)))"))
            #expect(found.stdoutText.contains("SHA-1 hash: \(Self.upperHex(Insecure.SHA1.hash(data: der)))"))
        }
        #expect(found.stdoutText.contains("\"labl\"<blob>=\"Keyseal Test Two\""))
    }

    @Test func findByCommonNamePrintsThatCertificateAsPEM() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let files = try TemporaryDirectory()
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let bundle = Self.pem(KeyTestMaterial.certificate) + Self.pem(KeyTestMaterial.secondCertificate)
        #expect(try cli("add-certificates", try Self.write(Data(bundle.utf8), "bundle.pem", in: files)).status == 0)
        let found = try cli("find-certificate", "-c", "Two", "-p")
        #expect(found.status == 0, "\(found.stderrText)")
        #expect(found.stdoutText == Self.pem(KeyTestMaterial.secondCertificate))
        #expect(try cli("find-certificate", "-c", "Three").status == 44)
    }

    @Test func aDERCertificateIsDeletedByItsSHA1Hash() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let files = try TemporaryDirectory()
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(
            try cli("add-certificates", try Self.write(KeyTestMaterial.certificate, "one.der", in: files)).status == 0
        )
        let hash = Self.upperHex(Insecure.SHA1.hash(data: KeyTestMaterial.certificate))
        let deleted = try cli("delete-certificate", "-Z", hash)
        #expect(deleted.status == 0, "\(deleted.stderrText)")
        #expect(try cli("find-certificate").status == 44)
    }

    @Test func anAmbiguousNameDeletesNothing() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let files = try TemporaryDirectory()
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let bundle = Self.pem(KeyTestMaterial.certificate) + Self.pem(KeyTestMaterial.secondCertificate)
        #expect(try cli("add-certificates", try Self.write(Data(bundle.utf8), "bundle.pem", in: files)).status == 0)
        #expect(try cli("delete-certificate", "-c", "Keyseal Test").status == 45)
        let listed = try cli("--json", "find-certificate", "-a")
        let documents = try #require(try JSONSerialization.jsonObject(with: listed.stdout) as? [[String: Any]])
        #expect(documents.count == 2)
    }

    @Test func aFileThatIsNoCertificateIsAParameterErrorAndTheOthersAreAdded() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let files = try TemporaryDirectory()
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let bad = try Self.write(Data("not a certificate".utf8), "bad.der", in: files)
        let good = try Self.write(KeyTestMaterial.certificate, "good.der", in: files)
        let added = try cli("add-certificates", bad, good)
        #expect(added.status == 206)
        #expect(added.stderrText.hasPrefix("keyseal: add-certificates: "))
        #expect(try cli("find-certificate", "-c", "Keyseal Test").status == 0)
    }

    /// The showcase: a key generated in swtpm, a CSR signed inside keyseald, a certificate from a test CA, added
    /// and listed as a valid identity.
    @Test func aHardwareKeysCSRBecomesAValidIdentity() throws {
        let daemon = try DaemonFixture(.tpm)
        defer { daemon.remove() }
        let files = try TemporaryDirectory()
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let created = try cli("--json", "create-key", "--tag", "device", "--hardware")
        #expect(created.status == 0, "\(created.stderrText)")
        let publicKey = try P256.Signing.PublicKey(
            pemRepresentation: try #require(CLI.json(created)["publicKey"] as? String)
        )

        let requested = try cli("create-csr", "--tag", "device", "--subject", "CN=device-7,O=Keyseal")
        #expect(requested.status == 0, "\(requested.stderrText)")
        let csr = try CertificateSigningRequest(pemEncoded: requested.stdoutText)
        #expect(csr.publicKey == Certificate.PublicKey(publicKey))
        #expect(csr.publicKey.isValidSignature(csr.signature, for: csr))
        #expect(
            csr.subject
                == (try DistinguishedName {
                    CommonName("device-7")
                    OrganizationName("Keyseal")
                })
        )

        #expect(try cli("find-identity", "-v").stdoutText == "     0 valid identities found\n")
        let caKey = P256.Signing.PrivateKey()
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: csr.publicKey,
            notValidBefore: now.addingTimeInterval(-60),
            notValidAfter: now.addingTimeInterval(3600),
            issuer: try DistinguishedName { CommonName("Keyseal Test CA") },
            subject: csr.subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions(),
            issuerPrivateKey: Certificate.PrivateKey(caKey)
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        let der = Data(serializer.serializedBytes)
        #expect(
            try cli("add-certificates", try Self.write(Data(Self.pem(der).utf8), "device.pem", in: files)).status == 0
        )

        let identities = try cli("find-identity", "-v")
        #expect(identities.status == 0, "\(identities.stderrText)")
        #expect(
            identities.stdoutText
                == "  1) \(Self.upperHex(Insecure.SHA1.hash(data: der))) \"device-7\"\n     1 valid identities found\n"
        )
    }

    @Test func anExpiredIdentityIsListedButNotValid() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let files = try TemporaryDirectory()
        defer { files.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(try cli("create-key", "--tag", "old").status == 0)
        let requested = try cli("create-csr", "--tag", "old", "--subject", "CN=old-device")
        let csr = try CertificateSigningRequest(pemEncoded: requested.stdoutText)
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: csr.publicKey,
            notValidBefore: now.addingTimeInterval(-7200),
            notValidAfter: now.addingTimeInterval(-3600),
            issuer: try DistinguishedName { CommonName("Keyseal Test CA") },
            subject: csr.subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions(),
            issuerPrivateKey: Certificate.PrivateKey(P256.Signing.PrivateKey())
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        let path = try Self.write(Data(serializer.serializedBytes), "old.der", in: files)
        #expect(try cli("add-certificates", path).status == 0)
        let all = try cli("find-identity")
        #expect(all.stdoutText.contains("\"old-device\" (CSSMERR_TP_CERT_EXPIRED)\n     1 identities found\n"))
        #expect(try cli("find-identity", "-v").stdoutText == "     0 valid identities found\n")
    }

    @Test func aSubjectThatIsNotNameValuePairsIsAParameterError() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(try cli("create-key", "--tag", "k").status == 0)
        let result = try cli("create-csr", "--tag", "k", "--subject", "device-7")
        #expect(result.status == 206)
    }
}
