import KeysealTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Whether this process is root, as the tests that act as another user (`setpriv`) or edit the daemon's files need.
/// Outside CI a test run without root returns early; in CI that is a failure, so no such test skips silently there.
func runningAsRoot(
    _ why: Comment = "the other-user tests need root to switch users",
    sourceLocation: SourceLocation = #_sourceLocation
) -> Bool {
    guard getuid() != 0 else { return true }
    #expect(!runningInCI, why, sourceLocation: sourceLocation)
    return false
}
