import Foundation
import Keyseal
import KeysealCore
import KeysealSecurity
import KeysealTestSupport
import LocalAuthentication
import Testing

/// The store's passcode in these tests.
let passcode = "correct horse"

/// Askpass programs: shell scripts in a temporary directory.
final class AskpassScripts: @unchecked Sendable {
    let directory: TemporaryDirectory
    /// Prints the right passcode, and records its argument (the prompt) in `prompt.txt`.
    let right: String
    /// Prints a wrong passcode.
    let wrong: String
    /// Exits 1 (the user dismissed it).
    let cancel: String
    var promptFile: String { directory.appending("prompt.txt").path }

    init() throws {
        directory = try TemporaryDirectory(prefix: "keyseal-askpass")
        let prompt = directory.appending("prompt.txt").path
        right = try Self.script(directory, "right", "printf '%s' \"$1\" > '\(prompt)'\necho '\(passcode)'")
        wrong = try Self.script(directory, "wrong", "echo 'not the passcode'")
        cancel = try Self.script(directory, "cancel", "exit 1")
    }

    private static func script(_ directory: TemporaryDirectory, _ name: String, _ body: String) throws -> String {
        let path = directory.appending(name).path
        try Data("#!/bin/sh\n\(body)\n".utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o700)
        return path
    }

    /// Runs `body` with `program` (nil: none) as the askpass program.
    func using<T>(_ program: String?, _ body: () throws -> T) rethrows -> T {
        unsetenv("SSH_ASKPASS")
        if let program { setenv("KEYSEAL_ASKPASS", program, 1) } else { unsetenv("KEYSEAL_ASKPASS") }
        defer { unsetenv("KEYSEAL_ASKPASS") }
        return try body()
    }
}

/// Evaluates `policy` through the callback form and waits for the answer.
func evaluate(_ context: LAContext, _ policy: LAPolicy = .deviceOwnerAuthentication) -> (Bool, NSError?) {
    let semaphore = DispatchSemaphore(value: 0)
    let answer = Answer()
    context.evaluatePolicy(policy, localizedReason: "open the test item") { success, error in
        answer.set(success, error.map { $0 as NSError })
        semaphore.signal()
    }
    semaphore.wait()
    return answer.get()
}

final class Answer: @unchecked Sendable {
    private let lock = NSLock()
    private var value: (Bool, NSError?) = (false, nil)
    func set(_ success: Bool, _ error: NSError?) { lock.withLock { value = (success, error) } }
    func get() -> (Bool, NSError?) { lock.withLock { value } }
}

/// A host-key store with the passcode set, made the default for `body`.
func withPasscodeStore<T>(_ body: (StoreFixture) throws -> T) throws -> T {
    let fixture = try StoreFixture(.hostKey)
    defer { fixture.remove() }
    try fixture.store.setPasscode(passcode)
    return try KeychainStore.withDefault(fixture.store) { try body(fixture) }
}

/// A generic password protected by `.userPresence` (or `flags`).
func addProtectedItem(_ flags: SecAccessControlCreateFlags = .userPresence) throws {
    var error: Unmanaged<CFError>?
    let control = try #require(
        SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, flags, &error)
    )
    let attributes: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "la",
        kSecAttrAccount as String: "protected",
        kSecValueData as String: Data("protected secret".utf8), kSecAttrAccessControl as String: control,
    ]
    #expect(SecItemAdd(attributes as CFDictionary, nil) == errSecSuccess)
}

/// Reads the protected item's data with `extra` query keys.
func readProtected(_ extra: [String: Any] = [:], account: String? = "protected") -> (OSStatus, Data?) {
    var query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "la", kSecReturnData as String: true,
    ]
    if let account { query[kSecAttrAccount as String] = account }
    query.merge(extra) { _, new in new }
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    return (status, result as? Data)
}

/// The suites set process-wide environment variables (the askpass program): one at a time.
@Suite("LocalAuthentication", .serialized)
enum LocalAuthenticationSuites {}

extension LocalAuthenticationSuites {
    @Suite("LAContext over the store's passcode")
    struct LAContextTests {
        let askpass: AskpassScripts

        init() throws { askpass = try AskpassScripts() }

        @Test("canEvaluatePolicy(.deviceOwnerAuthentication) is true with a passcode and an askpass program")
        func canEvaluateWithPasscode() throws {
            try withPasscodeStore { _ in
                askpass.using(askpass.right) {
                    var error: NSError?
                    #expect(LAContext().canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
                    #expect(error == nil)
                }
            }
        }

