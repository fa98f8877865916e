import Foundation
import KeysealClient
import KeysealTestSupport
import Testing

/// The Secret Service bridge with real clients as processes: secret-tool (libsecret-tools), libsecret through
/// PyGObject, SecretStorage and python-keyring from PyPI (Scripts/bootstrap.sh installs them in
/// /opt/keyseal-python), on a private dbus-daemon in front of a keyseald.
@Suite("Secret Service bridge", .serialized)
struct SecretServiceTests {
    static let pythonDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Python"
    )

    static func python() throws -> String {
        let path = ProcessInfo.processInfo.environment["KEYSEAL_PYTHON"] ?? "/opt/keyseal-python/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw FixtureError("\(path) is missing (SecretStorage, keyring, pytest); run Scripts/bootstrap.sh")
        }
        return path
    }

    /// Runs a script of Python/ on the fixture's bus; fails the test with its output unless it exits 0.
    static func runPython(_ fixture: SecretServiceFixture, _ arguments: [String]) throws {
        let result = try fixture.run(try python(), arguments)
        #expect(
            result.status == 0,
            "\(arguments.joined(separator: " ")) exited \(result.status):\n\(result.stdoutText)\n\(result.stderrText)\n\(fixture.bridgeLog())"
        )
    }

    static func script(_ name: String) -> String { pythonDirectory.appendingPathComponent(name).path }

    @Test("secret-tool store, lookup, search and clear go through keyseald")
    func secretToolRoundTrip() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        let store = try fixture.secretTool(
            ["store", "--label=Mail password", "service", "mail", "user", "alice"],
            input: "hunter2"
        )
        #expect(store.status == 0, "\(store.stderrText)")
        let lookup = try fixture.secretTool(["lookup", "service", "mail", "user", "alice"])
        #expect(lookup.status == 0)
        #expect(lookup.stdoutText == "hunter2")
        // One attribute of the two finds it; a wrong value finds nothing.
        #expect(try fixture.secretTool(["lookup", "user", "alice"]).stdoutText == "hunter2")
        let miss = try fixture.secretTool(["lookup", "service", "mail", "user", "bob"])
        #expect(miss.status != 0 && miss.stdoutText.isEmpty)
        let search = try fixture.secretTool(["search", "--all", "service", "mail"])
        #expect(search.stdoutText.contains("label = Mail password"), "\(search.stdoutText)\(search.stderrText)")
        #expect(search.stdoutText.contains("secret = hunter2"))
        // secret-tool prints the attributes on standard error.
        #expect(search.stderrText.contains("attribute.user = alice"), "\(search.stderrText)")
        #expect(try fixture.secretTool(["clear", "service", "mail", "user", "alice"]).status == 0)
        #expect(try fixture.secretTool(["lookup", "service", "mail", "user", "alice"]).stdoutText.isEmpty)
    }

    @Test("the items are Keyseal items: secret-tool's store is a sealed generic password in keyseald")
    func itemsAreKeysealItems() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        _ = try fixture.secretTool(["store", "--label=L", "k", "v"], input: "value-in-keyseald")
        let keyseal = try builtProductsDirectory().appendingPathComponent("keyseal").path
        let found = try runProcess(
            keyseal,
            ["--socket", fixture.daemon.socketPath, "find-generic-password", "-s", "freedesktop-secret:login"]
        )
        #expect(found.status == 0, "\(found.stderrText)")
        let database = try Data(contentsOf: fixture.daemon.storeDirectory.appendingPathComponent("keyseal.db"))
        for plaintext in ["value-in-keyseald", "xdg:schema"] {
            #expect(database.range(of: Data(plaintext.utf8)) == nil, "\(plaintext) is in the store file in the clear")
        }
    }

    @Test("a second provider is refused unless --replace, which takes the name")
    func busNameOwnership() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        let log = fixture.directory.appending("second.log").path
        let second = try SecretServiceFixture.launchBridge(
            arguments: ["--socket", fixture.daemon.socketPath],
            environment: fixture.environment,
            log: log
        )
        #expect(try second.exitStatus() == 3)
        let message = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(message.contains("another Secret Service provider owns org.freedesktop.secrets"), "\(message)")
        let replacing = try SecretServiceFixture.launchBridge(
            arguments: ["--socket", fixture.daemon.socketPath, "--replace"],
            environment: fixture.environment,
            log: log
        )
        defer {
            kill(replacing.processIdentifier, SIGTERM)
            replacing.waitForExit()
        }
        // The first bridge loses the name and exits.
        let deadline = Date().addingTimeInterval(15)
        while fixture.bridge?.isRunning == true && Date() < deadline { usleep(20_000) }
        #expect(fixture.bridge?.isRunning == false, "\(fixture.bridgeLog())")
        _ = try fixture.secretTool(["store", "--label=L", "after", "replace"], input: "v")
        #expect(try fixture.secretTool(["lookup", "after", "replace"]).stdoutText == "v")
    }

    @Test("libsecret through PyGObject stores, looks up and clears")
    func libsecretInProcess() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        try Self.runPython(fixture, [Self.script("libsecret_gi.py")])
    }

    @Test("SecretStorage: a DH session (AES-128-CBC), the default alias, items created, searched, replaced, deleted")
    func secretStorage() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        try Self.runPython(fixture, [Self.script("secretstorage_roundtrip.py")])
    }

    /// Its tests of a mock service's prompts and locking skip themselves on org.freedesktop.secrets, as they do against
    /// gnome-keyring.
    @Test("SecretStorage 3.3.3's own test suite passes against the bridge: items, collections, exceptions")
    func secretStorageOwnSuite() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        let tests = URL(fileURLWithPath: try Self.python()).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("share/secretstorage_tests").path
        guard FileManager.default.fileExists(atPath: tests + "/test_exceptions.py") else {
            throw FixtureError("\(tests) is missing (SecretStorage's own tests); run Scripts/bootstrap.sh")
        }
        try Self.runPython(fixture, ["-m", "pytest", "-q", "-p", "no:cacheprovider", tests])
    }

    @Test("python-keyring's BackendBasicTests pass against the bridge")
    func keyringBackendTests() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        try Self.runPython(
            fixture,
            ["-m", "pytest", "-q", "-p", "no:cacheprovider", Self.script("test_keyring_backend.py")]
        )
    }

    /// One user's two sessions, each with its session bus and its bridge, in front of one keyseald: libsecret's
    /// store (CreateItem with replace) from both at the same moment, round after round, leaves one item each time.
    @Test("two clients on two bridges storing the same attributes at once leave one item")
    func concurrentStoresLeaveOneItem() throws {
        let first = try SecretServiceFixture()
        defer { first.remove() }
        let second = try SecretServiceFixture(daemon: first.daemon)
        defer { second.remove() }
        try Self.runPython(first, [Self.script("concurrent_store.py"), first.busAddress, second.busAddress, "40"])
    }

    @Test("a session is closed when the client that opened it exits; a connected client's session stays")
    func sessionClosedOnExit() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        try Self.runPython(fixture, [Self.script("session_closed_on_exit.py")])
    }

    @Test("one client opening 1,100 sessions closes none of another client's; it keeps its own newest 64")
    func sessionsArePerClient() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        try Self.runPython(fixture, [Self.script("sessions_per_client.py")])
    }

    @Test("one process holding 257 connections of 64 sessions each does not keep secret-tool from a lookup")
    func sessionsArePerProcess() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        try Self.runPython(fixture, [Self.script("sessions_per_process.py")])
    }

    /// A bridge in front of a keyseald with a passcode set, an item stored, then locked through `secret-tool lock`.
    static func lockedFixture(bridgeArguments: (SecretServiceFixture) -> [String]) throws -> SecretServiceFixture {
        let fixture = try SecretServiceFixture(daemon: nil, startBridge: false)
        let keyseal = try builtProductsDirectory().appendingPathComponent("keyseal").path
        let setPasscode = try runProcess(
            keyseal,
            ["--socket", fixture.daemon.socketPath, "passcode", "set", "--passcode-stdin"],
            input: Data("pass-1234\n".utf8)
        )
        #expect(setPasscode.status == 0, "\(setPasscode.stderrText)")
        try "pass-1234\n".write(to: fixture.askpassFile, atomically: true, encoding: .utf8)
        try fixture.startBridge(bridgeArguments(fixture))
        #expect(try fixture.secretTool(["store", "--label=L", "app", "before"], input: "kept").status == 0)
        // secret-tool lock goes through the bridge's Lock. (Debian's secret-tool 0.20.5 then frees its list of
        // collections twice and dies of SIGSEGV at exit, after the Lock answered: the state is what counts.)
        _ = try fixture.secretTool(["lock", "--collection=login"])
        #expect(try Self.keyseal(fixture, ["status"]).stdoutText.contains("state:            locked"))
        return fixture
    }

    static func keyseal(
        _ fixture: SecretServiceFixture,
        _ arguments: [String],
        input: String? = nil
    ) throws
        -> ProcessResult
    {
        try runProcess(
            try builtProductsDirectory().appendingPathComponent("keyseal").path,
            ["--socket", fixture.daemon.socketPath] + arguments,
            input: input.map { Data($0.utf8) }
        )
    }

    @Test("locked, no askpass: lookups and stores fail with IsLocked and its message; nothing is stored or lost")
    func lockedWithoutPrompt() throws {
        let fixture = try Self.lockedFixture { _ in [] }
        defer { fixture.remove() }
        // The lookup finds the item locked and asks to unlock it; the prompt completes dismissed (no askpass), and
        // libsecret finds nothing, as with a headless gnome-keyring.
        let lookup = try fixture.secretTool(["lookup", "app", "before"])
        #expect(lookup.status != 0 && lookup.stdoutText.isEmpty)
        let store = try fixture.secretTool(["store", "--label=L", "app", "while-locked"], input: "v")
        #expect(store.status != 0, "a store into a locked keychain must fail, not vanish")
        #expect(store.stderrText.contains("locked"), "\(store.stderrText)")
        #expect(try Self.keyseal(fixture, ["unlock", "--passcode-stdin"], input: "pass-1234\n").status == 0)
        #expect(try fixture.secretTool(["lookup", "app", "before"]).stdoutText == "kept")
        #expect(try fixture.secretTool(["lookup", "app", "while-locked"]).stdoutText.isEmpty)
    }

    @Test(
        "locked, with an askpass program: a search names the item locked, its secret stays IsLocked, the prompt unlocks"
    )
    func lockedWithPrompt() throws {
        let fixture = try Self.lockedFixture { ["--askpass", $0.askpassProgram.path] }
        defer { fixture.remove() }
        try Self.runPython(fixture, [Self.script("unlock_prompt.py")])
        #expect(try fixture.secretTool(["lookup", "app", "before"]).stdoutText == "kept")
        // Locked again: secret-tool's store asks the collection to unlock, the prompt does, and the item is stored.
        _ = try fixture.secretTool(["lock", "--collection=login"])
        #expect(try fixture.secretTool(["store", "--label=L", "app", "after"], input: "v2").status == 0)
        #expect(try fixture.secretTool(["lookup", "app", "after"]).stdoutText == "v2")
    }

    @Test("a lock by another keyseald client between SearchItems and GetSecrets: GetSecrets and GetSecret are IsLocked")
    func lockBetweenSearchAndSecret() throws {
        let fixture = try SecretServiceFixture(daemon: nil, startBridge: false)
        defer { fixture.remove() }
        let keyseal = try builtProductsDirectory().appendingPathComponent("keyseal").path
        #expect(try Self.keyseal(fixture, ["passcode", "set", "--passcode-stdin"], input: "pass-1234\n").status == 0)
        try fixture.startBridge([])
        #expect(try fixture.secretTool(["store", "--label=L", "app", "before"], input: "kept").status == 0)
        try Self.runPython(
            fixture,
            [Self.script("lock_between_search_and_secret.py"), keyseal, "--socket", fixture.daemon.socketPath, "lock"]
        )
    }

    @Test("locked: `secret-tool search --unlock` finds the item as locked, unlocks it through the prompt and prints it")
    func searchUnlockWhileLocked() throws {
        let fixture = try Self.lockedFixture { ["--askpass", $0.askpassProgram.path] }
        defer { fixture.remove() }
        let search = try fixture.secretTool(["search", "--unlock", "app", "before"])
        #expect(search.status == 0, "\(search.stderrText)\n\(fixture.bridgeLog())")
        #expect(search.stdoutText.contains("secret = kept"), "\(search.stdoutText)\(search.stderrText)")
        #expect(try Self.keyseal(fixture, ["status"]).stdoutText.contains("state:            unlocked"))
    }

    @Test("locked: libsecret's lookup unlocks the item it found through the prompt and reads it")
    func lookupUnlocksWhileLocked() throws {
        let fixture = try Self.lockedFixture { ["--askpass", $0.askpassProgram.path] }
        defer { fixture.remove() }
        let lookup = try fixture.secretTool(["lookup", "app", "before"])
        #expect(lookup.stdoutText == "kept", "\(lookup.stderrText)\n\(fixture.bridgeLog())")
    }

    /// Stops the bridge and starts it again with `arguments` (keyseald keeps its state).
    static func restartBridge(_ fixture: SecretServiceFixture, _ arguments: [String]) throws {
        fixture.stopBridge()
        // startBridge waits for "serving" in the log: the first bridge's line must not answer for the second.
        try Data().write(to: URL(fileURLWithPath: fixture.bridgeLogPath))
        try fixture.startBridge(arguments)
    }

    /// git's credential helper (contrib/credential/libsecret) looks up with secret_service_search and the flags
    /// UNLOCK and LOAD_SECRETS, which `secret-tool search --unlock` also uses (GitCredentialHelperTests runs the
    /// helper itself); `secret-tool lookup` is secret_password_lookup.
    @Test("bridge started while locked: libsecret's search and lookup get the item as locked, prompt, and read it")
    func lockedStartPrompts() throws {
        let fixture = try Self.lockedFixture { ["--askpass", $0.askpassProgram.path] }
        defer { fixture.remove() }
        let arguments = ["--askpass", fixture.askpassProgram.path]
        try Self.restartBridge(fixture, arguments)
        let search = try fixture.secretTool(["search", "--unlock", "app", "before"])
        #expect(search.status == 0, "\(search.stderrText)\n\(fixture.bridgeLog())")
        #expect(search.stdoutText.contains("secret = kept"), "\(search.stdoutText)\(search.stderrText)")
        #expect(search.stderrText.contains("attribute.app = before"), "\(search.stderrText)")
        #expect(try Self.keyseal(fixture, ["status"]).stdoutText.contains("state:            unlocked"))
        // A search that matches nothing prompts too (the attributes are sealed), then finds nothing.
        _ = try fixture.secretTool(["lock", "--collection=login"])
        try Self.restartBridge(fixture, arguments)
        let miss = try fixture.secretTool(["lookup", "app", "missing"])
        #expect(miss.status != 0 && miss.stdoutText.isEmpty, "\(miss.stdoutText)")
        _ = try fixture.secretTool(["lock", "--collection=login"])
        try Self.restartBridge(fixture, arguments)
        let lookup = try fixture.secretTool(["lookup", "app", "before"])
        #expect(lookup.stdoutText == "kept", "\(lookup.stderrText)\n\(fixture.bridgeLog())")
    }

    @Test("no passcode: Lock leaves the collections unlocked, as keyseald is; python-keyring and libsecret read on")
    func lockWithoutPasscode() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        try Self.runPython(fixture, [Self.script("lock_without_passcode.py")])
        _ = try fixture.secretTool(["lock", "--collection=login"])
        let lookup = try fixture.secretTool(["lookup", "service", "lock-test"])
        #expect(lookup.stdoutText == "still-here", "\(lookup.stderrText)")
    }

    @Test("prompts never run are capped per client: one client's 100 keep its newest 16, none of another's go")
    func promptsPerClient() throws {
        let fixture = try Self.lockedFixture { _ in [] }
        defer { fixture.remove() }
        try Self.runPython(fixture, [Self.script("prompts_per_client.py")])
    }

    @Test("locked, no askpass: Unlock's prompt completes dismissed; python-keyring raises KeyringLocked")
    func unlockWithoutAskpass() throws {
        let fixture = try Self.lockedFixture { _ in [] }
        defer { fixture.remove() }
        try Self.runPython(fixture, [Self.script("unlock_without_askpass.py")])
        // The same from a bridge started while locked.
        try Self.restartBridge(fixture, [])
        try Self.runPython(fixture, [Self.script("unlock_without_askpass.py")])
        #expect(try fixture.secretTool(["lookup", "app", "before"]).stdoutText.isEmpty)
        #expect(try Self.keyseal(fixture, ["status"]).stdoutText.contains("state:            locked"))
    }

    /// A fixture with a headless gnome-keyring on its bus (no bridge), beside `fixture`'s bridge.
    static func gnomeKeyring(beside fixture: SecretServiceFixture) throws -> SecretServiceFixture {
        let gnome = try SecretServiceFixture(daemon: fixture.daemon, startBridge: false)
        do {
            try gnome.startGnomeKeyring()
        } catch {
            gnome.remove()
            throw error
        }
        return gnome
    }

    /// unknown_objects.py in `mode` against the bridge and against gnome-keyring; each one's error names.
    static func unknownObjectAnswers(_ mode: String) throws -> (bridge: String, gnomeKeyring: String) {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        let gnome = try Self.gnomeKeyring(beside: fixture)
        defer { gnome.remove() }
        var answers: [String] = []
        for provider in [fixture, gnome] {
            let result = try provider.run(try Self.python(), [Self.script("unknown_objects.py"), mode])
            #expect(result.status == 0, "\(result.stdoutText)\n\(result.stderrText)")
            answers.append(result.stdoutText)
        }
        return (answers[0], answers[1])
    }

    @Test("paths that name no object answer as gnome-keyring's do: SecretStorage and python-keyring see no such object")
    func unknownObjectsAsGnomeKeyring() throws {
        let answers = try Self.unknownObjectAnswers("service")
        #expect(
            answers.bridge == answers.gnomeKeyring,
            "bridge:\n\(answers.bridge)\ngnome-keyring:\n\(answers.gnomeKeyring)"
        )
        #expect(answers.bridge.contains("org.freedesktop.DBus.Error.UnknownMethod"), "\(answers.bridge)")
    }

    @Test("paths outside /org/freedesktop/secrets, `/` among them, answer UnknownMethod as gnome-keyring's do")
    func pathsOutsideTheServiceAsGnomeKeyring() throws {
        let answers = try Self.unknownObjectAnswers("outside")
        #expect(
            answers.bridge == answers.gnomeKeyring,
            "bridge:\n\(answers.bridge)\ngnome-keyring:\n\(answers.gnomeKeyring)"
        )
        #expect(answers.bridge.contains("org.freedesktop.DBus.Error.UnknownMethod"), "\(answers.bridge)")
    }

    @Test("a collection's property or method on an item that does not exist answers as gnome-keyring's: no such object")
    func otherInterfacesOfMissingItemsAsGnomeKeyring() throws {
        let answers = try Self.unknownObjectAnswers("missing-item")
        #expect(
            answers.bridge == answers.gnomeKeyring,
            "bridge:\n\(answers.bridge)\ngnome-keyring:\n\(answers.gnomeKeyring)"
        )
        #expect(answers.bridge.contains("org.freedesktop.DBus.Error.UnknownMethod"), "\(answers.bridge)")
    }

    /// gnome-keyring stamps such an item too, though only once it reads its keyring file again (after a later
    /// write), which is too slow and irregular to compare here.
    @Test("an item stored without a schema is stamped generic: a lookup with the generic schema finds it")
    func genericSchema() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        let store = try fixture.secretTool(["store", "--label=No schema", "tool", "no-schema"], input: "generic-value")
        #expect(store.status == 0, "\(store.stderrText)")
        try Self.runPython(fixture, [Self.script("generic_schema.py")])
    }

    @Test("a 64 KiB attribute value is stored and found; an item too large is refused in the client's words")
    func largeAttribute() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        try Self.runPython(fixture, [Self.script("large_attribute.py")])
    }

    /// Runs portal_secret.py in `mode` on the fixture's bus; its standard output.
    static func portal(_ fixture: SecretServiceFixture, _ mode: String) throws -> String {
        let result = try fixture.run(try python(), [script("portal_secret.py"), mode])
        #expect(result.status == 0, "\(mode): \(result.stdoutText)\n\(result.stderrText)\n\(fixture.bridgeLog())")
        return result.stdoutText
    }

    @Test("the Secret portal backend: each application id its own secret, kept in its group, stable, refused locked")
    func portalSecrets() throws {
        let fixture = try SecretServiceFixture(daemon: nil, startBridge: false)
        defer { fixture.remove() }
        #expect(try Self.keyseal(fixture, ["passcode", "set", "--passcode-stdin"], input: "pass-1234\n").status == 0)
        try "pass-1234\n".write(to: fixture.askpassFile, atomically: true, encoding: .utf8)
        try fixture.startBridge([])
        let first = try Self.portal(fixture, "unlocked")
        #expect(first.split(separator: "\n").count == 2, "\(first)")
        // Kept in keyseald: the same secrets from a new bridge, each in its application's access group.
        try Self.restartBridge(fixture, [])
        #expect(try Self.portal(fixture, "unlocked") == first)
        let groups = try SecretServiceIdentityTests.groups(fixture.daemon)
        #expect(groups.sorted() == ["org.example.First", "org.example.Second"], "\(groups)")
        // Locked, no askpass: cancelled, nothing written; with one, the prompt unlocks and the secret is the same.
        #expect(try Self.keyseal(fixture, ["lock"]).status == 0)
        _ = try Self.portal(fixture, "cancelled")
        try Self.restartBridge(fixture, ["--askpass", fixture.askpassProgram.path])
        #expect(try Self.portal(fixture, "unlocked") == first)
        #expect(try Self.keyseal(fixture, ["status"]).stdoutText.contains("state:            unlocked"))
    }

    /// bubblewrap's arguments for a sandbox as Flatpak builds one: a root of its own holding /.flatpak-info, with the
    /// scripts and the fixture's directory (the bus socket) bound in. Nested namespaces are allowed, as in any
    /// bubblewrap sandbox not made with --disable-userns.
    static func sandboxArguments(_ fixture: SecretServiceFixture) throws -> [String] {
        let info = fixture.directory.appending("flatpak-info")
        try "[Application]\nname=org.example.Sandboxed\n".write(to: info, atomically: true, encoding: .utf8)
        var arguments = [
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin", "--ro-bind", "/etc", "/etc",
            "--ro-bind", "/opt", "/opt", "--bind", "/tmp", "/tmp", "--proc", "/proc", "--dev", "/dev",
            "--ro-bind", info.path, "/.flatpak-info",
        ]
        for directory in Self.sandboxedDirectories(fixture) {
            arguments += ["--bind", directory, directory]
        }
        return arguments
    }

    /// The directories outside /tmp a sandboxed script needs: the scripts and the fixture's.
    static func sandboxedDirectories(_ fixture: SecretServiceFixture) -> [String] {
        [pythonDirectory.path, fixture.directory.path].filter { !$0.hasPrefix("/tmp/") }
    }

    @Test("the Secret portal backend refuses a caller in a Flatpak sandbox: it could name another application")
    func portalRefusesSandboxedCallers() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        let outside = try Self.portal(fixture, "unlocked")
        #expect(outside.split(separator: "\n").count == 2, "\(outside)")
        let arguments =
            try Self.sandboxArguments(fixture) + [
                "--", try Self.python(), Self.pythonDirectory.path + "/portal_secret.py", "sandboxed",
            ]
        let sandboxed = try fixture.run(try requireTool("bwrap", package: "bubblewrap"), arguments)
        #expect(sandboxed.status == 0, "\(sandboxed.stdoutText)\n\(sandboxed.stderrText)\n\(fixture.bridgeLog())")
        #expect(fixture.bridgeLog().contains("RetrieveSecret from a sandboxed or unknown process refused"))
    }

    /// Inside the sandbox, `unshare -Urm` makes a user and mount namespace, binds what Python needs into a root of
    /// its own without /.flatpak-info, and chroots into it: its /proc/PID/root, as the bridge sees it, has no
    /// /.flatpak-info.
    @Test(
        "the Secret portal refuses a sandboxed caller chrooted in namespaces of its own to a root without .flatpak-info"
    )
    func portalRefusesCallersInNamespacesOfTheirOwn() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        let outside = try Self.portal(fixture, "unlocked")
        #expect(outside.split(separator: "\n").count == 2, "\(outside)")
        let root = fixture.directory.appending("chroot").path
        var script = "set -e; R='\(root)'; mkdir -p \"$R\"; "
        script += "for link in lib lib64 bin sbin; do ln -sfn usr/$link \"$R/$link\"; done; "
        for directory in ["/usr", "/etc", "/opt", "/tmp", "/dev"] + Self.sandboxedDirectories(fixture) {
            script += "mkdir -p \"$R\(directory)\"; mount --rbind '\(directory)' \"$R\(directory)\"; "
        }
        script += "test ! -e \"$R/.flatpak-info\"; "
        script += "exec /usr/sbin/chroot \"$R\" '\(try Self.python())' "
        script += "'\(Self.pythonDirectory.path)/portal_secret.py' sandboxed"
        let arguments =
            try Self.sandboxArguments(fixture) + [
                "--", try requireTool("unshare", package: "util-linux"), "-Urm", "/bin/sh", "-c", script,
            ]
        let escaped = try fixture.run(try requireTool("bwrap", package: "bubblewrap"), arguments)
        #expect(escaped.status == 0, "\(escaped.stdoutText)\n\(escaped.stderrText)\n\(fixture.bridgeLog())")
        #expect(fixture.bridgeLog().contains("RetrieveSecret from a sandboxed or unknown process refused"))
    }

    @Test("collections are access groups: an item in each of two, a search on each collection finds only its own")
    func collectionsAreGroups() throws {
        let fixture = try SecretServiceFixture()
        defer { fixture.remove() }
        try Self.runPython(fixture, [Self.script("collections_groups.py")])
        let query = ItemQuery(itemClass: .genericPassword, limit: .all, returns: ReturnOptions(rawValue: 2))
        guard
            case .records(let records) = try KeysealConnection(socketPath: fixture.daemon.socketPath).send(
                .copyMatching(query)
            )
        else { throw FixtureError("no records") }
        var groups: [String: String] = [:]
        for record in records {
            if case .string(let service)? = record.attributes["svce"],
                case .string(let group)? = record.attributes["agrp"]
            {
                groups[service] = group
            }
        }
        #expect(groups["freedesktop-secret:com_example_work"] == "com.example.work", "\(groups)")
        #expect(groups["freedesktop-secret:login"].map { $0 != "com.example.work" } == true, "\(groups)")
    }

    @Test("a wrong passcode from the askpass program dismisses the prompt and leaves the keychain locked")
    func wrongPasscodeDismisses() throws {
        let fixture = try Self.lockedFixture { ["--askpass", $0.askpassProgram.path] }
        defer { fixture.remove() }
        try "wrong-passcode\n".write(to: fixture.askpassFile, atomically: true, encoding: .utf8)
        try Self.runPython(fixture, [Self.script("unlock_dismissed.py")])
        #expect(try Self.keyseal(fixture, ["status"]).stdoutText.contains("state:            locked"))
    }
}

