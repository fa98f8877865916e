import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// The core SecItem semantics through a real keyseald, on each backend: the same answers as embedded.
@Suite("Daemon semantics", .serialized)
struct DaemonSemanticsTests {
    @Test(
        "add, find, update, delete, duplicate, not found and locked through the daemon",
        arguments: DaemonFixture.Backend.allCases
    )
    func coreSemantics(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let store = try daemon.client()

        _ = try store.add(.password(account: "alice", secret: "s3cret"))
        #expect(status { _ = try store.add(.password(account: "alice")) } == KeychainStatus.duplicateItem)
        let found = try store.copyMatching(.password(account: "alice", returns: [.data, .attributes]))
        #expect(found.count == 1)
        #expect(found.first?.data == Data("s3cret".utf8))
        #expect(found.first?.string(AttributeKey.accessGroup) == "default")
        #expect(status { _ = try store.copyMatching(.password(account: "nobody")) } == KeychainStatus.itemNotFound)

        try store.update(.password(account: "alice"), with: ItemChanges(data: Data([0, 0xff, 0xc3])))
        #expect(
            try store.copyMatching(.password(account: "alice", returns: .data)).first?.data == Data([0, 0xff, 0xc3])
        )

        // Values byte-exact at the limit; over the limit refused.
        let big = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        _ = try store.add(
            NewItem(
                itemClass: .genericPassword,
                attributes: [AttributeKey.account: .string("big")],
                data: big
            )
        )
        var query = ItemQuery.password(account: "big", returns: .data)
        query.attributes[AttributeKey.service] = nil
        #expect(try store.copyMatching(query).first?.data == big)
        #expect(
            status {
                _ = try store.add(.password(account: "huge", secret: String(repeating: "x", count: (1 << 20) + 1)))
            }
                == KeychainStatus.dataTooLarge
        )

        // Locked: when-unlocked items are -25308 for find, update and delete; after-first-unlock items still work.
        _ = try store.add(.password(account: "ck", accessibility: .afterFirstUnlock))
        try store.setPasscode("correct horse")
        #expect(store.lockState == .unlocked)
        #expect(try store.lock() == nil)
        #expect(store.lockState == .locked)
        #expect(
            status { _ = try store.copyMatching(.password(account: "alice", returns: .data)) }
                == KeychainStatus.interactionNotAllowed
        )
        #expect(
            status { try store.update(.password(account: "alice"), with: ItemChanges(data: Data())) }
                == KeychainStatus.interactionNotAllowed
        )
        #expect(status { try store.delete(.password(account: "alice")) } == KeychainStatus.interactionNotAllowed)
        #expect(status { _ = try store.add(.password(account: "new")) } == KeychainStatus.interactionNotAllowed)
        #expect(try store.copyMatching(.password(account: "ck", returns: .data)).first?.data == Data("secret".utf8))
        #expect(status { try store.unlock(passcode: "wrong") } == KeychainStatus.authFailed)
        try store.unlock(passcode: "correct horse")
        try store.delete(.password(account: "alice"))
        #expect(status { _ = try store.copyMatching(.password(account: "alice")) } == KeychainStatus.itemNotFound)
        try store.removePasscode("correct horse")
        #expect(try store.lock() != nil)
        #expect(store.lockState == .unlocked)
    }

    @Test("status reports the backend; a development swtpm is not hardware-backed")
    func swtpmStatus() throws {
        let daemon = try DaemonFixture(.swtpm)
        defer { daemon.remove() }
        let status = try daemon.client().status()
        #expect(status.device.backend == "tpm")
        #expect(!status.device.hardwareBacked)
        #expect(status.device.detail.contains("not hardware-backed"))
        #expect(status.autoLockSeconds == 300)
    }

    @Test("results over the frame limit arrive whole through the daemon, as embedded")
    func resultsOverTheFrameLimit() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let store = try daemon.client()
        // Three values at the limit: about 3 MiB of results, over the 2 MiB frame.
        let values = (0..<3).map { index in Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ index) }) }
        for (index, value) in values.enumerated() {
            _ = try store.add(
                NewItem(
                    itemClass: .genericPassword,
                    attributes: [AttributeKey.service: .string("big"), AttributeKey.account: .string("item-\(index)")],
                    data: value
                )
            )
        }
        var query = ItemQuery(
            itemClass: .genericPassword,
            attributes: [AttributeKey.service: .string("big")],
            returns: [.data, .attributes]
        )
        query.limit = .all
        let found = try store.copyMatching(query)
        #expect(found.count == 3)
        for (index, value) in values.enumerated() {
            #expect(found.first { $0.string(AttributeKey.account) == "item-\(index)" }?.data == value)
        }
        // The largest item: a value at the limit and every string attribute at the attribute limit.
        let text = String(repeating: "l", count: RequestValidation.attributeLimit)
        let keys = [
            AttributeKey.label, AttributeKey.description, AttributeKey.comment, AttributeKey.creator,
            AttributeKey.type, AttributeKey.generic,
        ]
        try store.update(
            .password(service: "big", account: "item-0"),
            with: ItemChanges(
                attributes: Dictionary(uniqueKeysWithValues: keys.map { ($0, AttributeValue.string(text)) })
            )
        )
        let one = try store.copyMatching(.password(service: "big", account: "item-0", returns: [.data, .attributes]))
        #expect(one.first?.data == values[0])
        #expect(keys.allSatisfy { one.first?.string($0) == text })
        // An attribute over the limit is refused before the engine.
        #expect(
            status {
                try store.update(
                    .password(service: "big", account: "item-0"),
                    with: ItemChanges(attributes: [AttributeKey.label: .string(String(repeating: "l", count: 3 << 19))])
                )
            } == KeychainStatus.dataTooLarge
        )
        // The connection is still in step: the next request gets its own answer.
        #expect(
            try store.copyMatching(.password(service: "big", account: "item-2", returns: .data)).first?.data
                == values[2]
        )
    }

    @Test("a value over the limit is refused by the client before sending")
    func refusedBeforeSending() throws {
        let store = try KeychainStore.daemon(socket: "/nonexistent-keyseal/keyseal.sock")
        let item = NewItem(itemClass: .genericPassword, data: Data(count: (1 << 20) + 1))
        #expect(status { _ = try store.add(item) } == KeychainStatus.dataTooLarge)
        #expect(status { _ = try store.add(.password(account: "a")) } == KeychainStatus.noSuchKeychain)
    }
}