        @Test("canEvaluatePolicy answers passcodeNotSet on a store without a passcode")
        func canEvaluateWithoutPasscode() throws {
            let fixture = try StoreFixture(.hostKey)
            defer { fixture.remove() }
            KeychainStore.withDefault(fixture.store) {
                askpass.using(askpass.right) {
                    var error: NSError?
                    #expect(!LAContext().canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
                    #expect(error?.domain == LAErrorDomain)
                    #expect(error?.code == LAError.Code.passcodeNotSet.rawValue)
                }
            }
        }

        @Test("canEvaluatePolicy answers notInteractive when no askpass program is configured")
        func canEvaluateWithoutAskpass() throws {
            try withPasscodeStore { _ in
                askpass.using(nil) {
                    var error: NSError?
                    #expect(!LAContext().canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
                    #expect(error?.code == LAError.Code.notInteractive.rawValue)
                }
            }
        }

        @Test("evaluatePolicy succeeds with the right passcode and shows localizedReason as the prompt")
        func evaluateRightPasscode() throws {
            try withPasscodeStore { _ in
                let (success, error) = askpass.using(askpass.right) { evaluate(LAContext()) }
                #expect(success)
                #expect(error == nil)
                #expect((try? String(contentsOfFile: askpass.promptFile, encoding: .utf8)) == "open the test item")
            }
        }

        @Test("a wrong passcode fails with authenticationFailed and counts as a failed unlock attempt")
        func evaluateWrongPasscodeCounts() throws {
            try withPasscodeStore { fixture in
                let before = try fixture.store.status().failedAttempts
                let (success, error) = askpass.using(askpass.wrong) { evaluate(LAContext()) }
                #expect(!success)
                #expect(error?.domain == LAErrorDomain)
                #expect(error?.code == LAError.Code.authenticationFailed.rawValue)
                #expect(try fixture.store.status().failedAttempts == before + 1)
            }
        }

        @Test("an askpass program that exits non-zero is a userCancel, and no attempt is counted")
        func evaluateCancelled() throws {
            try withPasscodeStore { fixture in
                let (success, error) = askpass.using(askpass.cancel) { evaluate(LAContext()) }
                #expect(!success)
                #expect(error?.code == LAError.Code.userCancel.rawValue)
                let failures = try fixture.store.status().failedAttempts
                #expect(failures == 0)
            }
        }

        @Test("the async evaluatePolicy throws an LAError for a wrong passcode")
        func asyncEvaluateWrong() async throws {
            let fixture = try StoreFixture(.hostKey)
            defer { fixture.remove() }
            try fixture.store.setPasscode(passcode)
            unsetenv("SSH_ASKPASS")
            setenv("KEYSEAL_ASKPASS", askpass.wrong, 1)
            defer { unsetenv("KEYSEAL_ASKPASS") }
            let context = LAContext()
            // The store is read when the call starts, on this task: a scoped default is given for that moment.
            let task = KeychainStore.withDefault(fixture.store) {
                Task { try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "async") }
            }
            await #expect(throws: LAError.self) { try await task.value }
            do {
                _ = try await task.value
            } catch LAError.authenticationFailed {
            } catch {
                Issue.record("expected authenticationFailed, got \(error)")
            }
        }

        @Test("evaluateAccessControl asks for the passcode for .userPresence and fprintd for biometry alone")
        func evaluateAccessControlPolicies() throws {
            let fprintd = try FprintdFixture(service: nil)
            defer { fprintd.remove() }
            try withPasscodeStore { _ in
                var error: Unmanaged<CFError>?
                let presence = try #require(
                    SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, &error)
                )
                let biometry = try #require(
                    SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .biometryAny, &error)
                )
                let context = LAContext()
                let semaphore = DispatchSemaphore(value: 0)
                let answer = Answer()
                askpass.using(askpass.wrong) {
                    context.evaluateAccessControl(presence, operation: .useItem, localizedReason: "use") { ok, error in
                        answer.set(ok, error.map { $0 as NSError })
                        semaphore.signal()
                    }
                    semaphore.wait()
                }
                #expect(answer.get().1?.code == LAError.Code.authenticationFailed.rawValue)
                askpass.using(askpass.right) {
                    context.evaluateAccessControl(presence, operation: .useItem, localizedReason: "use") { ok, error in
                        answer.set(ok, error.map { $0 as NSError })
                        semaphore.signal()
                    }
                    semaphore.wait()
                }
                #expect(answer.get().0)
                fprintd.using {
                    context.evaluateAccessControl(biometry, operation: .useItem, localizedReason: "use") { ok, error in
                        answer.set(ok, error.map { $0 as NSError })
                        semaphore.signal()
                    }
                    semaphore.wait()
                }
                #expect(answer.get().1?.code == LAError.Code.biometryNotAvailable.rawValue)
            }
        }

        @Test("an invalidated context fails with invalidContext")
        func invalidatedContext() throws {
            try withPasscodeStore { _ in
                let context = LAContext()
                context.invalidate()
                let (success, error) = askpass.using(askpass.right) { evaluate(context) }
                #expect(!success)
                #expect(error?.code == LAError.Code.invalidContext.rawValue)
            }
        }
    }

}

