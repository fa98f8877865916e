import Foundation
import KeysealCore

/// A SoftHSM2 token of its own for one test: label, user PIN and a 0600 PIN file.
///
/// SoftHSM2 reads `SOFTHSM2_CONF` once, when the library is first initialized in a process, and does not see
/// tokens created later while it stays initialized; p11-kit shares that one initialization between every load
/// of the module in the process. Tests run in parallel in one process, so the fixture uses one process-wide
/// SoftHSM2 configuration (its own temporary directory, `SOFTHSM2_CONF` set with ``publishEnvironment(_:)`` before any module is
/// loaded) holding a pool of tokens with unique labels, all created up front by `softhsm2-util`; each fixture
/// takes a fresh token from the pool. Create the first fixture before loading the module in any other way.
/// The pool size is `KEYSEAL_SOFTHSM_TOKENS`: by default 44 (enough for the whole suite, and below the 48 slots
/// GnuTLS's p11tool handles), 700 when `KEYSEAL_TEST_BACKEND` is `pkcs11` or `daemon-pkcs11`. Child processes (the
/// daemon) get the same configuration through ``environment``.
public final class SoftHSMFixture: @unchecked Sendable {
    /// The SoftHSM2 module of the Debian package.
    public static let defaultModule = "/usr/lib/softhsm/libsofthsm2.so"

    public let module: String
    public let tokenLabel: String
    /// The user PIN (a test secret).
    public let pin: String
    public let soPin: String
    /// A 0600 file holding ``pin`` and a newline.
    public let pinFile: URL
    /// The `softhsm2.conf` shared by every fixture in this process.
    public let configPath: String
    /// `SOFTHSM2_CONF` for child processes.
    public var environment: [String: String] { ["SOFTHSM2_CONF": configPath] }

    private let directory: TemporaryDirectory

    /// Takes a fresh token from the process-wide pool. Throws a ``FixtureError`` naming the missing package when
    /// SoftHSM2 is not installed (never a skip).
    public init() throws {
        let pool = try SoftHSMPool.shared.get()
        let token = try pool.take()
        module = Self.defaultModule
        tokenLabel = token.label
        pin = token.pin
        soPin = token.soPin
        configPath = pool.configPath
        directory = try TemporaryDirectory(prefix: "keyseal-softhsm-pin")
        pinFile = directory.appending("pin")
        try SoftHSMFixture.writeFile(pinFile, contents: pin + "\n")
    }

    /// Removes the fixture's PIN file. The token stays in the shared token directory (SoftHSM2 keeps it open)
    /// until the process exits, when the whole configuration directory is removed.
    public func remove() { directory.remove() }

    /// Writes `contents` to a new file created with mode 0600, then sets `mode` (PIN files for tests).
    public static func writeFile(_ url: URL, contents: String, mode: Int = 0o600) throws {
        guard
            FileManager.default.createFile(
                atPath: url.path,
                contents: Data(contents.utf8),
                attributes: [.posixPermissions: 0o600]
            )
        else { throw FixtureError("cannot create \(url.path)") }
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: url.path)
    }

    /// Runs `softhsm2-util` against this fixture's configuration.
    @discardableResult
    public func softhsmUtil(_ arguments: [String]) throws -> ProcessResult {
        try runProcess(try requireTool("softhsm2-util", package: "softhsm2"), arguments, environment: environment)
    }
}

/// The process-wide SoftHSM2 configuration and its pool of initialized tokens.
final class SoftHSMPool: @unchecked Sendable {
    struct Token {
        var label: String
        var pin: String
        var soPin: String
    }

    /// Created once, on first use; a failure is kept and reported to every fixture.
    static let shared: Result<SoftHSMPool, FixtureError> = {
        do {
            let pool = try SoftHSMPool()
            return .success(pool)
        } catch let error as FixtureError {
            return .failure(error)
        } catch {
            return .failure(FixtureError("SoftHSM2 set-up failed: \(error)"))
        }
    }()

    let root: String
    let configPath: String
    private let lock = NSLock()
    private var free: [Token]
    private let size: Int

    private init() throws {
        let util = try requireTool("softhsm2-util", package: "softhsm2")
        guard FileManager.default.fileExists(atPath: SoftHSMFixture.defaultModule) else {
            throw FixtureError(
                "the SoftHSM2 module \(SoftHSMFixture.defaultModule) is missing (Debian package softhsm2); "
                    + "run Scripts/bootstrap.sh"
            )
        }
        let directory = try TemporaryDirectory(prefix: "keyseal-softhsm")
        root = directory.path
        let tokens = directory.appending("tokens")
        try FileManager.default.createDirectory(
            at: tokens,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        configPath = directory.appending("softhsm2.conf").path
        let config = """
            directories.tokendir = \(tokens.path)
            objectstore.backend = file
            log.level = ERROR
            slots.removable = false

            """
        try SoftHSMFixture.writeFile(URL(fileURLWithPath: configPath), contents: config)
        // Replaces any configuration inherited from the environment: the tokens live here. Other tests run meanwhile.
        publishEnvironment(["SOFTHSM2_CONF": configPath])
        Self.removeAtExit(root)

        // When the engine's whole suites run on PKCS#11 every store needs its own token.
        let environment = fixtureEnvironment
        let fallback = environment["KEYSEAL_TEST_BACKEND"]?.hasSuffix("pkcs11") == true ? 700 : 44
        size = Int(environment["KEYSEAL_SOFTHSM_TOKENS"] ?? "") ?? fallback
        var created: [Token] = []
        let pid = getpid()
        for index in 0..<size {
            let token = Token(
                label: "keyseal-\(pid)-\(index)",
                pin: String(UInt32.random(in: 100_000...999_999)),
                soPin: String(UInt32.random(in: 100_000...999_999))
            )
            let result = try runProcess(
                util,
                ["--init-token", "--free", "--label", token.label, "--pin", token.pin, "--so-pin", token.soPin],
                environment: ["SOFTHSM2_CONF": configPath]
            )
            guard result.status == 0 else {
                throw FixtureError(
                    "softhsm2-util --init-token failed (\(result.status)): \(result.stderrText)\(result.stdoutText)"
                )
            }
            created.append(token)
        }
        free = created
    }

    func take() throws -> Token {
        try lock.withLock {
            guard !free.isEmpty else {
                throw FixtureError(
                    "the SoftHSM2 token pool (\(size) tokens) is used up; raise KEYSEAL_SOFTHSM_TOKENS (SoftHSM2 does "
                        + "not see tokens created after it was initialized in this process)"
                )
            }
            return free.removeFirst()
        }
    }

    private static func removeAtExit(_ root: String) {
        pendingRemoval.withLock { $0 = root }
        atexit {
            if let root = SoftHSMPool.pendingRemoval.withLock({ $0 }) {
                try? FileManager.default.removeItem(atPath: root)
            }
        }
    }

    private static let pendingRemoval = Locked<String?>(nil)

    /// A value behind a lock.
    private final class Locked<Value>: @unchecked Sendable {
        private let lock = NSLock()
        private var value: Value
        init(_ value: Value) { self.value = value }
        func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
            try lock.withLock { try body(&value) }
        }
    }
}
