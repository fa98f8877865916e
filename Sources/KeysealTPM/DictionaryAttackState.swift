/// The TPM's dictionary-attack state, read before and after every passcode try.
///
/// Keyseal never spends the TPM's last try: one try is always kept in reserve, so that a passcode object can
/// never put the TPM into lockout (which would also block every other DA-protected object on the machine).
/// The tries it reports are the tries it will actually spend: `TPM tries left − 1`.
struct DictionaryAttackState: Equatable {
    var lockoutAuthSet: Bool
    var inLockout: Bool
    /// TPM2_PT_LOCKOUT_COUNTER: failures counted and not yet healed.
    var failures: Int
    /// TPM2_PT_MAX_AUTH_FAIL: failures that put the TPM into lockout.
    var maxFailures: Int
    /// TPM2_PT_LOCKOUT_INTERVAL: seconds after which one counted failure is forgotten. 0 disables DA protection.
    var interval: Int
    /// TPM2_PT_LOCKOUT_RECOVERY: seconds the lockout hierarchy is blocked after a wrong lockout authorization.
    var recovery: Int

    /// Whether the TPM counts failures at all (a zero recovery interval disables dictionary-attack protection).
    var counting: Bool { interval > 0 }

    /// Tries the TPM still accepts before lockout.
    var tpmTriesLeft: Int { inLockout ? 0 : max(0, maxFailures - failures) }

    /// Tries Keyseal will spend: one fewer than the TPM's, never negative.
    var usableTriesLeft: Int { max(0, tpmTriesLeft - 1) }

    /// Seconds until Keyseal will try again, when it refuses now; nil when a try may be spent. An upper bound: the
    /// TPM forgets one failure per interval, and how much of the current interval has passed is not visible.
    var secondsUntilNextTry: Int? {
        guard counting, usableTriesLeft == 0 else { return nil }
        guard maxFailures >= 2 else { return nil }  // never possible: see `refusal`
        let failuresToForget = failures - (maxFailures - 2)
        return max(1, failuresToForget) * interval
    }

    /// Whether a passcode object can ever be tried (the TPM must allow at least two tries, one kept in reserve).
    var triesPossible: Bool { !counting || maxFailures >= 2 }

    /// Whether the TPM itself refuses DA-protected authorizations now (its counter reached the limit).
    var tpmLockedOut: Bool { counting && tpmTriesLeft == 0 }

    /// Whether the only try left is the TPM's last one, which Keyseal keeps in reserve: the TPM is not in lockout,
    /// yet Keyseal makes no try.
    var atReserve: Bool { counting && triesPossible && tpmTriesLeft == 1 }

    /// The TPM's limits in words, for status and refusals: "the TPM allows 3 passcode tries and forgets one
    /// failure every 1000 s".
    var limitsDescription: String {
        "the TPM allows \(maxFailures) passcode \(maxFailures == 1 ? "try" : "tries") and forgets one failure every "
            + "\(interval) s"
    }
}