extension LocalAuthenticationSuites {
    @Suite("SecAccessControl .userPresence enforced with LAContext")
    struct UserPresenceItemTests {
        let askpass: AskpassScripts

        init() throws { askpass = try AskpassScripts() }

        @Test("a .userPresence item opens with a freshly evaluated context")
        func freshContextOpens() throws {
            try withPasscodeStore { _ in
                try addProtectedItem()
                let context = LAContext()
                #expect(askpass.using(askpass.right) { evaluate(context).0 })
                let (status, data) = askpass.using(nil) {
                    readProtected([kSecUseAuthenticationContext as String: context])
                }
                #expect(status == errSecSuccess)
                #expect(data == Data("protected secret".utf8))
            }
        }

        @Test("without a context, kSecUseAuthenticationUIFail answers errSecInteractionNotAllowed")
        func uiFailRefuses() throws {
            try withPasscodeStore { _ in
                try addProtectedItem()
                let (status, data) = askpass.using(askpass.right) {
                    readProtected([kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail])
                }
                #expect(status == errSecInteractionNotAllowed)
                #expect(data == nil)
            }
        }

        @Test("kSecUseAuthenticationUISkip leaves the protected item out of a search and returns the others")
        func uiSkipSkips() throws {
            try withPasscodeStore { _ in
                try addProtectedItem()
                let plain: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "la",
                    kSecAttrAccount as String: "plain",
                    kSecValueData as String: Data("plain".utf8),
                ]
                #expect(SecItemAdd(plain as CFDictionary, nil) == errSecSuccess)
                var result: CFTypeRef?
                let query: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "la",
                    kSecReturnAttributes as String: true,
                    kSecMatchLimit as String: kSecMatchLimitAll,
                    kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip,
                ]
                #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
                let accounts = (result as? [[String: Any]] ?? []).compactMap { $0[kSecAttrAccount] as? String }
                #expect(accounts == ["plain"])
                // The protected one alone: not found.
                let (status, _) = readProtected([kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip])
                #expect(status == errSecItemNotFound)
            }
        }

        @Test("without a context the call asks through the askpass program itself; a wrong answer is errSecAuthFailed")
        func callAuthenticatesItself() throws {
            try withPasscodeStore { fixture in
                try addProtectedItem()
                let (status, data) = askpass.using(askpass.right) { readProtected() }
                #expect(status == errSecSuccess)
                #expect(data == Data("protected secret".utf8))
                let (wrongStatus, wrongData) = askpass.using(askpass.wrong) { readProtected() }
                #expect(wrongStatus == errSecAuthFailed)
                #expect(wrongData == nil)
                #expect(try fixture.store.status().failedAttempts == 1)
            }
        }

        @Test("a call without a context authenticates for itself only: the next call asks again")
        func singleUse() throws {
            try withPasscodeStore { _ in
                try addProtectedItem()
                #expect(askpass.using(askpass.right) { readProtected().0 } == errSecSuccess)
                let fail = [kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail]
                #expect(askpass.using(nil) { readProtected(fail).0 } == errSecInteractionNotAllowed)
            }
        }

        @Test("the access control survives a reopen, and an accessibility-only update does not drop it")
        func accessControlPersists() throws {
            try withPasscodeStore { fixture in
                try addProtectedItem()
                let update: [String: Any] = [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock]
                let query: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "la",
                    kSecAttrAccount as String: "protected",
                ]
                let failing = query.merging([kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail]) { a, _ in
                    a
                }
                #expect(SecItemUpdate(failing as CFDictionary, update as CFDictionary) == errSecInteractionNotAllowed)
                let context = LAContext()
                #expect(askpass.using(askpass.right) { evaluate(context).0 })
                #expect(
                    SecItemUpdate(
                        query.merging([kSecUseAuthenticationContext as String: context]) { a, _ in a } as CFDictionary,
                        update as CFDictionary
                    ) == errSecSuccess
                )
                try fixture.reopen()
                let reopened = fixture.store
                try KeychainStore.withDefault(reopened) {
                    try reopened.unlock(passcode: passcode)
                    let (status, _) = readProtected([kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail])
                    #expect(status == errSecInteractionNotAllowed)
                }
            }
        }

        @Test("biometry alone cannot be met by the passcode: errSecAuthFailed")
        func biometryOnlyItem() throws {
            try withPasscodeStore { _ in
                try addProtectedItem(.biometryAny)
                let context = LAContext()
                #expect(askpass.using(askpass.right) { evaluate(context).0 })
                #expect(
                    askpass.using(nil) { readProtected([kSecUseAuthenticationContext as String: context]).0 }
                        == errSecAuthFailed
                )
            }
        }

        @Test("biometry .or device passcode is met by the passcode")
        func biometryOrPasscode() throws {
            try withPasscodeStore { _ in
                try addProtectedItem([.biometryAny, .or, .devicePasscode])
                let context = LAContext()
                #expect(askpass.using(askpass.right) { evaluate(context).0 })
                #expect(
                    askpass.using(nil) { readProtected([kSecUseAuthenticationContext as String: context]).0 }
                        == errSecSuccess
                )
            }
        }
    }

}

