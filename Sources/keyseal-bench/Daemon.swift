import Foundation
import Keyseal
import KeysealClient
import KeysealCore
import KeysealSecurity

#if canImport(Glibc)
import Glibc
#endif

/// The directory of this executable, where the release keyseald is built next to it.
func binaryDirectory() -> URL {
    URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A keyseald process started by the bench.
final class DaemonProcess {
    let process = Process()
    let socket: String
    let logPath: String

    init(arguments: [String], socket: String, logPath: String) throws {
        let executable = binaryDirectory().appendingPathComponent("keyseald")
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw BenchError("\(executable.path) is missing: swift build -c release --product keyseald")
        }
        self.socket = socket
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil, attributes: [.posixPermissions: 0o600])
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.executableURL = executable
        process.arguments = arguments + ["--socket", socket, "--log-level", "warning"]
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let probe = try KeychainStore.daemon(socket: socket)
        defer { probe.close() }
        let deadline = Date().addingTimeInterval(60)
        while (try? probe.status()) == nil {
            guard process.isRunning, Date() < deadline else {
                throw BenchError("keyseald did not start: \((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")")
            }
            usleep(5_000)
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// A line of /proc/PID/status in KiB (VmRSS, VmHWM).
    func memoryKiB(_ field: String) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return -1 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let number = line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ").first
            return Double(number ?? "") ?? -1
        }
        return -1
    }

    /// User + system CPU seconds of the daemon so far.
    var cpuSeconds: Double { processCPUSeconds(pid) }

    func stop() {
        if process.isRunning { kill(pid, SIGTERM) }
        process.waitUntilExit()
    }
}