@Suite("Secret Service bridge: two users")
struct SecretServiceUserTests {
    @Test(
        "two users' bridges on one keyseald do not see each other's items",
        .enabled(if: getuid() == 0, "needs root to run as two users")
    )
    func twoUsers() throws {
        let daemon = try DaemonFixture.sharedWithNobody()
        defer { daemon.remove() }
        let first = try UserSecretSession(uid: 65534, daemon: daemon)
        defer { first.remove() }
        // A second account that exists (dbus-daemon looks its user up): Debian's `daemon`.
        let other = try #require(getpwnam("daemon")?.pointee.pw_uid)
        let second = try UserSecretSession(uid: other, daemon: daemon)
        defer { second.remove() }
        #expect(try first.secretTool(["store", "--label=L", "app", "same"], input: "first-secret").status == 0)
        #expect(try second.secretTool(["store", "--label=L", "app", "same"], input: "second-secret").status == 0)
        #expect(try first.secretTool(["lookup", "app", "same"]).stdoutText == "first-secret")
        #expect(try second.secretTool(["lookup", "app", "same"]).stdoutText == "second-secret")
        let search = try first.secretTool(["search", "--all", "app", "same"])
        #expect(search.stdoutText.components(separatedBy: "secret = ").count == 2, "\(search.stdoutText)")
        #expect(!search.stdoutText.contains("second-secret"))
        // Clearing one user's item leaves the other's.
        #expect(try second.secretTool(["clear", "app", "same"]).status == 0)
        #expect(try first.secretTool(["lookup", "app", "same"]).stdoutText == "first-secret")
    }
}

