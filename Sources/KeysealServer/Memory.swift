import CKeysealSys
import KeysealClient

/// The daemon's heap after large, rare operations.
public enum Memory {
    /// Gives the pages that the store's open, a passcode change (every item re-encrypted) or an unlock freed back to
    /// the system, so that the daemon's resident memory returns to its steady state instead of keeping the peak.
    public static func returnFreedPages() { _ = keyseal_malloc_trim() }

    /// Large frames are served from resident heap pages: blocks up to twice the frame limit stay on the heap (not a
    /// fresh mapping each, zero-filled a page fault at a time) and up to 8 MiB of free memory stays at its top.
    /// Measured with a 1 MiB value: 14 → 2 ms a lookup through keyseald (docs/DECISIONS.md, "Where a daemon lookup's
    /// time goes"). No arena is created after this call (threads started later share those of start-up): with an arena
    /// per thread, the thread-pool thread that ran a passcode set kept 4.4 MiB at its arena's top, which `malloc_trim`
    /// does not return outside the main arena. keyseald calls this once the store is open, so that the open runs on
    /// glibc's default thresholds (its large temporary blocks mapped and unmapped), then `returnFreedPages`.
    public static func tuneHeap() -> Bool {
        keyseal_tune_heap(Int32(2 * Wire.maxFrame), 8 << 20, 1) != 0
    }
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
