import Crypto
import Foundation
import KeysealTestSupport
import Testing

/// `keyseal create-key`, `find-key`, `sign` and `delete-key` against a real keyseald on swtpm.
@Suite("CLI keys")
struct CLIKeyTests {
    @Test func aHardwareKeyIsCreatedFoundUsedAndDeletedFromTheCommandLine() throws {
        let daemon = try DaemonFixture(.tpm)
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let created = try cli("--json", "create-key", "--tag", "device", "-l", "Device key", "--hardware")
        #expect(created.status == 0, "\(created.stderr)")
        let document = try CLI.json(created)
        let pem = try #require(document["publicKey"] as? String)
        #expect(document["hardware"] as? Bool == true)
        let publicKey = try P256.Signing.PublicKey(pemRepresentation: pem)

        let found = try cli("find-key", "--tag", "device")
        #expect(found.status == 0 && found.stdoutText.contains("hardware") && found.stdoutText.contains(pem))

        let signed = try cli("sign", "--tag", "device", input: "message")
        #expect(signed.status == 0, "\(signed.stderr)")
        let signature = try P256.Signing.ECDSASignature(derRepresentation: signed.stdout)
        #expect(publicKey.isValidSignature(signature, for: Data("message".utf8)))

        #expect(try cli("delete-key", "--tag", "device").status == 0)
        #expect(try cli("find-key", "--tag", "device").status == 44)
    }

    @Test func aHardwareKeyOnTheHostKeyBackendExits252() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let result = try CLI(socket: daemon.socketPath)("create-key", "--tag", "x", "--hardware")
        #expect(result.status == 252)
    }
}
