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

/// `keyseal tpm advance-policy-epoch`: run by `keyseal-tpm-policy` (``SignPolicyHelper``); declared here for help, the
/// man page and completions.
struct AdvancePolicyEpochCommand: ParsableCommand {
    static let configuration = AdvancePolicyEpochHelp.configuration
    @OptionGroup var global: GlobalOptions
    @OptionGroup var options: AdvancePolicyEpochOptions
}

/// `keyseal tpm sign-policy` and `keyseal tpm advance-policy-epoch` run as `keyseal-tpm-policy`, installed next to `keyseal`, so that `keyseal` links neither
/// swift-crypto nor tpm2-tss (every command would start slower; docs/ARCHITECTURE.md, "The command line").
enum SignPolicyHelper {
    /// Replaces this process with `keyseal-tpm-policy` when `arguments` name `tpm sign-policy` or `tpm
    /// advance-policy-epoch`; returns otherwise.
    static func runIfNeeded(_ arguments: [String]) {
        let index = HelperProgram.commandIndex(arguments)
        guard index + 1 < arguments.count, arguments[index] == "tpm",
            ["sign-policy", "advance-policy-epoch"].contains(arguments[index + 1])
        else { return }
        HelperProgram.exec("keyseal-tpm-policy", arguments, command: "tpm \(arguments[index + 1])")
    }
}
