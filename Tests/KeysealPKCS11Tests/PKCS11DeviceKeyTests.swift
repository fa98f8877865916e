import CP11Kit
import Foundation
import KeysealCore
import KeysealTestSupport
import Synchronization
import Testing

@testable import KeysealPKCS11

/// Opens a device key on `fixture`'s token; the caller closes it.
func openDeviceKey(
    _ fixture: PKCS11TokenFixture,
    provisioning: Bool = true,
    module: String? = nil,
    pinFile: URL? = nil,
    tokenLabel: String? = nil
) throws -> PKCS11DeviceKey {
    let key = PKCS11DeviceKey(
        module: module ?? fixture.module,
        tokenLabel: tokenLabel ?? fixture.tokenLabel,
        pinFile: pinFile ?? fixture.pinFile
    )
    do {
        try key.open(provisioning: provisioning)
    } catch {
        key.close()
        throw error
    }
    return key
}

/// Runs `body`, which must fail with a ``KeychainError`` of `status`; returns its message.
func failureMessage(_ status: OSStatus, _ body: () throws -> Void) -> String {
    do {
        try body()
    } catch let error as KeychainError {
        #expect(error.status == status, "expected \(KeychainStatus.name(status) ?? "\(status)"), got \(error)")
        return error.message
    } catch {
        Issue.record("expected a KeychainError, got \(error)")
        return ""
    }
    Issue.record("expected \(KeychainStatus.name(status) ?? "\(status)"), but the call succeeded")
    return ""
}

extension PKCS11Stack {
    /// The module's name in p11-kit's registry.
    var p11KitName: String {
        switch self {
        case .softhsm2: "softhsm2"
        case .tpm2pkcs11: "tpm2_pkcs11"
        }
    }
}

