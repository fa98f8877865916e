import Foundation
import KeysealTestSupport
import Testing

/// git's libsecret credential helper, built from the contrib source Debian's git package ships, against the bridge
/// on a private bus: the client that lost passwords to a lock the bridge showed but keyseald did not have, and that
/// could not unlock a store the bridge started locked.
@Suite("git's libsecret credential helper", .serialized)
struct GitCredentialHelperTests {
    static let source = "/usr/share/doc/git/contrib/credential/libsecret/git-credential-libsecret.c"

    /// The helper, compiled once per test process into a directory every fixture user can read.
    static let helper: Result<String, FixtureError> = {
        do {
            guard FileManager.default.fileExists(atPath: source) else {
                throw FixtureError("\(source) is missing (Debian package git); run Scripts/bootstrap.sh")
            }
            let pkgConfig = try requireTool("pkg-config", package: "pkg-config")
            let flags = try runProcess(pkgConfig, ["--cflags", "--libs", "libsecret-1", "glib-2.0"])
            guard flags.status == 0 else {
                throw FixtureError("libsecret-1's build flags are missing (Debian package libsecret-1-dev)")
            }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keyseal-git-credential-\(getpid())"
            )
            try FileManager.default.createDirectory(
                at: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o755]
            )
            let output = directory.appendingPathComponent("git-credential-libsecret").path
            let compile = try runProcess(
                try requireTool("cc", package: "gcc"),
                ["-O2", "-o", output, source] + flags.stdoutText.split(whereSeparator: \.isWhitespace).map(String.init)
            )
            guard compile.status == 0 else { throw FixtureError("building git's helper failed: \(compile.stderrText)") }
            return .success(output)
        } catch let error as FixtureError {
            return .failure(error)
        } catch {
            return .failure(FixtureError("\(error)"))
        }
    }()

    static func credential(
        _ fixture: SecretServiceFixture,
        _ operation: String,
        _ fields: [String: String]
    ) throws -> ProcessResult {
        let input = fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)\n" }.joined() + "\n"
        return try fixture.run(try helper.get(), [operation], input: Data(input.utf8))
    }

    static let site = ["protocol": "https", "host": "git.example.com"]

    @Test("store, get and erase round-trip a credential through the bridge")
    func roundTrip() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        let stored = try Self.credential(
            fixture,
            "store",
            Self.site.merging(["username": "alice", "password": "hunter2-token"]) { $1 }
        )
        #expect(stored.status == 0, "\(stored.stderrText)\n\(fixture.bridgeLog())")
        let got = try Self.credential(fixture, "get", Self.site)
        #expect(got.stdoutText.contains("username=alice\n"), "\(got.stdoutText)\(got.stderrText)")
        #expect(got.stdoutText.contains("password=hunter2-token\n"), "\(got.stderrText)")
        #expect(try Self.credential(fixture, "erase", Self.site.merging(["username": "alice"]) { $1 }).status == 0)
        #expect(!(try Self.credential(fixture, "get", Self.site).stdoutText.contains("password=")))
    }

    @Test("no passcode: after a Lock the helper still gets the password, not a username alone")
    func lockWithoutPasscode() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        let fields = Self.site.merging(["username": "alice", "password": "still-here"]) { $1 }
        #expect(try Self.credential(fixture, "store", fields).status == 0)
        _ = try fixture.secretTool(["lock", "--collection=login"])
        let got = try Self.credential(fixture, "get", Self.site)
        #expect(got.stdoutText.contains("username=alice\n"), "\(got.stdoutText)\(got.stderrText)")
        #expect(got.stdoutText.contains("password=still-here\n"), "\(got.stderrText)\n\(fixture.bridgeLog())")
    }

    @Test("bridge started while the store is locked: the helper's get prompts through askpass and reads the password")
    func lockedStartPrompts() throws {
        let fixture = try SecretServiceTests.lockedFixture { ["--askpass", $0.askpassProgram.path] }
        defer { fixture.remove() }
        // Stored while unlocked, then locked again and the bridge restarted: it has never seen the item unlocked.
        #expect(
            try SecretServiceTests.keyseal(fixture, ["unlock", "--passcode-stdin"], input: "pass-1234\n").status == 0
        )
        let fields = Self.site.merging(["username": "alice", "password": "behind-the-lock"]) { $1 }
        #expect(try Self.credential(fixture, "store", fields).status == 0)
        #expect(try SecretServiceTests.keyseal(fixture, ["lock"]).status == 0)
        try SecretServiceTests.restartBridge(fixture, ["--askpass", fixture.askpassProgram.path])
        let got = try Self.credential(fixture, "get", Self.site)
        #expect(got.stdoutText.contains("password=behind-the-lock\n"), "\(got.stderrText)\n\(fixture.bridgeLog())")
        #expect(try SecretServiceTests.keyseal(fixture, ["status"]).stdoutText.contains("state:            unlocked"))
    }
}
