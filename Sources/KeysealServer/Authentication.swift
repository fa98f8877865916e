import FoundationEssentials
import Keyseal
import KeysealClient
import KeysealCore
import Logging

// User-presence authentication through keyseald (docs/WIRE-PROTOCOL.md, `authenticate` and `authenticated`): a
// client's passcode check issues a token bound to its uid; a request carrying the token is checked against the uid
// the kernel reports for the connection, never against anything the client says.

extension ConnectionHandler {
    /// The request to answer and its caller: every caller carries its peer's uid; an `authenticated` request is
    /// unwrapped, its authentication given to the caller.
    static func authenticating(
        _ request: WireRequest,
        caller: Caller,
        peer: PeerCredentials
    ) -> (Caller, WireRequest) {
        var caller = caller
        caller.uid = peer.uid
        guard case .authenticated(let authentication, let inner) = request else { return (caller, request) }
        caller.authentication = authentication
        return (caller, inner)
    }
}

extension KeychainService {
    /// Checks the passcode for `caller` and returns a token bound to its uid: an administrator's wrong passcode counts
    /// toward the store's delays as an unlock attempt does, a client's only toward its uid's own tries
    /// (ClientPasscodeTries.swift).
    func authenticate(passcode: SecretBytes, caller: Caller) throws -> SecretBytes {
        guard passcode.isValidUTF8 else { throw KeychainError(KeychainStatus.param, "the passcode is not valid UTF-8") }
        do {
            let token = try store.authenticate(passcode: passcode, caller: caller)
            logger.info("authenticated", metadata: ["peer.uid": "\(caller.uid.map(String.init) ?? "-")"])
            return token
        } catch {
            logger.notice(
                "authentication failed",
                metadata: ["peer.uid": "\(caller.uid.map(String.init) ?? "-")", "error": "\(error)"]
            )
            throw error
        }
    }
}
