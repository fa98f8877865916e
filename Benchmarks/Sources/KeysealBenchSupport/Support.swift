// What the suites share. package-benchmark runs every benchmark in a process of its own, so what several benchmarks
// use (a populated store) is made once per run in a scratch directory and reused from there.
import Benchmark
import CKeysealBenchFloors
import Foundation
import Keyseal
import KeysealClient
import KeysealSecurity
import KeysealTestSupport

#if canImport(Glibc)
import Glibc
#endif

public struct BenchError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The run's settings, from the environment Scripts/bench.sh sets.
public enum BenchEnvironment {
    static let environment = ProcessInfo.processInfo.environment
    /// `KEYSEAL_BENCH_QUICK=1`: shorter runs (the same sizes, fewer samples).
    public static let quick = environment["KEYSEAL_BENCH_QUICK"] == "1"
    /// The large store of the issues' targets.
    public static let largeItems = 100_000
    /// `KEYSEAL_BENCH_SCRATCH`: the run's directory for stores shared between benchmarks (tmpfs by default: the
    /// stores are populated one add at a time, and what is measured of them does not write).
    public static let scratch = URL(
        fileURLWithPath: environment["KEYSEAL_BENCH_SCRATCH"] ?? "/dev/shm/keyseal-bench-\(getuid())"
    )
    /// `KEYSEAL_BENCH_DISK`: a directory on a disk, for what commits (durable adds, their SQLite floor, backups).
    public static let disk = URL(fileURLWithPath: environment["KEYSEAL_BENCH_DISK"] ?? "/tmp")
    /// `KEYSEAL_BENCH_BIN`: where the release keyseald and keyseal are; else next to this executable.
    public static var binaries: URL {
        if let path = environment["KEYSEAL_BENCH_BIN"] { return URL(fileURLWithPath: path) }
        return ownDirectory
    }
    /// This executable's directory, where the package's own helpers are (keyseal-bench-echo, keyseal-bench-minimal).
    public static var ownDirectory: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// The environment of the programs the suites start (keyseald, keyseal, the floors' helpers): this process's,
    /// without `LD_PRELOAD`. package-benchmark preloads its malloc interposer, a Swift library, into the benchmark
    /// process, and a child would inherit it: each of the child's allocations would pay the counter, and a statically
    /// linked Swift program would load a second Swift runtime at start (about 3 ms more per `keyseal` run, measured).
    /// The interposer counts this process's allocations only, so the children lose nothing measured by running as
    /// users run them.
    public static let childEnvironment = environment.filter { $0.key != "LD_PRELOAD" }

    public static func binary(_ name: String, own: Bool = false) throws -> URL {
        let url = (own ? ownDirectory : binaries).appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw BenchError("\(url.path) is missing: swift build -c release (Scripts/bench.sh builds it)")
        }
        return url
    }

    /// A fresh private directory of this process under `base`.
    public static func privateDirectory(_ name: String, base: URL = scratch) throws -> URL {
        let url = base.appendingPathComponent("\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(
            at: url,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        return url
    }
}

/// The configuration of the suites: wall clock in nanoseconds, throughput, allocations (the malloc interposer
/// counts this process only: a daemon's allocations are not in the figures). The iteration caps are the issues'
/// sample counts; `--quick` quarters them and the time.
public func benchConfiguration(
    metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal],
    maxIterations: Int = 20_000,
    seconds: Int = 4,
    warmup: Int = 100
) -> Benchmark.Configuration {
    Benchmark.Configuration(
        metrics: metrics,
        timeUnits: .nanoseconds,
        warmupIterations: warmup,
        maxDuration: .seconds(BenchEnvironment.quick ? max(1, seconds / 4) : seconds),
        maxIterations: BenchEnvironment.quick ? max(1, maxIterations / 4) : maxIterations
    )
}

/// A measurement taken once (resident memory, a whole export): custom metrics, one iteration, no warm-up.
public func onceConfiguration(_ metrics: [BenchmarkMetric]) -> Benchmark.Configuration {
    Benchmark.Configuration(
        metrics: metrics,
        timeUnits: .nanoseconds,
        warmupIterations: 0,
        maxDuration: .seconds(600),
        maxIterations: 1
    )
}

/// Runs a setup step that throws in a benchmark's synchronous body, stopping the process with the error
/// (package-benchmark reports the benchmark failed).
public func orFail<T>(_ what: String, _ body: () throws -> T) -> T {
    do {
        return try body()
    } catch {
        FileHandle.standardError.write(Data("benchmark: \(what): \(error)\n".utf8))
        exit(1)
    }
}

public func nanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// What a benchmark's setup makes and its closure uses (each benchmark runs in a process of its own).
public final class Shared<Value>: @unchecked Sendable {
    public var value: Value!
    public init() {}
}