@Suite("Secret Service bridge: applications with identities")
struct SecretServiceIdentityTests {
    @Test(
        "CreateCollection for a group the policy does not grant is refused; a granted group stores",
        .enabled(if: getuid() == 0, "needs root to run as another user")
    )
    func collectionRefused() throws {
        let root = try TemporaryDirectory(prefix: "keyseal-bridge-groups")
        defer { root.remove() }
        let policy = root.appending("policy")
        try "user 65534: uid.65534 com.example.granted\n".write(to: policy, atomically: true, encoding: .utf8)
        let daemon = try DaemonFixture.sharedWithNobody(["--policy", policy.path])
        defer { daemon.remove() }
        let session = try UserSecretSession(uid: 65534, daemon: daemon)
        defer { session.remove() }
        let result = try session.run(
            try SecretServiceTests.python(),
            [
                try session.readableCopy(of: SecretServiceTests.script("collection_refused.py")), "com.example.granted",
                "com.example.other",
            ]
        )
        #expect(result.status == 0, "\(result.stdoutText)\n\(result.stderrText)")
        #expect(try Self.groups(daemon).contains("com.example.granted"))
    }

    /// The access groups of every item in keyseald, read as root.
    static func groups(_ daemon: DaemonFixture) throws -> [String] {
        let query = ItemQuery(itemClass: .genericPassword, limit: .all, returns: ReturnOptions(rawValue: 2))
        let connection = KeysealConnection(socketPath: daemon.socketPath)
        guard case .records(let records) = try connection.send(.copyMatching(query)) else { return [] }
        return records.compactMap { record in
            if case .string(let group)? = record.attributes["agrp"] { return group }
            return nil
        }
    }

