import Foundation
import Keyseal
import KeysealCore
import KeysealSecurity
import KeysealTestSupport
import LocalAuthentication
import Testing

extension LocalAuthenticationSuites {
    /// User presence through a real keyseald: the token is issued by the daemon and bound to the client's uid.
    @Suite("User presence through keyseald")
    struct DaemonAuthenticationTests {
        let askpass: AskpassScripts

        init() throws { askpass = try AskpassScripts() }

        @Test("through keyseald, a .userPresence item opens with an evaluated LAContext and refuses UIFail without one")
        func secItemThroughDaemon() throws {
            let daemon = try DaemonFixture()
            defer { daemon.remove() }
            let store = try daemon.client()
            defer { store.close() }
            try store.setPasscode(passcode)
            try KeychainStore.withDefault(store) {
                try addProtectedItem()
                let (refused, _) = askpass.using(askpass.right) {
                    readProtected([kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail])
                }
                #expect(refused == errSecInteractionNotAllowed)
                let context = LAContext()
                #expect(askpass.using(askpass.right) { evaluate(context).0 })
                let (status, data) = askpass.using(nil) {
                    readProtected([kSecUseAuthenticationContext as String: context])
                }
                #expect(status == errSecSuccess)
                #expect(data == Data("protected secret".utf8))
                // A wrong passcode through the daemon counts as a failed attempt of the store.
                #expect(!askpass.using(askpass.wrong) { evaluate(LAContext()).0 })
                #expect(try store.status().failedAttempts == 1)
            }
        }

        @Test("through keyseald on swtpm, a .privateKeyUsage|.userPresence Secure Enclave key signs only when fresh")
        func hardwareKeyThroughDaemon() throws {
            let daemon = try DaemonFixture(.tpm)
            defer { daemon.remove() }
            let store = try daemon.client()
            defer { store.close() }
            try store.setPasscode(passcode)
            try KeychainStore.withDefault(store) {
                _ = try makeProtectedKey(inHardware: true, permanent: true)
                func find(_ extra: [String: Any]) throws -> SecKey {
                    var query: [String: Any] = [
                        kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("la.protected".utf8),
                        kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnRef as String: true,
                        kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail,
                    ]
                    query.merge(extra) { _, new in new }
                    var result: CFTypeRef?
                    #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
                    return try #require(result as! SecKey?)
                }
                let refused = try find([:])
                #expect(
                    (SecKeyCopyAttributes(refused) as? [String: Any])?[kSecAttrTokenID as String] as? String
                        == kSecAttrTokenIDSecureEnclave as String
                )
                let (noSignature, code) = askpass.using(askpass.right) { KeyUse.sign(refused) }
                #expect(noSignature == nil)
                #expect(code == Int(errSecInteractionNotAllowed))

                // Fresh: signs, and again (as on Apple, an evaluated context opens the calls until invalidated).
                let context = evaluatedContext(askpass)
                let key = try find([kSecUseAuthenticationContext as String: context])
                let (signature, signCode) = askpass.using(nil) { KeyUse.sign(key) }
                #expect(signCode == nil)
                #expect(signature.map { KeyUse.verifies(key, $0) } == true)
                let (again, againCode) = askpass.using(nil) { KeyUse.sign(key) }
                #expect(againCode == nil)
                #expect(again.map { KeyUse.verifies(key, $0) } == true)

                // An invalidated context presents no token.
                let invalidated = evaluatedContext(askpass, reuse: 60)
                let keyOfInvalidated = try find([kSecUseAuthenticationContext as String: invalidated])
                invalidated.invalidate()
                let (none, noneCode) = askpass.using(nil) { KeyUse.sign(keyOfInvalidated) }
                #expect(none == nil)
                #expect(noneCode == Int(errSecInteractionNotAllowed))
            }
        }

