import CKeysealSys
import FoundationEssentials
import Glibc

/// Process hardening for the daemon: no core files, not dumpable (no ptrace by the same user), private file
/// modes by default. Key pages are locked and excluded from dumps by `SecretBytes` itself.
public enum Hardening {
    /// Applies every measure; returns the ones that failed, for a warning.
    public static func apply() -> [String] {
        var failed: [String] = []
        if keyseal_set_nondumpable() != 0 { failed.append("PR_SET_DUMPABLE: \(String(cString: strerror(errno)))") }
        if keyseal_disable_core_files() != 0 { failed.append("RLIMIT_CORE: \(String(cString: strerror(errno)))") }
        umask(0o077)
        return failed
    }
}