/// A custom metric in the unit its name says, not scaled.
public func metric(_ name: String, biggerIsBetter: Bool = false) -> BenchmarkMetric {
    .custom(name, polarity: biggerIsBetter ? .prefersLarger : .prefersSmaller, useScalingFactor: false)
}

/// User + system CPU seconds of process `pid` (0: this process), from /proc/PID/stat.
public func processCPUSeconds(_ pid: Int32) -> Double {
    let path = pid == 0 ? "/proc/self/stat" : "/proc/\(pid)/stat"
    guard let text = try? String(contentsOfFile: path, encoding: .utf8), let close = text.lastIndex(of: ")") else {
        return 0
    }
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

// MARK: - Stores

/// The item every lookup reads: service "bench.service", account "account-N", a short value.
public func benchItem(_ index: Int) -> NewItem {
    NewItem(
        itemClass: .genericPassword,
        attributes: [
            AttributeKey.service: .string("bench.service"), AttributeKey.account: .string("account-\(index)"),
        ],
        data: Data("secret-value-\(index)".utf8)
    )
}

/// The account of the 1 MiB item in every shared store.
public let largeValueAccount = "large-value-1MiB"
public let largeValueBytes = 1 << 20

/// A store of `items` bench items (and the 1 MiB item) on a host key, populated once per run under the scratch
/// directory: (directory, host key file). Populated one add at a time through the public API.
public func sharedStore(items: Int) throws -> (directory: URL, hostKey: URL) {
    let base = BenchEnvironment.scratch.appendingPathComponent("store-\(items)")
    let directory = base.appendingPathComponent("store")
    let hostKey = base.appendingPathComponent("host.key")
    let done = base.appendingPathComponent("complete")
    if FileManager.default.fileExists(atPath: done.path) { return (directory, hostKey) }
    try? FileManager.default.removeItem(at: base)
    try FileManager.default.createDirectory(
        at: base,
        withIntermediateDirectories: true,
        attributes: [.posixPermissions: 0o700]
    )
    let store = try KeychainStore.embedded(directory: directory, device: .hostKey(file: hostKey))
    defer { store.close() }
    for index in 0..<items { _ = try store.add(benchItem(index)) }
    _ = try store.add(
        NewItem(
            itemClass: .genericPassword,
            attributes: [
                AttributeKey.service: .string("bench.service"), AttributeKey.account: .string(largeValueAccount),
            ],
            data: Data(repeating: 0x4b, count: largeValueBytes)
        )
    )
    _ = FileManager.default.createFile(atPath: done.path, contents: Data(), attributes: [.posixPermissions: 0o600])
    return (directory, hostKey)
}

/// A private copy of a shared store, for benchmarks that change it.
public func copyOfSharedStore(items: Int, base: URL = BenchEnvironment.scratch) throws -> (directory: URL, hostKey: URL)
{
    let shared = try sharedStore(items: items)
    let target = try BenchEnvironment.privateDirectory("copy-\(items)", base: base)
    let directory = target.appendingPathComponent("store")
    let hostKey = target.appendingPathComponent("host.key")
    try FileManager.default.copyItem(at: shared.directory, to: directory)
    try FileManager.default.copyItem(at: shared.hostKey, to: hostKey)
    return (directory, hostKey)
}

/// The lookup every figure times: SecItemCopyMatching by service and account, returning the data.
public func lookupQuery(account: String) -> [String: Any] {
    [
        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench.service",
        kSecAttrAccount as String: account, kSecReturnData as String: true,
    ]
}

/// One SecItemCopyMatching by service and a random account of `items`, returning the data, on the default store.
public func lookupOnce(items: Int, using generator: inout SystemRandomNumberGenerator) {
    lookupAccount("account-\(Int.random(in: 0..<items, using: &generator))")
}

/// A benchmark's body of ``lookupOnce(items:using:)`` calls on the default store, one per scaled iteration.
public func lookupIterations(items: Int) -> @Sendable (Benchmark) -> Void {
    { benchmark in
        var generator = SystemRandomNumberGenerator()
        for _ in benchmark.scaledIterations { lookupOnce(items: items, using: &generator) }
    }
}

public func lookupAccount(_ account: String) {
    var result: CFTypeRef?
    let status = SecItemCopyMatching(lookupQuery(account: account) as CFDictionary, &result)
    guard status == errSecSuccess, let data = result as? Data else { fatalError("lookup failed: \(status)") }
    blackHole(data)
}

// MARK: - Device-key stacks

/// One device-key stack with whatever process or token it needs (the test fixtures'), for an embedded store and for
/// a keyseald serving a store on the same device.
public struct BenchBackend {
    public var device: DeviceKey
    /// The TCTI of a TPM stack, for the raw ESAPI floor.
    public var tcti: String?
    /// keyseald's backend options for this device, and what it adds to keyseald's environment.
    public var daemonArguments: [String]
    public var environment: [String: String]
    public var cleanup: () -> Void

    public static let names = ["host-key", "swtpm", "tabrmd", "tpm2-pkcs11", "softhsm2"]

    public static func make(_ name: String, directory: URL) throws -> BenchBackend {
        switch name {
        case "host-key":
            let file = directory.appendingPathComponent("host.key")
            return BenchBackend(
                device: .hostKey(file: file),
                daemonArguments: ["--backend", "host-key", "--host-key", file.path],
                environment: [:],
                cleanup: {}
            )
        case "swtpm":
            let tpm = try SwtpmFixture(maxTries: 32)
            return BenchBackend(
                device: .tpm(tcti: tpm.tcti),
                tcti: tpm.tcti,
                daemonArguments: ["--backend", "tpm", "--tcti", tpm.tcti],
                environment: [:],
                cleanup: { tpm.stop() }
            )
        case "tabrmd":
            // It stops when the process exits.
            let broker = try ResourceManagerFixture.shared()
            return BenchBackend(
                device: .tpm(tcti: broker.tcti),
                tcti: broker.tcti,
                daemonArguments: ["--backend", "tpm", "--tcti", broker.tcti],
                environment: broker.environment,
                cleanup: {}
            )
        case "tpm2-pkcs11":
            let pool = try TPM2PKCS11Pool.shared()
            let token = try pool.token(.shared)
            return BenchBackend(
                device: .pkcs11(module: token.module, token: token.tokenLabel, pinFile: token.pinFile),
                daemonArguments: pkcs11Arguments(module: token.module, token: token.tokenLabel, pinFile: token.pinFile),
                environment: pool.environment,
                cleanup: { token.remove() }
            )
        case "softhsm2":
            let token = try SoftHSMFixture()
            return BenchBackend(
                device: .pkcs11(module: token.module, token: token.tokenLabel, pinFile: token.pinFile),
                daemonArguments: pkcs11Arguments(module: token.module, token: token.tokenLabel, pinFile: token.pinFile),
                environment: token.environment,
                cleanup: { token.remove() }
            )
        default: throw BenchError("unknown backend \(name)")
        }
    }

    static func pkcs11Arguments(module: String, token: String, pinFile: URL) -> [String] {
        ["--backend", "pkcs11", "--pkcs11-module", module, "--pkcs11-token", token, "--pkcs11-pin-file", pinFile.path]
    }
}

/// The passcode of the stores of ``BackendStore``.
public let benchPasscode = "bench-passcode"
/// The smallest cost libargon2 accepts.
public let minimalArgon2 = Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)

