import Foundation
import KeysealTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The command line and client against attacks from other local users: a server run by someone else, secrets on
/// the command line, weak passcodes and passphrases, the host key's path in `status`.
@Suite("keyseal client hardening", .serialized)
struct ClientHardeningTests {
    @Test("a server at the socket run by another user gets nothing: exit 50 naming its uid, no byte sent")
    func foreignServerGetsNoPasscode() throws {
        let server = try FakeServer(uid: 65534)
        defer { server.stop() }
        let result = try CLI(socket: server.socket)("unlock", "--passcode-stdin", input: "correct-horse-7\n")
        #expect(result.status == 50)
        #expect(result.stderrText.contains("runs as uid 65534"))
        #expect(try server.received().isEmpty)
    }

    @Test("a server run by the system account keyseal is trusted: the client sends its request")
    func systemAccountServerIsTrusted() throws {
        let unshare = try requireTool("unshare", package: "util-linux")
        // The account exists only in this client's mount namespace: a copy of /etc/passwd bound over the real one.
        let uid: uid_t = 65533
        let server = try FakeServer(uid: uid)
        defer { server.stop() }
        let passwd = server.directory.appending("passwd").path
        let entries = try String(contentsOfFile: "/etc/passwd", encoding: .utf8)
        try #require(
            !entries.contains("\n\(uid):") && !entries.hasPrefix("keyseal:") && !entries.contains("\nkeyseal:")
        )
        try (entries + "keyseal:x:\(uid):\(uid)::/nonexistent:/usr/sbin/nologin\n").write(
            toFile: passwd,
            atomically: true,
            encoding: .utf8
        )
        let keyseal = try builtProductsDirectory().appendingPathComponent("keyseal").path
        let result = try runProcess(
            unshare,
            [
                "--mount", "sh", "-c", "mount --bind \"$1\" /etc/passwd && exec \"$2\" --socket \"$3\" status", "sh",
                passwd, keyseal, server.socket,
            ]
        )
        #expect(!result.stderrText.contains("runs as uid"), "\(result.stderrText)")
        #expect(try !server.received().isEmpty)
    }

    @Test("a client of its own user's keyseald asks no name service (no /etc/passwd, nsswitch.conf or nscd)")
    func ownServerNeedsNoNameService() throws {
        let strace = try requireTool("strace", package: "strace")
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let keyseal = try builtProductsDirectory().appendingPathComponent("keyseal").path
        let result = try runProcess(
            strace,
            [
                "-f", "-e", "trace=openat,connect", keyseal, "--socket", daemon.socketPath, "find-generic-password",
                "-a", "nobody", "-w",
            ]
        )
        #expect(result.status == 44, "\(result.stderrText)")
        #expect(result.stderrText.contains(daemon.socketPath))
        for name in ["/etc/passwd", "nsswitch.conf", "nscd", "libnss_"] {
            #expect(!result.stderrText.contains(name), "\(name)")
        }
    }

    @Test("status shows the host key's path to administrators only")
    func statusRedactsHostKeyPath() throws {
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let daemon = try DaemonFixture(arguments: ["--socket-group", "65534"], start: false)
        defer { daemon.remove() }
        chmod(daemon.root.path, 0o711)
        try daemon.start()
        let admin = try CLI(socket: daemon.socketPath)("status")
        #expect(admin.stdoutText.contains(daemon.hostKeyPath))
        let keyseal = try builtProductsDirectory().appendingPathComponent("keyseal").path
        let other = try runProcess(
            setpriv,
            [
                "--reuid", "65534", "--regid", "65534", "--clear-groups", keyseal, "--socket", daemon.socketPath,
                "status",
            ]
        )
        #expect(other.status == 0, "\(other.stderrText)")
        #expect(other.stdoutText.contains("the device key is a file on this host"))
        #expect(!other.stdoutText.contains(daemon.hostKeyPath))
        #expect(!other.stdoutText.contains(daemon.root.path))
    }

    @Test(
        "obviously weak new passcodes are refused with errSecParam naming the override",
        arguments: [
            "12345", "aaaaaaaa", "abcdefgh", "87654321", "Password",
        ]
    )
    func weakPasscodeRefused(passcode: String) throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        let refused = try cli("passcode", "set", "--passcode-stdin", input: passcode + "\n")
        #expect(refused.status == 206)
        #expect(refused.stderrText.contains("too weak"))
        #expect(refused.stderrText.contains("--allow-weak-passcode"))
        #expect(!refused.stderrText.contains(passcode))
        #expect(try CLI.json(try cli("--json", "status"))["passcodeSet"] as? Bool == false)
        #expect(
            try cli("passcode", "set", "--allow-weak-passcode", "--passcode-stdin", input: passcode + "\n").status == 0
        )
        let change = try cli("passcode", "change", "--passcode-stdin", input: passcode + "\n" + passcode + "\n")
        #expect(change.status == 206)
        #expect(try cli("passcode", "change", "--passcode-stdin", input: passcode + "\nwell-chosen-9\n").status == 0)
    }

    @Test("a weak backup passphrase is refused before any file is written; the override takes it")
    func weakPassphraseRefused() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        try cli("add-generic-password", "-a", "a", "-s", "s", "-w", "v")
        let file = daemon.root.appending("backup.ksb").path
        let refused = try cli("export", "--output", file, "--passphrase-stdin", input: "short-one\n")
        #expect(refused.status == 206)
        #expect(refused.stderrText.contains("--allow-weak-passphrase"))
        #expect(!FileManager.default.fileExists(atPath: file))
        let forced = try cli(
            "export",
            "--output",
            file,
            "--allow-weak-passphrase",
            "--passphrase-stdin",
            input: "short-one\n"
        )
        #expect(forced.status == 0, "\(forced.stderrText)")
    }

    @Test("--hex-stdin reads the hexadecimal password from standard input; -X's help warns about command lines")
    func hexFromStandardInput() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(
            try cli("add-generic-password", "-a", "a", "-s", "hex", "--hex-stdin", input: "68 65 6c6C6f\n").status == 0
        )
        #expect(try cli("find-generic-password", "-a", "a", "-s", "hex", "-w").stdoutText == "hello\n")
        #expect(try cli("add-generic-password", "-a", "b", "-s", "hex", "--hex-stdin", input: "6g\n").status == 206)
        let help = try cli("add-generic-password", "--help").stdoutText.split(whereSeparator: \.isWhitespace)
            .joined(separator: " ")
        #expect(
            help.contains("The password in hexadecimal. Other local users can read command lines: prefer --hex-stdin")
        )
    }
}

