import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// Export and import through a keyseald process: the daemon produces and consumes the bytes, the client writes
/// and reads the file.
@Suite("Daemon backup", .serialized)
struct DaemonBackupTests {
    static func item(_ accessibility: Accessibility) -> NewItem {
        .password(
            service: "svc-\(accessibility.rawValue)",
            account: "acct-\(accessibility.rawValue)",
            secret: "secret-\(accessibility.rawValue)",
            accessibility: accessibility
        )
    }

    static func everyItem(_ store: KeychainStore) throws -> [String: Data] {
        do {
            var result: [String: Data] = [:]
            for record in try store.copyMatching(
                ItemQuery(itemClass: .genericPassword, limit: .all, returns: [.data, .attributes])
            ) {
                result["\(record.string(AttributeKey.service) ?? "")/\(record.string(AttributeKey.account) ?? "")"] =
                    record.data
            }
            return result
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
            return [:]
        }
    }

    @Test("an administrator exports from one daemon and imports into a daemon on another device, in many chunks")
    func exportAndImportAcrossDevices() throws {
        let source = try DaemonFixture(.hostKey)
        defer { source.remove() }
        let target = try DaemonFixture(.hostKey)
        defer { target.remove() }
        let sourceStore = try source.client()
        try sourceStore.setPasscode("pw")
        for accessibility in Accessibility.allCases { _ = try sourceStore.add(Self.item(accessibility)) }
        // Enough data for several 1 MiB chunks each way.
        let bulk = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        for index in 0..<1500 {
            _ = try sourceStore.add(
                NewItem(
                    itemClass: .genericPassword,
                    attributes: [AttributeKey.service: .string("bulk"), AttributeKey.account: .string("\(index)")],
                    accessibility: .afterFirstUnlock,
                    data: bulk
                )
            )
        }
        let file = source.root.appending("backup.ksb")
        var exportProgress: [(Int, Int)] = []
        let exported = try sourceStore.exportBackup(to: file, passphrase: "correct horse") {
            exportProgress.append(($0, $1))
        }
        #expect(exported.exportedCount == 1506)
        #expect(exported.skippedPasscodeOnly == 1)
        #expect(exportProgress.count > 2)
        #expect(exportProgress.last.map { $0.0 == $0.1 && $0.1 == 1506 } == true)
        #expect(try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int == 0o600)

        let targetStore = try target.client()
        var importProgress: [(Int, Int)] = []
        let report = try targetStore.importBackup(from: file, passphrase: "correct horse") {
            importProgress.append(($0, $1))
        }
        #expect(report.restoredCount == 1503)
        #expect(report.restored[.afterFirstUnlock] == 1501)
        #expect(
            Set(report.skipped.map { "\($0.service ?? "")/\($0.account ?? "")" })
                == ["svc-aku/acct-aku", "svc-cku/acct-cku", "svc-dku/acct-dku"]
        )
        #expect(report.skipped.allSatisfy { $0.reason == .otherDevice })
        #expect(importProgress.last.map { $0.0 == 1506 && $0.1 == 1506 } == true)
        // (One response carries at most 2 MiB: the items are checked a few at a time.)
        #expect(try targetStore.status().itemCounts == [.whenUnlocked: 1, .afterFirstUnlock: 1501, .always: 1])
        #expect(
            try targetStore.copyMatching(.password(service: "svc-ak", account: "acct-ak", returns: .data)).first?.data
                == Data("secret-ak".utf8)
        )
        #expect(
            try targetStore.copyMatching(.password(service: "bulk", account: "1499", returns: .data)).first?.data
                == bulk
        )
    }

    @Test("keyseald on its own swtpm restores this-device-only items into its own store")
    func sameDeviceThroughTheDaemonOnSwtpm() throws {
        let daemon = try DaemonFixture(.swtpm)
        defer { daemon.remove() }
        let store = try daemon.client()
        let classes: [Accessibility] = [.whenUnlocked, .always, .whenUnlockedThisDeviceOnly, .alwaysThisDeviceOnly]
        for accessibility in classes { _ = try store.add(Self.item(accessibility)) }
        let file = daemon.root.appending("backup.ksb")
        try store.exportBackup(to: file, passphrase: "p")
        try store.delete(ItemQuery(itemClass: .genericPassword, limit: .all))
        let report = try store.importBackup(from: file, passphrase: "p")
        #expect(report.skipped.isEmpty)
        #expect(report.restoredCount == 4)
        #expect(try Self.everyItem(store)["svc-aku/acct-aku"] == Data("secret-aku".utf8))
    }

    @Test("a daemon export leaves a non-extractable key out and names it to the client; `keyseal export` prints it")
    func nonExtractableKeysStayOutOfADaemonExport() throws {
        let daemon = try DaemonFixture(.hostKey)
        defer { daemon.remove() }
        let store = try daemon.client()
        _ = try store.generateKey(
            KeyGenerationRequest(
                keyType: .p256,
                attributes: [AttributeKey.applicationTag: .data(Data("ne".utf8)), AttributeKey.label: .string("kept")],
                isExtractable: false
            )
        )
        _ = try store.add(Self.item(.whenUnlocked))
        let report = try store.exportBackup(to: daemon.root.appending("backup.ksb"), passphrase: "p")
        #expect(report.exportedCount == 1)
        #expect(
            report.skippedKeys == [
                ExportReport.SkippedKey(
                    accessGroup: "default",
                    label: "kept",
                    tag: Data("ne".utf8),
                    reason: .notExtractable
                )
            ]
        )
        let output = try CLI(socket: daemon.socketPath).run(
            [
                "export", "--output", daemon.root.appending("cli.ksb").path, "--passphrase-stdin",
                "--allow-weak-passphrase",
            ],
            input: Data("p\n".utf8)
        )
        #expect(output.status == 0, "\(output.stderrText)")
        #expect(output.stdoutText.contains("not exported: 1 key that cannot leave this device"))
        #expect(output.stdoutText.contains("label \"kept\"  tag \"ne\"  not-extractable"))
    }

    @Test("a wrong passphrase and a truncated file are refused through the daemon and change nothing")
    func refusalsThroughTheDaemon() throws {
        let daemon = try DaemonFixture(.hostKey)
        defer { daemon.remove() }
        let store = try daemon.client()
        _ = try store.add(Self.item(.whenUnlocked))
        let file = daemon.root.appending("backup.ksb")
        try store.exportBackup(to: file, passphrase: "p")
        try store.delete(ItemQuery(itemClass: .genericPassword, limit: .all))
        _ = try store.add(.password(service: "own", account: "own", secret: "mine"))

        #expect(status { try store.importBackup(from: file, passphrase: "wrong") } == KeychainStatus.authFailed)
        let bytes = try Data(contentsOf: file)
        let truncated = daemon.root.appending("truncated.ksb")
        try bytes.dropLast(3).write(to: truncated)
        #expect(status { try store.importBackup(from: truncated, passphrase: "p") } == KeychainStatus.decode)
        #expect(try Self.everyItem(store) == ["own/own": Data("mine".utf8)])
        // The connection is usable afterwards.
        #expect(try store.status().lockState == .unlocked)
    }

    @Test("a locked class fails a daemon export with interaction not allowed, and no file is left")
    func lockedExportThroughTheDaemon() throws {
        let daemon = try DaemonFixture(.hostKey)
        defer { daemon.remove() }
        let store = try daemon.client()
        try store.setPasscode("pw")
        _ = try store.add(Self.item(.whenUnlocked))
        try store.lock()
        let file = daemon.root.appending("backup.ksb")
        #expect(status { try store.exportBackup(to: file, passphrase: "p") } == KeychainStatus.interactionNotAllowed)
        #expect(!FileManager.default.fileExists(atPath: file.path))
        #expect(
            try store.exportBackup(to: file, passphrase: "p", availableOnly: true).skippedUnavailable == [
                .whenUnlocked: 1
            ]
        )
    }

    @Test("export and import are refused to a client that is not an administrator")
    func nonAdministratorsAreRefused() throws {
        guard runningAsRoot("the other-user test needs root to switch users") else { return }
        let setpriv = try requireTool("setpriv", package: "util-linux")
        let daemon = try DaemonFixture(arguments: ["--socket-group", "65534"], start: false)
        defer { daemon.remove() }
        chmod(daemon.root.path, 0o711)
        try daemon.start()
        _ = try daemon.client().add(Self.item(.whenUnlocked))
        let probe = try builtProductsDirectory().appendingPathComponent("keyseal-wire-probe").path
        func asNobody(_ arguments: [String]) throws -> String {
            try runProcess(
                setpriv,
                ["--reuid", "65534", "--regid", "65534", "--clear-groups", probe, daemon.socketPath] + arguments
            ).stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try asNobody(["export", "p"]).hasPrefix("error -34018"))
        #expect(try asNobody(["import", "p"]).hasPrefix("error -34018"))
        // The same probe as the administrator is served.
        let asAdmin = try runProcess(probe, [daemon.socketPath, "export", "p"]).stdoutText
        #expect(asAdmin.hasPrefix("ok 1"))
    }
}
