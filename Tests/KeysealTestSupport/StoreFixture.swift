import Foundation
import Keyseal
import KeysealCore
import Synchronization

/// A clock tests move by hand.
public final class TestClock: Sendable {
    private let current: Mutex<Date>
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Mutex(start) }
    public var now: Date { current.withLock { $0 } }
    public func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// The device keys the engine's suites run against.
public enum TestBackend: String, CaseIterable, Sendable, CustomStringConvertible {
    case hostKey = "host-key"
    case tpm
    case pkcs11

    public var description: String { rawValue }

    /// The backend the engine's suites run against: `KEYSEAL_TEST_BACKEND` (`host-key`, `tpm`, `pkcs11`, `tabrmd`, or
    /// one of these prefixed with `daemon-` to run through a keyseald process), else the host key. Scripts/test.sh runs
    /// the suites once per backend.
    public static var current: TestBackend { selection.backend }

    /// Whether `KEYSEAL_TEST_BACKEND` asks for the suites to run through a real keyseald (`daemon-host-key`,
    /// `daemon-tpm`, `daemon-pkcs11`): ``StoreFixture`` then starts a keyseald process and hands tests a
    /// `KeychainStore.daemon(socket:)`.
    public static var throughDaemon: Bool { selection.throughDaemon }

    /// `KEYSEAL_TEST_BACKEND=daemon-tabrmd`: the TPM suites through keyseald on a TPM behind tpm2-abrmd
    /// (`DaemonFixture.Backend.tabrmd`); the backend is then `.tpm`.
    public static var throughResourceManager: Bool {
        ProcessInfo.processInfo.environment["KEYSEAL_TEST_BACKEND"] == "daemon-tabrmd"
    }

    /// `KEYSEAL_TEST_BACKEND=tabrmd`: the engine's suites embedded, each store on the TPM behind the one tpm2-abrmd
    /// of the test process (``ResourceManagerFixture/shared()``); the backend is then `.tpm`.
    public static var onSharedResourceManager: Bool {
        ProcessInfo.processInfo.environment["KEYSEAL_TEST_BACKEND"] == "tabrmd"
    }

    private static var selection: (backend: TestBackend, throughDaemon: Bool) {
        guard var name = ProcessInfo.processInfo.environment["KEYSEAL_TEST_BACKEND"], !name.isEmpty else {
            return (.hostKey, false)
        }
        let throughDaemon = name.hasPrefix("daemon-")
        if throughDaemon { name.removeFirst("daemon-".count) }
        if name == "tabrmd" { return (.tpm, throughDaemon) }
        guard let backend = TestBackend(rawValue: name) else {
            fatalError(
                "KEYSEAL_TEST_BACKEND=\(name) is not one of host-key, tpm, pkcs11, tabrmd, daemon-host-key, "
                    + "daemon-tpm, daemon-pkcs11, daemon-tabrmd"
            )
        }
        return (backend, throughDaemon)
    }
}

/// Argon2id cost for tests: the smallest libargon2 accepts, so that unlocks take microseconds.
public let testArgon2 = Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)

/// A temporary store on one backend, with a hand-moved clock. Remove with ``remove()``.
///
/// Through the daemon (``TestBackend/throughDaemon``) the store is a `KeychainStore.daemon(socket:)` on a keyseald
/// process of the fixture's own, on the same backend; ``reopen()`` restarts that process (a reboot). The clock
/// and ``sql(_:)`` reach only an embedded engine: tests that use them say so with
/// `.disabled(if: TestBackend.throughDaemon, "reason")`, which the test run reports as skipped with the reason.
public final class StoreFixture: @unchecked Sendable {
    public let backend: TestBackend
    public let root: TemporaryDirectory
    public let clock = TestClock()
    public let device: DeviceKey
    public let configuration: KeychainStore.Configuration
    /// The swtpm behind a TPM fixture (nil on the shared tpm2-abrmd: that TPM is not this store's own).
    public let swtpm: SwtpmFixture?
    /// The tpm2-abrmd a store on the shared resource manager reaches its TPM through.
    public let resourceManager: ResourceManagerFixture?
    /// The SoftHSM2 token behind a PKCS#11 fixture.
    public let softhsm: SoftHSMFixture?
    /// The keyseald process the store talks to, through the daemon.
    public let daemon: DaemonFixture?
    private let lock = NSLock()
    private var _store: KeychainStore?

    public var storeDirectory: URL { daemon?.storeDirectory ?? root.appending("store") }
    public var databasePath: String { storeDirectory.appendingPathComponent("keyseal.db").path }
    public var throughDaemon: Bool { daemon != nil }

    /// A store on the backend `KEYSEAL_TEST_BACKEND` names, embedded or through a daemon as it says.
    /// On the TPM backend the TPM allows 32 passcode failures, so that the engine suites see the store's escalating
    /// delays (10 failures) with every try made by the TPM, none refused at its reserve.
    public convenience init(valueLimit: Int = 1 << 20) throws {
        try self.init(
            TestBackend.current,
            valueLimit: valueLimit,
            throughDaemon: TestBackend.throughDaemon,
            tpmMaxTries: 32,
            sharedResourceManager: TestBackend.onSharedResourceManager
        )
    }

