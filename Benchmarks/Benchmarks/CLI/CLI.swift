// Whole-process `keyseal find-generic-password -w` against a release keyseald (host key), next to a minimal Swift
// program with no Foundation (keyseal-bench-minimal): each iteration starts the program with posix_spawn and waits
// for it, so the figure is the whole process (exec, dynamic loading, runtime start-up, the request, exit).
import Benchmark
import Foundation
import KeysealBenchSupport

#if canImport(Glibc)
import Glibc
#endif

/// The environment of every program started here (`KEY=value`, without the harness's malloc interposer).
let childEnvironment = BenchEnvironment.childEnvironment.map { "\($0.key)=\($0.value)" }

/// Runs `argv` with stdout to /dev/null and waits; stops the benchmark on a failure.
func run(_ argv: [String]) {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    let cArguments = argv.map { strdup($0) } + [nil]
    defer { for pointer in cArguments { free(pointer) } }
    let cEnvironment = childEnvironment.map { strdup($0) } + [nil]
    defer { for pointer in cEnvironment { free(pointer) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, argv[0], &actions, nil, cArguments, cEnvironment) == 0 else {
        fatalError("cannot start \(argv[0])")
    }
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    guard status == 0 else { fatalError("\(argv.joined(separator: " ")) exited with \(status)") }
}

let benchmarks: @Sendable () -> Void = {
    let configuration = benchConfiguration(
        metrics: [.wallClock, .throughput],
        maxIterations: 400,
        seconds: 10,
        warmup: 10
    )
    let minimal = Shared<String>()
    Benchmark(
        "cli: floor: minimal Swift program (whole process)",
        configuration: configuration,
        closure: { benchmark in
            for _ in benchmark.scaledIterations { run([minimal.value]) }
        },
        setup: { minimal.value = try BenchEnvironment.binary("keyseal-bench-minimal", own: true).path }
    )

    let daemon = Shared<DaemonProcess>()
    let find = Shared<[String]>()
    Benchmark(
        "cli: keyseal find-generic-password -w (whole process)",
        configuration: configuration,
        closure: { benchmark in
            for _ in benchmark.scaledIterations { run(find.value) }
        },
        setup: {
            let directory = try BenchEnvironment.privateDirectory("cli")
            daemon.value = try DaemonProcess(
                store: (directory.appendingPathComponent("store"), directory.appendingPathComponent("host.key"))
            )
            let keyseal = try BenchEnvironment.binary("keyseal").path
            run([
                keyseal, "--socket", daemon.value.socket, "add-generic-password", "-a", "bench", "-s", "cli", "-w",
                "s3cret",
            ])
            find.value = [
                keyseal, "--socket", daemon.value.socket, "find-generic-password", "-a", "bench", "-s", "cli", "-w",
            ]
        },
        teardown: { daemon.value.stop() }
    )
}