        @Test("through keyseald, a .userPresence software key that is not stored is refused, not made unprotected")
        func transientProtectedKeyThroughDaemon() throws {
            let daemon = try DaemonFixture()
            defer { daemon.remove() }
            let store = try daemon.client()
            defer { store.close() }
            try store.setPasscode(passcode)
            KeychainStore.withDefault(store) {
                var error: Unmanaged<CFError>?
                let control = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)
                let attributes: [String: Any] = [
                    kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                    kSecPrivateKeyAttrs as String: [
                        kSecAttrIsPermanent as String: false, kSecAttrAccessControl as String: control as Any,
                    ] as [String: Any],
                ]
                #expect(SecKeyCreateRandomKey(attributes as CFDictionary, &error) == nil)
                #expect(error.map { CFErrorGetCode($0.takeRetainedValue()) } == Int(errSecUnimplemented))
            }
        }

        @Test("a revoked token opens nothing more; only the uid it was issued to can revoke it")
        func revokedTokenOpensNothing() throws {
            guard getuid() == 0 else {
                Issue.record("needs root to run the probe as uid 65534")
                return
            }
            let daemon = try DaemonFixture.sharedWithNobody()
            defer { daemon.remove() }
            let administrator = try daemon.client()
            defer { administrator.close() }
            try administrator.setPasscode(passcode)
            #expect(try daemon.probeAsNobody(["add-protected", "-", "p"]).hasPrefix("ok"))
            func token() throws -> String {
                let answer = try daemon.probeAsNobody(["authenticate", passcode])
                #expect(answer.hasPrefix("ok token "))
                return String(answer.dropFirst("ok token ".count))
            }
            // Another uid's revoke changes nothing.
            let kept = try token()
            #expect(try daemon.probe(asUID: 65533, ["token", kept, "revoke"]) == "ok")
            #expect(try daemon.probeAsNobody(["token", kept, "find", "-", "p"]).hasPrefix("ok 1"))
            // Its own uid's does: a copy of the token opens nothing.
            let revoked = try token()
            #expect(try daemon.probeAsNobody(["token", revoked, "revoke"]) == "ok")
            #expect(try daemon.probeAsNobody(["token", revoked, "find", "-", "p"]).hasPrefix("error -25308"))
        }

        @Test("LAContext.invalidate() has keyseald forget the context's token")
        func invalidateRevokesInDaemon() throws {
            let daemon = try DaemonFixture()
            defer { daemon.remove() }
            let store = try daemon.client()
            defer { store.close() }
            try store.setPasscode(passcode)
            KeychainStore.withDefault(store) {
                let context = evaluatedContext(askpass, reuse: 60)
                #expect(!daemon.log_().contains("authentication revoked"))
                context.invalidate()
            }
            #expect(daemon.log_().contains("authentication revoked"))
        }

        @Test("a fixture's processes never inherit the askpass program a test set in the test process")
        func fixturesDoNotInheritAskpass() throws {
            let daemon = try DaemonFixture(start: false)
            defer { daemon.remove() }
            let (inherited, daemonEnvironment) = try askpass.using(askpass.right) {
                (try runProcess("/usr/bin/env", []).stdoutText, daemon.environment)
            }
            #expect(!inherited.contains("KEYSEAL_ASKPASS="))
            #expect(daemonEnvironment["KEYSEAL_ASKPASS"] == nil)
        }

        @Test(
            "a client uid authenticates through keyseald; its wrong passcode is not the store's; another uid's token is refused"
        )
        func clientUIDToken() throws {
            guard getuid() == 0 else {
                Issue.record("needs root to run the probe as uid 65534")
                return
            }
            let daemon = try DaemonFixture.sharedWithNobody()
            defer { daemon.remove() }
            let administrator = try daemon.client()
            defer { administrator.close() }
            try administrator.setPasscode(passcode)
            #expect(try daemon.probeAsNobody(["add-protected", "-", "p"]).hasPrefix("ok"))
            #expect(try daemon.probeAsNobody(["find", "-", "p"]).hasPrefix("error -25308"))

            #expect(try daemon.probeAsNobody(["authenticate", "wrong"]).hasPrefix("error -25293"))
            // Counted for uid 65534 in keyseald (ClientPasscodeTriesTests), never toward the store's delays.
            #expect(try administrator.status().failedAttempts == 0)

            let answer = try daemon.probeAsNobody(["authenticate", passcode])
            #expect(answer.hasPrefix("ok token "))
            let token = String(answer.dropFirst("ok token ".count))
            #expect(try daemon.probeAsNobody(["token", token, "find", "-", "p"]).hasPrefix("ok 1"))
            // Reuse 0: spent by that request.
            #expect(try daemon.probeAsNobody(["token", token, "find", "-", "p"]).hasPrefix("error -25308"))

            // A token issued to uid 0 does not open the item for uid 65534.
            let rootToken = try administrator.authenticate(passcode: SecretBytes(utf8: passcode))
            let rootHex = rootToken.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
            #expect(try daemon.probeAsNobody(["token", rootHex, "find", "-", "p"]).hasPrefix("error -25308"))
        }
    }
}
