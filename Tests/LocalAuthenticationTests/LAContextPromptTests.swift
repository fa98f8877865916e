import Foundation
import Keyseal
import KeysealCore
import KeysealSecurity
import KeysealTestSupport
import LocalAuthentication
import Testing

/// fprintd for a test: a private bus (dbus-daemon) set as the system bus of this process, with, unless `service` is
/// nil, a stand-in for fprintd's D-Bus service on it (Python/fake-fprintd.py, options as it takes them). The library
/// runs fprintd's own clients (`fprintd-list`, `fprintd-verify`), which talk to it as to fprintd.
final class FprintdFixture: @unchecked Sendable {
    let directory: TemporaryDirectory
    private var processes: [Process] = []
    var address: String { "unix:path=" + directory.appending("bus").path }
    var log: String { (try? String(contentsOfFile: directory.appending("calls").path, encoding: .utf8)) ?? "" }

    init(service options: [String]?) throws {
        _ = try requireTool("fprintd-list", package: "fprintd")
        _ = try requireTool("fprintd-verify", package: "fprintd")
        directory = try TemporaryDirectory(prefix: "keyseal-fprintd")
        do {
            let bus = try start(
                try requireTool("dbus-daemon", package: "dbus"),
                ["--session", "--nofork", "--nopidfile", "--address=\(address)"]
            )
            try wait("dbus-daemon did not start") {
                SwtpmFixture.accepts(self.directory.appending("bus").path) || !bus.isRunning
            }
            if let options {
                let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                    .appendingPathComponent("Python/fake-fprintd.py").path
                let service = try start(
                    "/usr/bin/python3",
                    [script, address, directory.appending("calls").path] + options
                )
                try wait("the fprintd stand-in did not start") { self.log.contains("serving") || !service.isRunning }
            }
        } catch {
            remove()
            throw error
        }
    }

    private func start(_ executable: String, _ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        processes.append(process)
        return process
    }

    private func wait(_ failure: String, until done: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(10)
        while !done() {
            guard Date() < deadline else { throw FixtureError(failure) }
            usleep(10_000)
        }
        guard processes.allSatisfy(\.isRunning) else { throw FixtureError(failure) }
    }

    /// Runs `body` with this bus as the system bus.
    func using<T>(_ body: () throws -> T) rethrows -> T {
        setenv("DBUS_SYSTEM_BUS_ADDRESS", address, 1)
        defer { unsetenv("DBUS_SYSTEM_BUS_ADDRESS") }
        return try body()
    }

    func remove() {
        for process in processes.reversed() where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            _ = process.waitForExit()
        }
        processes = []
        directory.remove()
    }
}

extension LocalAuthenticationSuites.LAContextTests {
    /// An askpass script of `body` (in the suite's script directory).
    func script(_ name: String, _ body: String) throws -> String {
        let path = askpass.directory.appending(name).path
        try Data("#!/bin/sh\n\(body)\n".utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o700)
        return path
    }

    /// Runs `body` with `KEYSEAL_ASKPASS_TIMEOUT` set to `seconds`.
    func withAskpassTimeout<T>(_ seconds: Int, _ body: () throws -> T) rethrows -> T {
        setenv("KEYSEAL_ASKPASS_TIMEOUT", "\(seconds)", 1)
        defer { unsetenv("KEYSEAL_ASKPASS_TIMEOUT") }
        return try body()
    }

    // MARK: The askpass program's limits

