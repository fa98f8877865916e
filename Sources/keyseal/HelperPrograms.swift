#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// What the helper programs installed next to `keyseal` share: `keyseal` runs a command that needs a heavy library
/// (X.509, swift-crypto, tpm2-tss) as a program of its own, so that every other command starts fast
/// (docs/ARCHITECTURE.md, "The command line").
enum HelperProgram {
    /// The index of the command's first word in `arguments`, after the global options `--json`, `--socket PATH` and
    /// `--socket=PATH`.
    static func commandIndex(_ arguments: [String]) -> Int {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--json" || argument.hasPrefix("--socket=") {
                index += 1
            } else if argument == "--socket" {
                index += 2
            } else {
                break
            }
        }
        return index
    }

    /// Where `program` is: next to this executable (a build tree), else in `../libexec/keyseal/` beside the
    /// executable's directory (the package: `/usr/bin/keyseal` runs `/usr/libexec/keyseal/PROGRAM`).
    static func path(of program: String) -> String {
        var path = "/proc/self/exe"
        if let resolved = realpath(path, nil) {
            path = String(cString: resolved)
            free(resolved)
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        let beside = directory.appendingPathComponent(program).path
        if access(beside, X_OK) == 0 { return beside }
        let installed = directory.deletingLastPathComponent()
            .appendingPathComponent("libexec/keyseal").appendingPathComponent(program).path
        return access(installed, X_OK) == 0 ? installed : beside
    }

    /// Replaces this process with `program` (``path(of:)``), given `arguments`. When it cannot be run, reports
    /// errSecNotAvailable for `command` and exits 53.
    static func exec(_ program: String, _ arguments: [String], command: String) -> Never {
        let helper = path(of: program)
        var cArguments = ([helper] + arguments).map { strdup($0) } + [nil]
        execv(helper, &cArguments)
        CommandFailure(
            status: -25291,
            message:
                "cannot run \(helper): \(String(cString: strerror(errno))) (install \(program) next to keyseal or in ../libexec/keyseal/)"
        ).report(command: command, json: arguments.contains("--json"))
        exit(53)
    }
}
