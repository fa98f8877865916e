import Foundation
import Keyseal
import KeysealCore
import KeysealSecurity
import KeysealTestSupport
import LocalAuthentication
import Testing

/// A key's private-key operations, each answering the signature (or plaintext, or secret) or the error's code.
enum KeyUse {
    static let message = Data("message".utf8)

    static func sign(_ key: SecKey) -> (Data?, Int?) {
        var error: Unmanaged<CFError>?
        let signature = SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, &error)
        return (signature, error.map { CFErrorGetCode($0.takeRetainedValue()) })
    }

    static func decrypt(_ key: SecKey) throws -> (Data?, Int?) {
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let ciphertext = try #require(
            SecKeyCreateEncryptedData(publicKey, .eciesEncryptionStandardX963SHA256AESGCM, message as CFData, nil)
        )
        var error: Unmanaged<CFError>?
        let plaintext = SecKeyCreateDecryptedData(key, .eciesEncryptionStandardX963SHA256AESGCM, ciphertext, &error)
        return (plaintext, error.map { CFErrorGetCode($0.takeRetainedValue()) })
    }

    static func derive(_ key: SecKey) throws -> (Data?, Int?) {
        var error: Unmanaged<CFError>?
        let peerAttributes: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
        ]
        let peer = try #require(SecKeyCreateRandomKey(peerAttributes as CFDictionary, &error))
        let peerPublic = try #require(SecKeyCopyPublicKey(peer))
        let secret = SecKeyCopyKeyExchangeResult(
            key,
            .ecdhKeyExchangeStandard,
            peerPublic,
            [:] as [String: Any] as CFDictionary,
            &error
        )
        return (secret, error.map { CFErrorGetCode($0.takeRetainedValue()) })
    }

    static func verifies(_ key: SecKey, _ signature: Data) -> Bool {
        guard let publicKey = SecKeyCopyPublicKey(key) else { return false }
        return SecKeyVerifySignature(
            publicKey,
            .ecdsaSignatureMessageX962SHA256,
            message as CFData,
            signature as CFData,
            nil
        )
    }
}

/// Where a key that is not stored lives: a software key (on the host-key backend), or the hardware of swtpm or
/// SoftHSM2 (`kSecAttrTokenIDSecureEnclave`).
enum TransientKeyPlace: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case software
    case tpm
    case pkcs11

    var testDescription: String { rawValue }

    var backend: TestBackend {
        switch self {
        case .software: .hostKey
        case .tpm: .tpm
        case .pkcs11: .pkcs11
        }
    }

    var inHardware: Bool { self != .software }
}

/// A store on `backend` with the passcode set, made the default for `body`.
func withPasscodeStore<T>(on backend: TestBackend, _ body: (StoreFixture) throws -> T) throws -> T {
    let fixture = try StoreFixture(backend)
    defer { fixture.remove() }
    try fixture.store.setPasscode(passcode)
    return try KeychainStore.withDefault(fixture.store) { try body(fixture) }
}

/// A P-256 key protected by `.userPresence` (with `.privateKeyUsage` in hardware), generated with `extra` in its
/// parameters and `privateExtra` in its `kSecPrivateKeyAttrs`.
func makeProtectedKey(
    inHardware: Bool,
    permanent: Bool,
    extra: [String: Any] = [:],
    privateExtra: [String: Any] = [:]
) throws -> SecKey {
    var error: Unmanaged<CFError>?
    let flags: SecAccessControlCreateFlags = inHardware ? [.privateKeyUsage, .userPresence] : .userPresence
    let control = try #require(
        SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, flags, &error)
    )
    var privateAttributes: [String: Any] = [
        kSecAttrIsPermanent as String: permanent, kSecAttrAccessControl as String: control,
        kSecAttrApplicationTag as String: Data("la.protected".utf8),
    ]
    privateAttributes.merge(privateExtra) { _, new in new }
    var attributes: [String: Any] = [
        kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
        kSecPrivateKeyAttrs as String: privateAttributes,
    ]
    if inHardware { attributes[kSecAttrTokenID as String] = kSecAttrTokenIDSecureEnclave }
    attributes.merge(extra) { _, new in new }
    let key = SecKeyCreateRandomKey(attributes as CFDictionary, &error)
    if let error { Issue.record("key generation failed: \(error.takeRetainedValue())") }
    return try #require(key)
}