    static func resolved(_ path: String) -> String { URL(fileURLWithPath: path).resolvingSymlinksInPath().path }

    @Test(
        "a vouching bridge stores a D-Bus caller's item in its executable's group; without vouching in the bridge's",
        .enabled(if: getuid() == 0, "needs root to run as another user")
    )
    func callerExecutable() throws {
        let secretTool = Self.resolved(try requireTool("secret-tool", package: "libsecret-tools"))
        let bridge = Self.resolved(try SecretServiceFixture.bridgeExecutable())
        let root = try TemporaryDirectory(prefix: "keyseal-bridge-policy")
        defer { root.remove() }
        for vouching in [true, false] {
            let policy = root.appending("policy-\(vouching)")
            try ("exe \(secretTool): *com.example.secret-tool\n" + (vouching ? "vouching exe \(bridge)\n" : ""))
                .write(to: policy, atomically: true, encoding: .utf8)
            let daemon = try DaemonFixture.sharedWithNobody(["--policy", policy.path])
            defer { daemon.remove() }
            let session = try UserSecretSession(uid: 65534, daemon: daemon)
            defer { session.remove() }
            #expect(try session.secretTool(["store", "--label=L", "app", "one"], input: "s1").status == 0)
            #expect(try session.secretTool(["lookup", "app", "one"]).stdoutText == "s1")
            #expect(try Self.groups(daemon) == [vouching ? "com.example.secret-tool" : "uid.65534"])
        }
    }
}
