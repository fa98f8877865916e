import Foundation
import KeysealCore
import KeysealServer
import KeysealTestSupport
import Testing

@Suite("Access policy")
struct AccessPolicyTests {
    static func users(_ name: String) -> UInt32? { ["alice": 1001, "bob": 1002][name] }
    static func groups(_ name: String) -> UInt32? { ["staff": 50, "ops": 60][name] }

    static func parse(_ text: String) throws -> AccessPolicy {
        try AccessPolicy.parse(text, daemonUID: 999, lookUpUser: users, lookUpGroup: groups)
    }

    @Test("the daemon's uid and root are administrators holding every group")
    func administrators() throws {
        let policy = try Self.parse("")
        for uid: UInt32 in [0, 999] {
            let caller = policy.caller(for: PeerCredentials(pid: 1, uid: uid, gid: 1)) { _ in [] }
            #expect(caller == .owner)
        }
    }

    @Test("a client not in the policy gets only uid.<n>")
    func privateGroup() throws {
        let policy = try Self.parse("user alice: mail\n")
        let caller = policy.caller(for: PeerCredentials(pid: 1, uid: 1002, gid: 1002)) { _ in [] }
        #expect(caller.accessGroups == ["uid.1002"])
        #expect(caller.defaultGroup == "uid.1002")
        #expect(!caller.isAdministrator)
    }

    @Test("user rules come first, then group rules by primary or supplementary group, without repeats")
    func rules() throws {
        let policy = try Self.parse(
            """
            # comment
            group staff: shared  team   # trailing comment
            user alice: mail shared
            group 60: ops
            user 1001: extra
            """
        )
        let caller = policy.caller(for: PeerCredentials(pid: 1, uid: 1001, gid: 1001)) { _ in [50, 60] }
        #expect(caller.accessGroups == ["mail", "shared", "extra", "team", "ops"])
        #expect(caller.defaultGroup == "mail")
        let staffOnly = policy.caller(for: PeerCredentials(pid: 1, uid: 1002, gid: 50)) { _ in [] }
        #expect(staffOnly.accessGroups == ["shared", "team"])
    }

    @Test(
        "bad lines are one-line errors naming the line",
        arguments: [
            "user alice mail", "user nobody-known: g", "group nogroup: g", "role alice: g", "user alice:", "user: g",
        ]
    )
    func badLines(line: String) {
        #expect(throws: KeychainError.self) { try Self.parse("\n" + line) }
        do {
            _ = try Self.parse("\n" + line)
        } catch {
            #expect("\(error)".contains("policy:2"))
        }
    }

    static let app = PeerIdentity(executable: "/usr/bin/mail app", unit: "mail.service")

    @Test("exe and unit rules come before user rules and a `*` group is the client's default")
    func identityRules() throws {
        let policy = try Self.parse(
            """
            user alice: shared
            unit mail.service: spool *com.example.mail
            exe /usr/bin/mail app: com.example.mail.cache
            exe /usr/bin/other: other
            """
        )
        let caller = policy.caller(for: PeerCredentials(pid: 1, uid: 1001, gid: 1001), identity: Self.app) { _ in [] }
        #expect(caller.accessGroups == ["com.example.mail.cache", "spool", "com.example.mail", "shared"])
        #expect(caller.defaultGroup == "com.example.mail")
        let plain = policy.caller(for: PeerCredentials(pid: 1, uid: 1001, gid: 1001)) { _ in [] }
        #expect(plain.accessGroups == ["shared"])
    }

    /// keyseald reads what a peer runs from /proc only for a policy that names executables or units; every such
    /// policy must say so, or its exe and unit rules would never match.
    @Test("only a policy naming an executable or a unit needs to know what a peer runs")
    func identifiesPeers() throws {
        #expect(try !Self.parse("user alice: shared\ngroup 100: team\n").identifiesPeers)
        #expect(try !Self.parse("").identifiesPeers)
        #expect(try Self.parse("user alice: shared\nexe /usr/bin/mail: mail\n").identifiesPeers)
        #expect(try Self.parse("unit mail.service: mail\n").identifiesPeers)
        #expect(try Self.parse("vouching exe /usr/bin/bridge\n").identifiesPeers)
    }

    @Test("an administrator keeps every group and takes its exe or unit rule's default group")
    func administratorDefault() throws {
        let policy = try Self.parse("exe /usr/bin/mail app: shared *com.example.mail\nuser 999: *ignored\n")
        let caller = policy.caller(for: PeerCredentials(pid: 1, uid: 999, gid: 999), identity: Self.app) { _ in [] }
        #expect(caller == Caller(accessGroups: nil, defaultGroup: "com.example.mail", isAdministrator: true))
        #expect(policy.caller(for: PeerCredentials(pid: 1, uid: 999, gid: 999)) { _ in [] } == .owner)
    }