extension LocalAuthenticationSuites {
    @Suite("SecAccessControl .privateKeyUsage|.userPresence on a software key")
    struct UserPresenceKeyTests {
        let askpass: AskpassScripts

        init() throws { askpass = try AskpassScripts() }

        /// A stored P-256 key protected by `.privateKeyUsage | .userPresence`, and its reference found with `extra`.
        static func protectedKey(_ extra: [String: Any]) throws -> SecKey {
            var error: Unmanaged<CFError>?
            let control = try #require(
                SecAccessControlCreateWithFlags(
                    nil,
                    kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                    [.privateKeyUsage, .userPresence],
                    &error
                )
            )
            let tag = Data("la.key".utf8)
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag,
                    kSecAttrAccessControl as String: control,
                ] as [String: Any],
            ]
            _ = try #require(SecKeyCreateRandomKey(attributes as CFDictionary, &error))
            var query: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
                kSecReturnRef as String: true,
            ]
            query.merge(extra) { _, new in new }
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            return try #require(result as! SecKey?)
        }

        static func sign(_ key: SecKey) -> (Data?, Int?) {
            var error: Unmanaged<CFError>?
            let signature = SecKeyCreateSignature(
                key,
                .ecdsaSignatureMessageX962SHA256,
                Data("message".utf8) as CFData,
                &error
            )
            return (signature, error.map { CFErrorGetCode($0.takeRetainedValue()) })
        }

        @Test("the key's material is not exported without a fresh context (kSecUseAuthenticationUIFail)")
        func exportNeedsFreshContext() throws {
            try withPasscodeStore { _ in
                let refused = try Self.protectedKey([
                    kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail
                ])
                var error: Unmanaged<CFError>?
                #expect(askpass.using(askpass.right) { SecKeyCopyExternalRepresentation(refused, &error) } == nil)
                #expect(error.map { CFErrorGetCode($0.takeRetainedValue()) } == Int(errSecInteractionNotAllowed))
                let context = LAContext()
                #expect(askpass.using(askpass.right) { evaluate(context).0 })
                let key = try Self.protectedKey([
                    kSecUseAuthenticationContext as String: context,
                    kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail,
                ])
                #expect(askpass.using(nil) { SecKeyCopyExternalRepresentation(key, nil) } != nil)
            }
        }

        @Test("the key signs with a fresh context and refuses without one (kSecUseAuthenticationUIFail)")
        func signsOnlyWithFreshContext() throws {
            try withPasscodeStore { _ in
                let refused = try Self.protectedKey([kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail])
                let (noSignature, code) = askpass.using(askpass.right) { Self.sign(refused) }
                #expect(noSignature == nil)
                #expect(code == Int(errSecInteractionNotAllowed))

                let context = LAContext()
                #expect(askpass.using(askpass.right) { evaluate(context).0 })
                let key = try Self.protectedKey([
                    kSecUseAuthenticationContext as String: context,
                    kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail,
                ])
                let (signature, _) = askpass.using(nil) { Self.sign(key) }
                #expect(signature != nil)
                // An invalidated context opens nothing: the next signature needs another evaluation.
                context.invalidate()
                let (second, secondCode) = askpass.using(nil) { Self.sign(key) }
                #expect(second == nil)
                #expect(secondCode == Int(errSecInteractionNotAllowed))
            }
        }
    }
}
