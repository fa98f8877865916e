import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

extension LocalAuthenticationSuites {
    /// Passcode checks by keyseald's clients (uids that are not administrators): counted by uid in keyseald's memory,
    /// never in the store, and bounded on the TPM, so that no client can keep an administrator from unlocking.
    @Suite("Clients' passcode tries")
    struct ClientPasscodeTriesTests {
        /// Client uids in the socket's group (``DaemonFixture/probe(asUID:_:)``).
        static let clients: [UInt32] = [65534, 65533]

        static func requireRoot() -> Bool {
            guard getuid() == 0 else {
                Issue.record("needs root to run the probe as other uids")
                return false
            }
            return true
        }

        @Test("a client that keeps sending wrong passcodes never delays or refuses the administrator's unlock")
        func clientCannotHoldTheAdministratorsUnlock() throws {
            guard Self.requireRoot() else { return }
            let daemon = try DaemonFixture.sharedWithNobody()
            defer { daemon.remove() }
            let administrator = try daemon.client()
            defer { administrator.close() }
            try administrator.setPasscode(passcode)
            // The attack, kept up: between the administrator's unlocks the client sends more wrong passcodes than the
            // store's undelayed tries (5): counted as the store's, they would delay the unlock by a minute and more.
            for round in 0..<3 {
                _ = try administrator.lock()
                for attempt in 0..<6 {
                    let answer = try daemon.probeAsNobody(["authenticate", "wrong \(round) \(attempt)"])
                    #expect(answer.hasPrefix("error -25293"), "\(answer)")
                }
                try administrator.unlock(passcode: passcode)
                #expect(try administrator.status().lockState == .unlocked)
                #expect(try administrator.status().failedAttempts == 0)
            }
        }

        @Test("a client has three wrong tries until an administrator unlocks, then is refused without a try")
        func clientTriesAreLimitedPerUID() throws {
            guard Self.requireRoot() else { return }
            let daemon = try DaemonFixture.sharedWithNobody(environment: ["KEYSEAL_TESTING_PASSCODE_DELAYS": "tenth"])
            defer { daemon.remove() }
            let administrator = try daemon.client()
            defer { administrator.close() }
            try administrator.setPasscode(passcode)
            // Its first wrong try is undelayed; the second sets the store's first delay (60 s, 6 s here).
            for attempt in 1...3 {
                let answer = try daemon.probeAsNobody(["authenticate", "wrong"])
                #expect(answer.hasPrefix("error -25293"), "attempt \(attempt): \(answer)")
                #expect(answer.contains("wrong passcode"), "attempt \(attempt): \(answer)")
                if attempt == 2 { Thread.sleep(forTimeInterval: 6.5) }
            }
            // Past its three, even the right passcode is refused without a try, and the store counted nothing.
            let refused = try daemon.probeAsNobody(["authenticate", passcode])
            #expect(refused.hasPrefix("error -25293"), "\(refused)")
            #expect(refused.contains("no passcode check was made"), "\(refused)")
            #expect(try administrator.status().failedAttempts == 0)
            // An administrator's unlock gives the client its tries back.
            try administrator.unlock(passcode: passcode)
            #expect(try daemon.probeAsNobody(["authenticate", passcode]).hasPrefix("ok token "))
        }

        @Test("a client's second wrong try waits its own delay; a try inside it is refused and not counted")
        func clientTriesAreDelayedPerUID() throws {
            guard Self.requireRoot() else { return }
            let daemon = try DaemonFixture.sharedWithNobody(environment: ["KEYSEAL_TESTING_PASSCODE_DELAYS": "tenth"])
            defer { daemon.remove() }
            let administrator = try daemon.client()
            defer { administrator.close() }
            try administrator.setPasscode(passcode)
            #expect(try daemon.probeAsNobody(["authenticate", "wrong"]).contains("wrong passcode"))
            #expect(try daemon.probeAsNobody(["authenticate", "wrong"]).contains("wrong passcode"))
            // Now inside the 6 s the second failure's delay sets (60 s in the product): refused, even the right one.
            let early = try daemon.probeAsNobody(["authenticate", passcode])
            #expect(early.contains("no passcode check was made"), "\(early)")
            #expect(early.contains("try again in"), "\(early)")
            // Another uid is not held by the first one's delay.
            #expect(try daemon.probe(asUID: Self.clients[1], ["authenticate", passcode]).hasPrefix("ok token "))
            Thread.sleep(forTimeInterval: 6.5)
            #expect(try daemon.probeAsNobody(["authenticate", passcode]).hasPrefix("ok token "))
        }

        @Test("on swtpm, clients together spend at most six of the TPM's tries and leave the administrator two")
        func clientsSpendBoundedTPMTries() throws {
            guard Self.requireRoot() else { return }
            let daemon = try DaemonFixture.sharedWithNobody(
                backend: .tpm,
                environment: ["KEYSEAL_TESTING_PASSCODE_DELAYS": "tenth"],
                tpmLimits: (maxTries: 12, recoveryTime: 600, lockoutRecovery: 2)
            )
            defer { daemon.remove() }
            let administrator = try daemon.client()
            defer { administrator.close() }
            try administrator.setPasscode(passcode)
            let before = try #require(try administrator.status().triesLeft)
            // Three uids, each trying until refused: the per-uid limit (3) and the clients' total (6) stop them.
            for uid in Self.clients + [65532] {
                for attempt in 1...4 {
                    _ = try daemon.probe(asUID: uid, ["authenticate", "wrong"])
                    if attempt == 2 { Thread.sleep(forTimeInterval: 6.5) }
                }
            }
            let after = try #require(try administrator.status().triesLeft)
            #expect(before - after == 6, "clients spent \(before - after) TPM tries")
            #expect(try administrator.status().failedAttempts == 0)
            _ = try administrator.lock()
            try administrator.unlock(passcode: passcode)
            #expect(try administrator.status().lockState == .unlocked)
        }

        @Test("on swtpm, no client check is made while the TPM has two usable tries or fewer")
        func clientsLeaveTheAdministratorsHardwareTries() throws {
            guard Self.requireRoot() else { return }
            let daemon = try DaemonFixture.sharedWithNobody(
                backend: .tpm,
                tpmLimits: (maxTries: 5, recoveryTime: 600, lockoutRecovery: 2)
            )
            defer { daemon.remove() }
            let administrator = try daemon.client()
            defer { administrator.close() }
            try administrator.setPasscode(passcode)
            // 5 tries, one kept in reserve: 4 usable; the administrator's two wrong unlocks leave 2.
            _ = try administrator.lock()
            for _ in 0..<2 { #expect(throws: KeychainError.self) { try administrator.unlock(passcode: "wrong") } }
            #expect(try administrator.status().triesLeft == 2)
            let refused = try daemon.probeAsNobody(["authenticate", passcode])
            #expect(refused.contains("kept for an administrator"), "\(refused)")
            #expect(try administrator.status().triesLeft == 2)
            try administrator.unlock(passcode: passcode)
            #expect(try administrator.status().lockState == .unlocked)
        }
    }
}