/// Restart, signals and start-up errors of the keyseald process.
@Suite("Daemon lifecycle", .serialized)
struct DaemonLifecycleTests {
    @Test("a restart is a reboot: before first unlock, then unlock restores every class")
    func restartIsReboot() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        var store = try daemon.client()
        _ = try store.add(.password(account: "ak"))
        _ = try store.add(.password(account: "ck", accessibility: .afterFirstUnlock))
        _ = try store.add(.password(account: "dk", accessibility: .always))
        try store.setPasscode("pass")
        try daemon.restart()
        store = try daemon.client()
        #expect(store.lockState == .beforeFirstUnlock)
        #expect(
            status { _ = try store.copyMatching(.password(account: "ak", returns: .data)) }
                == KeychainStatus.interactionNotAllowed
        )
        #expect(
            status { _ = try store.copyMatching(.password(account: "ck", returns: .data)) }
                == KeychainStatus.interactionNotAllowed
        )
        #expect(try store.copyMatching(.password(account: "dk", returns: .data)).count == 1)
        try store.unlock(passcode: "pass")
        #expect(try store.copyMatching(.password(account: "ak", returns: .data)).count == 1)
        #expect(try store.copyMatching(.password(account: "ck", returns: .data)).count == 1)
    }

    @Test("a store connection survives a daemon restart between calls")
    func reconnects() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let store = try daemon.client()
        _ = try store.add(.password(account: "a"))
        try daemon.restart()
        #expect(try store.copyMatching(.password(account: "a")).count == 1)
    }

    @Test("SIGTERM and SIGINT remove the socket and exit 0", arguments: [SIGTERM, SIGINT])
    func signals(signal: Int32) throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        _ = try daemon.client().add(.password(account: "a"))
        #expect(daemon.stop(signal: signal) == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        #expect(status { _ = try daemon.client().status() } == KeychainStatus.noSuchKeychain)
    }

    @Test("the socket is 0600 in a 0700 directory")
    func socketModes() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let socketMode = try FileManager.default.attributesOfItem(atPath: daemon.socketPath)[.posixPermissions] as? Int
        let directory = (daemon.socketPath as NSString).deletingLastPathComponent
        let directoryMode = try FileManager.default.attributesOfItem(atPath: directory)[.posixPermissions] as? Int
        #expect(socketMode == 0o600)
        #expect(directoryMode == 0o700)
    }

    @Test("a store held by another daemon, a mismatched backend and a missing host key are one-line errors")
    func startErrors() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let other = daemon.root.appending("other.sock").path
        let held = try DaemonFixture.runToCompletion(
            [
                "--store", daemon.storeDirectory.path, "--socket", other, "--backend", "host-key", "--host-key",
                daemon.hostKeyPath,
            ])
        #expect(held.status != 0)
        #expect(held.stderrText.contains("already open"))
        #expect(held.stderrText.split(separator: "\n").count == 1)
        daemon.stop()

        let mismatched = try DaemonFixture.runToCompletion(
            ["--store", daemon.storeDirectory.path, "--socket", other, "--backend", "swtpm"])
        #expect(mismatched.status != 0)
        #expect(mismatched.stderrText.hasPrefix("keyseald: "))
        #expect(mismatched.stderrText.split(separator: "\n").count == 1)

        let missingKey = try DaemonFixture.runToCompletion(
            [
                "--store", daemon.storeDirectory.path, "--socket", other, "--backend", "host-key", "--host-key",
                daemon.root.appending("missing.key").path,
            ])
        #expect(missingKey.status != 0)
        #expect(missingKey.stderrText.split(separator: "\n").count == 1)
        #expect(!FileManager.default.fileExists(atPath: other))
    }

    @Test("auto-lock locks after the idle timeout and subscribers see every change")
    func autoLockAndSubscription() throws {
        let daemon = try DaemonFixture(arguments: ["--auto-lock", "1"])
        defer { daemon.remove() }
        let store = try daemon.client()
        try store.setPasscode("pass")
        let seen = LockStates()
        let watcher = Thread {
            try? KeychainStore.daemon(socket: daemon.socketPath).watchLockState { state in
                seen.append(state)
                return seen.count < 3
            }
        }
        watcher.start()
        // Auto-lock after about a second of idleness.
        let deadline = Date().addingTimeInterval(10)
        while seen.count < 2 && Date() < deadline { usleep(50_000) }
        #expect(store.lockState == .locked)
        try store.unlock(passcode: "pass")
        while seen.count < 3 && Date() < deadline { usleep(50_000) }
        #expect(seen.values == [.unlocked, .locked, .unlocked])
        #expect(try store.autoLockSeconds() == 1)
    }
}

final class LockStates: @unchecked Sendable {
    private let lock = NSLock()
    private var states: [LockState] = []
    func append(_ state: LockState) { lock.withLock { states.append(state) } }
    var values: [LockState] { lock.withLock { states } }
    var count: Int { values.count }
}
