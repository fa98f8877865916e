import CP11Kit
import Foundation
import Keyseal
import KeysealCore
import KeysealStore
import KeysealTestSupport
import Testing

@testable import KeysealPKCS11

/// The attack an outside review made on format 1, run as the token's PIN holder would: with the token, its PIN and
/// the passcode blob (not the passcode), ask the token for the AES-GCM keystream under the blob's IV — CKM_AES_GCM
/// with any associated data, or CKM_AES_CTR / CKM_AES_ECB on the counter blocks — and XOR it off the ciphertext.
/// Returns the recovered plaintext, or nil when every key on the token refuses every such mechanism.
private func keystreamAttack(_ key: PKCS11DeviceKey, blob: Data, roles: [PKCS11DeviceKey.Role]) throws -> [UInt8]? {
    let bytes = [UInt8](blob)
    // Format 1: version ‖ IV (12) ‖ ciphertext ‖ tag (16). Format 2 has no token-side ciphertext; the attacker tries
    // the same bytes at the same place.
    let iv = Array(bytes[1..<13])
    let ciphertext = Array(bytes[13..<(bytes.count - 16)])
    for role in roles {
        let found: [UInt8]? = try key.withRawSession(role) { functions, session, handle in
            var keystream = [UInt8](repeating: 0, count: ciphertext.count + 16)
            var length = CK_ULONG(keystream.count)
            var zeros = [UInt8](repeating: 0, count: ciphertext.count)
            // CKM_AES_GCM with no associated data: the keystream starts at counter 2, as in the blob.
            var aad: [UInt8] = []
            var ivCopy = iv
            let gcm = ivCopy.withUnsafeMutableBufferPointer { ivBuffer in
                aad.withUnsafeMutableBufferPointer { aadBuffer -> CK_RV in
                    var parameters = CK_GCM_PARAMS(
                        pIv: ivBuffer.baseAddress,
                        ulIvLen: 12,
                        ulIvBits: 96,
                        pAAD: aadBuffer.baseAddress,
                        ulAADLen: 0,
                        ulTagBits: 128
                    )
                    return withUnsafeMutablePointer(to: &parameters) { parameters in
                        var mechanism = CK_MECHANISM(
                            mechanism: CK_MECHANISM_TYPE(CKM_AES_GCM),
                            pParameter: UnsafeMutableRawPointer(parameters),
                            ulParameterLen: CK_ULONG(MemoryLayout<CK_GCM_PARAMS>.size)
                        )
                        return functions.C_EncryptInit!(session, &mechanism, handle)
                    }
                }
            }
            if gcm == CK_RV(CKR_OK),
                functions.C_Encrypt!(session, &zeros, CK_ULONG(zeros.count), &keystream, &length) == CK_RV(CKR_OK)
            {
                return zip(ciphertext, keystream).map { $0 ^ $1 }
            }
            // CKM_AES_ECB on the counter blocks IV ‖ 2, IV ‖ 3, …
            var blocks: [UInt8] = []
            for counter in 0..<((ciphertext.count + 15) / 16) {
                let value = UInt32(counter + 2)
                blocks +=
                    iv + [
                        UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF),
                        UInt8(value & 0xFF),
                    ]
            }
            var ecb = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_AES_ECB), pParameter: nil, ulParameterLen: 0)
            var output = [UInt8](repeating: 0, count: blocks.count)
            var outputLength = CK_ULONG(output.count)
            if functions.C_EncryptInit!(session, &ecb, handle) == CK_RV(CKR_OK),
                functions.C_Encrypt!(session, &blocks, CK_ULONG(blocks.count), &output, &outputLength) == CK_RV(CKR_OK)
            {
                return zip(ciphertext, output).map { $0 ^ $1 }
            }
            return nil
        }
        if let found { return found }
    }
    return nil
}

/// Runs a raw mechanism on one of the token's keys; true when the token lets it start.
private func tokenAllows(
    _ key: PKCS11DeviceKey,
    _ role: PKCS11DeviceKey.Role,
    mechanism type: UInt,
    sign: Bool
) throws
    -> Bool
{
    try key.withRawSession(role) { functions, session, handle in
        var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(type), pParameter: nil, ulParameterLen: 0)
        let rv =
            sign
            ? functions.C_SignInit!(session, &mechanism, handle) : functions.C_EncryptInit!(session, &mechanism, handle)
        guard rv == CK_RV(CKR_OK) else { return false }
        // Finish the operation so the session is free again.
        var data: [UInt8] = Array(repeating: 0, count: 16)
        var output = [UInt8](repeating: 0, count: 64)
        var length = CK_ULONG(output.count)
        _ =
            sign
            ? functions.C_Sign!(session, &data, 16, &output, &length)
            : functions.C_Encrypt!(session, &data, 16, &output, &length)
        return true
    }
}

