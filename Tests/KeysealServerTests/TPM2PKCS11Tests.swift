import Foundation
import KeysealTestSupport
import Testing

/// keyseald on tpm2-pkcs11, the PKCS#11 module many TPM devices use, behind tpm2-abrmd on swtpm: keys made
/// beforehand with `tpm2_ptool` (tpm2-pkcs11 cannot generate them through PKCS#11) serve as the device key.
@Suite("keyseald on tpm2-pkcs11", .serialized)
struct TPM2PKCS11Tests {
    /// Starts keyseald on the fixture's token; returns the process and its socket.
    private func startDaemon(_ token: TPM2PKCS11Fixture, store: URL, log: URL) throws -> (Process, String) {
        let socket = token.directory.appending("run/keyseal.sock").path
        let process = try startKeyseald(
            arguments: [
                "--store", store.path, "--backend", "pkcs11", "--pkcs11-module", TPM2PKCS11Fixture.module,
                "--pkcs11-token", token.tokenLabel, "--pkcs11-pin-file", token.pinFile.path,
            ],
            socket: socket,
            environment: token.environment,
            log: log
        )
        return (process, socket)
    }

    private func stop(_ process: Process) {
        process.terminate()
        process.waitForExit()
    }

    @Test("the scenario: passcode, classes, lock, refusal, wrong passcode, unlock, restart as a reboot, unlock")
    func scenario() throws {
        let token = try TPM2PKCS11Fixture(withKeys: true)
        defer { token.remove() }
        let store = token.directory.appending("store")
        let log = token.directory.appending("keyseald.log")
        var (daemon, socket) = try startDaemon(token, store: store, log: log)
        defer { stop(daemon) }
        let cli = CLI(socket: socket)
        #expect(try cli("passcode", "set", "--passcode-stdin", input: "correct horse battery\n").status == 0)
        #expect(try cli("add-generic-password", "-a", "alice", "-s", "mail", "-w", "wu-secret").status == 0)
        #expect(
            try cli(
                "add-generic-password",
                "-a",
                "bob",
                "-s",
                "mail",
                "-w",
                "afu-secret",
                "--accessible",
                "after-first-unlock"
            ).status == 0
        )
        #expect(try cli("lock").status == 0)
        #expect(try cli("find-generic-password", "-a", "alice", "-s", "mail", "-w").status == 36)
        #expect(try cli("find-generic-password", "-a", "bob", "-s", "mail", "-w").stdoutText == "afu-secret\n")
        let wrong = try cli("unlock", "--passcode-stdin", input: "wrong passcode here\n")
        #expect(wrong.status == 51, "\(wrong.stderrText)")
        #expect(try cli("unlock", "--passcode-stdin", input: "correct horse battery\n").status == 0)
        #expect(try cli("find-generic-password", "-a", "alice", "-s", "mail", "-w").stdoutText == "wu-secret\n")

        stop(daemon)
        (daemon, socket) = try startDaemon(token, store: store, log: log)
        #expect(try cli("find-generic-password", "-a", "bob", "-s", "mail", "-w").status == 36)
        #expect(try cli("unlock", "--passcode-stdin", input: "correct horse battery\n").status == 0)
        #expect(try cli("find-generic-password", "-a", "alice", "-s", "mail", "-w").stdoutText == "wu-secret\n")
        #expect(try cli("find-generic-password", "-a", "bob", "-s", "mail", "-w").stdoutText == "afu-secret\n")
    }

    @Test("a tpm2-pkcs11 token without the keys: provisioning fails and says to create them with the token's tool")
    func provisioningWithoutKeysSaysWhatToDo() throws {
        let token = try TPM2PKCS11Fixture(withKeys: false)
        defer { token.remove() }
        var environment = token.environment
        environment["KEYSEAL_TESTING_ARGON2"] = "minimal"
        let result = try runProcess(
            try builtProductsDirectory().appendingPathComponent("keyseald").path,
            [
                "--store", token.directory.appending("store").path, "--socket",
                token.directory.appending("run/keyseal.sock").path, "--backend", "pkcs11", "--pkcs11-module",
                TPM2PKCS11Fixture.module, "--pkcs11-token", token.tokenLabel, "--pkcs11-pin-file", token.pinFile.path,
            ],
            environment: environment
        )
        #expect(result.status != 0)
        #expect(
            result.stderrText.contains(
                "create the keys \"keyseal-device-key.device\" and \"keyseal-device-key.passcode\" beforehand"
            ),
            "\(result.stderrText)"
        )
    }
}
