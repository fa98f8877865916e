// Lookups through a release keyseald on a host key from one client and from 8 concurrent clients, at 1,000 and
// 100,000 items; a 1 MiB value; next to a bare unix-socket request/reply between two processes with the same frame
// sizes (keyseal-bench-echo). The serial floor of a lookup through the daemon, one round trip plus one embedded
// lookup, is formed from these and the Engine suite's figures by Scripts/bench_check.py. One client's lookups also
// on every device-key stack users deploy (host key, swtpm's socket, tpm2-abrmd, SoftHSM2), each next to the embedded
// lookup on the same store and device, so that each stack's serial floor is measured in this suite's run. Also the
// daemon's resident memory with 100,000 items, its unlock and passcode change.
import Benchmark
import Foundation
import Keyseal
import KeysealBenchSupport
import KeysealClient
import KeysealSecurity

#if canImport(Glibc)
import Glibc
#endif

/// The device-key stacks of the per-stack lookups (``BenchBackend``): the ones keyseald is deployed on.
let daemonBackends = ["host-key", "swtpm", "tabrmd", "softhsm2"]

/// Clients of the 8-client figure, and the lookups each does per iteration.
let clientCount = 8
let lookupsPerClient = 32

/// `clients` threads, each with its own connection to `socket` (its own `KeychainStore.daemon`); each iteration
/// releases all of them at once and returns when every one has done `perClient` lookups.
final class ClientPool: @unchecked Sendable {
    let go = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)
    let clients: Int
    var stopping = false
    /// The CPU seconds of keyseald and of this process when the pool was ready, and the lookups done since.
    var daemonCPUStart = 0.0
    var clientCPUStart = 0.0
    var lookups = 0

    init(socket: String, clients: Int, items: Int, perClient: Int) throws {
        self.clients = clients
        let ready = DispatchSemaphore(value: 0)
        for index in 0..<clients {
            let store = try KeychainStore.daemon(socket: socket)
            let thread = Thread { [self] in
                KeychainStore.withDefault(store) {
                    var generator = SystemRandomNumberGenerator()
                    // Connect and warm up before the clock starts.
                    for _ in 0..<100 { lookupAccount("account-\(index)") }
                    ready.signal()
                    while true {
                        go.wait()
                        if stopping { break }
                        for _ in 0..<perClient { lookupOnce(items: items, using: &generator) }
                        done.signal()
                    }
                }
                store.close()
                done.signal()
            }
            thread.start()
        }
        for _ in 0..<clients { ready.wait() }
    }

    func round() {
        for _ in 0..<clients { go.signal() }
        for _ in 0..<clients { done.wait() }
    }

    func stop() {
        stopping = true
        round()
    }
}

