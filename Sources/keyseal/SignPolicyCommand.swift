import ArgumentParser
import KeysealTPMPolicyOptions

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// `keyseal tpm sign-policy`: run by `keyseal-tpm-policy` (``SignPolicyHelper``); declared here for help, the man page
/// and completions.
struct SignPolicyCommand: ParsableCommand {
    static let configuration = SignPolicyHelp.configuration
    @OptionGroup var global: GlobalOptions
    @OptionGroup var options: SignPolicyOptions
}

/// `keyseal tpm sign-policy` runs as `keyseal-tpm-policy`, installed next to `keyseal`, so that `keyseal` links neither
/// swift-crypto nor tpm2-tss (every command would start slower; docs/ARCHITECTURE.md, "The command line").
enum SignPolicyHelper {
    /// Replaces this process with `keyseal-tpm-policy` when `arguments` name `tpm sign-policy`; returns otherwise.
    static func runIfNeeded(_ arguments: [String]) {
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
        guard index + 1 < arguments.count, arguments[index] == "tpm", arguments[index + 1] == "sign-policy" else {
            return
        }
        var path = "/proc/self/exe"
        if let resolved = realpath(path, nil) {
            path = String(cString: resolved)
            free(resolved)
        }
        let helper = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent(
            "keyseal-tpm-policy"
        )
        .path
        var cArguments = ([helper] + arguments).map { strdup($0) } + [nil]
        execv(helper, &cArguments)
        CommandFailure(
            status: -25291,
            message:
                "cannot run \(helper): \(String(cString: strerror(errno))) (install keyseal-tpm-policy next to keyseal)"
        ).report(command: "tpm sign-policy", json: arguments.contains("--json"))
        exit(53)
    }
}
