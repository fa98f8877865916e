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

    package func authenticate(passcode: SecretBytes, caller: Caller) throws -> SecretBytes {
        try route({ try $0.authenticate(passcode: passcode, caller: caller) }) { connection throws(KeychainError) in
            let response = try Self.request(connection, .authenticate(passcode: passcode))
            guard case .secret(let token) = response else { throw Self.unexpected(response) }
            return token
        }
    }
}
