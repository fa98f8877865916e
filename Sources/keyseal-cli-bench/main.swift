// Whole-process benchmark of `keyseal find-generic-password -w` against a keyseald (host-key backend, release
// build), next to a minimal Swift program with no Foundation measured in the same run, the two interleaved so
// that machine load falls on both alike. Prints medians and p99 and writes JSON into the output directory.
//
//   keyseal-cli-bench [--runs N] [--output DIR]
import Foundation

#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("keyseal-cli-bench: \(message)\n".utf8))
    exit(1)
}

var runs = 200
var output = "bench-results"
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--runs": runs = arguments.popFirst().flatMap { Int($0) } ?? runs
    case "--output": output = arguments.popFirst() ?? output
    default: fail("unknown argument \(argument)")
    }
}
guard runs >= 150 else { fail("--runs must be at least 150") }

let binDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
let keyseal = binDirectory.appendingPathComponent("keyseal").path
let keyseald = binDirectory.appendingPathComponent("keyseald").path
let minimal = binDirectory.appendingPathComponent("keyseal-bench-minimal").path
for path in [keyseal, keyseald, minimal] where !FileManager.default.isExecutableFile(atPath: path) {
    fail("\(path) is not built (swift build -c release)")
}

let work = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("keyseal-cli-bench-\(getpid())")
try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
defer { try? FileManager.default.removeItem(at: work) }
let socket = work.appendingPathComponent("keyseal.sock").path

let daemon = Process()
daemon.executableURL = URL(fileURLWithPath: keyseald)
daemon.arguments = [
    "--store", work.appendingPathComponent("store").path, "--socket", socket, "--backend", "host-key",
    "--host-key", work.appendingPathComponent("host.key").path, "--log-level", "error",
]
daemon.standardError = FileHandle.nullDevice
try daemon.run()
defer {
    daemon.terminate()
    daemon.waitUntilExit()
}
for _ in 0..<600 where !FileManager.default.fileExists(atPath: socket) { usleep(10_000) }

/// Runs `argv` with stdout to /dev/null and returns the wall time in microseconds; exits on failure.
func timed(_ argv: [String]) -> Double {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    let cArguments = argv.map { strdup($0) } + [nil]
    defer { for pointer in cArguments { free(pointer) } }
    var pid: pid_t = 0
    var start = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    guard posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ) == 0 else { fail("cannot start \(argv[0])") }
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    var end = timespec()
    clock_gettime(CLOCK_MONOTONIC, &end)
    guard status == 0 else { fail("\(argv.joined(separator: " ")) exited with \(status)") }
    return Double(end.tv_sec - start.tv_sec) * 1e6 + Double(end.tv_nsec - start.tv_nsec) / 1e3
}

let find = [keyseal, "--socket", socket, "find-generic-password", "-a", "bench", "-s", "cli", "-w"]
let add = Process()
add.executableURL = URL(fileURLWithPath: keyseal)
add.arguments = ["--socket", socket, "add-generic-password", "-a", "bench", "-s", "cli", "-w", "s3cret"]
try add.run()
add.waitUntilExit()
guard add.terminationStatus == 0 else { fail("keyseal add-generic-password exited \(add.terminationStatus)") }

// Warm the page cache, then interleave.
for _ in 0..<10 {
    _ = timed(find)
    _ = timed([minimal])
}
var cliSamples: [Double] = []
var minimalSamples: [Double] = []
for _ in 0..<runs {
    cliSamples.append(timed(find))
    minimalSamples.append(timed([minimal]))
}

func percentile(_ samples: [Double], _ p: Double) -> Double {
    let sorted = samples.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}
let cliMedian = percentile(cliSamples, 0.5)
let minimalMedian = percentile(minimalSamples, 0.5)
let ratio = cliMedian / minimalMedian
func ms(_ microseconds: Double) -> String { String(format: "%.2f ms", microseconds / 1000) }
print("keyseal find-generic-password -w: median \(ms(cliMedian)), p99 \(ms(percentile(cliSamples, 0.99))) (\(runs) runs)")
print("minimal Swift program:            median \(ms(minimalMedian)), p99 \(ms(percentile(minimalSamples, 0.99)))")
print(String(format: "ratio: %.2f× the minimal program (target ≤ 2×: %@)", ratio, ratio <= 2 ? "met" : "not met"))

let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "-")
let report: [String: Any] = [
    "benchmark": "cli", "runs": runs, "build": "release",
    "keysealFindMedianMicroseconds": cliMedian, "keysealFindP99Microseconds": percentile(cliSamples, 0.99),
    "minimalMedianMicroseconds": minimalMedian, "minimalP99Microseconds": percentile(minimalSamples, 0.99),
    "ratio": ratio, "target": 2.0,
]
try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
let file = URL(fileURLWithPath: output).appendingPathComponent("cli-\(stamp).json")
try JSONSerialization.data(withJSONObject: report, options: [.prettyPrinted, .sortedKeys]).write(to: file)
print("written: \(file.path)")
