// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Keyseal",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Keyseal", targets: ["Keyseal"]),
        .library(name: "KeysealSecurity", targets: ["KeysealSecurity"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
    ],
    targets: [
        // System libraries: a module map and a shim, nothing else.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CArgon2", pkgConfig: "libargon2", providers: [.apt(["libargon2-dev"])]),
        .systemLibrary(
            name: "CTSS2", pkgConfig: "tss2-esys",
            providers: [.apt(["libtss2-dev"])]),
        .systemLibrary(name: "CP11Kit", pkgConfig: "p11-kit-1", providers: [.apt(["libp11-kit-dev"])]),

        // Pure Swift: item model, query validation, OSStatus, lock state, keybag and envelope crypto.
        .target(
            name: "KeysealCore",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings),
        // SQLite persistence: schema, migrations, rows of ciphertext.
        .target(name: "KeysealStore", dependencies: ["KeysealCore", "CSQLite"], swiftSettings: swiftSettings),
        // Device keys in hardware.
        .target(name: "KeysealTPM", dependencies: ["KeysealCore", "CTSS2"], swiftSettings: swiftSettings),
        .target(
            name: "KeysealPKCS11",
            dependencies: ["KeysealCore", "CP11Kit", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings),
        // The native library: engine (embedded mode), KeychainStore, Keychain.
        .target(
            name: "Keyseal",
            dependencies: [
                "KeysealCore", "KeysealStore", "KeysealTPM", "KeysealPKCS11", "CArgon2",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings),
        // Apple's Security names over Keyseal.
        .target(name: "KeysealSecurity", dependencies: ["Keyseal", "KeysealCore"], swiftSettings: swiftSettings),

        // Test fixtures: swtpm and SoftHSM2 processes, temporary stores. Never linked by a product.
        .target(name: "KeysealTestSupport", dependencies: ["Keyseal", "KeysealCore"], swiftSettings: swiftSettings),

        .executableTarget(
            name: "keyseal-bench",
            dependencies: ["Keyseal", "KeysealSecurity", "KeysealCore", "CSQLite"],
            swiftSettings: swiftSettings),

        .executableTarget(name: "keyseal-tour", dependencies: ["Keyseal"], swiftSettings: swiftSettings),

        .testTarget(name: "KeysealCoreTests", dependencies: ["KeysealCore"], swiftSettings: swiftSettings),
        .testTarget(
            name: "KeysealTests",
            dependencies: ["Keyseal", "KeysealCore", "KeysealStore", "KeysealTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "KeysealSecurityTests",
            dependencies: ["KeysealSecurity", "Keyseal", "KeysealTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "KeysealTPMTests", dependencies: ["KeysealTPM", "KeysealCore", "KeysealTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "KeysealPKCS11Tests", dependencies: ["KeysealPKCS11", "KeysealCore", "KeysealTestSupport"],
            swiftSettings: swiftSettings),
    ]
)