    @Test("a unit rule matches a user manager's unit only for the daemon's own uid")
    func userUnits() throws {
        let policy = try Self.parse("unit mail.service: mail\n")
        let userMail = PeerIdentity(executable: "/x", unit: "user@1001.service", userUnit: "mail.service")
        let other = policy.caller(for: PeerCredentials(pid: 1, uid: 1001, gid: 1001), identity: userMail) { _ in [] }
        #expect(other.accessGroups == ["uid.1001"])
        let own = try AccessPolicy.parse("unit mail.service: *mail\n", daemonUID: 1001)
            .caller(for: PeerCredentials(pid: 1, uid: 1001, gid: 1001), identity: userMail) { _ in [] }
        #expect(own.defaultGroup == "mail")
    }

    @Test(
        "bad exe and unit lines are errors",
        arguments: [
            "exe relative/path: g", "unit mail: g", "unit a/b.service: g", "exe /bin/x: *a *b", "exe /bin/x: *",
        ]
    )
    func badIdentityLines(line: String) {
        #expect(throws: KeychainError.self) { try Self.parse(line) }
    }

    @Test("the unit comes from the cgroup path: slices skipped, the user manager's unit next, nothing deeper")
    func cgroupUnits() {
        let v2 = "0::/system.slice/mail.service\n"
        #expect(PeerIdentity.units(fromCgroup: v2) == ("mail.service", nil))
        let user = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope\n"
        #expect(PeerIdentity.units(fromCgroup: user) == ("user@1000.service", "run-r1.scope"))
        // A delegated unit may create sub-cgroups with any name: they never name a unit.
        let delegated = "0::/system.slice/build.service/evil.service\n"
        #expect(PeerIdentity.units(fromCgroup: delegated) == ("build.service", nil))
        let v1 = "12:cpu,cpuacct:/x\n1:name=systemd:/system.slice/cron.service\n"
        #expect(PeerIdentity.units(fromCgroup: v1) == ("cron.service", nil))
        #expect(PeerIdentity.units(fromCgroup: "0::/\n") == (nil, nil))
        #expect(PeerIdentity.units(fromCgroup: "0::/init.scope\n") == ("init.scope", nil))
    }

    @Test("the start time is field 22 of /proc/PID/stat even when the command name holds `) (`")
    func statStartTime() {
        let stat = "42 (a) (b c) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10 18446744073709551615"
        #expect(PeerIdentity.startTime(fromStat: stat) == 987654)
        #expect(PeerIdentity.startTime(fromStat: "42 (x) S 1") == nil)
    }

    @Test("a live peer is identified by its executable through a pidfd")
    func identifiesSelf() {
        let me = PeerCredentials(pid: getpid(), uid: geteuid(), gid: getegid())
        let (identity, source) = PeerIdentity.resolve(peer: me, peerPidfd: nil)
        #expect(source == .pidfdOpen)
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "-"
        #expect(identity.executable == exe)
    }

    @Test("a socket peer is identified through SO_PEERPIDFD (Linux 6.5 and later)")
    func identifiesThroughPeerPidfd() {
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer {
            close(pair[0])
            close(pair[1])
        }
        let pidfd = PeerIdentity.peerPidfd(socket: pair[0])
        #expect(pidfd != nil, "SO_PEERPIDFD needs Linux 6.5 or later")
        let me = PeerCredentials(pid: getpid(), uid: geteuid(), gid: getegid())
        let (identity, source) = PeerIdentity.resolve(peer: me, peerPidfd: pidfd)
        #expect(source == .peerPidfd)
        #expect(identity.executable == (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")))
    }

    /// A binary deleted and replaced by another file at its path (a copy, an upgrade): the process runs the old
    /// file, and the path now names another, so the path is not the process's executable any more.
    @Test("a process whose binary was deleted and replaced at its path is not identified by that path")
    func replacedExecutable() throws {
        let directory = try TemporaryDirectory(prefix: "keyseal-replaced-exe")
        defer { directory.remove() }
        let path = directory.appending("app").path
        let sleep = try requireTool("sleep", package: "coreutils")
        try FileManager.default.copyItem(atPath: sleep, toPath: path)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["30"]
        try process.run()
        defer {
            kill(process.processIdentifier, SIGKILL)
            process.waitForExit()
        }
        let peer = PeerCredentials(pid: process.processIdentifier, uid: geteuid(), gid: getegid())
        var identity = PeerIdentity.unknown
        for _ in 0..<100 where identity.executable != path {  // until the child has exec'd
            usleep(10_000)
            identity = PeerIdentity.resolve(peer: peer, peerPidfd: nil).identity
        }
        #expect(identity.executable == path)
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: sleep, toPath: path)
        #expect(PeerIdentity.resolve(peer: peer, peerPidfd: nil).identity.executable == nil)
    }

    @Test("a process that started after the connection was accepted (a reused pid) is not identified")
    func reusedPid() {
        let me = PeerCredentials(pid: getpid(), uid: geteuid(), gid: getegid())
        let (identity, _) = PeerIdentity.resolve(peer: me, peerPidfd: nil, acceptedTicks: 0)
        #expect(identity == .unknown)
    }

    @Test("a pid whose process has another uid than the peer's is not identified")
    func otherUID() {
        let me = PeerCredentials(pid: getpid(), uid: geteuid() &+ 1, gid: getegid())
        #expect(PeerIdentity.resolve(peer: me, peerPidfd: nil).identity == .unknown)
    }
}