/// A context evaluated (`.deviceOwnerAuthentication`) with the right passcode, reuse duration `reuse`.
func evaluatedContext(_ askpass: AskpassScripts, reuse: TimeInterval = 0) -> LAContext {
    let context = LAContext()
    context.touchIDAuthenticationAllowableReuseDuration = reuse
    #expect(askpass.using(askpass.right) { evaluate(context).0 })
    return context
}

extension LocalAuthenticationSuites {
    @Suite("SecAccessControl on keys that are not stored, and the generation's context")
    struct KeyAccessControlTests {
        let askpass: AskpassScripts

        init() throws { askpass = try AskpassScripts() }

        @Test(
            "a .userPresence key that is not stored refuses to sign, decrypt and derive without an authentication",
            arguments: TransientKeyPlace.allCases
        )
        func transientKeyRefusesWithoutAuthentication(_ place: TransientKeyPlace) throws {
            try withPasscodeStore(on: place.backend) { _ in
                // A context that may not ask: the operation fails instead of asking (Apple's UIFail for a key).
                let noInteraction = LAContext()
                noInteraction.interactionNotAllowed = true
                let key = try makeProtectedKey(
                    inHardware: place.inHardware,
                    permanent: false,
                    extra: [kSecUseAuthenticationContext as String: noInteraction]
                )
                try askpass.using(askpass.right) {
                    let (signature, signCode) = KeyUse.sign(key)
                    #expect(signature == nil)
                    #expect(signCode == Int(errSecInteractionNotAllowed))
                    let (plaintext, decryptCode) = try KeyUse.decrypt(key)
                    #expect(plaintext == nil)
                    #expect(decryptCode == Int(errSecInteractionNotAllowed))
                    let (secret, deriveCode) = try KeyUse.derive(key)
                    #expect(secret == nil)
                    #expect(deriveCode == Int(errSecInteractionNotAllowed))
                }
                #expect(!FileManager.default.fileExists(atPath: askpass.promptFile), "no prompt was shown")
            }
        }

        @Test(
            "a .userPresence key that is not stored signs with an evaluated context until the context is invalidated",
            arguments: TransientKeyPlace.allCases
        )
        func transientKeySignsWithFreshContext(_ place: TransientKeyPlace) throws {
            try withPasscodeStore(on: place.backend) { _ in
                let context = evaluatedContext(askpass)
                let key = try makeProtectedKey(
                    inHardware: place.inHardware,
                    permanent: false,
                    privateExtra: [kSecUseAuthenticationContext as String: context]
                )
                askpass.using(nil) {
                    let (signature, code) = KeyUse.sign(key)
                    #expect(code == nil)
                    #expect(signature.map { KeyUse.verifies(key, $0) } == true)
                    // As on Apple, the evaluated context opens the next call too (reuse duration 0), until invalidated.
                    #expect(KeyUse.sign(key).0 != nil)
                    // Invalidated: the call's own authentication through it is invalidContext, errSecAuthFailed.
                    context.invalidate()
                    let (late, lateCode) = KeyUse.sign(key)
                    #expect(late == nil)
                    #expect(lateCode == Int(errSecAuthFailed))
                }
            }
        }