/// A fake keyseald run as `uid` that records every byte a client sends.
private struct FakeServer {
    let directory: TemporaryDirectory
    let process: Process
    var socket: String { directory.appending("keyseal.sock").path }

    init(uid: uid_t) throws {
        let setpriv = try requireTool("setpriv", package: "util-linux")
        // The system's python3: a per-user installation (pyenv) is not reachable by another uid.
        let python = "/usr/bin/python3"
        try #require(FileManager.default.isExecutableFile(atPath: python), "install the Debian package python3")
        directory = try TemporaryDirectory(prefix: "keyseal-fake")
        chmod(directory.path, 0o777)
        let ready = directory.appending("ready").path
        let script = """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(1)
            open(sys.argv[3], "w").close()
            c, _ = s.accept(); c.settimeout(3); data = b""
            try:
                while True:
                    d = c.recv(65536)
                    if not d: break
                    data += d
            except Exception: pass
            open(sys.argv[2], "wb").write(data)
            """
        process = Process()
        process.executableURL = URL(fileURLWithPath: setpriv)
        process.arguments = [
            "--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups", python, "-c", script,
            directory.appending("keyseal.sock").path, directory.appending("received").path, ready,
        ]
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: ready), Date() < deadline { usleep(20_000) }
    }

    /// What the client sent, once it closed the connection (or the server's 3-second wait ended).
    func received() throws -> Data {
        _ = try process.exitStatus()
        return try Data(contentsOf: directory.appending("received"))
    }

    func stop() {
        if process.isRunning { process.terminate() }
        directory.remove()
    }
}
