import CKeysealBuildInfo

/// Keyseal's version: the one place it is written. `Scripts/package.sh` reads it for the package's version and checks
/// that CHANGELOG.md's newest release names it.
package enum KeysealVersion {
    package static let number = "0.1.0"

    /// The commit the binary was built from (a release build from `Scripts/package.sh`), else "development build".
    package static var commit: String { String(cString: keyseal_build_commit()) }

    /// `VERSION (COMMIT)`, as `keyseal --version` and `keyseald --version` print it.
    package static var description: String { "\(number) (\(commit))" }
}