    /// A store on `backend`: embedded unless `throughDaemon` (then the value limit is the wire's, 1 MiB).
    /// - Parameters:
    ///   - tpmMaxTries: on `.tpm`, the swtpm's TPM2_PT_MAX_AUTH_FAIL.
    ///   - sharedResourceManager: on `.tpm` and embedded, the TPM behind the process's one tpm2-abrmd
    ///     (`tabrmd:bus_type=session`) instead of a swtpm of the store's own.
    public init(
        _ backend: TestBackend,
        valueLimit: Int = 1 << 20,
        throughDaemon: Bool = false,
        tpmMaxTries: Int = 5,
        sharedResourceManager: Bool = false
    ) throws {
        self.backend = backend
        let clock = self.clock
        configuration = KeychainStore.Configuration(
            valueLimit: valueLimit,
            argon2: testArgon2,
            clock: { clock.now }
        )
        if throughDaemon {
            let daemonBackend: DaemonFixture.Backend =
                switch backend {
                case .hostKey: .hostKey
                case .tpm: TestBackend.throughResourceManager ? .tabrmd : .tpm
                case .pkcs11: .pkcs11
                }
            let daemon = try DaemonFixture(daemonBackend)
            self.daemon = daemon
            root = daemon.root
            device = daemon.device
            swtpm = daemon.swtpm
            softhsm = daemon.softhsm
            resourceManager = daemon.broker
            _store = try daemon.client()
            return
        }
        daemon = nil
        root = try TemporaryDirectory(prefix: "keyseal-store")
        switch backend {
        case .hostKey:
            device = .hostKey(file: root.appending("host.key"))
            swtpm = nil
            softhsm = nil
            resourceManager = nil
        case .tpm where sharedResourceManager:
            let broker = try ResourceManagerFixture.shared()
            device = .tpm(tcti: broker.tcti)
            swtpm = nil
            softhsm = nil
            resourceManager = broker
        case .tpm:
            let tpm = try SwtpmFixture(maxTries: tpmMaxTries)
            device = .tpm(tcti: tpm.tcti)
            swtpm = tpm
            softhsm = nil
            resourceManager = nil
        case .pkcs11:
            let token = try SoftHSMFixture()
            device = .pkcs11(module: token.module, token: token.tokenLabel, pinFile: token.pinFile)
            swtpm = nil
            softhsm = token
            resourceManager = nil
        }
        _store = try KeychainStore.embedded(directory: storeDirectory, device: device, configuration: configuration)
    }

    public var store: KeychainStore { lock.withLock { _store! } }

    /// Closes and opens the store again: a reboot (through the daemon, a restart of keyseald).
    public func reopen() throws {
        try lock.withLock {
            _store?.close()
            _store = nil
            if let daemon {
                try daemon.restart()
                _store = try daemon.client()
            } else {
                _store = try KeychainStore.embedded(
                    directory: storeDirectory,
                    device: device,
                    configuration: configuration
                )
            }
        }
    }

    /// Closes the store (through the daemon, also stops keyseald, which closes its store).
    public func close() {
        lock.withLock {
            _store?.close()
            daemon?.stop()
        }
    }

    /// Opens another store on the same directory (expected to fail while this one is open).
    public func openSecond() throws -> KeychainStore {
        try KeychainStore.embedded(directory: storeDirectory, device: device, configuration: configuration)
    }

    public func remove() {
        close()
        if let daemon {
            daemon.remove()
            return
        }
        swtpm?.stop()
        softhsm?.remove()
        root.remove()
    }

    /// Runs a read-only query with the sqlite3 tool against a copy of what is on disk now (the database and its
    /// WAL), while the store stays open: the engine holds its file locks exclusively, and a copy shows exactly
    /// what a crash at this instant would leave.
    public func sqlOnDisk(_ statement: String) throws -> String {
        try Self.sqlOnDisk(databasePath: databasePath, statement)
    }

    /// ``sqlOnDisk(_:)`` for any store file.
    public static func sqlOnDisk(databasePath: String, _ statement: String) throws -> String {
        let copy = try TemporaryDirectory()
        defer { copy.remove() }
        let copied = copy.appending("copy.db").path
        let manager = FileManager.default
        try manager.copyItem(atPath: databasePath, toPath: copied)
        if manager.fileExists(atPath: databasePath + "-wal") {
            try manager.copyItem(atPath: databasePath + "-wal", toPath: copied + "-wal")
        }
        let sqlite = try requireTool("sqlite3", package: "sqlite3")
        let result = try runProcess(sqlite, [copied, statement])
        guard result.status == 0 else { throw FixtureError("sqlite3 failed: \(result.stderrText)") }
        return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs SQL against the closed store file with the sqlite3 tool (for tamper tests).
    @discardableResult
    public func sql(_ statement: String) throws -> String {
        let sqlite = try requireTool("sqlite3", package: "sqlite3")
        let result = try runProcess(sqlite, [databasePath, statement])
        guard result.status == 0 else { throw FixtureError("sqlite3 failed: \(result.stderrText)") }
        return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

extension NewItem {
    /// A generic password for tests.
    public static func password(
        service: String = "svc",
        account: String,
        secret: String = "secret",
        accessibility: Accessibility = .whenUnlocked,
        group: String? = nil
    ) -> NewItem {
        NewItem(
            itemClass: .genericPassword,
            attributes: [AttributeKey.service: .string(service), AttributeKey.account: .string(account)],
            accessGroup: group,
            accessibility: accessibility,
            data: Data(secret.utf8)
        )
    }
}

extension ItemQuery {
    /// A generic-password query by service and account.
    public static func password(
        service: String = "svc",
        account: String?,
        returns: ReturnOptions = []
    )
        -> ItemQuery
    {
        var attributes: [String: AttributeValue] = [AttributeKey.service: .string(service)]
        if let account { attributes[AttributeKey.account] = .string(account) }
        return ItemQuery(itemClass: .genericPassword, attributes: attributes, returns: returns)
    }
}

/// The status a call threw, or 0.
public func status(of body: () throws -> Void) -> OSStatus {
    do {
        try body()
        return 0
    } catch let error as KeychainError {
        return error.status
    } catch {
        return KeychainStatus.internalComponent
    }
}