let benchmarks: @Sendable () -> Void = {
    // The ping-pong floors: the frame sizes of a bench lookup (small value) and of the 1 MiB lookup, read off a
    // keyseald answering them, then the same sizes between this process and keyseal-bench-echo.
    for (label, account) in [("lookup frames", "account-7"), ("1 MiB value frames", largeValueAccount)] {
        let pingPong = Shared<PingPong>()
        Benchmark(
            "floor: unix-socket ping-pong, 2 processes (\(label))",
            configuration: benchConfiguration(maxIterations: account == largeValueAccount ? 2_000 : 40_000),
            closure: { benchmark in
                for _ in benchmark.scaledIterations { pingPong.value.roundTrip() }
            },
            setup: {
                let daemon = try DaemonProcess(store: try sharedStore(items: 1_000))
                defer { daemon.stop() }
                let sizes = try lookupFrameSizes(socket: daemon.socket, account: account)
                pingPong.value = try PingPong(requestBytes: sizes.request, replyBytes: sizes.reply)
            },
            teardown: { pingPong.value.close() }
        )
    }

    for items in [1_000, BenchEnvironment.largeItems] {
        let daemon = Shared<DaemonProcess>()
        let client = Shared<KeychainStore>()
        Benchmark(
            "daemon: SecItemCopyMatching return data, 1 client (\(items) items)",
            configuration: benchConfiguration(),
            closure: { benchmark in
                var generator = SystemRandomNumberGenerator()
                for _ in benchmark.scaledIterations { lookupOnce(items: items, using: &generator) }
            },
            setup: {
                daemon.value = try DaemonProcess(store: try sharedStore(items: items))
                client.value = try KeychainStore.daemon(socket: daemon.value.socket)
                KeychainStore.default = client.value
            },
            teardown: {
                client.value.close()
                daemon.value.stop()
            }
        )

        let pool = Shared<ClientPool>()
        let poolDaemon = Shared<DaemonProcess>()
        let daemonCPU = metric("keyseald CPU per lookup (ns)")
        let clientCPU = metric("clients' CPU per lookup (ns)")
        Benchmark(
            "daemon: SecItemCopyMatching return data, \(clientCount) clients × \(lookupsPerClient) lookups (\(items) items)",
            configuration: benchConfiguration(
                metrics: [.wallClock, .throughput, .mallocCountTotal, daemonCPU, clientCPU],
                maxIterations: 2_000
            ),
            closure: { benchmark in
                for _ in benchmark.scaledIterations { pool.value.round() }
                // CPU time is counted in clock ticks (10 ms), more than one iteration takes: each sample is the
                // average since the setup, which converges.
                pool.value.lookups += clientCount * lookupsPerClient
                let lookups = Double(pool.value.lookups)
                benchmark.measurement(
                    daemonCPU,
                    Int((processCPUSeconds(poolDaemon.value.pid) - pool.value.daemonCPUStart) / lookups * 1e9)
                )
                benchmark.measurement(
                    clientCPU,
                    Int((processCPUSeconds(0) - pool.value.clientCPUStart) / lookups * 1e9)
                )
            },
            setup: {
                poolDaemon.value = try DaemonProcess(store: try sharedStore(items: items))
                pool.value = try ClientPool(
                    socket: poolDaemon.value.socket,
                    clients: clientCount,
                    items: items,
                    perClient: lookupsPerClient
                )
                pool.value.daemonCPUStart = processCPUSeconds(poolDaemon.value.pid)
                pool.value.clientCPUStart = processCPUSeconds(0)
            },
            teardown: {
                pool.value.stop()
                poolDaemon.value.stop()
            }
        )
    }

    // One client's lookups through keyseald per device-key stack, each on a store of its own with a passcode, unlocked
    // through the socket, next to the embedded lookup on such a store: once the store is unlocked a lookup needs
    // nothing from the device, so neither figure may depend on the stack (a TPM daemon once served one client 2.5×
    // slower than the host key's, unseen while only the host key was measured here).
    for name in daemonBackends {
        let embedded = Shared<BackendStore>()
        Benchmark(
            "\(name): daemon floor: embedded SecItemCopyMatching return data (1000 items)",
            configuration: benchConfiguration(),
            closure: lookupIterations(items: 1_000),
            setup: {
                embedded.value = try BackendStore(name, argon2: minimalArgon2)
                KeychainStore.default = embedded.value.store!
            },
            teardown: { embedded.value.close() }
        )

        let served = Shared<BackendStore>()
        let daemon = Shared<DaemonProcess>()
        let client = Shared<KeychainStore>()
        Benchmark(
            "\(name): daemon: SecItemCopyMatching return data, 1 client (1000 items)",
            configuration: benchConfiguration(),
            closure: lookupIterations(items: 1_000),
            setup: {
                served.value = try BackendStore(name, argon2: minimalArgon2)
                daemon.value = try served.value.daemon()
                client.value = try KeychainStore.daemon(socket: daemon.value.socket)
                KeychainStore.default = client.value
            },
            teardown: {
                client.value.close()
                daemon.value.stop()
                served.value.close()
            }
        )
    }

    // The daemon's own overhead: a ping answered without the engine, and a raw copy-matching without the SecItem
    // layer, on the wire client.
    let wireDaemon = Shared<DaemonProcess>()
    let connection = Shared<KeysealConnection>()
    let wireSetup: @Sendable () throws -> Void = {
        wireDaemon.value = try DaemonProcess(store: try sharedStore(items: 1_000))
        connection.value = KeysealConnection(socketPath: wireDaemon.value.socket)
    }
    let wireTeardown: @Sendable () throws -> Void = {
        connection.value.disconnect()
        wireDaemon.value.stop()
    }
    Benchmark(
        "daemon: ping (wire client, no engine)",
        configuration: benchConfiguration(),
        closure: { benchmark in
            for _ in benchmark.scaledIterations { blackHole(orFail("ping") { try connection.value.send(.ping) }) }
        },
        setup: wireSetup,
        teardown: wireTeardown
    )
    let rawQuery = rawLookup(account: "account-12")
    Benchmark(
        "daemon: raw copy-matching (wire client, no SecItem layer, 1000 items)",
        configuration: benchConfiguration(),
        closure: { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(orFail("copy-matching") { try connection.value.send(.copyMatching(rawQuery)) })
            }
        },
        setup: wireSetup,
        teardown: wireTeardown
    )

    // A 1 MiB value through the daemon (target: ≤ 2× the ping-pong of the same frames plus the embedded lookup).
    let largeDaemon = Shared<DaemonProcess>()
    let largeClient = Shared<KeychainStore>()
    Benchmark(
        "daemon: SecItemCopyMatching return data, 1 MiB value (1 client)",
        configuration: benchConfiguration(maxIterations: 2_000),
        closure: { benchmark in
            for _ in benchmark.scaledIterations { lookupAccount(largeValueAccount) }
        },
        setup: {
            largeDaemon.value = try DaemonProcess(store: try sharedStore(items: 1_000))
            largeClient.value = try KeychainStore.daemon(socket: largeDaemon.value.socket)
            KeychainStore.default = largeClient.value
        },
        teardown: {
            largeClient.value.close()
            largeDaemon.value.stop()
        }
    )

    // Resident memory with 100,000 items (target ≤ 30 MiB outside unlock: Argon2id's 64 MiB excluded), the passcode
    // set that re-encrypts every item, and an unlock through the socket. Once, on a copy of the large store.
    let rssStart = metric("VmRSS at start (KiB)")
    let rssAfterLookups = metric("VmRSS after 2000 lookups (KiB)")
    let anonAfterLookups = metric("RssAnon after 2000 lookups (KiB)")
    let rssLocked = metric("VmRSS locked (KiB)")
    let rssAfterUnlock = metric("VmRSS after the unlock (KiB)")
    let peak = metric("VmHWM with Argon2id's 64 MiB (KiB)")
    let passcodeSet = metric("passcode set re-encrypting every item (ms)")
    let unlock = metric("unlock through the socket with Argon2id 64 MiB t=3 (ms)")
    let memoryMetrics = [
        rssStart, rssAfterLookups, anonAfterLookups, rssLocked, rssAfterUnlock, peak, passcodeSet, unlock,
    ]
    let memoryStore = Shared<(directory: URL, hostKey: URL)>()
    Benchmark(
        "daemon: resident memory, passcode set and unlock (\(BenchEnvironment.largeItems) items)",
        configuration: onceConfiguration(memoryMetrics),
        closure: { benchmark in
            orFail("memory") {
                let daemon = try DaemonProcess(store: memoryStore.value)
                defer { daemon.stop() }
                benchmark.measurement(rssStart, daemon.memoryKiB("VmRSS"))
                let admin = try KeychainStore.daemon(socket: daemon.socket)
                defer { admin.close() }
                var generator = SystemRandomNumberGenerator()
                try KeychainStore.withDefault(admin) {
                    for _ in 0..<2_000 { lookupOnce(items: BenchEnvironment.largeItems, using: &generator) }
                    benchmark.measurement(rssAfterLookups, daemon.memoryKiB("VmRSS"))
                    benchmark.measurement(anonAfterLookups, daemon.memoryKiB("RssAnon"))
                    let passcode = "bench-passcode-\(UInt32.random(in: 0...UInt32.max))"
                    var start = nanoseconds()
                    try admin.setPasscode(passcode)
                    benchmark.measurement(passcodeSet, Int((nanoseconds() - start) / 1_000_000))
                    _ = try admin.lock()
                    benchmark.measurement(rssLocked, daemon.memoryKiB("VmRSS"))
                    start = nanoseconds()
                    try admin.unlock(passcode: passcode)
                    benchmark.measurement(unlock, Int((nanoseconds() - start) / 1_000_000))
                    for _ in 0..<2_000 { lookupOnce(items: BenchEnvironment.largeItems, using: &generator) }
                    benchmark.measurement(rssAfterUnlock, daemon.memoryKiB("VmRSS"))
                    benchmark.measurement(peak, daemon.memoryKiB("VmHWM"))
                }
            }
        },
        setup: { memoryStore.value = try copyOfSharedStore(items: BenchEnvironment.largeItems) },
        teardown: { try? FileManager.default.removeItem(at: memoryStore.value.directory.deletingLastPathComponent()) }
    )
}
