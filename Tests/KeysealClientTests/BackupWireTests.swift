import Foundation
import Testing

@testable import KeysealClient

@Suite("Backup wire frames")
struct BackupWireTests {
    static func payload(_ frame: [UInt8]) -> [UInt8] { Array(frame.dropFirst(4)) }

    @Test("export and import requests round-trip, carry their passphrase and are administrator-only")
    func requestsRoundTrip() throws {
        let passphrase = SecretBytes(utf8: "pässphrase")
        let requests: [WireRequest] = [
            .exportBackup(passphrase: passphrase, availableOnly: true),
            .importBegin(passphrase: passphrase, replace: true),
            .importChunk([0, 1, 0xff]),
            .importEnd,
        ]
        for request in requests {
            let decoded = try WireRequest.decode(payload: Self.payload(try request.encodedFrame()))
            #expect(decoded.isManagement)
            switch (request, decoded) {
            case (.exportBackup(_, let a), .exportBackup(let p, let b)):
                #expect(a == b)
                #expect(p.utf8String == "pässphrase")
            case (.importBegin(_, let a), .importBegin(let p, let b)):
                #expect(a == b)
                #expect(p.utf8String == "pässphrase")
            case (.importChunk(let a), .importChunk(let b)): #expect(a == b)
            case (.importEnd, .importEnd): break
            default: Issue.record("\(request.name) decoded as \(decoded.name)")
            }
        }
        #expect(WireRequest.exportBackup(passphrase: passphrase, availableOnly: false).carriesSecret)
        #expect(!WireRequest.importChunk([]).carriesSecret)
    }

    @Test("a chunk over the limit is refused before sending")
    func oversizedChunk() {
        #expect(throws: KeychainError.self) {
            _ = try WireRequest.importChunk([UInt8](repeating: 0, count: Wire.backupChunk + 1)).encodedFrame()
        }
    }

    @Test("backup responses round-trip")
    func responsesRoundTrip() throws {
        let skipped = ImportReport.SkippedItem(
            itemClass: "genp",
            accessibility: .whenUnlockedThisDeviceOnly,
            accessGroup: "g",
            service: "s",
            account: nil,
            reason: .otherDevice,
            detail: "made on another device"
        )
        let responses: [WireResponse] = [
            .backupChunk(bytes: [1, 2, 3], done: 5, total: 9),
            .exportReport(
                ExportReport(
                    exported: [.whenUnlocked: 3, .alwaysThisDeviceOnly: 1],
                    skippedPasscodeOnly: 2,
                    skippedUnavailable: [.whenUnlockedThisDeviceOnly: 4],
                    keyDerivationSeconds: 0.25
                )
            ),
            .importProgress(done: 7, total: 9),
            .importSkipped([skipped, skipped]),
            .importReport(
                ImportReport(
                    total: 9,
                    restored: [.afterFirstUnlock: 6],
                    replaced: 1,
                    skipped: [skipped],
                    keyDerivationSeconds: 0.5
                )
            ),
        ]
        for response in responses {
            #expect(try WireResponse.decode(payload: Self.payload(response.encodedFrame())) == response)
        }
    }

    @Test("a skipped-item count the frame cannot hold is malformed, not an allocation")
    func hugeSkippedCount() {
        var frame = WireResponse.importSkipped([]).encodedFrame()
        frame.replaceSubrange(6..<10, with: [0x7f, 0xff, 0xff, 0xff])
        #expect(throws: KeychainError.self) { _ = try WireResponse.decode(payload: Self.payload(frame)) }
    }
}
