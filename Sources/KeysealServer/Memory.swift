import CKeysealSys
import KeysealClient

/// The daemon's heap after large, rare operations.
enum Memory {
    /// Gives the pages that a passcode change (every item re-encrypted) or an unlock freed back to the system, so
    /// that the daemon's resident memory returns to its steady state instead of keeping the peak.
    static func returnFreedPages() { _ = keyseal_malloc_trim() }
}

extension WireRequest {
    /// Unlock and passcode set, change and remove: Argon2id's working memory and, for a change, every item of the
    /// passcode classes re-encrypted.
    var isPasscodeChange: Bool {
        switch self {
        case .unlock, .setPasscode, .changePasscode, .removePasscode: return true
        default: return false
        }
    }
}
