import FoundationEssentials
import KeysealClient
import KeysealCore

extension KeychainStore {
    /// Checks the store's passcode and returns an authentication token for items and keys whose access control asks
    /// for user presence or the device passcode (pass it in ``ItemAuthentication/current`` around the calls that use
    /// them). The check counts as an unlock attempt: refused during the store's delays (errSecAuthFailed with the
    /// seconds to wait), a wrong passcode counts toward them. It does not unlock the store. No passcode set:
    /// errSecParam. Through keyseald any client may ask; the token is bound to its uid.
    public func authenticate(passcode: SecretBytes) throws -> SecretBytes {
        try authenticate(passcode: passcode, caller: .owner)
    }

    /// Forgets `token`, so that no copy of it opens anything more (``LAContext/invalidate()`` calls it). Through
    /// keyseald only a token issued to the caller's uid is forgotten; an unknown token changes nothing.
    public func revokeAuthentication(_ token: SecretBytes) throws {
        _ = try revokeAuthentication(token, caller: .owner)
    }

    /// Whether the token was forgotten (through keyseald: false, which does not say).
    package func revokeAuthentication(_ token: SecretBytes, caller: Caller) throws -> Bool {
        try route({ $0.revokeAuthentication(token, caller: caller) }) { connection throws(KeychainError) in
            let response = try Self.request(connection, .revokeAuthentication(token: token))
            guard case .ok = response else { throw Self.unexpected(response) }
            return false
        }
    }

    package func authenticate(passcode: SecretBytes, caller: Caller) throws -> SecretBytes {
        try route({ try $0.authenticate(passcode: passcode, caller: caller) }) { connection throws(KeychainError) in
            let response = try Self.request(connection, .authenticate(passcode: passcode))
            guard case .secret(let token) = response else { throw Self.unexpected(response) }
            return token
        }
    }
}
