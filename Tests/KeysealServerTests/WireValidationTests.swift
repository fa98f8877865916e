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

    static func rawAdd(_ itemClass: String, _ attributes: [String: WireValue] = [:]) -> WireRequest {
        .add(WireNewItem(itemClass: itemClass, attributes: attributes, accessibility: "ak", data: Data("s".utf8)))
    }

    @Test("a raw add of keys, cert, idnt or an unknown attribute is refused; passcode changes and exports keep working")
    func unimplementedClassesAndUnknownAttributesCannotStrandRows() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let connection = KeysealConnection(socketPath: daemon.socketPath)
        defer { connection.disconnect() }
        let store = try daemon.client()
        _ = try store.add(.password(account: "good"))

        for itemClass in ["keys", "cert", "idnt"] {
            #expect(
                Self.wireStatus(connection, Self.rawAdd(itemClass, ["labl": .string("x")])) == KeychainStatus.unimplemented,
                "class \(itemClass)")
        }
        #expect(
            Self.wireStatus(connection, Self.rawAdd("genp", ["acct": .string("odd"), "zzzz": .string("x")]))
                == KeychainStatus.noSuchAttr)

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
}
