// swift-tools-version: 6.1
// Keyseal's benchmarks on ordo-one's package-benchmark (github.com/ordo-one/benchmark): p50/p99, allocations and
// next to its floor measured in the same run. Run them with Scripts/bench.sh (CONTRIBUTING.md, "Benchmarks").
import PackageDescription

import struct Foundation.URL

/// The root package's identity: the name of the directory it is checked out in.
let keyseal = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent
    .lowercased()

let swiftSettings: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "KeysealBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        // The malloc interposer counts allocations; the runtime interposer (ARC counts) is left out.
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
    ],
    targets: [
        // The floors in C straight on the libraries: SQLite, tpm2-tss (ESAPI), PKCS#11 (p11-kit), libcrypto's
        // AES-GCM, libargon2. Only the benchmarks link them.
        .target(
            name: "CKeysealBenchFloors",
            cSettings: [.unsafeFlags(["-I/usr/include/p11-kit-1"])],
            linkerSettings: [
                .linkedLibrary("sqlite3"), .linkedLibrary("tss2-esys"), .linkedLibrary("tss2-tctildr"),
                .linkedLibrary("tss2-mu"), .linkedLibrary("p11-kit"), .linkedLibrary("crypto"),
                .linkedLibrary("argon2"),
            ]
        ),
        // What every suite shares: stores, a keyseald process, the ping-pong client, the binaries' paths.
        .target(
            name: "KeysealBenchSupport",
            dependencies: [
                "CKeysealBenchFloors",
                .product(name: "Keyseal", package: keyseal),
                .product(name: "KeysealSecurity", package: keyseal),
                .product(name: "KeysealClient", package: keyseal),
                .product(name: "KeysealTestSupport", package: keyseal),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            swiftSettings: swiftSettings
        ),
        // The ping-pong floor's other process: answers each length-prefixed frame with a frame of a given size.
        .executableTarget(
            name: "keyseal-bench-echo",
            dependencies: ["CKeysealBenchFloors"],
            swiftSettings: swiftSettings
        ),
        // The command line's yardstick: a minimal Swift program with no Foundation.
        .executableTarget(name: "keyseal-bench-minimal", swiftSettings: swiftSettings),
    ]
)

// One executable per suite, Benchmarks/<Suite>/<Suite>.swift, as swift-nio and swift-certificates lay them out.
for suite in ["Engine", "Daemon", "Unlock", "Keys", "CLI", "Backup"] {
    package.targets.append(
        .executableTarget(
            name: suite,
            dependencies: [
                "KeysealBenchSupport", "CKeysealBenchFloors",
                .product(name: "Keyseal", package: keyseal),
                .product(name: "KeysealSecurity", package: keyseal),
                .product(name: "KeysealClient", package: keyseal),
                .product(name: "KeysealTestSupport", package: keyseal),
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Benchmarks/\(suite)",
            swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    )
}