private func legacyDeviceKey(_ fixture: SoftHSMFixture) -> DeviceKey {
    DeviceKey(description: "pkcs11 format 1") {
        PKCS11DeviceKey(
            module: fixture.module,
            tokenLabel: fixture.tokenLabel,
            pinFile: fixture.pinFile,
            keyLabel: "keyseal-device-key",
            sealsLegacyFormat: true
        )
    }
}

private func keybag(_ directory: URL) throws -> Keybag {
    let store = try ItemStore(directory: directory)
    defer { store.close() }
    let stored = try #require(try store.loadKeybag())
    return try Keybag.parseUnverified(stored.body)
}

private let fastArgon2 = Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)

@Suite("PKCS#11: every passcode guess needs the token")
struct PKCS11PasscodeBindingTests {
    /// SoftHSM2 only here and in the format-1 migration below: format 1 needs an AES key made by C_GenerateKey and
    /// AES-GCM, which tpm2-pkcs11 has neither of.
    @Test(
        "format 1 (the old design): the PIN holder recovers the passcode secret from its blob without the passcode (SoftHSM2 only: format 1 needs AES-GCM)"
    )
    func keystreamAttackBreaksFormat1() throws {
        let fixture = try SoftHSMFixture()
        defer { fixture.remove() }
        let key = PKCS11DeviceKey(
            module: fixture.module,
            tokenLabel: fixture.tokenLabel,
            pinFile: fixture.pinFile,
            keyLabel: "keyseal-device-key",
            sealsLegacyFormat: true
        )
        try key.open(provisioning: true)
        defer { key.close() }
        let secret = SecretBytes.random(count: 32)
        let authorization = SecretBytes.random(count: 32)
        let blob = try key.sealWithPasscode(secret, authorization: authorization)
        let recovered = try #require(try keystreamAttack(key, blob: blob, roles: [.legacy]))
        #expect(SecretBytes(copying: recovered).constantTimeEquals(secret))
    }

