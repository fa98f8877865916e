import Crypto
import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Synchronization
import Testing

@testable import KeysealClient

/// Where keyseald runs a key operation: on the connection's event loop only while the key's last operations were
/// fast, so that a slow device never holds up another client for more than one operation. A debug keyseald delays
/// each key operation by the milliseconds in `KEYSEAL_TESTING_KEY_DELAY_FILE` (a slow device) and takes its bound
/// for a fast operation from `KEYSEAL_TESTING_KEY_BOUND_MS`.
@Suite("Key operations on the event loop", .serialized)
struct DaemonKeyPlacementTests {
    static let algorithm = "algid:sign:ECDSA:message-X962:SHA256"
    /// The fast operations in a row after which a key's operations run on the event loop (KeyOperationPlacement).
    static let fastRun = 8
    /// How long the slow device takes for each key operation.
    static let slow = 1_000

    /// A keyseald on swtpm whose key operations wait for the delay file's milliseconds, with `bound` for a fast one.
    static func daemon(delay: Int, bound: Int?) throws -> (DaemonFixture, URL) {
        let daemon = try DaemonFixture(.tpm, start: false)
        let delayFile = daemon.root.appending("key-delay")
        try Data("\(delay)".utf8).write(to: delayFile)
        daemon.extraEnvironment["KEYSEAL_TESTING_KEY_DELAY_FILE"] = delayFile.path
        if let bound { daemon.extraEnvironment["KEYSEAL_TESTING_KEY_BOUND_MS"] = "\(bound)" }
        try daemon.start()
        return (daemon, delayFile)
    }

