import Foundation
import KeysealTestSupport
import Testing

/// The test fixtures' process runner: every hardware and client test starts its tools through it.
@Suite("Test fixtures: running a tool")
struct RunProcessTests {
    @Test("a tool's output, error output and exit status come back whole, with its input fed")
    func outputAndStatus() throws {
        let input = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0) })
        let result = try runProcess("/bin/sh", ["-c", "cat; echo oops >&2; exit 3"], input: input)
        #expect(result.stdout == input)
        #expect(result.stderrText == "oops\n")
        #expect(result.status == 3)
    }

    @Test("a tool that outlives its time limit is killed, and the error names it")
    func hungToolIsKilled() throws {
        let started = ContinuousClock.now
        let error = #expect(throws: FixtureError.self) {
            try runProcess("/bin/sleep", ["30"], timeout: .milliseconds(300))
        }
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(error?.description.contains("sleep 30 did not finish") == true)
    }

    @Test("a tool that leaves a background child holding its output still returns when it exits")
    func backgroundChildDoesNotHoldTheCaller() throws {
        let started = ContinuousClock.now
        let result = try runProcess("/bin/sh", ["-c", "sleep 30 & echo started"])
        #expect(result.stdoutText == "started\n")
        #expect(result.status == 0)
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test("a tool that exits at once is not a timeout because a background child holds its output past the limit")
    func exitBeforeTheLimitIsNoTimeout() throws {
        let result = try runProcess("/bin/sh", ["-c", "sleep 30 & echo started"], timeout: .milliseconds(500))
        #expect(result.stdoutText == "started\n")
        #expect(result.status == 0)
    }

    @Test("a tool that reads none of a large input ends normally; the test process is not killed by SIGPIPE")
    func unreadInput() throws {
        let result = try runProcess("/bin/true", [], input: Data(count: 1 << 20))
        #expect(result.status == 0)
    }

    @Test("a timeout kills the tool's descendants too")
    func timeoutKillsDescendants() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let marker = directory.appending("grandchild").path
        #expect(throws: FixtureError.self) {
            try runProcess("/bin/sh", ["-c", "(sleep 1; touch \(marker)) & sleep 30"], timeout: .milliseconds(300))
        }
        usleep(1_500_000)
        #expect(!FileManager.default.fileExists(atPath: marker))
    }

    @Test("a tool ended by a signal reports the signal's number, as Foundation's terminationStatus does")
    func signalStatus() throws {
        let result = try runProcess("/bin/sh", ["-c", "kill -TERM $$"])
        #expect(result.status == SIGTERM)
    }
}