/// A store of `items` bench items with a passcode (``benchPasscode``) on a fresh device of `name`, open and unlocked.
public final class BackendStore: @unchecked Sendable {
    public let backend: BenchBackend
    public let directory: URL
    public let configuration: KeychainStore.Configuration
    public var store: KeychainStore?

    public var storeDirectory: URL { directory.appendingPathComponent("store") }

    public init(_ name: String, argon2: Argon2Parameters, items: Int = 1_000) throws {
        directory = try BenchEnvironment.privateDirectory("backend-\(name)")
        backend = try BenchBackend.make(name, directory: directory)
        configuration = KeychainStore.Configuration(argon2: argon2)
        let store = try KeychainStore.embedded(
            directory: storeDirectory,
            device: backend.device,
            configuration: configuration
        )
        try store.setPasscode(benchPasscode)
        for index in 0..<items { _ = try store.add(benchItem(index)) }
        self.store = store
    }

    public func open() throws -> KeychainStore {
        try KeychainStore.embedded(directory: storeDirectory, device: backend.device, configuration: configuration)
    }

    /// keyseald serving this store on its device (the embedded store closed first: one process at a time), unlocked
    /// through the socket.
    public func daemon() throws -> DaemonProcess {
        store?.close()
        store = nil
        let daemon = try DaemonProcess(
            arguments: ["--store", storeDirectory.path, "--no-auto-lock"] + backend.daemonArguments,
            environment: backend.environment
        )
        do {
            let admin = try KeychainStore.daemon(socket: daemon.socket)
            defer { admin.close() }
            try admin.unlock(passcode: benchPasscode)
        } catch {
            daemon.stop()
            throw error
        }
        return daemon
    }

    public func close() {
        store?.close()
        backend.cleanup()
        try? FileManager.default.removeItem(at: directory)
    }
}

// MARK: - keyseald

