import Crypto
import Foundation
import KeysealCore
import KeysealTPM
import KeysealTestSupport
import Testing

/// Objects bound to signed PCR policies (`PolicyAuthorize`) of ``TPMDeviceKey`` on swtpm (docs/TPM.md "Signed PCR
/// policies").
@Suite("TPM signed PCR policies on swtpm")
struct TPMSignedBindingTests {
    /// A device key on a new swtpm whose new objects are bound to PCR 7 through policies signed by `signer`, reading
    /// signatures from a directory of its own where the current state is signed.
    static func withSignedTPM<Result>(
        signer: P256.Signing.PrivateKey,
        _ body: (SwtpmFixture, TPMDeviceKey, String) throws -> Result
    ) throws -> Result {
        let fixture = try SwtpmFixture(maxTries: 10, recoveryTime: 60, lockoutRecovery: 2)
        defer { fixture.stop() }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try sign(fixture, signer, into: directory.path, name: "a.json")
        let publicKey = try PCRPolicyKey(pemRepresentation: signer.publicKey.pemRepresentation)
        let key = TPMDeviceKey(
            tcti: fixture.tcti,
            pcrs: [7],
            pcrPolicyKey: publicKey,
            signatureDirectories: [directory.path]
        )
        defer { key.close() }
        try key.open(provisioning: true)
        return try body(fixture, key, directory.path)
    }

    /// A signed policy for the swtpm's current PCR 7, written as `name` in `directory`.
    static func sign(
        _ fixture: SwtpmFixture,
        _ signer: P256.Signing.PrivateKey,
        into directory: String,
        name: String
    )
        throws
    {
        let values = try TPMDeviceKey.readPCRs(tcti: fixture.tcti, pcrs: [7])
        let policy = try SignedPCRPolicy.sign(values: values, privateKeyPEM: signer.pemRepresentation)
        try SignedPCRPolicy.encodeFile([policy]).write(to: URL(fileURLWithPath: directory + "/" + name))
    }

    @Test("a signed passcode object: a wrong passcode is counted; in a state nobody signed nothing is tried")
    func signedPasscodeObject() throws {
        try Self.withSignedTPM(signer: P256.Signing.PrivateKey()) { fixture, key, _ in
            let blob = try key.sealWithPasscode(secret(1), authorization: secret(9))
            #expect(try TPMDeviceKey.boundPCRs(ofBlob: blob) == [7])
            #expect(bytes(try key.unsealWithPasscode(blob, authorization: secret(9))) == bytes(secret(1)))
            #expect(throws: KeychainError.authFailed) { try key.unsealWithPasscode(blob, authorization: secret(8)) }
            #expect(try fixture.lockoutCounter() == 1)
            try fixture.tool("tpm2_pcrextend", ["7:sha256=" + String(repeating: "cd", count: 32)])
            let error = try #require(throws: KeychainError.self) {
                try key.unsealWithPasscode(blob, authorization: secret(9))
            }
            #expect(error.status == KeychainStatus.recoveryRequired && error.notTried)
            #expect(error.message.contains("no policy signed by the PCR policy key"), "\(error)")
            #expect(try fixture.lockoutCounter() == 1)
        }
    }

    @Test("a device blob whose recorded policy key was replaced by another is refused before the TPM is asked")
    func replacedPolicyKeyRefused() throws {
        let signer = P256.Signing.PrivateKey()
        try Self.withSignedTPM(signer: signer) { _, key, _ in
            let blob = [UInt8](try key.seal(secret(2)))
            #expect(bytes(try key.unseal(Data(blob))) == bytes(secret(2)))
            let bound = Array(signer.publicKey.x963Representation.dropFirst())
            let other = Array(P256.Signing.PrivateKey().publicKey.x963Representation.dropFirst())
            var edited = blob
            for (coordinate, replacement) in [(bound[0..<32], other[0..<32]), (bound[32...], other[32...])] {
                let start = try #require(
                    (0...(edited.count - 32)).first { Array(edited[$0..<$0 + 32]) == Array(coordinate) }
                )
                edited.replaceSubrange(start..<start + 32, with: replacement)
            }
            let error = try #require(throws: KeychainError.self) { try key.unseal(Data(edited)) }
            #expect(error.status == KeychainStatus.decode, "\(error)")
            #expect(error.message.contains("not PolicyAuthorize of its PCR policy key"), "\(error)")
        }
    }
}
