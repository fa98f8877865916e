import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

@testable import KeysealClient

/// Bad frames and stalled clients affect only their own connection; other users see only their groups.
@Suite("Daemon isolation", .serialized)
struct DaemonIsolationTests {
    static func raw(_ path: String) throws -> Int32 { try KeysealConnection.open(path) }

    static func send(_ fd: Int32, _ bytes: [UInt8]) throws { try KeysealConnection.writeAll(fd, bytes) }

    /// Reads until EOF (or 5 s); returns what arrived.
    static func drain(_ fd: Int32) -> [UInt8] {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var all: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            all += buffer.prefix(count)
        }
        return all
    }

    /// The error frame a closed connection got, if any.
    static func errorStatus(_ bytes: [UInt8]) -> Int32? {
        guard bytes.count > 4, case .failure(let error)? = try? WireResponse.decode(payload: Array(bytes.dropFirst(4)))
        else { return nil }
        return error.status
    }

    /// Reads one frame's payload (5 s at most); nil on EOF or timeout.
    static func readPayload(_ fd: Int32) -> [UInt8]? {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        func read(_ count: Int) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: count)
            var done = 0
            while done < count {
                let got = bytes.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + done, count - done, 0) }
                if got <= 0 { return nil }
                done += got
            }
            return bytes
        }
        guard let header = read(4), let length = try? wireFrameLength(header) else { return nil }
        return read(length)
    }

    @Test("a well-formed frame naming an unknown item class is errSecNoSuchClass, and the connection stays served")
    func unknownItemClassIsRefusedNotDropped() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let fd = try Self.raw(daemon.socketPath)
        defer { close(fd) }
        // A valid lookup frame whose class code is changed to one the engine does not know (same length).
        var frame = try WireRequest.copyMatching(ItemQuery(itemClass: .genericPassword)).encodedFrame()
        let code = Array("genp".utf8)
        let at = try #require((0...(frame.count - 4)).first { Array(frame[$0..<$0 + 4]) == code })
        frame.replaceSubrange(at..<at + 4, with: Array("zzzz".utf8))
        try Self.send(fd, frame)
        let refusal = try #require(Self.readPayload(fd))
        guard case .failure(let error) = try WireResponse.decode(payload: refusal) else {
            Issue.record("not a failure")
            return
        }
        #expect(error.status == KeychainStatus.noSuchClass)
        try Self.send(fd, try WireRequest.ping.encodedFrame())
        let pong = try #require(Self.readPayload(fd))
        #expect(try WireResponse.decode(payload: pong) == .ok)
    }

    @Test("garbage, truncated, oversized and unknown frames and a stalled client leave a normal client served")
    func badClients() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let store = try daemon.client()
        _ = try store.add(.password(account: "a", secret: "v"))

        // A client that stalls mid-frame, and one that stalls before sending anything.
        let stalled = try Self.raw(daemon.socketPath)
        defer { close(stalled) }
        try Self.send(stalled, [0, 0, 0, 100, 1, 17, 4])
        let silent = try Self.raw(daemon.socketPath)
        defer { close(silent) }

        // Oversized: an error frame, then the connection closes.
        let oversized = try Self.raw(daemon.socketPath)
        try Self.send(oversized, [0xff, 0xff, 0xff, 0xff, 1, 2, 3])
        #expect(Self.errorStatus(Self.drain(oversized)) == KeychainStatus.dataTooLarge)
        close(oversized)

        // A well-framed payload of garbage: errSecDecode, then closed.
        let garbage = try Self.raw(daemon.socketPath)
        try Self.send(garbage, [0, 0, 0, 6, 1, 200, 9, 9, 9, 9])
        #expect(Self.errorStatus(Self.drain(garbage)) == KeychainStatus.decode)
        close(garbage)

        // A wrong protocol version.
        let version = try Self.raw(daemon.socketPath)
        try Self.send(version, [0, 0, 0, 2, 99, 2])
        #expect(Self.errorStatus(Self.drain(version)) == KeychainStatus.decode)
        close(version)

        // Random bytes, then the peer hangs up; and a truncated frame followed by a hang-up.
        for _ in 0..<20 {
            let random = try Self.raw(daemon.socketPath)
            try? Self.send(random, (0..<Int.random(in: 1...3000)).map { _ in UInt8.random(in: 0...255) })
            close(random)
        }
        let truncated = try Self.raw(daemon.socketPath)
        try Self.send(truncated, Array(try WireRequest.status.encodedFrame().dropLast()))
        close(truncated)

        // The normal client is served throughout, and the stalled connections stay open.
        for _ in 0..<200 {
            #expect(try store.copyMatching(.password(account: "a", returns: .data)).first?.data == Data("v".utf8))
        }
        var entry = pollfd(fd: stalled, events: Int16(POLLIN), revents: 0)
        #expect(poll(&entry, 1, 0) == 0)
        #expect(daemon.process?.isRunning == true)
        // Shutdown is not held up by stalled clients.
        #expect(daemon.stop() == 0)
    }

    @Test("a client that stalls mid-frame is closed with errSecIO after the frame timeout; a silent one stays open")
    func stalledMidFrameTimesOut() throws {
        let daemon = try DaemonFixture(arguments: ["--frame-timeout", "1"])
        defer { daemon.remove() }
        let store = try daemon.client()
        _ = try store.add(.password(account: "a", secret: "v"))
        let silent = try Self.raw(daemon.socketPath)
        defer { close(silent) }
        let stalled = try Self.raw(daemon.socketPath)
        defer { close(stalled) }
        let start = Date()
        try Self.send(stalled, [0, 0, 0, 100, 1, 17, 4])
        // The normal client is served while the stalled frame waits.
        #expect(try store.copyMatching(.password(account: "a", returns: .data)).first?.data == Data("v".utf8))
        #expect(Self.errorStatus(Self.drain(stalled)) == KeychainStatus.io)
        let waited = Date().timeIntervalSince(start)
        #expect(waited >= 0.9 && waited < 4.5, "closed after \(waited) s")
        // The silent connection held no partial frame: still open.
        var entry = pollfd(fd: silent, events: Int16(POLLIN), revents: 0)
        #expect(poll(&entry, 1, 0) == 0)
        #expect(try store.copyMatching(.password(account: "a", returns: .data)).first?.data == Data("v".utf8))
    }

    /// The frame timeout counts only the time keyseald spends reading the connection. While it answers requests
    /// pipelined ahead of a frame (on the pool, reading nothing more from the client), the rest of that frame waits
    /// in the socket, and that wait is keyseald's. Counted from the frame's first bytes, a client that sent
    /// everything at once was closed with errSecIO.
    @Test("a frame behind long pipelined requests is not timed out while keyseald answers them")
    func frameBehindLongRequestsIsNotStalled() throws {
        let daemon = try DaemonFixture(arguments: ["--frame-timeout", "1"])
        defer { daemon.remove() }
        let store = try daemon.client()
        for index in 0..<300 { _ = try store.add(.password(account: "a\(index)", secret: "v")) }
        let fd = try Self.raw(daemon.socketPath)
        defer { close(fd) }
        // Updates of every item, each on the pool, then the first bytes of a ping; its last bytes follow at once.
        let update = try WireRequest.update(
            ItemQuery(itemClass: .genericPassword, limit: .all),
            ItemChanges(data: Data("w".utf8))
        ).encodedFrame()
        let ping = try WireRequest.ping.encodedFrame()
        let updates = 96
        let start = ContinuousClock.now
        try Self.send(fd, Array(repeating: update, count: updates).flatMap { $0 } + Array(ping.prefix(3)))
        usleep(5_000)
        try Self.send(fd, Array(ping.dropFirst(3)))
        for index in 0..<updates {
            let response = try KeysealConnection.readResponse(fd, path: daemon.socketPath)
            if case .failure(let error) = response {
                Issue.record("update \(index) failed: \(error)")
                return
            }
        }
        #expect(try KeysealConnection.readResponse(fd, path: daemon.socketPath) == .ok)
        // The updates kept keyseald from reading the ping's last bytes for longer than the frame timeout (1 s).
        #expect(ContinuousClock.now - start > .seconds(1.2), "the updates took \(ContinuousClock.now - start)")
    }

    @Test("pipelined requests are answered in order: a long one (on the pool) before a short one after it")
    func pipelinedRequestsKeepTheirOrder() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let fd = try Self.raw(daemon.socketPath)
        defer { close(fd) }
        let long = try WireRequest.unlock(passcode: SecretBytes(utf8: "no passcode is set")).encodedFrame()
        let short = try WireRequest.status.encodedFrame()
        try Self.send(fd, long + short)
        let first = try KeysealConnection.readResponse(fd, path: daemon.socketPath)
        let second = try KeysealConnection.readResponse(fd, path: daemon.socketPath)
        if case .status = first { Issue.record("the short request was answered first") }
        guard case .status = second else {
            Issue.record("the second response is \(second), not the status")
            return
        }
    }

    @Test("a client that sends a frame one byte at a time, slower than the timeout, is closed")
    func slowDripTimesOut() throws {
        let daemon = try DaemonFixture(arguments: ["--frame-timeout", "1"])
        defer { daemon.remove() }
        let drip = try Self.raw(daemon.socketPath)
        defer { close(drip) }
        let frame = try WireRequest.status.encodedFrame()
        var closed = false
        for byte in frame.dropLast() {
            guard (try? Self.send(drip, [byte])) != nil else {
                closed = true
                break
            }
            usleep(300_000)
            var entry = pollfd(fd: drip, events: Int16(POLLIN), revents: 0)
            if poll(&entry, 1, 0) > 0 {
                closed = true
                break
            }
        }
        #expect(closed)
        #expect(Self.errorStatus(Self.drain(drip)) == KeychainStatus.io)
    }

    @Test("another user sees nothing of the first user's groups and is refused management operations")
    func otherUser() throws {
        guard runningAsRoot("the other-user test needs root to switch users") else { return }
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let daemon = try DaemonFixture(arguments: ["--socket-group", "65534"], start: false)
        defer { daemon.remove() }
        // The socket's parent chain must be traversable by the other user.
        chmod(daemon.root.path, 0o711)
        try daemon.start()
        let runDirectory = (daemon.socketPath as NSString).deletingLastPathComponent
        let directoryInfo = try FileManager.default.attributesOfItem(atPath: runDirectory)
        #expect(directoryInfo[.posixPermissions] as? Int == 0o750)
        // keyseald binds the socket 0600 (umask 077) and then gives it to the group: it may answer a moment before.
        var socketMode: Int?
        for _ in 0..<100 {
            socketMode = try FileManager.default.attributesOfItem(atPath: daemon.socketPath)[.posixPermissions] as? Int
            if socketMode == 0o660 { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(socketMode == 0o660)

        let store = try daemon.client()
        _ = try store.add(.password(account: "alice"))
        let probe = try builtProductsDirectory().appendingPathComponent("keyseal-wire-probe").path
        func asNobody(_ arguments: [String]) throws -> String {
            let result = try runProcess(
                setpriv,
                ["--reuid", "65534", "--regid", "65534", "--clear-groups", probe, daemon.socketPath] + arguments
            )
            return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // The first user's item is invisible; naming its group is -34018 naming the group.
        #expect(try asNobody(["find", "-", "alice"]).hasPrefix("error -25300"))
        let named = try asNobody(["find", "default", "alice"])
        #expect(named.hasPrefix("error -34018"))
        #expect(named.contains("default"))
        // Management operations are refused; reading the state is allowed, without item counts.
        #expect(try asNobody(["lock"]).hasPrefix("error -34018"))
        #expect(try asNobody(["unlock", "x"]).hasPrefix("error -34018"))
        #expect(try asNobody(["settings"]).hasPrefix("error -34018"))
        #expect(try asNobody(["status"]) == "ok status unlocked counts=0")
        // Its own items go to uid.65534, which the administrator sees.
        #expect(try asNobody(["add", "-", "bob"]) == "ok 0")
        #expect(try asNobody(["find", "-", "bob"]) == "ok 1 uid.65534")
        let bob = try store.copyMatching(.password(service: "probe", account: "bob", returns: .attributes))
        #expect(bob.first?.string(AttributeKey.accessGroup) == "uid.65534")
    }

    @Test("a policy file gives a user its access groups")
    func policyGroups() throws {
        guard runningAsRoot("the policy test needs root to switch users") else { return }
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let root = try TemporaryDirectory(prefix: "keyseald-policy")
        defer { root.remove() }
        let policy = root.appending("policy")
        try "user 65534: com.example.shared team\n".write(to: policy, atomically: true, encoding: .utf8)
        let daemon = try DaemonFixture(arguments: ["--socket-group", "65534", "--policy", policy.path], start: false)
        defer { daemon.remove() }
        chmod(daemon.root.path, 0o711)
        try daemon.start()
        let store = try daemon.client()
        _ = try store.add(.password(service: "probe", account: "shared", group: "team"))
        let probe = try builtProductsDirectory().appendingPathComponent("keyseal-wire-probe").path
        func asNobody(_ arguments: [String]) throws -> String {
            try runProcess(
                setpriv,
                ["--reuid", "65534", "--regid", "65534", "--clear-groups", probe, daemon.socketPath] + arguments
            ).stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try asNobody(["find", "-", "shared"]) == "ok 1 team")
        #expect(try asNobody(["add", "-", "mine"]) == "ok 0")
        #expect(try asNobody(["find", "-", "mine"]) == "ok 1 com.example.shared")
        #expect(try asNobody(["add", "uid.65534", "x"]).hasPrefix("error -34018"))
    }

    @Test("an executable named in the policy reaches its group; a copy of it at another path does not")
    func policyByExecutable() throws {
        guard runningAsRoot("the policy test needs root to switch users") else { return }
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let root = try TemporaryDirectory(prefix: "keyseald-exe-policy")
        defer { root.remove() }
        chmod(root.path, 0o711)
        let built = try builtProductsDirectory().appendingPathComponent("keyseal-wire-probe").path
        var copies: [String] = []
        for name in ["granted", "copy"] {
            let directory = root.appending(name)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            chmod(directory.path, 0o755)
            let path = directory.appendingPathComponent("keyseal-wire-probe").path
            try FileManager.default.copyItem(atPath: built, toPath: path)
            chmod(path, 0o755)
            copies.append(path)
        }
        let policy = root.appending("policy")
        try "exe \(copies[0]): team *com.example.app\n".write(to: policy, atomically: true, encoding: .utf8)
        let daemon = try DaemonFixture(arguments: ["--socket-group", "65534", "--policy", policy.path], start: false)
        defer { daemon.remove() }
        chmod(daemon.root.path, 0o711)
        try daemon.start()
        _ = try daemon.client().add(.password(service: "probe", account: "app", group: "com.example.app"))
        func asNobody(_ probe: String, _ arguments: [String]) throws -> String {
            try runProcess(
                setpriv,
                ["--reuid", "65534", "--regid", "65534", "--clear-groups", probe, daemon.socketPath] + arguments
            ).stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try asNobody(copies[0], ["find", "-", "app"]) == "ok 1 com.example.app")
        #expect(try asNobody(copies[0], ["add", "-", "mine"]) == "ok 0")
        #expect(try asNobody(copies[0], ["find", "-", "mine"]) == "ok 1 com.example.app")
        #expect(try asNobody(copies[1], ["find", "-", "app"]).hasPrefix("error -25300"))
        #expect(try asNobody(copies[1], ["find", "com.example.app", "app"]).hasPrefix("error -34018"))
        #expect(try asNobody(copies[1], ["add", "-", "theirs"]) == "ok 0")
        #expect(try asNobody(copies[1], ["find", "-", "theirs"]) == "ok 1 uid.65534")
    }

    /// The review's attack: an unprivileged user, in a user and mount namespace of its own (`unshare -Urm`), makes
    /// the path of a granted binary it cannot even execute (root's, 0700) name its own program — a bind mount over
    /// the file or an overlay over its directory — and execs that path. `/proc/PID/exe` then reads the granted
    /// path; keyseald must see that the file behind it is not the granted one. (A process in a user namespace other
    /// than keyseald's is not identified by its executable at all; "bind in keyseald's user namespace" is a mount
    /// namespace root made, as a container runtime does, in which only the device-and-inode check refuses.)
    @Test(
        "a granted path that names another file in the peer's own mount namespace grants nothing",
        arguments: ["bind", "overlay", "bind in keyseald's user namespace"]
    )
    func namespaceCannotLendAnExecutable(mount: String) throws {
        guard runningAsRoot("the namespace test needs root to switch users") else { return }
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let unshare = try requireTool("unshare", package: "util-linux")
        let fixture = try GrantedProbe(prefix: "keyseald-exe-namespace", mode: 0o700)
        defer { fixture.remove() }
        let (daemon, granted, grantedDirectory) = (fixture.daemon, fixture.granted, fixture.grantedDirectory)
        // The attacker's own program, which speaks keyseald's protocol, and an overlay's upper and work directories.
        let upper = try fixture.directory("upper", owner: 65534)
        let work = try fixture.directory("work", owner: 65534)
        let own = upper + "/keyseal-wire-probe"
        try FileManager.default.copyItem(atPath: try GrantedProbe.built(), toPath: own)
        chmod(own, 0o755)
        chown(own, 65534, 65534)
        // The granted binary itself, run by root, is identified: the rule and the path are right.
        let genuine = try runProcess(granted, [daemon.socketPath, "find", "-", "app"])
        #expect(genuine.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) == "ok 1 com.example.app")

        let over =
            mount.hasPrefix("bind")
            ? #"mount --bind "$1" "$2""#
            : #"mount -t overlay overlay -o "lowerdir=$3,upperdir=$4,workdir=$5,userxattr" "$3""#
        func attack(_ arguments: [String]) throws -> String {
            // $1 own program, $2 granted path, $3 its directory, $4 upper, $5 work, $6 socket, then the command.
            // Keyseal's client talks only to a server of root, `keyseal` or its own uid, and in the namespace
            // keyseald's root shows as the overflow uid 65534: a nested user namespace makes the attacker that uid
            // (the review's client checked nothing). The mount namespace, with the mount, is the same.
            let script =
                over + #" && granted="$2" socket="$6" && shift 6 && "#
                + #"exec unshare --user --map-user=65534 --map-group=65534 "$granted" "$socket" "$@""#
            let shellArguments = ["sh", own, granted, grantedDirectory, upper, work, daemon.socketPath]
            let nobody = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups"]
            // Root makes the mount namespace and the bind mount; the attacker's program runs there as uid 65534.
            let asNobody =
                over + #" && granted="$2" socket="$6" && shift 6 && "#
                + "exec \(nobody.joined(separator: " ")) " + #""$granted" "$socket" "$@""#
            let command =
                mount.hasSuffix("keyseald's user namespace")
                ? [unshare, "--mount", "sh", "-c", asNobody] + shellArguments
                : nobody + [unshare, "-Urm", "sh", "-c", script] + shellArguments
            return try runProcess(command[0], Array(command.dropFirst()) + arguments)
                .stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // The attacker's program ran at the granted path and reached keyseald, as uid 65534 with its own group only.
        let found = try attack(["find", "-", "app"])
        #expect(found.hasPrefix("error -25300"), "\(found)")
        let named = try attack(["find", "com.example.app", "app"])
        #expect(named.hasPrefix("error -34018"), "\(named)")
        #expect(try attack(["add", "-", "mine"]) == "ok 0")
        #expect(try attack(["find", "-", "mine"]) == "ok 1 uid.65534")
    }

    /// The granted binary itself, run by uid 65534 in namespaces of its own: in a network namespace of its own (a
    /// unit's `PrivateNetwork=`) it keeps its groups — both ends of its connection live in that namespace, where
    /// keyseald looks them up; in a user namespace of its own, where a process may set its own `/proc/PID/exe` to any
    /// file it can read (`prctl(PR_SET_MM_MAP)`) without running it, it has none.
    @Test(
        "the granted binary keeps its groups in a network namespace of its own, and has none in a user namespace",
        arguments: ["network", "user"]
    )
    func grantedBinaryInANamespace(namespace: String) throws {
        guard runningAsRoot("the namespace test needs root to switch users") else { return }
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let unshare = try requireTool("unshare", package: "util-linux")
        let fixture = try GrantedProbe(prefix: "keyseald-exe-ns")
        defer { fixture.remove() }
        let (daemon, granted) = (fixture.daemon, fixture.granted)
        let nobody = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups"]
        let command =
            namespace == "network"
            ? [unshare, "--net"] + nobody + [granted]
            // Keyseal's client talks to a server of root or its own uid: mapped to 65534, it sees root as 65534.
            : nobody + [unshare, "--user", "--map-user=65534", "--map-group=65534", granted]
        let found = try runProcess(command[0], Array(command.dropFirst()) + [daemon.socketPath, "find", "-", "app"])
            .stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        if namespace == "network" {
            #expect(found == "ok 1 com.example.app")
        } else {
            #expect(found.hasPrefix("error -25300"), "\(found)")
        }
    }

    /// The review's attack: a process connects, starts a child to use the connection, and execs the granted binary.
    /// keyseald is held with SIGSTOP until the exec is done, so that it reads the connection's identity after it, as
    /// it did in 2 of the review's 12 tries; the process then runs the granted binary with the connection either
    /// still open (inherited across the exec) or closed by it.
    @Test(
        "a connection made before its process exec'd a granted binary gets none of that binary's groups",
        arguments: ["inherit", "cloexec"]
    )
    func connectionLentAcrossExec(mode: String) throws {
        guard runningAsRoot("the policy test needs root to switch users") else { return }
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let fixture = try GrantedProbe(prefix: "keyseald-exe-lent")
        defer { fixture.remove() }
        let (daemon, granted, built) = (fixture.daemon, fixture.granted, try GrantedProbe.built())
        let nobody = ["--reuid", "65534", "--regid", "65534", "--clear-groups"]
        // The granted binary's own connection is identified.
        let genuine = try runProcess(setpriv, nobody + [granted, daemon.socketPath, "find", "-", "app"])
        #expect(genuine.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) == "ok 1 com.example.app")

        let daemonPID = try #require(daemon.process?.processIdentifier)
        kill(daemonPID, SIGSTOP)
        var stopped = true
        defer { if stopped { kill(daemonPID, SIGCONT) } }
        let attacker = Process()
        attacker.executableURL = URL(fileURLWithPath: setpriv)
        attacker.arguments =
            nobody + [built, daemon.socketPath, "lend", mode, granted, daemon.socketPath, "poll-status", "3"]
        let output = Pipe()
        attacker.standardOutput = output
        try attacker.run()
        let exe = "/proc/\(attacker.processIdentifier)/exe"
        var execd = false
        for _ in 0..<500 where !execd {
            execd = (try? FileManager.default.destinationOfSymbolicLink(atPath: exe)) == granted
            if !execd { usleep(10_000) }
        }
        #expect(execd, "the attacker exec'd the granted binary")
        kill(daemonPID, SIGCONT)
        stopped = false
        let lines = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .split(separator: "\n").map(String.init)
        _ = try attacker.exitStatus()
        // The child's lookup on the lent connection: uid 65534's own group only. The granted binary's own polls on
        // its own connection are answered.
        #expect(lines.contains { $0.hasPrefix("error -25300") }, "\(lines)")
        #expect(!lines.contains("ok 1 com.example.app"), "\(lines)")
        #expect(lines.contains { $0.hasPrefix("ok ") && $0 != "ok 0" }, "\(lines)")
    }

    @Test("only a vouching client acts for another process, and only for a process of its own uid")
    func vouchingClient() throws {
        guard runningAsRoot("the policy test needs root to switch users") else { return }
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let root = try TemporaryDirectory(prefix: "keyseald-vouching")
        defer { root.remove() }
        chmod(root.path, 0o711)
        let built = try builtProductsDirectory().appendingPathComponent("keyseal-wire-probe").path
        var probes: [String: String] = [:]
        for name in ["app", "bridge", "other"] {
            let directory = root.appending(name)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            chmod(directory.path, 0o755)
            let path = directory.appendingPathComponent("keyseal-wire-probe").path
            try FileManager.default.copyItem(atPath: built, toPath: path)
            chmod(path, 0o755)
            probes[name] = path
        }
        let policy = root.appending("policy")
        try "exe \(probes["app"]!): *com.example.app\nvouching exe \(probes["bridge"]!)\n"
            .write(to: policy, atomically: true, encoding: .utf8)
        let daemon = try DaemonFixture(arguments: ["--socket-group", "65534", "--policy", policy.path], start: false)
        defer { daemon.remove() }
        chmod(daemon.root.path, 0o711)
        try daemon.start()
        _ = try daemon.client().add(.password(service: "probe", account: "app", group: "com.example.app"))

        // The granted application, running as uid 65534 and as root, each for a few seconds.
        func running(_ arguments: [String]) throws -> Process {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: arguments[0])
            process.arguments = Array(arguments.dropFirst())
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            return process
        }
        let nobodyApp = try running(
            [
                setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", probes["app"]!, daemon.socketPath,
                "poll-status", "4",
            ])
        let rootApp = try running([probes["app"]!, daemon.socketPath, "poll-status", "4"])
        defer {
            nobodyApp.waitForExit()
            rootApp.waitForExit()
        }
        usleep(300_000)  // both have exec'd the granted binary
        func asNobody(_ probe: String, _ arguments: [String]) throws -> String {
            try runProcess(
                setpriv,
                ["--reuid", "65534", "--regid", "65534", "--clear-groups", probe, daemon.socketPath] + arguments
            ).stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let app = "\(nobodyApp.processIdentifier)"
        // The vouching client acting for the granted application of its own uid gets that application's groups.
        #expect(try asNobody(probes["bridge"]!, ["as", app, "find", "-", "app"]) == "ok 1 com.example.app")
        #expect(try asNobody(probes["bridge"]!, ["as", app, "add", "-", "vouched"]) == "ok 0")
        #expect(try asNobody(probes["bridge"]!, ["as", app, "find", "-", "vouched"]) == "ok 1 com.example.app")
        // A client the policy does not name as vouching cannot claim the application's identity.
        #expect(try asNobody(probes["other"]!, ["as", app, "find", "-", "app"]).hasPrefix("error -34018"))
        // The vouching client cannot lend itself another uid's process: the granted application run by root.
        let other = "\(rootApp.processIdentifier)"
        #expect(try asNobody(probes["bridge"]!, ["as", other, "find", "-", "app"]).hasPrefix("error -25300"))
        let named = try asNobody(probes["bridge"]!, ["as", other, "find", "com.example.app", "app"])
        #expect(named.hasPrefix("error -34018"))
        // Acting for a process that has exited gives only the uid's own groups.
        #expect(try asNobody(probes["bridge"]!, ["as", "999999", "find", "-", "app"]).hasPrefix("error -25300"))
    }
}

/// A keyseald that uid 65534 can reach, whose policy grants `*com.example.app` to a copy of the wire probe at
/// `ROOT/granted/keyseal-wire-probe` (root's, of `mode`), with one item `app` in that group.
struct GrantedProbe {
    let root: TemporaryDirectory
    let daemon: DaemonFixture
    let grantedDirectory: String
    let granted: String

    static func built() throws -> String {
        try builtProductsDirectory().appendingPathComponent("keyseal-wire-probe").path
    }

    init(prefix: String, mode: mode_t = 0o755) throws {
        root = try TemporaryDirectory(prefix: prefix)
        chmod(root.path, 0o711)
        grantedDirectory = root.appending("granted").path
        try FileManager.default.createDirectory(atPath: grantedDirectory, withIntermediateDirectories: false)
        chmod(grantedDirectory, 0o755)
        granted = grantedDirectory + "/keyseal-wire-probe"
        try FileManager.default.copyItem(atPath: try Self.built(), toPath: granted)
        chmod(granted, mode)
        let policy = root.appending("policy")
        try "exe \(granted): *com.example.app\n".write(to: policy, atomically: true, encoding: .utf8)
        daemon = try DaemonFixture(arguments: ["--socket-group", "65534", "--policy", policy.path], start: false)
        chmod(daemon.root.path, 0o711)
        try daemon.start()
        _ = try daemon.client().add(.password(service: "probe", account: "app", group: "com.example.app"))
    }

    /// A directory under the root, 0755, owned by `owner`.
    func directory(_ name: String, owner: uid_t) throws -> String {
        let path = root.appending(name).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        chmod(path, 0o755)
        chown(path, owner, owner)
        return path
    }

    func remove() {
        daemon.remove()
        root.remove()
    }
}
