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

    /// Replaces this process with `program`, found next to this executable, given `arguments`. When it cannot be
    /// run, reports errSecNotAvailable for `command` and exits 53.
    static func exec(_ program: String, _ arguments: [String], command: String) -> Never {
        var path = "/proc/self/exe"
        if let resolved = realpath(path, nil) {
            path = String(cString: resolved)
            free(resolved)
        }
        let helper = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent(program).path
        var cArguments = ([helper] + arguments).map { strdup($0) } + [nil]
        execv(helper, &cArguments)
        CommandFailure(
            status: -25291,
            message: "cannot run \(helper): \(String(cString: strerror(errno))) (install \(program) next to keyseal)"
        ).report(command: command, json: arguments.contains("--json"))
        exit(53)
    }
}
