import Foundation
import Glibc
import KeysealTestSupport
import Testing

/// keyseald on a TPM reached directly (a swtpm socket, as `/dev/tpm0`: one client at a time, no resource manager),
/// killed with SIGKILL and started again (docs/TPM.md "What a dead client leaves in the TPM").
@Suite("keyseald on a TPM without a resource manager, killed and restarted")
struct TPMLeftoverTests {
    @Test("20 kill -9 and restarts in a row on swtpm: each keyseald starts and serves every write acknowledged before")
    func killNineRestarts() throws {
        let daemon = try DaemonFixture(.tpm, tpmLimits: (32, 600, 2))
        defer { daemon.remove() }
        let swtpm = try #require(daemon.swtpm)
        let cli = CLI(socket: daemon.socketPath)
        let key = try cli("create-key", "--tag", "hardware", "--hardware")
        #expect(key.status == 0, "\(key.stderrText)")
        for round in 0..<20 {
            // What a keyseald keeps loaded: the primary and its session, a hardware key and its signing session.
            let added = try cli("add-generic-password", "-a", "acct", "-s", "round-\(round)", "-w", "secret-\(round)")
            #expect(added.status == 0, "round \(round): \(added.stderrText)")
            let signed = try cli("sign", "--tag", "hardware", input: "round \(round)")
            #expect(signed.status == 0, "round \(round): \(signed.stderrText)")
            #expect(daemon.stop(signal: SIGKILL) == 128 + SIGKILL)
            do {
                try daemon.start()
            } catch {
                Issue.record("round \(round): keyseald did not start again: \(error)")
                return
            }
            for earlier in 0...round {
                let found = try cli("find-generic-password", "-a", "acct", "-s", "round-\(earlier)", "-w")
                #expect(
                    found.stdoutText == "secret-\(earlier)\n",
                    "round \(round), write \(earlier): \(found.stderrText)"
                )
            }
        }
        // Only what the running keyseald keeps is in the TPM: nothing of the 20 it replaced.
        let handles = try swtpm.handlesInUse()
        #expect(handles.count <= 4, "\(handles)")
    }
}