/// On every PKCS#11 module of the test run: SoftHSM2, and tpm2-pkcs11 behind tpm2-abrmd (keys made with
/// `tpm2_ptool`, one token shared by the tests that only seal and unseal). A test on SoftHSM2 alone says why.
@Suite("PKCS#11 device key")
struct PKCS11DeviceKeyTests {
    @Test("a 32-byte secret seals and unseals byte-exact", arguments: PKCS11Stack.allCases)
    func sealRoundTrip(stack: PKCS11Stack) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let key = try openDeviceKey(fixture)
        defer { key.close() }
        let secret = SecretBytes.random(count: 32)
        let blob = try key.seal(secret)
        #expect(blob.count == 1 + 32 + 12 + 32 + 16)
        #expect(blob.first == 2)
        let opened = try key.unseal(blob)
        #expect(opened.constantTimeEquals(secret))
    }

    @Test(
        "the key created at provisioning (or beforehand) is found again by label on a second open",
        arguments: PKCS11Stack.allCases
    )
    func keyFoundAgain(stack: PKCS11Stack) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let first = try openDeviceKey(fixture, provisioning: true)
        let identity = try first.deviceIdentity()
        let secret = SecretBytes.random(count: 32)
        let blob = try first.seal(secret)
        first.close()

        let second = try openDeviceKey(fixture, provisioning: false)
        defer { second.close() }
        #expect(try second.deviceIdentity() == identity)
        #expect(try second.unseal(blob).constantTimeEquals(secret))
    }

    @Test("a non-provisioning open without a key fails and names the key", arguments: PKCS11Stack.allCases)
    func missingKeyWithoutProvisioning(stack: PKCS11Stack) throws {
        let fixture = try stack.token(.withoutKeys)
        defer { fixture.remove() }
        let message = failureMessage(KeychainStatus.notAvailable) {
            _ = try openDeviceKey(fixture, provisioning: false)
        }
        #expect(
            message.contains(
                "\"keyseal-device-key.device\" and \"keyseal-device-key.passcode\" not found on token \"\(fixture.tokenLabel)\""
            )
        )
    }

    @Test("a wrong PIN is refused with a clear message", arguments: PKCS11Stack.allCases)
    func wrongPIN(stack: PKCS11Stack) throws {
        let fixture = try stack.token(.own)
        defer { fixture.remove() }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let wrong = directory.appending("wrong-pin")
        try SoftHSMFixture.writeFile(wrong, contents: fixture.pin + "0\n")
        let message = failureMessage(KeychainStatus.notAvailable) {
            _ = try openDeviceKey(fixture, pinFile: wrong)
        }
        #expect(message.contains("wrong PIN"))
        #expect(message.contains("CKR_PIN_INCORRECT"))
        #expect(!message.contains(fixture.pin))
    }

    @Test(
        "a wrong PIN is refused while another device key of the process is logged in to the token (which then answers CKR_USER_ALREADY_LOGGED_IN without looking at the PIN)",
        arguments: PKCS11Stack.allCases
    )
    func wrongPINWhileLoggedIn(stack: PKCS11Stack) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let first = try openDeviceKey(fixture)
        defer { first.close() }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let wrong = directory.appending("wrong-pin")
        try SoftHSMFixture.writeFile(wrong, contents: fixture.pin + "0\n")
        let message = failureMessage(KeychainStatus.notAvailable) {
            let second = try openDeviceKey(fixture, pinFile: wrong)
            second.close()
        }
        #expect(message.contains("wrong PIN"))
        #expect(!message.contains(fixture.pin))
    }

    @Test(
        "the right PIN opens a second device key while the first is logged in, and the first still seals after the second closes",
        arguments: PKCS11Stack.allCases
    )
    func rightPINWhileLoggedIn(stack: PKCS11Stack) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let first = try openDeviceKey(fixture)
        defer { first.close() }
        let second = try openDeviceKey(fixture)
        let blob = try second.seal(SecretBytes.random(count: 32))
        second.close()
        #expect(try first.unseal(blob).count == 32)
    }

    @Test(
        "two tokens of one module keep their logins apart (tpm2-pkcs11 only: it gives every token the same serial number)"
    )
    func loginsOfTwoTokensStayApart() throws {
        let stack = PKCS11Stack.tpm2pkcs11
        let fixtureA = try stack.token()
        defer { fixtureA.remove() }
        let fixtureB = try stack.token(.second)
        defer { fixtureB.remove() }
        #expect(fixtureA.pin != fixtureB.pin)
        let keyA = try openDeviceKey(fixtureA)
        defer { keyA.close() }
        let keyB = try openDeviceKey(fixtureB)
        defer { keyB.close() }
        // The token is logged in: its PIN is checked against the login recorded for this token, not the other's.
        let againA = try openDeviceKey(fixtureA, provisioning: false)
        defer { againA.close() }
        #expect(try keyA.unseal(try againA.seal(SecretBytes.random(count: 32))).count == 32)
    }

    @Test(
        "device keys opened and closed at once on several threads never find the module finalized underneath them (SoftHSM2 only: tpm2-pkcs11 tokens take turns)"
    )
    func concurrentOpenAndClose() throws {
        let fixtures = try (0..<2).map { _ in try SoftHSMFixture() }
        defer { for fixture in fixtures { fixture.remove() } }
        // Provision both tokens' keys first.
        for fixture in fixtures { try openDeviceKey(fixture).close() }
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            let fixture = fixtures[worker % fixtures.count]
            for _ in 0..<25 {
                do {
                    let key = try openDeviceKey(fixture, provisioning: false)
                    defer { key.close() }
                    _ = try key.unseal(try key.seal(SecretBytes.random(count: 32)))
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        let found = failures.withLock { $0 }
        #expect(found.isEmpty, "\(found.count) of 200 opens failed; first: \(found.first ?? "")")
    }

    // The PIN file is read before any module is loaded: the next two run on SoftHSM2 alone.
    @Test("a missing PIN file is refused")
    func missingPINFile() throws {
        let fixture = try SoftHSMFixture()
        defer { fixture.remove() }
        let missing = URL(fileURLWithPath: "/nonexistent/keyseal/pin")
        let message = failureMessage(KeychainStatus.notAvailable) {
            _ = try openDeviceKey(fixture, pinFile: missing)
        }
        #expect(message.contains("/nonexistent/keyseal/pin does not exist"))
    }

    @Test("a PIN file readable by group or others is refused", arguments: [0o644, 0o640, 0o604, 0o660])
    func permissivePINFile(mode: Int) throws {
        let fixture = try SoftHSMFixture()
        defer { fixture.remove() }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let pinFile = directory.appending("pin")
        try SoftHSMFixture.writeFile(pinFile, contents: fixture.pin + "\n", mode: mode)
        let message = failureMessage(KeychainStatus.notAvailable) {
            _ = try openDeviceKey(fixture, pinFile: pinFile)
        }
        #expect(message.contains("too permissive"))
        #expect(message.contains("0" + String(mode, radix: 8)))
    }

    @Test("an unknown token label fails and lists the labels found", arguments: PKCS11Stack.allCases)
    func unknownTokenLabel(stack: PKCS11Stack) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let message = failureMessage(KeychainStatus.notAvailable) {
            _ = try openDeviceKey(fixture, tokenLabel: "no-such-token")
        }
        #expect(message.contains("no token with label \"no-such-token\""))
        #expect(message.contains("\"\(fixture.tokenLabel)\""))
    }

    @Test("a missing module path fails and names the path")
    func missingModulePath() throws {
        let key = PKCS11DeviceKey(
            module: "/nonexistent/libkeyseal-missing.so",
            tokenLabel: "any",
            pinFile: nil
        )
        defer { key.close() }
        let message = failureMessage(KeychainStatus.notAvailable) { try key.open(provisioning: false) }
        #expect(message.contains("PKCS#11 module not found: /nonexistent/libkeyseal-missing.so"))
    }

    @Test("a file that is not a PKCS#11 library fails to load and names the path")
    func unloadableModule() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let notALibrary = directory.appending("libnot-a-module.so")
        try SoftHSMFixture.writeFile(notALibrary, contents: "not an ELF file")
        let key = PKCS11DeviceKey(module: notALibrary.path, tokenLabel: "any", pinFile: nil)
        defer { key.close() }
        let message = failureMessage(KeychainStatus.notAvailable) { try key.open(provisioning: false) }
        #expect(message.contains("could not be loaded"))
        #expect(message.contains(notALibrary.path))
    }

    @Test("an unknown p11-kit module name fails and says where it looked")
    func unknownModuleName() throws {
        let key = PKCS11DeviceKey(module: "keyseal-no-such-module", tokenLabel: "any", pinFile: nil)
        defer { key.close() }
        let message = failureMessage(KeychainStatus.notAvailable) { try key.open(provisioning: false) }
        #expect(message.contains("keyseal-no-such-module"))
        #expect(message.contains("/usr/share/p11-kit/modules"))
    }

    @Test("the module is found by its p11-kit name (softhsm2, tpm2_pkcs11)", arguments: PKCS11Stack.allCases)
    func moduleByName(stack: PKCS11Stack) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let key = try openDeviceKey(fixture, module: stack.p11KitName)
        defer { key.close() }
        let secret = SecretBytes.random(count: 32)
        #expect(try key.unseal(key.seal(secret)).constantTimeEquals(secret))
    }

    @Test(
        "a tampered blob is refused with errSecDecode",
        arguments: PKCS11Stack.allCases,
        ["version", "salt", "nonce", "ciphertext", "tag", "truncated"]
    )
    func tamperedBlob(stack: PKCS11Stack, part: String) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let key = try openDeviceKey(fixture)
        defer { key.close() }
        var blob = [UInt8](try key.seal(SecretBytes.random(count: 32)))
        switch part {
        case "version": blob[0] ^= 0x01
        case "salt": blob[5] ^= 0x01
        case "nonce": blob[40] ^= 0x01
        case "ciphertext": blob[50] ^= 0x80
        case "tag": blob[blob.count - 1] ^= 0x01
        default: blob.removeLast(20)
        }
        _ = failureMessage(KeychainStatus.decode) { _ = try key.unseal(Data(blob)) }
    }

    @Test("a blob sealed on another token is refused with errSecDecode", arguments: PKCS11Stack.allCases)
    func blobFromAnotherToken(stack: PKCS11Stack) throws {
        let fixtureA = try stack.token()
        defer { fixtureA.remove() }
        let fixtureB = try stack.token(.second)
        defer { fixtureB.remove() }
        let keyA = try openDeviceKey(fixtureA)
        defer { keyA.close() }
        let keyB = try openDeviceKey(fixtureB)
        defer { keyB.close() }
        #expect(try keyA.deviceIdentity() != keyB.deviceIdentity())
        let blob = try keyA.seal(SecretBytes.random(count: 32))
        let message = failureMessage(KeychainStatus.decode) { _ = try keyB.unseal(blob) }
        #expect(message.contains("does not authenticate"))
    }

    /// SoftHSM2 only: the attributes of the keys Keyseal creates at provisioning. tpm2-pkcs11 cannot create keys
    /// through PKCS#11 (tpm2_ptool makes them, with attributes of its own, checked when the keys are found).
    @Test(
        "each HMAC key Keyseal creates is a sensitive, never-extractable, private token object whose only use is HMAC-SHA256 signing (SoftHSM2 only: tpm2-pkcs11 cannot create keys through PKCS#11)",
        arguments: [PKCS11DeviceKey.Role.device, .passcode]
    )
    func keysAreRestricted(role: PKCS11DeviceKey.Role) throws {
        let fixture = try SoftHSMFixture()
        defer { fixture.remove() }
        let key = try openDeviceKey(fixture)
        defer { key.close() }
        let attributes = try key.keyAttributes(role)
        #expect(attributes.keyType == UInt(CKK_GENERIC_SECRET))
        #expect(attributes.sensitive == true)
        #expect(attributes.extractable == false)
        #expect(attributes.alwaysSensitive == true)
        #expect(attributes.neverExtractable == true)
        #expect(attributes.token == true)
        #expect(attributes.isPrivate == true)
        #expect(attributes.valueLength == 32)
        #expect(attributes.sign == true)
        #expect(attributes.verify == false)
        #expect(attributes.encrypt == false)
        #expect(attributes.decrypt == false)
        #expect(attributes.wrap == false)
        #expect(attributes.unwrap == false)
        #expect(attributes.derive == false)
        #expect(attributes.allowedMechanisms == [UInt(CKM_SHA256_HMAC)])
    }

    @Test(
        "sealing after the key was destroyed from another session fails with errSecNotAvailable",
        arguments: PKCS11Stack.allCases
    )
    func keyRemovedWhileOpen(stack: PKCS11Stack) throws {
        let fixture = try stack.token(.own)
        defer { fixture.remove() }
        let key = try openDeviceKey(fixture)
        defer { key.close() }
        let other = try openDeviceKey(fixture, provisioning: false)
        try other.destroyKey(.device)
        other.close()
        let message = failureMessage(KeychainStatus.notAvailable) { _ = try key.seal(SecretBytes.random(count: 32)) }
        #expect(message.contains("the device key was removed from the token"))
    }

    /// SoftHSM2 only: tpm2-pkcs11 keeps the objects it read when the session logged in (the key's TPM blob in
    /// memory), so another process's deletion reaches a running keyseald only at its next open (docs/PKCS11.md).
    @Test(
        "sealing after another process deleted the key fails with errSecNotAvailable (SoftHSM2 only: tpm2-pkcs11 keeps the key it read at login until the next open)"
    )
    func keyDeletedByAnotherProcess() throws {
        let p11tool = try requireTool("p11tool", package: "gnutls-bin")
        let fixture = try SoftHSMFixture()
        defer { fixture.remove() }
        let key = try openDeviceKey(fixture)
        defer { key.close() }
        let deleted = try runProcess(
            p11tool,
            [
                "--provider", fixture.module, "--login", "--batch", "--delete",
                "pkcs11:token=\(fixture.tokenLabel);object=keyseal-device-key.device;type=secret-key",
            ],
            environment: fixture.environment.merging(["GNUTLS_PIN": fixture.pin]) { _, new in new }
        )
        try #require(deleted.status == 0, "p11tool --delete failed: \(deleted.stderrText)")
        let message = failureMessage(KeychainStatus.notAvailable) { _ = try key.seal(SecretBytes.random(count: 32)) }
        #expect(message.contains("the device key was removed from the token"))
    }

    @Test(
        "a secret sealed with a passcode authorization opens only with that authorization",
        arguments: PKCS11Stack.allCases
    )
    func passcodeRoundTrip(stack: PKCS11Stack) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let key = try openDeviceKey(fixture)
        defer { key.close() }
        let secret = SecretBytes.random(count: 32)
        let authorization = SecretBytes.random(count: 32)
        let blob = try key.sealWithPasscode(secret, authorization: authorization)
        #expect(try key.unsealWithPasscode(blob, authorization: authorization).constantTimeEquals(secret))
        _ = failureMessage(KeychainStatus.authFailed) {
            _ = try key.unsealWithPasscode(blob, authorization: SecretBytes.random(count: 32))
        }
    }

    @Test("passcode blobs and device blobs are not interchangeable", arguments: PKCS11Stack.allCases)
    func domainSeparation(stack: PKCS11Stack) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let key = try openDeviceKey(fixture)
        defer { key.close() }
        let secret = SecretBytes.random(count: 32)
        let passcodeBlob = try key.sealWithPasscode(secret, authorization: SecretBytes.random(count: 32))
        _ = failureMessage(KeychainStatus.decode) { _ = try key.unseal(passcodeBlob) }
    }

    @Test("status reports a hardware-backed key whose guessing is not hardware-limited")
    func status() throws {
        let key = PKCS11DeviceKey(module: "softhsm2", tokenLabel: "any", pinFile: nil)
        let status = try key.status()
        #expect(key.backendName == "pkcs11")
        #expect(status.backend == "pkcs11")
        #expect(status.hardwareBacked)
        #expect(!status.guessingHardwareLimited)
        #expect(status.detail.contains("not by the token"))
        #expect(status.detail.contains("every guess needs the token"))
    }

    @Test("close is idempotent and later calls fail with errSecNotAvailable", arguments: PKCS11Stack.allCases)
    func closeIsIdempotent(stack: PKCS11Stack) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let key = try openDeviceKey(fixture)
        key.close()
        key.close()
        _ = failureMessage(KeychainStatus.notAvailable) { _ = try key.seal(SecretBytes.random(count: 32)) }
    }
}