/// A release keyseald serving a store on a host key.
public final class DaemonProcess: @unchecked Sendable {
    let process = Process()
    public let socket: String
    let logPath: String

    public convenience init(store: (directory: URL, hostKey: URL)) throws {
        try self.init(
            arguments: [
                "--store", store.directory.path, "--backend", "host-key", "--host-key", store.hostKey.path,
                "--no-auto-lock",
            ])
    }

    /// keyseald with `arguments` (a store and a backend), on a socket of its own.
    public convenience init(arguments: [String], environment: [String: String] = [:]) throws {
        let run = try BenchEnvironment.privateDirectory("keyseald")
        try self.init(
            arguments: arguments,
            socket: run.appendingPathComponent("keyseal.sock").path,
            logPath: run.appendingPathComponent("log").path,
            environment: environment
        )
    }

    public init(arguments: [String], socket: String, logPath: String, environment: [String: String] = [:]) throws {
        self.socket = socket
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil, attributes: [.posixPermissions: 0o600])
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.executableURL = try BenchEnvironment.binary("keyseald")
        process.arguments = arguments + ["--socket", socket, "--log-level", "warning"]
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        process.environment = BenchEnvironment.childEnvironment.merging(environment) { $1 }
        try process.run()
        let probe = try KeychainStore.daemon(socket: socket)
        defer { probe.close() }
        let deadline = Date().addingTimeInterval(120)
        while (try? probe.status()) == nil {
            guard process.isRunning, Date() < deadline else {
                throw BenchError(
                    "keyseald did not start: \((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")"
                )
            }
            usleep(5_000)
        }
    }

    public var pid: Int32 { process.processIdentifier }

    /// A line of /proc/PID/status in KiB (VmRSS, VmHWM, RssAnon, RssFile).
    public func memoryKiB(_ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return -1 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let number = line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ")
                .first
            return Int(number ?? "") ?? -1
        }
        return -1
    }

    public func stop() {
        if process.isRunning { kill(pid, SIGTERM) }
        process.waitUntilExit()
    }
}

// MARK: - The ping-pong floor

/// A bare unix-socket request/reply between this process and keyseal-bench-echo, with the frame sizes of a
/// daemon exchange: the cheapest that exchange could be.
public final class PingPong: @unchecked Sendable {
    let child = Process()
    let fd: Int32
    var request: [UInt8]
    var reply: [UInt8]

    /// - Parameters: requestBytes, replyBytes: the payloads (without the 4-byte length).
    public init(requestBytes: Int, replyBytes: Int) throws {
        let directory = try BenchEnvironment.privateDirectory("pingpong")
        let path = directory.appendingPathComponent("floor.sock").path
        child.executableURL = try BenchEnvironment.binary("keyseal-bench-echo", own: true)
        child.arguments = [path, String(replyBytes)]
        child.environment = BenchEnvironment.childEnvironment
        try child.run()
        var fd: Int32 = -1
        let deadline = Date().addingTimeInterval(10)
        while fd < 0 {
            fd = keyseal_pingpong_connect(path)
            if fd >= 0 { break }
            guard Date() < deadline else { throw BenchError("the ping-pong child did not listen") }
            usleep(1_000)
        }
        self.fd = fd
        var frame = [UInt8](repeating: 0x33, count: 4 + requestBytes)
        withUnsafeBytes(of: UInt32(requestBytes).bigEndian) { for i in 0..<4 { frame[i] = $0[i] } }
        request = frame
        reply = [UInt8](repeating: 0, count: 4 + replyBytes)
    }

    public func roundTrip() {
        let rc = request.withUnsafeBytes { out in
            reply.withUnsafeMutableBytes { back in
                keyseal_pingpong_round_trip(
                    fd,
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    out.count,
                    back.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    back.count
                )
            }
        }
        guard rc == 0 else { fatalError("ping-pong failed") }
    }

    public func close() {
        Glibc.close(fd)
        child.waitUntilExit()
    }
}

/// The frame sizes of one lookup of `account` through `socket` (request, reply payloads), from the wire coding
/// the client and the daemon use.
public func lookupFrameSizes(socket: String, account: String) throws -> (request: Int, reply: Int) {
    let query = rawLookup(account: account)
    let connection = KeysealConnection(socketPath: socket)
    defer { connection.disconnect() }
    let response = try connection.send(.copyMatching(query))
    return (try WireRequest.copyMatching(query).encodedFrame().count - 4, response.encodedFrame().count - 4)
}

/// The bench lookup as the wire sends it (generic password, service and account, return data).
public func rawLookup(account: String) -> ItemQuery {
    ItemQuery(
        itemClass: .genericPassword,
        attributes: [AttributeKey.service: .string("bench.service"), AttributeKey.account: .string(account)],
        returns: .data
    )
}
