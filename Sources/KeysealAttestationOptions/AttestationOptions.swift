import ArgumentParser

// The options and help of the attestation commands that `keyseal-attestation` runs, shared with `keyseal`, which lists
// them in its help, man page and completions but runs `keyseal-attestation` for them (docs/ARCHITECTURE.md).

public struct CAChallengeOptions: ParsableArguments {
    public init() {}

    @Option(name: .long, help: ArgumentHelp("The device's enrollment request.", valueName: "file"))
    public var request: String
    @Option(name: .customLong("ca-key"), help: ArgumentHelp("The CA's private key (PEM).", valueName: "file"))
    public var caKey: String
    @Option(name: .customLong("ca-cert"), help: ArgumentHelp("The CA's certificate (PEM).", valueName: "file"))
    public var caCert: String
    @Option(name: .customLong("ek-ca"), help: ArgumentHelp("EK CA certificates (PEM).", valueName: "file"))
    public var ekCA: String?
    @Option(name: .long, help: ArgumentHelp("The challenge file to write.", valueName: "file"))
    public var output: String
}

public struct CAIssueOptions: ParsableArguments {
    public init() {}

    @Option(name: .long, help: ArgumentHelp("The state ca-challenge wrote.", valueName: "file"))
    public var state: String
    @Option(name: .long, help: ArgumentHelp("The device's proof.", valueName: "file"))
    public var proof: String
    @Option(name: .customLong("ca-key"), help: ArgumentHelp("The CA's private key (PEM).", valueName: "file"))
    public var caKey: String?
    @Option(name: .customLong("ca-cert"), help: ArgumentHelp("The CA's certificate (PEM).", valueName: "file"))
    public var caCert: String?
    @Option(name: .long, help: ArgumentHelp("The AK certificate to write (PEM).", valueName: "file"))
    public var output: String
}

public struct VerifyAttestationOptions: ParsableArguments {
    public init() {}

    @Option(name: .long, help: ArgumentHelp("The attestation.", valueName: "file"))
    public var input: String
    @Option(name: .long, help: ArgumentHelp("The challenge, in hex.", valueName: "hex"))
    public var challenge: String
    @Option(
        name: .long,
        help: ArgumentHelp("The CA certificate(s) that issued the AK certificate (PEM).", valueName: "file")
    )
    public var ca: String
    @Option(name: .customLong("public-key"), help: ArgumentHelp("The expected key (PEM).", valueName: "file"))
    public var publicKey: String?
}

public enum AttestationCommandHelp {
    public static let caChallenge = CommandConfiguration(
        commandName: "ca-challenge",
        abstract: "CA side: check the EK certificate and make a credential to the EK for the AK (no keyseald).",
        discussion: """
            Writes the challenge for the device to --output and what ca-issue needs to --output.state (0600: it \
            holds the credential; keep it on the CA). Every certificate in --ek-ca (the TPM maker's root and \
            intermediates) is trusted to issue EK certificates; without --ek-ca the EK certificate is not checked.
            """
    )
    public static let caIssue = CommandConfiguration(
        commandName: "ca-issue",
        abstract: "CA side: check the device's proof and issue the AK certificate (no keyseald).",
        discussion: """
            The certificate: X.509 v3, empty subject, the TPM's manufacturer, model and version (from the EK \
            certificate) in the subjectAltName, EKU 2.23.133.8.3 (tcg-kp-AIKCertificate), not a CA.
            """
    )
    public static let verifyAttestation = CommandConfiguration(
        commandName: "verify-attestation",
        abstract: "Check a key attestation (webauthn-tpm or json) against a challenge and a CA (no keyseald).",
        discussion: """
            Checks: the AK certificate (empty subject, EKU 2.23.133.8.3, not a CA) chains to --ca; certInfo's \
            magic and type; the certified Name is pubArea's; pubArea has fixedTPM, fixedParent and \
            sensitiveDataOrigin; extraData is SHA-256 of the challenge (for json: 0x02 then SHA-256 of the \
            challenge and the properties, keyseal-tpm-attestation-v2; v1 documents are refused); the AK's \
            signature; with --public-key, the certified key. Exit 0 when all hold, else 93 with the failed check.
            """
    )
}
