import Foundation
import Keyseal
import KeysealClient
import KeysealCore
import KeysealTestSupport
import Testing

/// keyseald checks every item request whole before the engine sees it: a client cannot store what the engine does
/// not implement, and so cannot strand rows that break passcode changes, exports and deletes.
@Suite("Wire validation", .serialized)
struct WireValidationTests {
    /// The status of one raw wire request (0 when it succeeds).
    static func wireStatus(_ connection: KeysealConnection, _ request: WireRequest) -> Int32 {
        do {
            _ = try connection.send(request)
            return 0
        } catch {
            return error.status
        }
    }

    static func rawAdd(_ itemClass: ItemClass, _ attributes: [String: AttributeValue] = [:]) -> WireRequest {
        .add(NewItem(itemClass: itemClass, attributes: attributes, accessibility: .whenUnlocked, data: Data("s".utf8)))
    }

    @Test(
        "a raw add of a key, certificate or identity without valid material, or of an unknown attribute, is refused; passcode changes and exports keep working"
    )
    func unimplementedClassesAndUnknownAttributesCannotStrandRows() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let connection = KeysealConnection(socketPath: daemon.socketPath)
        defer { connection.disconnect() }
        let store = try daemon.client()
        _ = try store.add(.password(account: "good"))

        for itemClass: ItemClass in [.key, .certificate, .identity] {
            #expect(
                Self.wireStatus(connection, Self.rawAdd(itemClass, ["labl": .string("x")])) == KeychainStatus.param,
                "class \(itemClass)"
            )
        }
        #expect(
            Self.wireStatus(connection, Self.rawAdd(.genericPassword, ["acct": .string("odd"), "zzzz": .string("x")]))
                == KeychainStatus.noSuchAttr
        )

        // The damage the finding describes: after a passcode change, rows of those classes could not be decrypted,
        // every export failed and nobody could delete them. None were stored, so all of this works.
        try store.setPasscode("one")
        try store.changePasscode(from: "one", to: "two")
        let scratch = try TemporaryDirectory(prefix: "export")
        defer { scratch.remove() }
        let report = try store.exportBackup(to: scratch.appending("backup.ksb"), passphrase: "pp")
        #expect(report.exportedCount == 1)
        #expect(report.undecryptable.isEmpty)
        var all = ItemQuery(itemClass: .genericPassword, limit: .all)
        all.limitGiven = true
        try store.delete(all)
        #expect(try store.undecryptableItems().isEmpty)
    }

    @Test("the embedded engine and keyseald give the same status for each bad request")
    func embeddedAndDaemonAnswerAlike() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let embedded = try StoreFixture(.hostKey)
        defer { embedded.remove() }
        let client = try daemon.client()
        for store in [client, embedded.store] { _ = try store.add(.password(account: "anyone")) }
        for request in BadRequest.allCases {
            let throughDaemon = request.status(on: client)
            let inProcess = request.status(on: embedded.store)
            #expect(throughDaemon == inProcess, "\(request): keyseald \(throughDaemon), embedded \(inProcess)")
            #expect(throughDaemon == request.expected, "\(request)")
        }
        #expect(try client.undecryptableItems().isEmpty)
    }

    @Test("only administrators may list or delete undecryptable rows")
    func doctorIsForAdministrators() throws {
        guard runningAsRoot("the other-user test needs root to switch users") else { return }
        let daemon = try DaemonFixture.sharedWithNobody()
        defer { daemon.remove() }
        let asNobody = daemon.probeAsNobody
        #expect(try asNobody(["doctor"]).hasPrefix("error -34018"))
        #expect(try asNobody(["doctor-delete", String(repeating: "0", count: 32)]).hasPrefix("error -34018"))
        #expect(try asNobody(["add-class", "keys"]).hasPrefix("error -50 "))
        #expect(try daemon.client().undecryptableItems().isEmpty)
    }
}

/// `keyseal doctor` and `keyseal export` through a real keyseald, with a row edited in the store file.
@Suite("keyseal doctor", .serialized)
struct DoctorCommandTests {
    @Test("doctor lists an undecryptable row, export reports it and exports the rest, doctor deletes it by id")
    func doctorListsReportsAndDeletes() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(try cli("add-generic-password", "-a", "good", "-s", "cli", "-w", "one").status == 0)
        #expect(try cli("add-generic-password", "-a", "bad", "-s", "cli", "-w", "two").status == 0)
        #expect(try cli("doctor").stdoutText == "no undecryptable items\n")
        daemon.stop()
        let database = daemon.storeDirectory.appendingPathComponent("keyseal.db").path
        let sqlite = try requireTool("sqlite3", package: "sqlite3")
        let edited = try runProcess(
            sqlite,
            [database, "UPDATE items SET value = zeroblob(length(value)) WHERE id = (SELECT max(id) FROM items)"]
        )
        #expect(edited.status == 0, "\(edited.stderrText)")
        let id = try runProcess(sqlite, [database, "SELECT lower(hex(item_id)) FROM items ORDER BY id DESC LIMIT 1"])
            .stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        try daemon.start()

        let listed = try cli("--json", "doctor")
        #expect(listed.status == 0, "\(listed.stderrText)")
        let entries = try #require(try CLI.json(listed)["undecryptable"] as? [[String: Any]])
        #expect(entries.map { $0["id"] as? String } == [id])
        #expect(entries.first?["reason"] as? String == "authentication")
        #expect(try cli("doctor").stdoutText.contains(id))

        let scratch = try TemporaryDirectory(prefix: "doctor")
        defer { scratch.remove() }
        let file = scratch.appending("backup.ksb").path
        let exported = try cli("--json", "export", "--output", file, "--passphrase-stdin", input: "backup words\n")
        #expect(exported.status == 0, "\(exported.stderrText)")
        let report = try CLI.json(exported)
        #expect(report["exported"] as? Int == 1)
        #expect(report["undecryptable"] as? Int == 1)
        #expect((report["undecryptableItems"] as? [[String: Any]])?.first?["id"] as? String == id)
        let text = try cli(
            "export",
            "--output",
            scratch.appending("again.ksb").path,
            "--passphrase-stdin",
            input: "backup words\n"
        )
        #expect(text.stdoutText.contains("not exported, undecryptable: 1 item"))

        #expect(try cli("doctor", "--delete-undecryptable").status == 64)
        #expect(try cli("doctor", String(repeating: "0", count: 32)).status == 64)
        #expect(try cli("doctor", "--delete-undecryptable", String(repeating: "0", count: 32)).status == 44)
        let deleted = try cli("doctor", "--delete-undecryptable", id)
        #expect(deleted.status == 0, "\(deleted.stderrText)")
        #expect(deleted.stdoutText.hasPrefix("deleted 1 undecryptable item\n"))
        #expect(try cli("doctor").stdoutText == "no undecryptable items\n")
        #expect(try cli("find-generic-password", "-a", "good", "-s", "cli", "-w").stdoutText == "one\n")
    }
}