    @Test(
        "an askpass program that never answers is stopped at the time limit: systemCancel, nothing counted",
        .timeLimit(.minutes(1))
    )
    func askpassTimeout() throws {
        try withPasscodeStore { fixture in
            let pidFile = askpass.directory.appending("sleeper.pid").path
            // A descendant in its process group sleeps too: the whole group goes at the limit. Only the run this test
            // starts records its descendant: a process that a concurrent test starts (a Secret Service bridge) while
            // this suite's KEYSEAL_ASKPASS is set could run the script too, and its copy is not this test's to judge.
            let sleeper = try script(
                "sleeper",
                "sleep 600 &\n[ \"$PPID\" = \"\(getpid())\" ] && echo $! > '\(pidFile)'\nsleep 600"
            )
            let started = ContinuousClock.now
            let (success, error) = withAskpassTimeout(2) { askpass.using(sleeper) { evaluate(LAContext()) } }
            #expect(!success)
            #expect(error?.code == LAError.Code.systemCancel.rawValue)
            #expect(ContinuousClock.now - started < .seconds(20))
            #expect(try fixture.store.status().failedAttempts == 0)
            let child = try #require(
                pid_t(String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
            )
            // Gone, or a zombie its new parent has not reaped yet: not running. A killed process still has to be
            // scheduled to exit, which takes a while on a loaded machine: up to 10 s.
            var state: Substring?
            for _ in 0..<100 {
                state =
                    (try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8))?
                    .split(separator: ")").last?.split(separator: " ").first
                if state == nil || state == "Z" { break }
                usleep(100_000)
            }
            #expect(state == nil || state == "Z", "the askpass program's own child was left running (\(state ?? ""))")
        }
    }

    @Test(
        "an askpass program that prints megabytes is stopped past 4 KiB: systemCancel, nothing counted",
        .timeLimit(.minutes(1))
    )
    func askpassFlood() throws {
        try withPasscodeStore { fixture in
            let flood = try script("flood", "head -c 8000000 /dev/zero | tr '\\\\0' 'x'\necho")
            let (success, error) = askpass.using(flood) { evaluate(LAContext()) }
            #expect(!success)
            #expect(error?.code == LAError.Code.systemCancel.rawValue)
            #expect(try fixture.store.status().failedAttempts == 0)
        }
    }

    @Test(
        "invalidate() during an evaluation dismisses the prompt: appCancel, no token, nothing counted",
        .timeLimit(.minutes(1))
    )
    func invalidateDuringEvaluation() throws {
        try withPasscodeStore { fixture in
            // Answers the right passcode, but only after 3 s: invalidate() comes first.
            let slow = try script("slow", "sleep 3\necho '\(passcode)'")
            let context = LAContext()
            let semaphore = DispatchSemaphore(value: 0)
            let answer = Answer()
            let started = ContinuousClock.now
            askpass.using(slow) {
                context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "open the test item") {
                    answer.set($0, $1.map { $0 as NSError })
                    semaphore.signal()
                }
                usleep(500_000)
                context.invalidate()
                #expect(semaphore.wait(timeout: .now() + 20) == .success)
            }
            let (success, error) = answer.get()
            #expect(!success)
            #expect(error?.code == LAError.Code.appCancel.rawValue)
            #expect(ContinuousClock.now - started < .seconds(2.5), "the prompt was not dismissed")
            #expect(context.authenticationToken.token == nil)
            #expect(try fixture.store.status().failedAttempts == 0)
        }
    }

    @Test("an empty answer is a dismissal (userCancel), not a wrong passcode: nothing counted")
    func emptyAnswerIsADismissal() throws {
        try withPasscodeStore { fixture in
            let empty = try script("empty", "echo ''")
            let (success, error) = askpass.using(empty) { evaluate(LAContext()) }
            #expect(!success)
            #expect(error?.code == LAError.Code.userCancel.rawValue)
            #expect(try fixture.store.status().failedAttempts == 0)
        }
    }

    @Test("a SecItem call whose askpass program never answers fails with errSecUserCanceled", .timeLimit(.minutes(1)))
    func secItemAskpassTimeout() throws {
        try withPasscodeStore { _ in
            try addProtectedItem()
            let sleeper = try script("sleeper", "sleep 600")
            let (status, data) = withAskpassTimeout(2) { askpass.using(sleeper) { readProtected() } }
            #expect(status == errSecUserCanceled)
            #expect(data == nil)
        }
    }

    // MARK: fprintd

    @Test("without fprintd on the system bus: biometryNotAvailable and biometryType .none")
    func biometryWithoutFprintd() throws {
        let fprintd = try FprintdFixture(service: nil)
        defer { fprintd.remove() }
        try withPasscodeStore { _ in
            fprintd.using {
                let context = LAContext()
                var error: NSError?
                #expect(!context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
                #expect(error?.code == LAError.Code.biometryNotAvailable.rawValue)
                #expect(context.biometryType == .none)
                let (success, evaluateError) = evaluate(context, .deviceOwnerAuthenticationWithBiometrics)
                #expect(!success)
                #expect(evaluateError?.code == LAError.Code.biometryNotAvailable.rawValue)
            }
        }
    }

    @Test("a hung fprintd holds canEvaluatePolicy at most its 2 s bound, once; later calls answer at once")
    func hungFprintdIsBounded() throws {
        let fprintd = try FprintdFixture(service: ["--hang"])
        defer { fprintd.remove() }
        try withPasscodeStore { _ in
            fprintd.using {
                let clock = ContinuousClock()
                var error: NSError?
                var answer = true
                let first = clock.measure {
                    answer = LAContext().canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error)
                }
                #expect(!answer)
                #expect(error?.code == LAError.Code.biometryNotAvailable.rawValue)
                #expect(fprintd.log.contains("GetDefaultDevice") || fprintd.log.contains("GetDevices"))
                // fprintd-list's own D-Bus timeout is 25 s: without the bound the call waits for it (10 s before).
                #expect(first < .seconds(6), "the first call took \(first)")
                let calls = fprintd.log.split(separator: "\n").count
                let second = clock.measure {
                    answer = LAContext().canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error)
                }
                #expect(!answer)
                // Not asked again: the hung fprintd is remembered.
                #expect(fprintd.log.split(separator: "\n").count == calls)
                #expect(second < .seconds(1), "the second call took \(second)")
            }
        }
    }

    @Test("fprintd without a reader: biometryNotAvailable, and no verification is asked")
    func biometryWithoutReader() throws {
        let fprintd = try FprintdFixture(service: ["--no-device"])
        defer { fprintd.remove() }
        try withPasscodeStore { _ in
            fprintd.using {
                let context = LAContext()
                var error: NSError?
                #expect(!context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
                #expect(error?.code == LAError.Code.biometryNotAvailable.rawValue)
                #expect(context.biometryType == .none)
                #expect(
                    evaluate(context, .deviceOwnerAuthenticationWithBiometrics).1?.code
                        == LAError.Code.biometryNotAvailable.rawValue
                )
            }
            #expect(!fprintd.log.contains("VerifyStart"))
        }
    }

    @Test("a reader with no enrolled finger: biometryNotEnrolled, biometryType .touchID, no verification asked")
    func biometryNotEnrolled() throws {
        let fprintd = try FprintdFixture(service: [])
        defer { fprintd.remove() }
        try withPasscodeStore { _ in
            fprintd.using {
                let context = LAContext()
                var error: NSError?
                #expect(!context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
                #expect(error?.code == LAError.Code.biometryNotEnrolled.rawValue)
                #expect(context.biometryType == .touchID)
                #expect(
                    evaluate(context, .deviceOwnerAuthenticationWithBiometrics).1?.code
                        == LAError.Code.biometryNotEnrolled.rawValue
                )
            }
            #expect(!fprintd.log.contains("VerifyStart"))
        }
    }

    @Test("a reader with an enrolled finger: biometry available (.touchID); fprintd's match decides the evaluation")
    func biometryWithFprintd() throws {
        let matching = try FprintdFixture(service: ["--fingers", "right-index-finger"])
        defer { matching.remove() }
        try withPasscodeStore { _ in
            matching.using {
                let context = LAContext()
                var error: NSError?
                #expect(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
                #expect(context.biometryType == .touchID)
                #expect(evaluate(context, .deviceOwnerAuthenticationWithBiometrics).0)
            }
            #expect(matching.log.contains("VerifyStart right-index-finger"))
        }
        let refusing = try FprintdFixture(service: ["--fingers", "right-index-finger", "--no-match"])
        defer { refusing.remove() }
        try withPasscodeStore { _ in
            let (success, error) = refusing.using { evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
            #expect(!success)
            #expect(error?.code == LAError.Code.authenticationFailed.rawValue)
        }
    }

    @Test("KEYSEAL_FPRINTD_VERIFY is not a way around fprintd: a program it names is never run")
    func fprintdOverrideIgnored() throws {
        let fprintd = try FprintdFixture(service: nil)
        defer { fprintd.remove() }
        let marker = askpass.directory.appending("ran").path
        let fake = try script("fake-verify", "touch '\(marker)'\nexit 0")
        try withPasscodeStore { _ in
            setenv("KEYSEAL_FPRINTD_VERIFY", fake, 1)
            defer { unsetenv("KEYSEAL_FPRINTD_VERIFY") }
            let (success, error) = fprintd.using { evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
            #expect(!success)
            #expect(error?.code == LAError.Code.biometryNotAvailable.rawValue)
            #expect(!FileManager.default.fileExists(atPath: marker))
        }
    }

    // MARK: docs/SECURITY-MODEL.md, "User presence"

    @Test("an evaluation during the store's delays is refused, even with the right passcode, and nothing is issued")
    func evaluateDuringDelayIsRefused() throws {
        try withPasscodeStore { fixture in
            askpass.using(askpass.wrong) {
                for _ in 0..<5 { _ = evaluate(LAContext()) }
            }
            let delayed = try fixture.store.status()
            #expect(delayed.nextTryAt != nil)
            let context = LAContext()
            let (success, error) = askpass.using(askpass.right) { evaluate(context) }
            #expect(!success)
            #expect(error?.code == LAError.Code.authenticationFailed.rawValue)
            #expect(context.authenticationToken.token == nil)
            let after = try fixture.store.status()
            #expect(after.failedAttempts == 5)
        }
    }

    @Test("an evaluation does not unlock a locked store")
    func evaluateDoesNotUnlock() throws {
        try withPasscodeStore { fixture in
            _ = try fixture.store.lock()
            #expect(try fixture.store.status().lockState == .locked)
            #expect(askpass.using(askpass.right) { evaluate(LAContext()).0 })
            #expect(try fixture.store.status().lockState == .locked)
        }
    }

    @Test("a right passcode is not counted toward the store's delays")
    func rightPasscodeDoesNotCount() throws {
        try withPasscodeStore { fixture in
            for _ in 0..<6 {
                #expect(askpass.using(askpass.right) { evaluate(LAContext()).0 })
            }
            let status = try fixture.store.status()
            #expect(status.failedAttempts == 0)
            #expect(status.nextTryAt == nil)
        }
    }

    @Test("an evaluated context opens calls for at most 300 s, whatever its reuse duration")
    func reuseCappedAt300() throws {
        try withPasscodeStore { fixture in
            try addProtectedItem()
            let context = LAContext()
            context.touchIDAuthenticationAllowableReuseDuration = 3600
            #expect(context.touchIDAuthenticationAllowableReuseDuration == 300)
            #expect(askpass.using(askpass.right) { evaluate(context).0 })
            let fail: [String: Any] = [
                kSecUseAuthenticationContext as String: context,
                kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail,
            ]
            askpass.using(nil) {
                fixture.clock.advance(by: 299)
                #expect(readProtected(fail).0 == errSecSuccess)
                fixture.clock.advance(by: 2)
                #expect(readProtected(fail).0 == errSecInteractionNotAllowed)
            }
        }
    }

    @Test("as on Apple, an evaluated context (reuse duration 0) opens every call until it is invalidated")
    func evaluatedContextReusedUntilInvalidated() throws {
        try withPasscodeStore { _ in
            try addProtectedItem()
            let context = LAContext()
            #expect(context.touchIDAuthenticationAllowableReuseDuration == 0)
            #expect(askpass.using(askpass.right) { evaluate(context).0 })
            let fail: [String: Any] = [
                kSecUseAuthenticationContext as String: context,
                kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail,
            ]
            askpass.using(nil) {
                for _ in 0..<3 { #expect(readProtected(fail).0 == errSecSuccess) }
                context.invalidate()
                #expect(readProtected(fail).0 == errSecInteractionNotAllowed)
            }
        }
    }
}

extension LocalAuthenticationSuites.LAContextTests {
    @Test("biometryType can be read while an evaluation on another thread sets it (a data race under TSan if not)")
    func biometryTypeWhileEvaluating() throws {
        let fprintd = try FprintdFixture(service: nil)
        defer { fprintd.remove() }
        try withPasscodeStore { _ in
            fprintd.using {
                let context = LAContext()
                let done = DispatchSemaphore(value: 0)
                context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "race") { _, _ in
                    done.signal()
                }
                var reads = 0
                while done.wait(timeout: .now()) == .timedOut {
                    _ = context.biometryType
                    reads += 1
                }
                #expect(reads > 0)
                #expect(context.biometryType == .none)
            }
        }
    }
}
