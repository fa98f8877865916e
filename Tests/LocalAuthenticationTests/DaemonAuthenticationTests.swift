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

        @Test("a client uid authenticates through keyseald; a wrong passcode counts; another uid's token is refused")
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
            #expect(try administrator.status().failedAttempts == 1)

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