        @Test(
            "a key that is not stored keeps its .userPresence when SecItemAdd stores it",
            arguments: [TransientKeyPlace.software, .tpm]
        )
        func storedTransientKeyKeepsAccessControl(_ place: TransientKeyPlace) throws {
            try withPasscodeStore(on: place.backend) { _ in
                let key = try makeProtectedKey(inHardware: place.inHardware, permanent: false)
                let tag = Data("la.added".utf8)
                let add: [String: Any] = [
                    kSecClass as String: kSecClassKey, kSecValueRef as String: key,
                    kSecAttrApplicationTag as String: tag,
                    kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlocked,
                ]
                #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
                let query: [String: Any] = [
                    kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                    kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnRef as String: true,
                    kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail,
                ]
                var result: CFTypeRef?
                #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
                let found = try #require(result as! SecKey?)
                let (signature, code) = askpass.using(askpass.right) { KeyUse.sign(found) }
                #expect(signature == nil)
                #expect(code == Int(errSecInteractionNotAllowed))
            }
        }

        @Test(
            "a key that is not stored with flags Keyseal cannot enforce is errSecUnimplemented",
            arguments: [TransientKeyPlace.software, .tpm]
        )
        func transientKeyWithUnenforceableFlagsIsRefused(_ place: TransientKeyPlace) throws {
            try withPasscodeStore(on: place.backend) { _ in
                let control = SecAccessControlCreateWithFlags(
                    nil,
                    kSecAttrAccessibleWhenUnlocked,
                    [.privateKeyUsage, .applicationPassword],
                    nil
                )
                var attributes: [String: Any] = [
                    kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                    kSecPrivateKeyAttrs as String: [
                        kSecAttrIsPermanent as String: false, kSecAttrAccessControl as String: control as Any,
                    ] as [String: Any],
                ]
                if place.inHardware { attributes[kSecAttrTokenID as String] = kSecAttrTokenIDSecureEnclave }
                var error: Unmanaged<CFError>?
                #expect(SecKeyCreateRandomKey(attributes as CFDictionary, &error) == nil)
                #expect(error.map { CFErrorGetCode($0.takeRetainedValue()) } == Int(errSecUnimplemented))
            }
        }

        @Test("a software key that is not stored gives its material only after an authentication")
        func transientSoftwareKeyExportNeedsAuthentication() throws {
            try withPasscodeStore(on: .hostKey) { _ in
                let noInteraction = LAContext()
                noInteraction.interactionNotAllowed = true
                let refused = try makeProtectedKey(
                    inHardware: false,
                    permanent: false,
                    extra: [kSecUseAuthenticationContext as String: noInteraction]
                )
                var error: Unmanaged<CFError>?
                #expect(askpass.using(askpass.right) { SecKeyCopyExternalRepresentation(refused, &error) } == nil)
                #expect(error.map { CFErrorGetCode($0.takeRetainedValue()) } == Int(errSecInteractionNotAllowed))
                let context = evaluatedContext(askpass)
                let key = try makeProtectedKey(
                    inHardware: false,
                    permanent: false,
                    extra: [kSecUseAuthenticationContext as String: context]
                )
                #expect(askpass.using(nil) { SecKeyCopyExternalRepresentation(key, nil) }?.count == 97)
            }
        }

        @Test("the generation's kSecUseAuthenticationContext (in kSecPrivateKeyAttrs) opens the stored key's first use")
        func generationContextGoesWithTheKey() throws {
            try withPasscodeStore { _ in
                let context = evaluatedContext(askpass)
                let key = try makeProtectedKey(
                    inHardware: false,
                    permanent: true,
                    privateExtra: [kSecUseAuthenticationContext as String: context]
                )
                let (signature, code) = askpass.using(nil) { KeyUse.sign(key) }
                #expect(code == nil)
                #expect(signature.map { KeyUse.verifies(key, $0) } == true)
            }
        }

        @Test("the generation's kSecUseOperationPrompt is the prompt of the key's later authentication")
        func generationPromptGoesWithTheKey() throws {
            try withPasscodeStore { _ in
                let key = try makeProtectedKey(
                    inHardware: false,
                    permanent: true,
                    extra: [kSecUseOperationPrompt as String: "sign the release"]
                )
                let (signature, code) = askpass.using(askpass.right) { KeyUse.sign(key) }
                #expect(code == nil)
                #expect(signature != nil)
                #expect((try? String(contentsOfFile: askpass.promptFile, encoding: .utf8)) == "sign the release")
            }
        }
    }
}

