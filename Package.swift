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
        .library(name: "LocalAuthentication", targets: ["LocalAuthentication"]),
        .library(name: "KeysealX509", targets: ["KeysealX509"]),
        .library(name: "KeysealClient", targets: ["KeysealClient"]),
        .executable(name: "keyseald", targets: ["keyseald"]),
        .executable(name: "keyseal", targets: ["keyseal"]),
        .executable(name: "keyseal-attestation", targets: ["keyseal-attestation"]),
        .executable(name: "keyseal-tpm-policy", targets: ["keyseal-tpm-policy"]),
        .executable(name: "keyseal-secret-service", targets: ["keyseal-secret-service"]),
        // The PKCS#11 module `libkeyseal-pkcs11.so`: a thin client of keyseald for C programs (docs/PKCS11.md).
        .library(name: "keyseal-pkcs11", type: .dynamic, targets: ["KeysealPKCS11Module"]),
        // For the Benchmarks package (Benchmarks/) only, hence the underscore: the test fixtures and the device-key
        // providers it measures; not for applications.
        .library(name: "_KeysealTestSupport", targets: ["KeysealTestSupport", "KeysealTPM", "KeysealPKCS11"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
    ],
    targets: [
        // System libraries: a module map and a shim, nothing else.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CArgon2", pkgConfig: "libargon2", providers: [.apt(["libargon2-dev"])]),
        .systemLibrary(
            name: "CTSS2",
            pkgConfig: "tss2-esys",
            providers: [.apt(["libtss2-dev"])]
        ),
        .systemLibrary(name: "CKeysealSys"),
        .systemLibrary(name: "CLibCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CP11Kit", pkgConfig: "p11-kit-1", providers: [.apt(["libp11-kit-dev"])]),
        .systemLibrary(name: "CSDBus", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),

        // The request, record, status and report types (OSStatus names and messages with them), and `SecretBytes`:
        // defined once for the engine, the wire and the command line (no crypto, no SQLite, no NIO;
        // FoundationEssentials for Data and Date).
        .target(
            name: "KeysealModel",
            dependencies: ["CKeysealSys", "CKeysealBuildInfo"],
            swiftSettings: swiftSettings
        ),
        // The commit of a release build, in an ELF section Scripts/package.sh fills (docs/OPERATIONS.md, "Installing").
        .target(name: "CKeysealBuildInfo"),
        // Item model, query validation, OSStatus, lock state, keybag and envelope crypto (swift-crypto; opens through
        // libcrypto, docs/ARCHITECTURE.md).
        .target(
            name: "KeysealCore",
            dependencies: [
                "KeysealModel", "CLibCrypto", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // SQLite persistence: schema, migrations, rows of ciphertext.
        .target(name: "KeysealStore", dependencies: ["KeysealCore", "CSQLite"], swiftSettings: swiftSettings),
        // Device keys in hardware.
        .target(
            name: "KeysealTPM",
            dependencies: [
                "KeysealCore", "CTSS2", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "KeysealPKCS11",
            dependencies: ["KeysealCore", "CP11Kit", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // TPM key attestation without a TPM: the WebAuthn "tpm" statement (CBOR), its verifier, and the CA's side of the
        // attestation key's enrollment (TPM2_MakeCredential in software, the AK certificate); docs/TPM.md.
        .target(
            name: "KeysealAttestation",
            dependencies: [
                "KeysealCore", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        // The wire protocol's client side: a blocking socket, FoundationEssentials only (no NIO, no GRDB).
        .target(name: "KeysealClient", dependencies: ["KeysealModel"], swiftSettings: swiftSettings),
        // The native library: engine (embedded mode), daemon mode, KeychainStore, Keychain.
        .target(
            name: "Keyseal",
            dependencies: [
                "KeysealCore", "KeysealStore", "KeysealTPM", "KeysealPKCS11", "KeysealClient", "CArgon2",
                "KeysealAttestation",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        // swift-certificates' types over the native library: `Certificate`s, identities, and a `CustomPrivateKey`
        // so that swift-certificates signs with a key that stays in the hardware (docs/ARCHITECTURE.md).
        .target(
            name: "KeysealX509",
            dependencies: [
                "Keyseal", "KeysealCore", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        // Apple's Security names over Keyseal.
        .target(
            name: "KeysealSecurity",
            dependencies: ["Keyseal", "KeysealCore", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),

        // Apple's LocalAuthentication names over Keyseal: `LAContext` checks the store's passcode (askpass) or a
        // fingerprint (fprintd) for the SecAccessControl constraints KeysealSecurity enforces.
        .target(
            name: "LocalAuthentication",
            dependencies: ["KeysealSecurity", "Keyseal", "KeysealCore"],
            swiftSettings: swiftSettings
        ),

        // The daemon as a library: socket server, peer credentials, roles, auto-lock, service lifecycle.
        .target(
            name: "KeysealServer",
            dependencies: [
                "Keyseal", "KeysealCore", "KeysealClient", "CKeysealSys", "KeysealX509", "KeysealTPM",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // free, realloc and reallocarray that wipe each block before the C library gets it back, for the whole process
        // of the executables that link it (docs/ARCHITECTURE.md, "Freed memory").
        .target(name: "CKeysealHeapWipe"),
        .executableTarget(
            name: "keyseald",
            dependencies: [
                "KeysealServer", "Keyseal", "CKeysealHeapWipe",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings,
            // The Swift runtime and FoundationEssentials linked in (the daemon's modules import nothing of full
            // Foundation, so neither it nor ICU's data is in the image): only the pages the daemon uses are
            // resident, instead of whole shared libraries (docs/OPERATIONS.md, resident memory).
            linkerSettings: [
                .unsafeFlags(["-static-stdlib"], .when(platforms: [.linux])),
                .linkedLibrary("_FoundationCollections", .when(platforms: [.linux])),
                .linkedLibrary("_FoundationCShims", .when(platforms: [.linux])),
                .linkedLibrary("swiftSynchronization", .when(platforms: [.linux])),
            ]
        ),
        // The command line: the thin client and argument parsing only (no engine, no NIO, no SQLite).
        .executableTarget(
            name: "keyseal",
            dependencies: [
                "KeysealClient", "KeysealModel", "KeysealAttestationOptions", "KeysealTPMPolicyOptions",
                "CKeysealSys", "CKeysealHeapWipe",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings,
            // The Swift runtime linked in: no dozen shared libraries to load and relocate at each start
            // (measured: median 12.3 → 8.8 ms per `keyseal find-generic-password -w`). Release builds only: the
            // debug build's KeysealServerTests link this module (FindParserTests), and a test binary cannot take
            // the static runtime.
            linkerSettings: [
                .unsafeFlags(["-static-stdlib"], .when(platforms: [.linux], configuration: .release)),
                // FoundationEssentials' own static dependencies, which -static-stdlib does not name.
                .linkedLibrary("_FoundationCollections", .when(platforms: [.linux], configuration: .release)),
                .linkedLibrary("_FoundationCShims", .when(platforms: [.linux], configuration: .release)),
            ]
        ),
        // The options and help of keyseal-attestation's commands, which keyseal lists too (argument parsing only).
        .target(
            name: "KeysealAttestationOptions",
            dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        // The options and help of `keyseal tpm sign-policy`, which keyseal lists too (argument parsing only).
        .target(
            name: "KeysealTPMPolicyOptions",
            dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        // `keyseal tpm sign-policy` (signing with the build system's key, PCRs read through the TCTI), which `keyseal`
        // runs as this program so that it links neither swift-crypto nor tpm2-tss (docs/TPM.md "Signed PCR policies").
        .executableTarget(
            name: "keyseal-tpm-policy",
            dependencies: [
                "KeysealTPM", "KeysealTPMPolicyOptions", "KeysealModel",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // The attestation commands that need X.509 and libcrypto (the CA's side of the AK enrollment, the verifier), which
        // `keyseal` runs as this program so that it links neither (docs/ARCHITECTURE.md, "The command line").
        .executableTarget(
            name: "keyseal-attestation",
            dependencies: [
                "KeysealAttestation", "KeysealAttestationOptions", "KeysealModel",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // The freedesktop Secret Service over keyseald: sd-bus on a thread of its own, items through the wire.
        .target(
            name: "KeysealSecretService",
            dependencies: [
                "KeysealClient", "KeysealCore", "CSDBus", "CLibCrypto", "CKeysealSys",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "keyseal-secret-service",
            dependencies: [
                "KeysealSecretService", "KeysealClient", "CKeysealHeapWipe",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // The PKCS#11 module's C face: the function lists (v2.40 and the v3.0 interface) and the stubs of what it does
        // not implement, over the Swift entry points. The header is p11-kit's pkcs11.h; nothing of p11-kit is linked.
        .target(
            name: "CKeysealPKCS11Entry",
            cSettings: [.unsafeFlags(["-I/usr/include/p11-kit-1"])]
        ),
        // The PKCS#11 module: keyseald's wire client inside the caller's process, no engine, SQLite, TPM or token code
        // (libcrypto, shared, only checks signatures with public keys for C_Verify).
        // The Swift runtime and FoundationEssentials are linked in, so that the module loads into a C program on a
        // machine without a Swift toolchain (checked with ldd in PKCS11ModuleTests).
        .target(
            name: "KeysealPKCS11Module",
            dependencies: ["CKeysealPKCS11Entry", "CLibCrypto", "KeysealClient", "KeysealModel"],
            swiftSettings: swiftSettings + [.unsafeFlags(["-Xcc", "-I/usr/include/p11-kit-1"])],
            linkerSettings: [
                .unsafeFlags(["-static-stdlib"], .when(platforms: [.linux])),
                .linkedLibrary("_FoundationCollections", .when(platforms: [.linux])),
                .linkedLibrary("_FoundationCShims", .when(platforms: [.linux])),
                .linkedLibrary("swiftSynchronization", .when(platforms: [.linux])),
            ]
        ),
        // Test helper and benchmark: the PKCS#11 module driven from C (dlopen), as C programs use it.
        .executableTarget(
            name: "keyseal-pkcs11-probe",
            path: "Tests/keyseal-pkcs11-probe",
            cSettings: [.unsafeFlags(["-I/usr/include/p11-kit-1"])],
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // Test helper: one wire request from a process of its own (e.g. run as another uid).
        .executableTarget(
            name: "keyseal-wire-probe",
            dependencies: ["KeysealClient"],
            path: "Tests/keyseal-wire-probe",
            swiftSettings: swiftSettings
        ),
        // Benchmark helper (Scripts/bench-ssh-agent.sh): keyseal ssh-agent's sign round trip next to the wire's.
        .executableTarget(
            name: "keyseal-ssh-agent-bench",
            dependencies: ["KeysealClient"],
            path: "Tests/keyseal-ssh-agent-bench",
            swiftSettings: swiftSettings
        ),

        // Test fixtures: swtpm and SoftHSM2 processes, temporary stores. Beside the tests (Tests/KeysealTestSupport);
        // linked by no application product (only _KeysealTestSupport, for Benchmarks/).
        .target(
            name: "KeysealTestSupport",
            dependencies: [
                "Keyseal", "KeysealCore", "CKeysealSys", "CKeysealHeapWipe",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/KeysealTestSupport",
            swiftSettings: swiftSettings
        ),

        .testTarget(name: "KeysealClientTests", dependencies: ["KeysealClient"], swiftSettings: swiftSettings),
        .testTarget(
            name: "KeysealSecretServiceTests",
            dependencies: ["KeysealSecretService", "KeysealTestSupport"],
            exclude: ["Python"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KeysealServerTests",
            dependencies: [
                "KeysealServer", "Keyseal", "KeysealClient", "KeysealCore", "KeysealTestSupport", "KeysealAttestation",
                // SecItemAdd through keyseald, for keys the command line does not make.
                "KeysealSecurity",
                // The command line's parsers, compared in FindParserTests.
                "keyseal", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            exclude: ["Python"],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "KeysealCoreTests", dependencies: ["KeysealCore"], swiftSettings: swiftSettings),
        .testTarget(
            name: "KeysealTests",
            dependencies: [
                "Keyseal", "KeysealCore", "KeysealStore", "KeysealTestSupport", "CKeysealHeapWipe",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KeysealSecurityTests",
            dependencies: [
                "KeysealSecurity", "Keyseal", "KeysealTestSupport", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LocalAuthenticationTests",
            dependencies: [
                "LocalAuthentication", "KeysealSecurity", "Keyseal", "KeysealCore", "KeysealTestSupport",
            ],
            exclude: ["Python"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KeysealX509Tests",
            dependencies: [
                "KeysealX509", "Keyseal", "KeysealCore", "KeysealTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KeysealTPMTests",
            dependencies: [
                "KeysealTPM", "KeysealCore", "KeysealTestSupport", "KeysealAttestation",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KeysealPKCS11Tests",
            dependencies: [
                "KeysealPKCS11", "KeysealCore", "KeysealStore", "Keyseal", "CP11Kit", "KeysealTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