    @Test(
        "format 2: no key on the token yields a keystream for the passcode blob, so PS cannot be taken offline",
        arguments: PKCS11Stack.allCases
    )
    func keystreamAttackFailsOnFormat2(stack: PKCS11Stack) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let key = try openDeviceKey(fixture)
        defer { key.close() }
        let blob = try key.sealWithPasscode(SecretBytes.random(count: 32), authorization: SecretBytes.random(count: 32))
        #expect(try keystreamAttack(key, blob: blob, roles: [.device, .passcode]) == nil)
    }

    @Test(
        "format 2: the token refuses every mechanism but HMAC-SHA256 signing on its keys",
        arguments: PKCS11Stack.allCases,
        [PKCS11DeviceKey.Role.device, .passcode]
    )
    func onlyHMACSHA256IsAllowed(stack: PKCS11Stack, role: PKCS11DeviceKey.Role) throws {
        let fixture = try stack.token()
        defer { fixture.remove() }
        let key = try openDeviceKey(fixture)
        defer { key.close() }
        #expect(try tokenAllows(key, role, mechanism: UInt(CKM_SHA256_HMAC), sign: true))
        for mechanism in [CKM_SHA_1_HMAC, CKM_SHA384_HMAC, CKM_SHA512_HMAC, CKM_MD5_HMAC] {
            #expect(
                try !tokenAllows(key, role, mechanism: UInt(mechanism), sign: true),
                "mechanism 0x\(String(mechanism, radix: 16))"
            )
        }
        for mechanism in [CKM_AES_ECB, CKM_AES_CBC, CKM_AES_CTR] {
            #expect(
                try !tokenAllows(key, role, mechanism: UInt(mechanism), sign: false),
                "mechanism 0x\(String(mechanism, radix: 16))"
            )
        }
        // Neither wrapping with the key nor reading its value.
        try key.withRawSession(role) { functions, session, handle in
            var wrap = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_AES_KEY_WRAP), pParameter: nil, ulParameterLen: 0)
            var length: CK_ULONG = 0
            #expect(functions.C_WrapKey!(session, &wrap, handle, handle, nil, &length) != CK_RV(CKR_OK))
            var value = CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_VALUE), pValue: nil, ulValueLen: 0)
            _ = functions.C_GetAttributeValue!(session, handle, &value, 1)
            // SoftHSM2 answers CK_UNAVAILABLE_INFORMATION; tpm2-pkcs11 an empty value (the key is in the TPM's
            // blob): either way, not one byte of the 32.
            #expect(value.ulValueLen == CK_ULONG.max || value.ulValueLen == 0, "CKA_VALUE length \(value.ulValueLen)")
        }
    }

    @Test(
        "a format-1 store migrates: DS at open, PS at the next unlock, items kept, the blobs no longer attackable (SoftHSM2 only: format 1 needs AES-GCM)"
    )
    func format1StoreMigrates() throws {
        let fixture = try SoftHSMFixture()
        defer { fixture.remove() }
        let root = try TemporaryDirectory(prefix: "keyseal-pkcs11-migrate")
        defer { root.remove() }
        let directory = root.appending("store")
        let configuration = KeychainStore.Configuration(argon2: fastArgon2)

        var store = try KeychainStore.embedded(
            directory: directory,
            device: legacyDeviceKey(fixture),
            configuration: configuration
        )
        try store.setPasscode("correct horse battery")
        try Keychain(service: "svc", store: store).accessibility(.whenUnlocked).set("when-unlocked", key: "ak")
        try Keychain(service: "svc", store: store).accessibility(.always).set("always", key: "dk")
        store.close()
        let before = try keybag(directory)
        #expect(before.sealedDeviceSecret.first == 1)
        #expect(before.passcode?.sealedSecret.first == 1)

        let current = DeviceKey.pkcs11(module: fixture.module, token: fixture.tokenLabel, pinFile: fixture.pinFile)
        // The store file is open to one connection at a time: each look at the keybag closes the store first.
        store = try KeychainStore.embedded(directory: directory, device: current, configuration: configuration)
        #expect(try Keychain(service: "svc", store: store).get("dk") == "always")
        #expect(status { try store.unlock(passcode: "wrong passcode") } == KeychainStatus.authFailed)
        store.close()
        let opened = try keybag(directory)
        #expect(opened.sealedDeviceSecret.first == 2)
        #expect(opened.deviceIdentity == before.deviceIdentity)
        #expect(opened.passcode?.sealedSecret.first == 1)

        store = try KeychainStore.embedded(directory: directory, device: current, configuration: configuration)
        try store.unlock(passcode: "correct horse battery")
        #expect(try Keychain(service: "svc", store: store).get("ak") == "when-unlocked")
        store.close()
        let unlocked = try keybag(directory)
        #expect(unlocked.passcode?.sealedSecret.first == 2)
        #expect(unlocked.classKeys == before.classKeys)

        // The old database pages were overwritten: no format-1 blob is left in the directory's files.
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            let contents = try Data(contentsOf: directory.appendingPathComponent(name))
            #expect(contents.range(of: before.passcode!.sealedSecret) == nil, "\(name)")
            #expect(contents.range(of: before.sealedDeviceSecret) == nil, "\(name)")
        }

        store = try KeychainStore.embedded(directory: directory, device: current, configuration: configuration)
        #expect(status { try store.unlock(passcode: "wrong passcode") } == KeychainStatus.authFailed)
        try store.unlock(passcode: "correct horse battery")
        #expect(try Keychain(service: "svc", store: store).get("ak") == "when-unlocked")
        #expect(try Keychain(service: "svc", store: store).get("dk") == "always")

        #expect(
            try store.status().device.detail.contains("format-1 AES key \"keyseal-device-key\" is still on the token")
        )
        store.close()

        // The migrated passcode blob resists the attack that broke format 1. (The format-1 key, still on the token
        // until an administrator deletes it, yields an AES keystream for any IV; it has nothing to do with a
        // format-2 blob, which the token never encrypted.)
        let key = try openDeviceKey(fixture, provisioning: false)
        defer { key.close() }
        let blob = try #require(try keybag(directory).passcode?.sealedSecret)
        #expect(try keystreamAttack(key, blob: blob, roles: [.device, .passcode]) == nil)
    }

    /// SoftHSM2 only: the variants are made with C_CreateObject and attribute edits SoftHSM2 allows; on tpm2-pkcs11
    /// keys made by `tpm2_ptool` are accepted by every test of ``PKCS11DeviceKeyTests``.
    @Test(
        "keys created beforehand are accepted when they qualify and refused, with the reason, when they do not (SoftHSM2 only: made with C_CreateObject)",
        arguments: ["qualifies", "derive", "extractable", "not sensitive", "sha1 allowed", "every mechanism"]
    )
    func keysCreatedBeforehand(variant: String) throws {
        let fixture = try SoftHSMFixture()
        defer { fixture.remove() }
        // Provision, then replace both keys with keys made by hand as the token's own tool would.
        let key = try openDeviceKey(fixture)
        let blobBefore = try key.seal(SecretBytes.random(count: 32))
        for role in [PKCS11DeviceKey.Role.passcode, .device] {
            let label = role == .device ? key.deviceSecretKeyLabel : key.passcodeSecretKeyLabel
            try key.withRawSession(role) { functions, session, handle in
                #expect(functions.C_DestroyObject!(session, handle) == CK_RV(CKR_OK))
                let allowed: [CK_MECHANISM_TYPE] =
                    switch variant {
                    case "sha1 allowed": [CK_MECHANISM_TYPE(CKM_SHA256_HMAC), CK_MECHANISM_TYPE(CKM_SHA_1_HMAC)]
                    case "every mechanism": []  // not set: the token allows every mechanism
                    default: [CK_MECHANISM_TYPE(CKM_SHA256_HMAC)]
                    }
                func ulong(_ value: UInt) -> [UInt8] { withUnsafeBytes(of: CK_ULONG(value)) { Array($0) } }
                func flag(_ value: Bool) -> [UInt8] { [value ? CK_BBOOL(CK_TRUE) : CK_BBOOL(CK_FALSE)] }
                let attributes: [(UInt, [UInt8])] =
                    [
                        (CKA_CLASS, ulong(CKO_SECRET_KEY)), (CKA_KEY_TYPE, ulong(CKK_GENERIC_SECRET)),
                        (CKA_VALUE_LEN, ulong(32)), (CKA_TOKEN, flag(true)), (CKA_PRIVATE, flag(true)),
                        (CKA_SENSITIVE, flag(variant != "not sensitive")),
                        (CKA_EXTRACTABLE, flag(variant == "extractable")),
                        (CKA_SIGN, flag(true)), (CKA_DERIVE, flag(variant == "derive")), (CKA_LABEL, Array(label.utf8)),
                        (CKA_ID, [1, 2, 3, 4]),
                    ] + (allowed.isEmpty ? [] : [(CKA_ALLOWED_MECHANISMS, allowed.withUnsafeBytes { Array($0) })])
                // One buffer holds every value for the call's duration.
                let total = attributes.reduce(0) { $0 + $1.1.count }
                let storage = UnsafeMutableRawPointer.allocate(byteCount: max(total, 1), alignment: 16)
                defer { storage.deallocate() }
                var offset = 0
                var template: [CK_ATTRIBUTE] = attributes.map { type, value in
                    let start = storage + offset
                    value.withUnsafeBytes {
                        if let base = $0.baseAddress { start.copyMemory(from: base, byteCount: $0.count) }
                    }
                    offset += value.count
                    return CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(type), pValue: start, ulValueLen: CK_ULONG(value.count))
                }
                var mechanism = CK_MECHANISM(
                    mechanism: CK_MECHANISM_TYPE(CKM_GENERIC_SECRET_KEY_GEN),
                    pParameter: nil,
                    ulParameterLen: 0
                )
                var created = CK_OBJECT_HANDLE(0)
                let rv = functions.C_GenerateKey!(session, &mechanism, &template, CK_ULONG(template.count), &created)
                #expect(rv == CK_RV(CKR_OK), "C_GenerateKey: 0x\(String(rv, radix: 16))")
            }
        }
        key.close()

        if variant == "qualifies" {
            let reopened = try openDeviceKey(fixture, provisioning: false)
            defer { reopened.close() }
            let secret = SecretBytes.random(count: 32)
            let authorization = SecretBytes.random(count: 32)
            let blob = try reopened.sealWithPasscode(secret, authorization: authorization)
            #expect(try reopened.unsealWithPasscode(blob, authorization: authorization).constantTimeEquals(secret))
            // Other keys: what the old ones sealed does not open.
            _ = failureMessage(KeychainStatus.decode) { _ = try reopened.unseal(blobBefore) }
        } else {
            let message = failureMessage(KeychainStatus.notAvailable) {
                _ = try openDeviceKey(fixture, provisioning: false)
            }
            #expect(message.contains("refusing to use it"), "\(message)")
        }
    }
}