    /// Starts `operation` on a thread of its own and, 200 ms later, pings keyseald from another connection: how long
    /// the ping took. Throws what the operation threw.
    static func pingDuring(_ operation: @escaping @Sendable () throws -> Void, socket: String) throws -> Duration {
        let pinger = KeysealConnection(socketPath: socket)
        defer { pinger.disconnect() }
        #expect(try pinger.send(.ping) == .ok)
        let failure = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do { try operation() } catch { failure.withLock { $0 = "\(error)" } }
            done.signal()
        }
        Thread.sleep(forTimeInterval: 0.2)
        let start = ContinuousClock.now
        let pong = try pinger.send(.ping)
        let elapsed = ContinuousClock.now - start
        #expect(pong == .ok)
        done.wait()
        if let failure = failure.withLock({ $0 }) { throw FixtureError("the key operation failed: \(failure)") }
        return elapsed
    }

    @Test("a key on a slow device signs on the pool: another client's ping is answered while the sign runs")
    func aSlowDeviceNeverHoldsUpAnotherClient() throws {
        let (daemon, _) = try Self.daemon(delay: Self.slow, bound: nil)
        defer { daemon.remove() }
        let store = try daemon.client()
        let key = try store.generateKey(KeyGenerationRequest(keyType: .p256, inHardware: true))
        for _ in 0..<2 {
            let ping = try Self.pingDuring(
                { _ = try store.sign(key.reference, algorithm: Self.algorithm, data: Data("m".utf8)) },
                socket: daemon.socketPath
            )
            #expect(ping < .milliseconds(400), "the ping waited for a slow sign: \(ping)")
        }
    }

    /// Nothing answered on an event loop waits there for the engine: while a slow sign holds the engine on the pool,
    /// lookups from connections on both event loops give up on the loop and wait on the pool, and a ping on either
    /// loop is answered at once. Waiting on the loop, each lookup held up its loop's every connection for the rest of
    /// the sign.
    @Test("while a slow sign holds the engine, lookups waiting for it do not hold up pings on their event loops")
    func requestsWaitingForTheEngineLeaveTheLoopsFree() throws {
        let (daemon, _) = try Self.daemon(delay: Self.slow, bound: nil)
        defer { daemon.remove() }
        let store = try daemon.client()
        let key = try store.generateKey(KeyGenerationRequest(keyType: .p256, inHardware: true))
        _ = try store.add(.password(account: "a"))
        // keyseald hands accepted connections to its event loops in turn: consecutive ones are on different loops.
        let lookups = (0..<4).map { _ in KeysealConnection(socketPath: daemon.socketPath) }
        let pingers = (0..<2).map { _ in KeysealConnection(socketPath: daemon.socketPath) }
        defer { for connection in lookups + pingers { connection.disconnect() } }
        for connection in lookups + pingers { #expect(try connection.send(.ping) == .ok) }
        let done = DispatchGroup()
        let found = Mutex(0)
        done.enter()
        Thread.detachNewThread {
            _ = try? store.sign(key.reference, algorithm: Self.algorithm, data: Data("m".utf8))
            done.leave()
        }
        Thread.sleep(forTimeInterval: 0.2)
        for connection in lookups {
            done.enter()
            Thread.detachNewThread {
                if case .records(let records)? = try? connection.send(.copyMatching(.password(account: "a"))) {
                    found.withLock { $0 += records.count }
                }
                done.leave()
            }
        }
        Thread.sleep(forTimeInterval: 0.1)
        for pinger in pingers {
            let start = ContinuousClock.now
            #expect(try pinger.send(.ping) == .ok)
            let elapsed = ContinuousClock.now - start
            #expect(elapsed < .milliseconds(250), "a ping waited behind a lookup waiting for the engine: \(elapsed)")
        }
        done.wait()
        // The lookups were answered all the same, on the pool once the sign was done.
        #expect(found.withLock { $0 } == lookups.count)
    }

    /// Graceful shutdown: keyseald stops accepting, answers what is in flight, closes every connection, then exits.
    @Test("at SIGTERM a sign in flight gets its signature, an idle connection is closed, and keyseald exits 0")
    func shutdownAnswersWhatIsInFlight() throws {
        let (daemon, _) = try Self.daemon(delay: Self.slow, bound: nil)
        defer { daemon.remove() }
        let idle = KeysealConnection(socketPath: daemon.socketPath)
        #expect(try idle.send(.ping) == .ok)
        let store = try daemon.client()
        let key = try store.generateKey(KeyGenerationRequest(keyType: .p256, inHardware: true))
        let outcome = Mutex<(signature: Data?, at: ContinuousClock.Instant)?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let signature = try? store.sign(key.reference, algorithm: Self.algorithm, data: Data("m".utf8))
            outcome.withLock { $0 = (signature, .now) }
            done.signal()
        }
        Thread.sleep(forTimeInterval: 0.2)
        let signalled = ContinuousClock.now
        let status = daemon.stop(signal: SIGTERM)
        #expect(done.wait(timeout: .now() + 30) == .success)
        let result = try #require(outcome.withLock { $0 })
        #expect(result.signature != nil, "the sign in flight was not answered")
        #expect(result.at > signalled, "the sign finished before the signal: nothing was in flight")
        #expect(status == 0)
        #expect(throws: KeychainError.self) { _ = try idle.send(.ping) }
    }

    /// A keyseald on swtpm where 400 ms counts as fast (so that a debug keyseald's swtpm signs count as fast whatever
    /// the load), and a hardware key in it measured fast by ``fastRun`` small signs; `sign` is one small sign more.
    struct FastKey {
        let daemon: DaemonFixture
        let delayFile: URL
        let store: KeychainStore
        let key: KeyDescription
        let sign: @Sendable () throws -> Void

        init() throws {
            (daemon, delayFile) = try DaemonKeyPlacementTests.daemon(delay: 0, bound: 400)
            let store = try daemon.client()
            let key = try store.generateKey(KeyGenerationRequest(keyType: .p256, inHardware: true))
            let sign: @Sendable () throws -> Void = {
                _ = try store.sign(key.reference, algorithm: DaemonKeyPlacementTests.algorithm, data: Data("m".utf8))
            }
            for _ in 0..<DaemonKeyPlacementTests.fastRun { try sign() }
            (self.store, self.key, self.sign) = (store, key, sign)
        }
    }

    @Test("a key measured fast signs on the event loop; one slow sign sends the next ones to the pool")
    func oneSlowOperationSendsTheNextOnesToThePool() throws {
        let fast = try FastKey()
        let (daemon, delayFile, sign) = (fast.daemon, fast.delayFile, fast.sign)
        defer { daemon.remove() }
        try Data("\(Self.slow)".utf8).write(to: delayFile)
        // Measured fast: this sign runs on the event loop, and the ping waits for it.
        let held = try Self.pingDuring(sign, socket: daemon.socketPath)
        #expect(held > .milliseconds(500), "a key measured fast did not sign on the event loop: \(held)")
        // That sign was slow: the next one runs on the pool.
        let answered = try Self.pingDuring(sign, socket: daemon.socketPath)
        #expect(answered < .milliseconds(400), "the sign after a slow one held up the ping: \(answered)")
        // Fewer than the fast run again, still on the pool.
        try Data("0".utf8).write(to: delayFile)
        for _ in 0..<(Self.fastRun - 1) { try sign() }
        try Data("\(Self.slow)".utf8).write(to: delayFile)
        let pooled = try Self.pingDuring(sign, socket: daemon.socketPath)
        #expect(
            pooled < .milliseconds(400),
            "a key with too few fast signs since a slow one held up the ping: \(pooled)"
        )
    }

    /// What an operation costs also depends on its input: a key measured fast still runs an operation of much input
    /// work (here a sign of 512 KiB, hashed before the device signs) on the pool, and that operation's time is not
    /// counted for the key. Before, the key's record alone decided: a review's key exchange of 2 MiB of shared info
    /// and 64 KiB of output, after eight fast ones, held the event loop 5.9–7.3 s.
    @Test("a key measured fast still runs an operation of large input on the pool: another client's ping goes on")
    func operationsOfLargeInputRunOnThePool() throws {
        let fast = try FastKey()
        let (daemon, store, key, small) = (fast.daemon, fast.store, fast.key, fast.sign)
        defer { daemon.remove() }
        try Data("\(Self.slow)".utf8).write(to: fast.delayFile)
        let large = try Self.pingDuring(
            {
                _ = try store.sign(key.reference, algorithm: Self.algorithm, data: Data(repeating: 1, count: 512 << 10))
            },
            socket: daemon.socketPath
        )
        #expect(large < .milliseconds(400), "a sign of 512 KiB ran on the event loop: the ping waited \(large)")
        // That slow sign was not counted: the key is still measured fast, and a small sign runs on the loop.
        let held = try Self.pingDuring(small, socket: daemon.socketPath)
        #expect(held > .milliseconds(500), "a large operation's time was counted for the key: \(held)")
    }

    @Test("refused signs (a locked class) do not count as fast: the key's next sign still runs on the pool")
    func refusedOperationsDoNotCountAsFast() throws {
        let (daemon, delayFile) = try Self.daemon(delay: 0, bound: 400)
        defer { daemon.remove() }
        let store = try daemon.client()
        try store.setPasscode("pw")
        let key = try store.generateKey(
            KeyGenerationRequest(keyType: .p256, inHardware: true, accessibility: .whenUnlocked)
        )
        let sign: @Sendable () throws -> Void = {
            _ = try store.sign(key.reference, algorithm: Self.algorithm, data: Data("m".utf8))
        }
        _ = try store.lock()
        for _ in 0..<Self.fastRun { #expect(throws: KeychainError.interactionNotAllowed) { try sign() } }
        try store.unlock(passcode: "pw")
        try Data("\(Self.slow)".utf8).write(to: delayFile)
        let ping = try Self.pingDuring(sign, socket: daemon.socketPath)
        #expect(ping < .milliseconds(400), "refused signs let a slow one run on the event loop: \(ping)")
    }

    @Test("signs pipelined on one connection run on the event loop one per turn: another client's ping goes between")
    func pipelinedSignsLetOtherClientsIn() throws {
        let fast = try FastKey()
        let (daemon, delayFile, key) = (fast.daemon, fast.delayFile, fast.key)
        defer { daemon.remove() }
        guard case .item(let reference) = key.reference else {
            Issue.record("a stored key has an item reference")
            return
        }
        // 100 ms each counts as fast (bound 400 ms): six pipelined signs all run on the event loop, 600 ms in all.
        try Data("100".utf8).write(to: delayFile)
        let frame = try WireRequest.keyOperation(
            WireKeyOperation(reference: reference, kind: .sign, algorithm: Self.algorithm, data: Data("m".utf8))
        ).encodedFrame()
        let pinger = KeysealConnection(socketPath: daemon.socketPath)
        defer { pinger.disconnect() }
        #expect(try pinger.send(.ping) == .ok)
        let fd = try KeysealConnection.open(daemon.socketPath)
        defer { close(fd) }
        try KeysealConnection.writeAll(fd, Array(repeating: frame, count: 6).flatMap { $0 })
        Thread.sleep(forTimeInterval: 0.15)
        let start = ContinuousClock.now
        #expect(try pinger.send(.ping) == .ok)
        let ping = ContinuousClock.now - start
        #expect(ping < .milliseconds(300), "the ping waited for the other connection's pipelined signs: \(ping)")
        for _ in 0..<6 {
            let payload = try #require(DaemonIsolationTests.readPayload(fd))
            guard case .keyResult = try WireResponse.decode(payload: payload) else {
                Issue.record("a pipelined sign was not answered with its signature")
                return
            }
        }
    }

    @Test("signs on the event loop verify, and a locked class refuses them with errSecInteractionNotAllowed")
    func signsOnTheEventLoopKeepTheirRules() throws {
        let (daemon, _) = try Self.daemon(delay: 0, bound: 400)
        defer { daemon.remove() }
        let store = try daemon.client()
        try store.setPasscode("pw")
        let key = try store.generateHardwareP256Key(tag: Data("loop".utf8), accessibility: .whenUnlocked)
        let message = Data("on the event loop".utf8)
        for _ in 0..<(Self.fastRun + 2) {
            #expect(key.publicKey.isValidSignature(try key.signature(for: message), for: message))
        }
        _ = try store.lock()
        #expect(throws: KeychainError.interactionNotAllowed) { _ = try key.signature(for: message) }
        try store.unlock(passcode: "pw")
        #expect(key.publicKey.isValidSignature(try key.signature(for: message), for: message))
    }
}
