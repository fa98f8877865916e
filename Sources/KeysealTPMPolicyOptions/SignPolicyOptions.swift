import ArgumentParser

// The options and help of `keyseal tpm sign-policy`, which `keyseal-tpm-policy` runs, shared with `keyseal`, which
// lists it in its help, man page and completions but runs `keyseal-tpm-policy` for it (docs/TPM.md "Signed PCR
// policies").

public struct SignPolicyOptions: ParsableArguments {
    public init() {}

    @Option(name: .long, help: "The PCRs the policy covers (comma-separated, 0-23), as the device's --tpm-pcrs.")
    public var pcrs: String
    @Option(name: .long, help: ArgumentHelp("The PCR values to sign.", valueName: "file"))
    public var pcrValues: String?
    @Flag(name: .long, help: "Sign the values the TPM's PCRs have now.")
    public var current = false
    @Option(name: .long, help: ArgumentHelp("The TPM to read with --current.", valueName: "tcti"))
    public var tcti: String?
    @Option(name: .long, help: ArgumentHelp("The signing key (PEM, RSA 2048 or P-256).", valueName: "file"))
    public var privateKey: String
    @Option(name: .long, help: ArgumentHelp("Where to write the signed policy (JSON).", valueName: "file"))
    public var output: String
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Sign for this policy epoch (0-65534): withdrawn once a device's epoch is above it.",
            valueName: "n"
        )
    )
    public var epoch: Int?

    public func validate() throws {
        guard (pcrValues == nil) != !current else {
            throw ValidationError("give one of --pcr-values FILE and --current")
        }
        if let epoch, !(0...65534).contains(epoch) { throw ValidationError("--epoch is 0 to 65534") }
    }
}

public enum SignPolicyHelp {
    public static let configuration = CommandConfiguration(
        commandName: "sign-policy",
        abstract: "Sign the PCR policy of a boot state (build system; no keyseald needed).",
        discussion: """
            Writes FILE: {"sha256": [{"pcrs": [..], "pkfp": HEX, "pol": HEX, "sig": BASE64}]}, the layout of \
            systemd's tpm2-pcr-signature.json. pol is the TPM's PolicyPCR digest over the given SHA-256 PCR values; \
            sig signs it (RSASSA-PKCS1-v1_5 or ECDSA, SHA-256) with --private-key, RSA 2048 or NIST P-256 (PEM); \
            pkfp names the key as systemd does: SHA-256 of its PKCS#1 RSAPublicKey DER (RSA) or of its uncompressed \
            point 04||X||Y (P-256). A device started with `keyseald --tpm-pcrs LIST \
            --tpm-pcr-public-key PUBLIC.pem` opens in that state when the file is in its signature directory.

            --pcr-values FILE: lines `PCR:HEX` or `PCR=HEX` (`tpm2_pcrread sha256:7` output works as it is), or a JSON \
            object {"7": "HEX"}. --current reads the values from the TPM at --tcti (default: $KEYSEAL_TCTI, else \
            device:/dev/tpmrm0) instead: the state this machine is in now. FILE is replaced; it holds nothing secret.

            --epoch N: the entry also holds "epoch": N, and pol is followed by PolicyCounterTimer, so that the TPM \
            accepts the signature only while the device's policy epoch (`keyseal tpm advance-policy-epoch`) is at \
            most N. Without --epoch a signature cannot be withdrawn.
            """
    )
}

/// The options of `keyseal tpm advance-policy-epoch`, which `keyseal-tpm-policy` runs.
public struct AdvancePolicyEpochOptions: ParsableArguments {
    public init() {}

    @Option(name: .long, help: ArgumentHelp("The policy epoch to move to (0-65534).", valueName: "n"))
    public var epoch: Int
    @Option(
        name: .long,
        help: ArgumentHelp("The TPM (default: $KEYSEAL_TCTI, else device:/dev/tpmrm0).", valueName: "tcti")
    )
    public var tcti: String?

    public func validate() throws {
        guard (0...65534).contains(epoch) else { throw ValidationError("--epoch is 0 to 65534") }
    }
}

public enum AdvancePolicyEpochHelp {
    public static let configuration = CommandConfiguration(
        commandName: "advance-policy-epoch",
        abstract: "Withdraw every boot state signed for a lower policy epoch (device; no keyseald needed).",
        discussion: """
            Moves the TPM's policy epoch to N: signatures made with `keyseal tpm sign-policy --epoch M` for M < N no \
            longer open a store on this TPM, wherever their files are restored; those for N and above still do. The \
            epoch is the top 16 bits of the TPM's Clock (TPM2_ClockSet, owner authorization), which the TPM never \
            moves back: it cannot be lowered again, by Keyseal or by root. Install the signatures for epoch N first. \
            Prints the epoch; an epoch below the TPM's is refused, the same epoch changes nothing.
            """
    )
}
