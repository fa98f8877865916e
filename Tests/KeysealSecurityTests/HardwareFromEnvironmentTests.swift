import Foundation
import KeysealSecurity
import KeysealTestSupport
import Testing

@testable import Keyseal

/// An unmodified SecItem program reaches a TPM or a PKCS#11 token through the environment alone, as it reaches
/// an embedded store on the host key through `KEYSEAL_STORE` and `KEYSEAL_HOST_KEY`.
@Suite("Embedded store on hardware from the environment")
struct HardwareFromEnvironmentTests {
    @Test func keysealTCTIOpensTheStoreOnTheTPM() throws {
        let tpm = try SwtpmFixture()
        defer { tpm.stop() }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = KeychainStore.fromEnvironment(["KEYSEAL_STORE": directory.path, "KEYSEAL_TCTI": tpm.tcti])
        defer { store.close() }
        try expectWorkingHardwareStore(store, backend: "tpm")
    }

    @Test func keysealPKCS11ModuleOpensTheStoreOnTheToken() throws {
        let token = try SoftHSMFixture()
        defer { token.remove() }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = KeychainStore.fromEnvironment([
            "KEYSEAL_STORE": directory.path,
            "KEYSEAL_PKCS11_MODULE": token.module,
            "KEYSEAL_PKCS11_TOKEN": token.tokenLabel,
            "KEYSEAL_PKCS11_PIN_FILE": token.pinFile.path,
        ])
        defer { store.close() }
        try expectWorkingHardwareStore(store, backend: "pkcs11")
    }

    @Test func bothATCTIAndAModuleIsAParameterError() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = KeychainStore.fromEnvironment([
            "KEYSEAL_STORE": directory.path,
            "KEYSEAL_TCTI": "swtpm:path=/nonexistent",
            "KEYSEAL_PKCS11_MODULE": SoftHSMFixture.defaultModule,
            "KEYSEAL_PKCS11_TOKEN": "token",
        ])
        let status = KeychainStore.withDefault(store) { SecItemAdd(genericPassword() as CFDictionary, nil) }
        #expect(status == errSecParam)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test func aModuleWithoutATokenLabelIsAParameterError() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = KeychainStore.fromEnvironment([
            "KEYSEAL_STORE": directory.path,
            "KEYSEAL_PKCS11_MODULE": SoftHSMFixture.defaultModule,
        ])
        let status = KeychainStore.withDefault(store) { SecItemAdd(genericPassword() as CFDictionary, nil) }
        #expect(status == errSecParam)
    }

    private func expectWorkingHardwareStore(_ store: KeychainStore, backend: String) throws {
        let status = try store.status()
        #expect(status.device.backend == backend)
        #expect(status.device.hardwareBacked)
        KeychainStore.withDefault(store) {
            #expect(SecItemAdd(genericPassword() as CFDictionary, nil) == errSecSuccess)
            var result: CFTypeRef?
            var query = genericQuery()
            query[kSecReturnData as String] = true
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("secret".utf8))
        }
    }
}