/// User + system CPU seconds of process `pid` (0: this process), from /proc/PID/stat.
func processCPUSeconds(_ pid: Int32) -> Double {
    let path = pid == 0 ? "/proc/self/stat" : "/proc/\(pid)/stat"
    guard let text = try? String(contentsOfFile: path, encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return 0 }
    // Fields after the command name: state is field 3; utime and stime are fields 14 and 15.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

// MARK: - The floor: a bare unix-socket request/reply between two processes

/// Reads exactly `count` bytes.
func readExactly(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Bool {
    var done = 0
    while done < count {
        let n = read(fd, buffer + done, count - done)
        if n <= 0 {
            if n < 0 && errno == EINTR { continue }
            return false
        }
        done += n
    }
    return true
}

func writeExactly(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
    var done = 0
    while done < bytes.count {
        let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
        if n <= 0 {
            if n < 0 && errno == EINTR { continue }
            return false
        }
        done += n
    }
    return true
}

func unixAddress(_ path: String) -> sockaddr_un {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        let bytes = Array(path.utf8.prefix(raw.count - 1))
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    return address
}

/// The child side (`keyseal-bench --echo-server PATH REPLY-BYTES`): accepts one connection and answers every
/// length-prefixed frame with a frame of REPLY-BYTES, as keyseald answers a lookup, until the peer closes.
func echoServer(path: String, replyBytes: Int) -> Never {
    let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = unixAddress(path)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0, listen(listener, 1) == 0 else { exit(2) }
    let fd = accept(listener, nil, nil)
    guard fd >= 0 else { exit(3) }
    var reply = [UInt8](repeating: 0x5a, count: 4 + replyBytes)
    withUnsafeBytes(of: UInt32(replyBytes).bigEndian) { for i in 0..<4 { reply[i] = $0[i] } }
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let ok = buffer.withUnsafeMutableBytes { raw -> Bool in
            guard readExactly(fd, raw.baseAddress!, 4) else { return false }
            let length = Int(UInt32(bigEndian: raw.loadUnaligned(as: UInt32.self)))
            guard length <= raw.count, readExactly(fd, raw.baseAddress!, length) else { return false }
            return reply.withUnsafeBytes { writeExactly(fd, $0) }
        }
        if !ok { exit(0) }
    }
}

/// Round trips of `requestBytes` out and `replyBytes` back between this process and a child, over a unix socket:
/// the cheapest a daemon lookup of those sizes could be.
func pingPongFloor(scratch: URL, requestBytes: Int, replyBytes: Int, count: Int) throws -> Figure {
    let path = scratch.appendingPathComponent("floor.sock").path
    let child = Process()
    child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    child.arguments = ["--echo-server", path, String(replyBytes)]
    try child.run()
    defer { child.waitUntilExit() }
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = unixAddress(path)
    let deadline = Date().addingTimeInterval(10)
    while true {
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if connected == 0 { break }
        guard Date() < deadline else { throw BenchError("the ping-pong child did not listen") }
        usleep(1_000)
    }
    defer { close(fd) }
    var request = [UInt8](repeating: 0x33, count: 4 + requestBytes)
    withUnsafeBytes(of: UInt32(requestBytes).bigEndian) { for i in 0..<4 { request[i] = $0[i] } }
    var reply = [UInt8](repeating: 0, count: 4 + replyBytes)
    func roundTrip() {
        let sent = request.withUnsafeBytes { writeExactly(fd, $0) }
        // Two reads, as the wire client reads a frame: the length, then the payload.
        let received = reply.withUnsafeMutableBytes { raw in
            readExactly(fd, raw.baseAddress!, 4) && readExactly(fd, raw.baseAddress! + 4, replyBytes)
        }
        guard sent && received else { fatalError("ping-pong failed") }
    }
    for _ in 0..<1000 { roundTrip() }
    return measure(
        "floor: unix-socket ping-pong, 2 processes (\(requestBytes) B → \(replyBytes) B)", count: count
    ) { _ in roundTrip() }
}

/// The private part of VmRSS (RssAnon: heap, stacks, SQLite's cache); the rest (RssFile) is the pages of the
/// executable and the shared libraries (Swift runtime, Foundation, libcrypto, SQLite) that it has touched.
func anonymous(_ daemon: DaemonProcess, _ when: String) -> Measurement {
    Measurement(
        name: "  of which RssAnon (private), \(when)", value: daemon.memoryKiB("RssAnon") / 1024, unit: "MiB",
        note: String(format: "RssFile %.1f MiB: executable and shared libraries", daemon.memoryKiB("RssFile") / 1024))
}

// MARK: - Lookups through keyseald

/// The frame sizes of one bench lookup on the wire, from the same encoders the client and daemon use.
func lookupFrameSizes(record: ItemRecord) throws -> (request: Int, reply: Int) {
    let query = ItemQuery(
        itemClass: .genericPassword,
        attributes: [AttributeKey.service: .string("bench.service"), AttributeKey.account: .string("account-12345")],
        returns: .data)
    let request = try WireRequest.copyMatching(query).encodedFrame().count - 4
    let reply = WireResponse.records([record]).encodedFrame().count - 4
    return (request, reply)
}

/// Collected latency samples of concurrent clients.
final class SharedSamples: @unchecked Sendable {
    private let lock = NSLock()
    private var all = Samples()
    func append(_ samples: [UInt64]) { lock.withLock { all.values += samples } }
    var samples: Samples { lock.withLock { all } }
}

/// `clients` threads, each with its own connection (its own `KeychainStore.daemon`), each doing `perClient`
/// lookups; all start together. Ops/s is the total over the wall time.
func concurrentLookups(socket: String, clients: Int, items: Int, perClient: Int) throws -> Figure {
    let shared = SharedSamples()
    let ready = DispatchSemaphore(value: 0)
    let go = DispatchSemaphore(value: 0)
    let finished = DispatchGroup()
    var threads: [Thread] = []
    for index in 0..<clients {
        let store = try KeychainStore.daemon(socket: socket)
        finished.enter()
        let thread = Thread {
            KeychainStore.withDefault(store) {
                var generator = SystemRandomNumberGenerator()
                var samples: [UInt64] = []
                samples.reserveCapacity(perClient)
                // Connect and warm up before the clock starts.
                for _ in 0..<200 {
                    var result: CFTypeRef?
                    _ = SecItemCopyMatching(lookupQuery(account: "account-\(index)") as CFDictionary, &result)
                }
                ready.signal()
                go.wait()
                for _ in 0..<perClient {
                    let account = "account-\(Int.random(in: 0..<items, using: &generator))"
                    var result: CFTypeRef?
                    let t0 = nanoseconds()
                    let status = SecItemCopyMatching(lookupQuery(account: account) as CFDictionary, &result)
                    samples.append(nanoseconds() - t0)
                    guard status == errSecSuccess, result is Data else { fatalError("lookup failed: \(status)") }
                }
                shared.append(samples)
            }
            store.close()
            finished.leave()
        }
        threads.append(thread)
        thread.start()
    }
    for _ in 0..<clients { ready.wait() }
    let start = nanoseconds()
    for _ in 0..<clients { go.signal() }
    finished.wait()
    let seconds = Double(nanoseconds() - start) / 1e9
    return figure(
        "daemon: lookup return data, \(clients) clients (threads, own connections, \(items) items)",
        samples: shared.samples, seconds: seconds)
}

/// Lookups through a release keyseald on the host key: one client and 8 concurrent clients next to the ping-pong
/// floor; the daemon's resident memory with `items` items after the lookups, while locked and after an unlock.
func daemonSection(scratch: URL, items: Int, lookupCount: Int, results: Results) throws {
    let storeDirectory = scratch.appendingPathComponent("daemon-store")
    let hostKey = scratch.appendingPathComponent("daemon-host.key")
    // Populated in one embedded transaction per 5,000 items (fast), then served by keyseald.
    let sample: ItemRecord
    do {
        let store = try KeychainStore.embedded(directory: storeDirectory, device: .hostKey(file: hostKey))
        try populate(store, count: items)
        sample = try store.copyMatching(
            ItemQuery(
                itemClass: .genericPassword,
                attributes: [AttributeKey.service: .string("bench.service"), AttributeKey.account: .string("account-12345")],
                returns: .data)
        ).first!
        store.close()
    }
    let sizes = try lookupFrameSizes(record: sample)

    let floor = try pingPongFloor(
        scratch: scratch, requestBytes: sizes.request, replyBytes: sizes.reply, count: lookupCount * 2)
    results.add(floor)

    let daemon = try DaemonProcess(
        arguments: [
            "--store", storeDirectory.path, "--backend", "host-key", "--host-key", hostKey.path, "--no-auto-lock",
        ],
        socket: scratch.appendingPathComponent("run/keyseal.sock").path,
        logPath: scratch.appendingPathComponent("keyseald.log").path)
    defer { daemon.stop() }
    let startedRSS = daemon.memoryKiB("VmRSS")

    // The daemon's own overhead: a ping answered without the engine, on the wire client.
    let connection = KeysealConnection(socketPath: daemon.socket)
    for _ in 0..<1000 { _ = try connection.send(.ping) }
    results.add(try measure("daemon: ping (wire client, no engine)", count: lookupCount) { _ in
        _ = try connection.send(.ping)
    })
    let rawQuery = ItemQuery(
        itemClass: .genericPassword,
        attributes: [AttributeKey.service: .string("bench.service"), AttributeKey.account: .string("account-12345")],
        returns: .data)
    results.add(try measure("daemon: raw copy-matching (wire client, no SecItem layer)", count: lookupCount) { _ in
        _ = try connection.send(.copyMatching(rawQuery))
    })
    connection.disconnect()

    let client = try KeychainStore.daemon(socket: daemon.socket)
    _ = lookups(client, items: items, count: 2000)
    var one = lookups(client, items: items, count: lookupCount, name: "daemon: 1 client")
    one.floor = "the ping-pong floor"
    one.fractionOfFloor = one.opsPerSecond / floor.opsPerSecond
    one.target = "≥ 50 % of the floor"
    one.meetsTarget = one.fractionOfFloor! >= 0.5
    results.add(one)
    client.close()

    let daemonCPU = daemon.cpuSeconds
    let clientCPU = processCPUSeconds(0)
    var eight = try concurrentLookups(socket: daemon.socket, clients: 8, items: items, perClient: lookupCount / 4)
    let operations = Double(eight.operations)
    results.add(
        Measurement(
            name: "  CPU per lookup with 8 clients: keyseald", value: (daemon.cpuSeconds - daemonCPU) / operations * 1e6,
            unit: "µs",
            note: String(
                format: "clients %.0f µs; %.0f %% of 2 CPUs busy in both",
                (processCPUSeconds(0) - clientCPU) / operations * 1e6,
                ((daemon.cpuSeconds - daemonCPU) + (processCPUSeconds(0) - clientCPU)) / (operations / eight.opsPerSecond)
                    / Double(ProcessInfo.processInfo.activeProcessorCount) * 100)))
    eight.floor = "the ping-pong floor"
    eight.fractionOfFloor = eight.opsPerSecond / floor.opsPerSecond
    eight.target = String(format: "≥ 1.5× one client (%.2f×)", eight.opsPerSecond / one.opsPerSecond)
    eight.meetsTarget = eight.opsPerSecond >= 1.5 * one.opsPerSecond
    results.add(eight)

    // Resident memory. Targets: ≤ 30 MB outside unlock (Argon2id's working memory excluded).
    let afterLookups = daemon.memoryKiB("VmRSS")
    results.add(Measurement(name: "daemon VmRSS at start (\(items) items)", value: startedRSS / 1024, unit: "MiB"))
    results.add(atMost("daemon VmRSS after the lookups (\(items) items)", afterLookups / 1024, "MiB", limit: 30))
    results.add(anonymous(daemon, "after the lookups"))
    let admin = try KeychainStore.daemon(socket: daemon.socket)
    defer { admin.close() }
    let passcode = "bench-passcode-\(UInt32.random(in: 0...UInt32.max))"
    let setStart = nanoseconds()
    try admin.setPasscode(passcode)
    let setSeconds = Double(nanoseconds() - setStart) / 1e9
    results.add(
        Measurement(
            name: "daemon: passcode set, re-encrypting \(items) items", value: setSeconds, unit: "s",
            note: "Argon2id 64 MiB t=3 included"))
    try admin.lock()
    results.add(atMost("daemon VmRSS locked (\(items) items)", daemon.memoryKiB("VmRSS") / 1024, "MiB", limit: 30))
    results.add(anonymous(daemon, "locked"))
    let unlockStart = nanoseconds()
    try admin.unlock(passcode: passcode)
    let unlockMilliseconds = Double(nanoseconds() - unlockStart) / 1e6
    _ = lookups(admin, items: items, count: 2000)
    results.add(
        atMost(
            "daemon VmRSS after the unlock finished (\(items) items)", daemon.memoryKiB("VmRSS") / 1024, "MiB",
            limit: 30))
    results.add(anonymous(daemon, "after the unlock"))
    results.add(
        Measurement(
            name: "daemon VmHWM (peak, Argon2id's 64 MiB included)", value: daemon.memoryKiB("VmHWM") / 1024,
            unit: "MiB"))
    results.add(
        Measurement(name: "daemon: unlock through the socket (host key)", value: unlockMilliseconds, unit: "ms",
            note: "Argon2id 64 MiB t=3 included"))
}
