import Foundation
import KeysealSecurity
import KeysealTestSupport
import Testing

/// `SecPKCS12Import` on files the `openssl` command writes, as JWT libraries load their signing identities.
@Suite("SecPKCS12Import")
struct SecPKCS12ImportTests {
    struct Written {
        let directory: TemporaryDirectory
        let p12: Data
        let certificate: Data
        let caCertificate: Data
    }

    static func openssl(_ arguments: [String]) throws {
        let result = try runProcess(try requireTool("openssl", package: "openssl"), arguments, environment: nil)
        try #require(result.status == 0, "openssl \(arguments.first ?? ""): \(result.stderrText)")
    }

    /// A key of `algorithm` (openssl genpkey options), its self-signed certificate and a second (CA) certificate,
    /// written to a PKCS#12 file under `passphrase` with the friendly name "signer" (with `legacy`, encrypted with
    /// RC2-40 and 3DES as Apple's and OpenSSL 1.x's exporters write them).
    static func write(_ algorithm: [String], passphrase: String, legacy: Bool = false) throws -> Written {
        let directory = try TemporaryDirectory()
        let path = { (name: String) in directory.appending(name).path }
        try openssl(["genpkey"] + algorithm + ["-out", path("key.pem")])
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("ca.pem")])
        for (key, name) in [("key.pem", "signer"), ("ca.pem", "ca")] {
            try openssl([
                "req", "-new", "-x509", "-key", path(key), "-subj", "/CN=\(name)", "-days", "1",
                "-outform", "DER", "-out", path("\(name).der"),
            ])
            try openssl(["x509", "-inform", "DER", "-in", path("\(name).der"), "-out", path("\(name).crt")])
        }
        try openssl(
            [
                "pkcs12", "-export", "-inkey", path("key.pem"), "-in", path("signer.crt"), "-certfile", path("ca.crt"),
                "-name", "signer", "-passout", "pass:\(passphrase)", "-out", path("file.p12"),
            ] + (legacy ? ["-legacy"] : [])
        )
        return Written(
            directory: directory,
            p12: try Data(contentsOf: directory.appending("file.p12")),
            certificate: try Data(contentsOf: directory.appending("signer.der")),
            caCertificate: try Data(contentsOf: directory.appending("ca.der"))
        )
    }

    static func importItems(_ p12: Data, _ options: [String: Any]) -> (OSStatus, [[String: Any]]) {
        var items: CFArray?
        let status = SecPKCS12Import(p12 as CFData, options as CFDictionary, &items)
        return (status, (items as? [[String: Any]]) ?? [])
    }

    static let keys: [(name: String, genpkey: [String], algorithm: SecKeyAlgorithm)] = [
        ("RSA 2048", ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"], .rsaSignatureMessagePKCS1v15SHA256),
        // A modulus a bit short of its block: a 2048-bit key, as Keyseal and Apple size RSA keys.
        ("RSA 2047", ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2047"], .rsaSignatureMessagePSSSHA256),
        ("EC P-256", ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], .ecdsaSignatureMessageX962SHA256),
        ("EC P-384", ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"], .ecdsaSignatureMessageX962SHA384),
    ]

    @Test("the identity's key signs what its certificate's key verifies; the chain and label are the file's")
    func importsIdentity() throws {
        for (name, genpkey, algorithm) in Self.keys {
            try Self.importsIdentity(name, genpkey, algorithm, legacy: false)
        }
    }

    @Test("a file encrypted with RC2-40 and 3DES, as older exporters write them, opens")
    func legacyEncryption() throws {
        for (name, genpkey, algorithm) in Self.keys {
            try Self.importsIdentity(name, genpkey, algorithm, legacy: true)
        }
    }

    static func importsIdentity(_ name: String, _ genpkey: [String], _ algorithm: SecKeyAlgorithm, legacy: Bool) throws
    {
        let written = try Self.write(genpkey, passphrase: "1234", legacy: legacy)
        let (status, items) = Self.importItems(written.p12, [kSecImportExportPassphrase as String: "1234"])
        try #require(status == errSecSuccess, "\(name)")
        try #require(items.count == 1, "\(name)")
        let item = items[0]
        #expect(item[kSecImportItemLabel as String] as? String == "signer", "\(name)")
        let chain = try #require(item[kSecImportItemCertChain as String] as? [SecCertificate])
        #expect(
            chain.map { SecCertificateCopyData($0) } == [written.certificate, written.caCertificate],
            "\(name)"
        )
        let identity = try #require(item[kSecImportItemIdentity as String] as? SecIdentity)
        var privateKey: SecKey?
        var certificate: SecCertificate?
        #expect(SecIdentityCopyPrivateKey(identity, &privateKey) == errSecSuccess)
        #expect(SecIdentityCopyCertificate(identity, &certificate) == errSecSuccess)
        #expect(certificate.map { SecCertificateCopyData($0) } == written.certificate, "\(name)")
        let publicKey = try #require(certificate.flatMap { SecCertificateCopyKey($0) })
        let message = Data("header.payload".utf8)
        var error: Unmanaged<CFError>?
        let signer = try #require(privateKey)
        let signature = try #require(SecKeyCreateSignature(signer, algorithm, message as CFData, &error))
        #expect(SecKeyVerifySignature(publicKey, algorithm, message as CFData, signature, &error), "\(name)")
    }

    @Test("the items read as on Apple: a CFArray is an NSArray, and as? [[String: Any]] works")
    func itemsAreAnNSArray() throws {
        let written = try Self.write(Self.keys[1].genpkey, passphrase: "1234")
        var items: CFArray?
        let options = [kSecImportExportPassphrase as String: "1234"]
        try #require(SecPKCS12Import(written.p12 as CFData, options as CFDictionary, &items) == errSecSuccess)
        // What makes JWTSwift's `unsafeBitCast(items, to: NSArray.self)` right: a `CFArray` is an `NSArray`.
        #expect(ObjectIdentifier(CFArray.self) == ObjectIdentifier(NSArray.self))
        let array = try #require(items)
        let first = try #require(array.firstObject as? NSDictionary)
        #expect(first[kSecImportItemIdentity as String] is SecIdentity)
        #expect((items as? [[String: Any]])?.first?[kSecImportItemLabel as String] as? String == "signer")
    }

    @Test("a wrong passphrase is errSecAuthFailed and returns nothing")
    func wrongPassphrase() throws {
        let written = try Self.write(Self.keys[1].genpkey, passphrase: "1234")
        let (status, items) = Self.importItems(written.p12, [kSecImportExportPassphrase as String: "wrongpassword"])
        #expect(status == errSecAuthFailed)
        #expect(items.isEmpty)
    }

    @Test("data that is not a PKCS#12 file is errSecDecode; a passphrase that is not a string errSecParam")
    func badInput() throws {
        let (garbage, _) = Self.importItems(Data("this_is_not_a_p12".utf8), [kSecImportExportPassphrase as String: "1"])
        #expect(garbage == errSecDecode)
        let written = try Self.write(Self.keys[1].genpkey, passphrase: "1234")
        let (number, _) = Self.importItems(written.p12, [kSecImportExportPassphrase as String: 1234])
        #expect(number == errSecParam)
    }
}
