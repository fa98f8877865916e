import Foundation
import Keyseal
import KeysealCore
import KeysealSecurity
import KeysealTestSupport
import Testing

/// A context that hands out a fixed token with the reuse its caller chooses, as a client holding a token's bytes
/// could send it; it never authenticates by itself.
final class FixedTokenContext: SecAuthenticationContext, @unchecked Sendable {
    let token: SecretBytes
    let reuseSeconds: Int

    init(_ token: SecretBytes, reuseSeconds: Int) {
        self.token = token
        self.reuseSeconds = reuseSeconds
    }

    var authenticationToken: (token: SecretBytes?, reuseSeconds: Int) { (token, reuseSeconds) }
    var interactionNotAllowed: Bool { true }
    var authenticationPrompt: String? { nil }
    func authenticateForUse(prompt: String) throws(KeychainError) {
        throw KeychainError(KeychainStatus.interactionNotAllowed, "no interaction")
    }
}

extension LocalAuthenticationSuites {
    @Suite("A single-request token is spent for good")
    struct SpentTokenTests {
        @Test("a token spent by one request opens nothing more, whatever reuse a later request claims")
        func spentTokenStaysSpent() throws {
            try withPasscodeStore { fixture in
                try addProtectedItem()
                let token = try fixture.store.authenticate(passcode: SecretBytes(copying: Array(passcode.utf8)))
                func read(reuse: Int) -> OSStatus {
                    readProtected([
                        kSecUseAuthenticationContext as String: FixedTokenContext(token, reuseSeconds: reuse),
                        kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail,
                    ]).0
                }
                #expect(read(reuse: 0) == errSecSuccess)
                #expect(read(reuse: 0) == errSecInteractionNotAllowed)
                #expect(read(reuse: 300) == errSecInteractionNotAllowed)
            }
        }
    }
}