/// An access control's flags and what a read of its item answers without an authentication
/// (`kSecUseAuthenticationUIFail`) and with a context evaluated with the passcode.
struct FlagsCase: Sendable, CustomTestStringConvertible {
    let name: String
    let flags: SecAccessControlCreateFlags
    let withoutAuthentication: OSStatus
    let withPasscode: OSStatus

    var testDescription: String { name }

    static let all: [FlagsCase] = [
        FlagsCase(
            name: ".userPresence",
            flags: .userPresence,
            withoutAuthentication: errSecInteractionNotAllowed,
            withPasscode: errSecSuccess
        ),
        FlagsCase(
            name: ".devicePasscode",
            flags: .devicePasscode,
            withoutAuthentication: errSecInteractionNotAllowed,
            withPasscode: errSecSuccess
        ),
        FlagsCase(
            name: ".userPresence .and .devicePasscode",
            flags: [.userPresence, .and, .devicePasscode],
            withoutAuthentication: errSecInteractionNotAllowed,
            withPasscode: errSecSuccess
        ),
        FlagsCase(
            name: ".biometryAny .and .devicePasscode",
            flags: [.biometryAny, .and, .devicePasscode],
            withoutAuthentication: errSecAuthFailed,
            withPasscode: errSecAuthFailed
        ),
        FlagsCase(
            name: ".biometryCurrentSet",
            flags: .biometryCurrentSet,
            withoutAuthentication: errSecAuthFailed,
            withPasscode: errSecAuthFailed
        ),
        FlagsCase(
            name: ".biometryCurrentSet .or .userPresence",
            flags: [.biometryCurrentSet, .or, .userPresence],
            withoutAuthentication: errSecInteractionNotAllowed,
            withPasscode: errSecSuccess
        ),
    ]
}

extension LocalAuthenticationSuites.UserPresenceItemTests {
    @Test("each access control's flags answer a read as Apple does without fprintd", arguments: FlagsCase.all)
    func flagsAnswer(_ flagsCase: FlagsCase) throws {
        try withPasscodeStore { _ in
            setenv("KEYSEAL_FPRINTD_VERIFY", "/nonexistent/fprintd-verify", 1)
            defer { unsetenv("KEYSEAL_FPRINTD_VERIFY") }
            try addProtectedItem(flagsCase.flags)
            let refused = askpass.using(askpass.right) {
                readProtected([kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail]).0
            }
            #expect(refused == flagsCase.withoutAuthentication)
            let context = evaluatedContext(askpass)
            let status = askpass.using(nil) {
                readProtected([
                    kSecUseAuthenticationContext as String: context,
                    kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail,
                ]).0
            }
            #expect(status == flagsCase.withPasscode)
        }
    }

    @Test("kSecUseNoAuthenticationUI answers errSecInteractionNotAllowed without asking")
    func noAuthenticationUIRefuses() throws {
        try withPasscodeStore { _ in
            try addProtectedItem()
            let (status, data) = askpass.using(askpass.right) {
                readProtected([kSecUseNoAuthenticationUI as String: true])
            }
            #expect(status == errSecInteractionNotAllowed)
            #expect(data == nil)
            #expect(!FileManager.default.fileExists(atPath: askpass.promptFile), "no prompt was shown")
        }
    }

    @Test("a context with interactionNotAllowed makes a SecItem call fail with errSecInteractionNotAllowed")
    func contextInteractionNotAllowedRefuses() throws {
        try withPasscodeStore { _ in
            try addProtectedItem()
            let context = LAContext()
            context.interactionNotAllowed = true
            let (status, data) = askpass.using(askpass.right) {
                readProtected([kSecUseAuthenticationContext as String: context])
            }
            #expect(status == errSecInteractionNotAllowed)
            #expect(data == nil)
            #expect(!FileManager.default.fileExists(atPath: askpass.promptFile), "no prompt was shown")
        }
    }
}
