import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// One item per accessibility class, named after the class: service `svc-<code>`, account `acct-<code>`.
private func classItem(_ accessibility: Accessibility) -> NewItem {
    .password(
        service: "svc-\(accessibility.rawValue)",
        account: "acct-\(accessibility.rawValue)",
        secret: "secret-\(accessibility.rawValue)",
        accessibility: accessibility
    )
}

private func classQuery(_ accessibility: Accessibility) -> ItemQuery {
    .password(
        service: "svc-\(accessibility.rawValue)",
        account: "acct-\(accessibility.rawValue)",
        returns: [.data, .attributes]
    )
}

/// A passcode (so that when-passcode-set items can exist) and one item of every class.
private func populateEveryClass(_ store: KeychainStore) throws {
    try store.setPasscode("pw")
    for accessibility in Accessibility.allCases { _ = try store.add(classItem(accessibility)) }
}

/// Every item the store holds (administrator view), by (service, account).
private func everyPassword(_ store: KeychainStore) throws -> [String: ItemRecord] {
    let records: [ItemRecord]
    do {
        records = try store.copyMatching(
            ItemQuery(itemClass: .genericPassword, limit: .all, returns: [.data, .attributes])
        )
    } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
        return [:]
    }
    var result: [String: ItemRecord] = [:]
    for record in records {
        result["\(record.string(AttributeKey.service) ?? "")/\(record.string(AttributeKey.account) ?? "")"] = record
    }
    return result
}

private func key(_ accessibility: Accessibility) -> String {
    "svc-\(accessibility.rawValue)/acct-\(accessibility.rawValue)"
}

/// A fresh store beside `fixture`'s, on the same device (the same swtpm state, token or host key).
private func sameDeviceStore(_ fixture: StoreFixture, _ name: String = "same-device") throws -> KeychainStore {
    try KeychainStore.embedded(
        directory: fixture.root.appending(name),
        device: fixture.device,
        configuration: fixture.configuration
    )
}

private let portable: [Accessibility] = [.whenUnlocked, .afterFirstUnlock, .always]
private let deviceOnly: [Accessibility] = [
    .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly,
]

/// Backups across devices on real hardware: swtpm for the TPM (two swtpm processes are two devices; a second
/// store on the same swtpm state is the same device) and SoftHSM2 tokens.
@Suite("Backup across devices")
struct BackupDeviceTests {
    @Test(arguments: [TestBackend.tpm, .pkcs11, .hostKey])
    func anotherDeviceRestoresThePortableClassesAndNamesTheSkippedThisDeviceOnlyItems(backend: TestBackend) throws {
        let source = try StoreFixture(backend)
        defer { source.remove() }
        let target = try StoreFixture(backend)
        defer { target.remove() }
        try populateEveryClass(source.store)
        let file = source.root.appending("backup.ksb")
        let exported = try source.store.exportBackup(to: file, passphrase: "correct horse")
        #expect(exported.exportedCount == 6)
        #expect(exported.skippedPasscodeOnly == 1)

        let report = try target.store.importBackup(from: file, passphrase: "correct horse")
        #expect(report.total == 6)
        #expect(report.restored == [.whenUnlocked: 1, .afterFirstUnlock: 1, .always: 1])
        let skipped = report.skipped.map { "\($0.service ?? "")/\($0.account ?? "")" }.sorted()
        #expect(skipped == deviceOnly.map(key).sorted())
        #expect(report.skipped.allSatisfy { $0.reason == .otherDevice })

        let items = try everyPassword(target.store)
        #expect(Set(items.keys) == Set(portable.map(key)))
        for accessibility in portable {
            #expect(items[key(accessibility)]?.data == Data("secret-\(accessibility.rawValue)".utf8))
            #expect(items[key(accessibility)]?.accessibility == accessibility)
        }
    }

    @Test(arguments: [TestBackend.tpm, .pkcs11])
    func aFreshStoreOnTheSameDeviceRestoresEverythingButWhenPasscodeSet(backend: TestBackend) throws {
        let source = try StoreFixture(backend)
        defer { source.remove() }
        try populateEveryClass(source.store)
        let file = source.root.appending("backup.ksb")
        try source.store.exportBackup(to: file, passphrase: "correct horse")
        source.close()

        let restored = try sameDeviceStore(source)
        defer { restored.close() }
        let report = try restored.importBackup(from: file, passphrase: "correct horse")
        #expect(report.skipped.isEmpty)
        #expect(report.restoredCount == 6)
        let items = try everyPassword(restored)
        #expect(Set(items.keys) == Set((portable + deviceOnly).map(key)))
        for accessibility in portable + deviceOnly {
            #expect(items[key(accessibility)]?.data == Data("secret-\(accessibility.rawValue)".utf8))
            #expect(items[key(accessibility)]?.accessibility == accessibility)
        }
    }

    @Test func theSameDeviceWithoutThePassphraseOpensNothing() throws {
        let source = try StoreFixture(.tpm)
        defer { source.remove() }
        try populateEveryClass(source.store)
        let file = source.root.appending("backup.ksb")
        try source.store.exportBackup(to: file, passphrase: "correct horse")
        source.close()
        let restored = try sameDeviceStore(source)
        defer { restored.close() }
        #expect(
            status { try restored.importBackup(from: file, passphrase: "wrong horse") } == KeychainStatus.authFailed
        )
        #expect(try everyPassword(restored).isEmpty)
    }

    @Test func theBackupNeverHoldsWhenPasscodeSetItems() throws {
        let source = try StoreFixture(.tpm)
        defer { source.remove() }
        try populateEveryClass(source.store)
        let file = source.root.appending("backup.ksb")
        try source.store.exportBackup(to: file, passphrase: "p")
        source.close()
        let restored = try sameDeviceStore(source)
        defer { restored.close() }
        try restored.setPasscode("pw")
        let report = try restored.importBackup(from: file, passphrase: "p")
        #expect(report.restored[.whenPasscodeSetThisDeviceOnly] == nil)
        #expect(
            status { _ = try restored.copyMatching(classQuery(.whenPasscodeSetThisDeviceOnly)) }
                == KeychainStatus.itemNotFound
        )
    }
}

/// Refusals: each leaves the store as it was.
@Suite("Backup refusals")
struct BackupRefusalTests {
    /// A store with one item of each portable class, its backup, and a target store holding one item of its own.
    final class Setup: @unchecked Sendable {
        let source: StoreFixture
        let target: StoreFixture
        let file: URL
        let bytes: [UInt8]

        init() throws {
            source = try StoreFixture(.hostKey)
            target = try StoreFixture(.hostKey)
            for accessibility in portable + deviceOnly { _ = try source.store.add(classItem(accessibility)) }
            file = source.root.appending("backup.ksb")
            try source.store.exportBackup(to: file, passphrase: "pass")
            bytes = [UInt8](try Data(contentsOf: file))
            _ = try target.store.add(.password(service: "own", account: "own", secret: "mine"))
        }

        func remove() {
            source.remove()
            target.remove()
        }

        /// Writes `bytes` to a new file and imports it; returns the status.
        func importStatus(_ bytes: [UInt8], passphrase: String = "pass") throws -> OSStatus {
            let edited = source.root.appending("edited-\(UUID().uuidString).ksb")
            try Data(bytes).write(to: edited)
            return status { try target.store.importBackup(from: edited, passphrase: passphrase) }
        }

        /// Only the target's own item is there.
        func targetUnchanged() throws -> Bool {
            let items = try everyPassword(target.store)
            return Set(items.keys) == ["own/own"] && items["own/own"]?.data == Data("mine".utf8)
        }

        /// Offsets of each record's length prefix, in order (the end record last).
        var recordOffsets: [Int] {
            let headerLength = Int(bytes[10]) << 24 | Int(bytes[11]) << 16 | Int(bytes[12]) << 8 | Int(bytes[13])
            var offset = 14 + headerLength + 32
            var offsets: [Int] = []
            while offset + 4 <= bytes.count {
                offsets.append(offset)
                let length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
                offset += 4 + length
            }
            return offsets
        }
    }

    @Test func aWrongPassphraseIsAuthFailedAndChangesNothing() throws {
        let setup = try Setup()
        defer { setup.remove() }
        #expect(try setup.importStatus(setup.bytes, passphrase: "wrong") == KeychainStatus.authFailed)
        #expect(try setup.targetUnchanged())
    }

    enum Damage: String, CaseIterable, CustomStringConvertible {
        case truncatedInPreamble, truncatedInHeader, truncatedMidRecord, truncatedBeforeEndRecord, lastByteMissing
        case flippedMagic, flippedHeaderField, flippedChecksum, flippedFirstRecord, flippedEndRecord, flippedLastByte
        case unknownVersion, recordsSwapped, recordDropped, recordDuplicated, garbageAppended, empty
        var description: String { rawValue }
    }

    static func damaged(_ setup: Setup, _ damage: Damage) -> [UInt8] {
        var bytes = setup.bytes
        let records = setup.recordOffsets
        func record(_ index: Int) -> ArraySlice<UInt8> {
            let start = records[index]
            let end = index + 1 < records.count ? records[index + 1] : bytes.count
            return setup.bytes[start..<end]
        }
        switch damage {
        case .truncatedInPreamble: return Array(bytes.prefix(9))
        case .truncatedInHeader: return Array(bytes.prefix(40))
        case .truncatedMidRecord: return Array(bytes.prefix(records[2] + 20))
        case .truncatedBeforeEndRecord: return Array(bytes.prefix(records.last!))
        case .lastByteMissing: return Array(bytes.dropLast())
        case .flippedMagic: bytes[2] ^= 0x01
        case .flippedHeaderField: bytes[30] ^= 0x01
        case .flippedChecksum: bytes[records[0] - 1] ^= 0x80
        case .flippedFirstRecord: bytes[records[0] + 10] ^= 0x01
        case .flippedEndRecord: bytes[records.last! + 8] ^= 0x01
        case .flippedLastByte: bytes[bytes.count - 1] ^= 0x01
        case .unknownVersion: bytes[9] = 2
        case .recordsSwapped:
            return Array(bytes[..<records[0]]) + record(1) + record(0) + Array(bytes[records[2]...])
        case .recordDropped:
            return Array(bytes[..<records[1]]) + Array(bytes[records[2]...])
        case .recordDuplicated:
            return Array(bytes[..<records[2]]) + record(1) + Array(bytes[records[2]...])
        case .garbageAppended: return bytes + [0, 0, 0, 32] + [UInt8](repeating: 7, count: 32)
        case .empty: return []
        }
        return bytes
    }

    @Test(arguments: Damage.allCases)
    func aDamagedFileIsDecodeErrorAndChangesNothing(damage: Damage) throws {
        let setup = try Setup()
        defer { setup.remove() }
        #expect(setup.recordOffsets.count == 7)
        #expect(try setup.importStatus(Self.damaged(setup, damage)) == KeychainStatus.decode)
        #expect(try setup.targetUnchanged())
    }

    @Test func aHeaderAskingForTooMuchArgon2idWorkIsRefusedBeforeAnyWork() throws {
        let setup = try Setup()
        defer { setup.remove() }
        // The Argon2id field (tag 2) follows the 16-byte backup id field; set m to 64 GiB and fix the checksum.
        var bytes = setup.bytes
        let costOffset = 14 + 5 + 16 + 5
        bytes.replaceSubrange(costOffset..<costOffset + 4, with: [0x04, 0x00, 0x00, 0x00])
        let headerEnd = setup.recordOffsets[0] - 32
        let checksum = try fixedChecksum(Array(bytes[..<headerEnd]))
        bytes.replaceSubrange(headerEnd..<headerEnd + 32, with: checksum)
        let started = Date()
        #expect(try setup.importStatus(bytes) == KeychainStatus.decode)
        #expect(Date().timeIntervalSince(started) < 1)
        #expect(try setup.targetUnchanged())
    }

    /// SHA-256 through the system tool (the test target does not link Crypto).
    func fixedChecksum(_ bytes: [UInt8]) throws -> [UInt8] {
        let tool = try requireTool("sha256sum", package: "coreutils")
        let hex = try runProcess(tool, ["-"], input: Data(bytes)).stdoutText.prefix(64)
        var result: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            result.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return result
    }

    @Test func aLockedClassFailsTheExportWithInteractionNotAllowedAndLeavesNoFile() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        try populateEveryClass(fixture.store)
        try fixture.store.lock()
        let file = fixture.root.appending("backup.ksb")
        #expect(
            status { try fixture.store.exportBackup(to: file, passphrase: "p") } == KeychainStatus.interactionNotAllowed
        )
        #expect(!FileManager.default.fileExists(atPath: file.path))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: fixture.root.path).filter {
            $0.contains("partial")
        }
        #expect(leftovers.isEmpty)
    }

    @Test func availableOnlyLeavesTheLockedClassesOutAndCountsThem() throws {
        let source = try StoreFixture(.hostKey)
        defer { source.remove() }
        try populateEveryClass(source.store)
        try source.store.lock()
        let file = source.root.appending("backup.ksb")
        let report = try source.store.exportBackup(to: file, passphrase: "p", availableOnly: true)
        #expect(report.skippedUnavailable == [.whenUnlocked: 1, .whenUnlockedThisDeviceOnly: 1])
        #expect(report.skippedPasscodeOnly == 1)
        #expect(
            report.exported == [
                .afterFirstUnlock: 1, .always: 1, .afterFirstUnlockThisDeviceOnly: 1, .alwaysThisDeviceOnly: 1,
            ]
        )
        source.close()
        let restored = try sameDeviceStore(source)
        defer { restored.close() }
        try restored.importBackup(from: file, passphrase: "p")
        let keys = Set(try everyPassword(restored).keys)
        #expect(
            keys
                == Set(
                    [Accessibility.afterFirstUnlock, .always, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly]
                        .map(key)
                )
        )
    }

    @Test func anImportIntoALockedClassIsInteractionNotAllowedAndChangesNothing() throws {
        let setup = try Setup()
        defer { setup.remove() }
        try setup.target.store.setPasscode("pw")
        try setup.target.store.lock()
        #expect(try setup.importStatus(setup.bytes) == KeychainStatus.interactionNotAllowed)
        try setup.target.store.unlock(passcode: "pw")
        #expect(try setup.targetUnchanged())
    }

    @Test func theFileIsPrivateAndAnExistingFileIsNeverReplaced() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        _ = try fixture.store.add(classItem(.whenUnlocked))
        let file = fixture.root.appending("backup.ksb")
        try fixture.store.exportBackup(to: file, passphrase: "p")
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let before = try Data(contentsOf: file)
        #expect(status { try fixture.store.exportBackup(to: file, passphrase: "p") } == KeychainStatus.param)
        #expect(try Data(contentsOf: file) == before)
    }

    @Test func anEmptyPassphraseIsAParameterError() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        #expect(
            status { try fixture.store.exportBackup(to: fixture.root.appending("b"), passphrase: "") }
                == KeychainStatus.param
        )
    }

    @Test func noAttributeOrSecretAppearsInTheFile() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        _ = try fixture.store.add(
            .password(
                service: "conspicuous-service",
                account: "conspicuous-account",
                secret: "conspicuous-secret",
                accessibility: .whenUnlockedThisDeviceOnly,
                group: "conspicuous-group"
            )
        )
        _ = try fixture.store.add(.password(service: "visible-svc", account: "visible-acct", secret: "visible-secret"))
        let file = fixture.root.appending("backup.ksb")
        try fixture.store.exportBackup(to: file, passphrase: "p")
        let bytes = try Data(contentsOf: file)
        for needle in ["conspicuous", "visible", "svce", "acct", "genp"] {
            #expect(bytes.range(of: Data(needle.utf8)) == nil, "\(needle) appears in the file")
        }
    }
}

/// What an import does with items already in the store, and the byte-exact round trip.
@Suite("Backup restore")
struct BackupRestoreTests {
    @Test func anExistingPrimaryKeyIsSkippedAndReported() throws {
        let source = try StoreFixture(.hostKey)
        defer { source.remove() }
        _ = try source.store.add(.password(service: "s", account: "shared", secret: "from-backup"))
        _ = try source.store.add(.password(service: "s", account: "new", secret: "n"))
        let file = source.root.appending("backup.ksb")
        try source.store.exportBackup(to: file, passphrase: "p")
        let target = try StoreFixture(.hostKey)
        defer { target.remove() }
        _ = try target.store.add(.password(service: "s", account: "shared", secret: "already-here"))

        let report = try target.store.importBackup(from: file, passphrase: "p")
        #expect(report.restoredCount == 1)
        #expect(report.replaced == 0)
        #expect(report.skipped.map(\.reason) == [.exists])
        #expect(report.skipped.first?.account == "shared")
        let shared = try target.store.copyMatching(.password(service: "s", account: "shared", returns: .data))
        #expect(shared.first?.data == Data("already-here".utf8))
    }

    @Test func replaceReplacesTheExistingItem() throws {
        let source = try StoreFixture(.hostKey)
        defer { source.remove() }
        _ = try source.store.add(.password(service: "s", account: "shared", secret: "from-backup"))
        let file = source.root.appending("backup.ksb")
        try source.store.exportBackup(to: file, passphrase: "p")
        let target = try StoreFixture(.hostKey)
        defer { target.remove() }
        _ = try target.store.add(.password(service: "s", account: "shared", secret: "already-here"))

        let report = try target.store.importBackup(from: file, passphrase: "p", replace: true)
        #expect(report.restoredCount == 1)
        #expect(report.replaced == 1)
        #expect(report.skipped.isEmpty)
        let shared = try target.store.copyMatching(
            ItemQuery(
                itemClass: .genericPassword,
                attributes: [AttributeKey.account: .string("shared")],
                limit: .all,
                returns: .data
            )
        )
        #expect(shared.map(\.data) == [Data("from-backup".utf8)])
    }

    @Test func tenThousandItemsRoundTripByteExact() throws {
        let source = try StoreFixture(.hostKey)
        defer { source.remove() }
        var generator = SystemRandomNumberGenerator()
        var expected: [String: (Data, [String: AttributeValue])] = [:]
        var items: [NewItem] = []
        let classes: [Accessibility] = portable + deviceOnly
        for index in 0..<10_000 {
            let value: Data
            switch index % 4 {
            case 0: value = Data()
            case 1:
                value = Data(
                    [0xff, 0xfe, 0x00, 0xc3, 0x28]
                        + (0..<(index % 97)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                )
            case 2: value = Data("pässwörd-\(index)".utf8)
            default: value = Data((0..<(index % 700)).map { _ in UInt8.random(in: 0...255, using: &generator) })
            }
            var attributes: [String: AttributeValue] = [
                AttributeKey.service: .string("svc-\(index % 13)"),
                AttributeKey.account: .data(Data([0xff, 0x00]) + Data("\(index)".utf8)),
                AttributeKey.label: .string("label \(index)"),
                AttributeKey.generic: .data(Data([UInt8(index & 0xff), 0x80])),
            ]
            if index % 5 == 0 { attributes[AttributeKey.comment] = .string("") }
            items.append(
                NewItem(
                    itemClass: .genericPassword,
                    attributes: attributes,
                    accessGroup: index % 3 == 0 ? "group.a" : nil,
                    accessibility: classes[index % classes.count],
                    data: value
                )
            )
        }
        try source.store.addBatch(items)
        for record in try source.store.copyMatching(
            ItemQuery(itemClass: .genericPassword, limit: .all, returns: [.data, .attributes])
        ) {
            guard case .data(let account)? = record.attributes[AttributeKey.account] else { continue }
            expected[account.base64EncodedString()] = (record.data ?? Data(), record.attributes)
        }
        #expect(expected.count == 10_000)
        let file = source.root.appending("backup.ksb")
        let exported = try source.store.exportBackup(to: file, passphrase: "p")
        #expect(exported.exportedCount == 10_000)
        source.close()

        let restored = try sameDeviceStore(source)
        defer { restored.close() }
        let report = try restored.importBackup(from: file, passphrase: "p")
        #expect(report.restoredCount == 10_000)
        var matched = 0
        for record in try restored.copyMatching(
            ItemQuery(itemClass: .genericPassword, limit: .all, returns: [.data, .attributes])
        ) {
            guard case .data(let account)? = record.attributes[AttributeKey.account],
                let (value, attributes) = expected[account.base64EncodedString()]
            else { continue }
            if record.data == value && record.attributes == attributes { matched += 1 }
        }
        #expect(matched == 10_000)
    }
}

@Suite("Backup streaming")
struct BackupStreamingTests {
    @Test func anExportIsHandedOutInPiecesOfAboutAMegabyte() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        let bulk = Data(repeating: 0x5a, count: 4096)
        try fixture.store.addBatch(
            (0..<1500).map { index in
                NewItem(
                    itemClass: .genericPassword,
                    attributes: [AttributeKey.service: .string("bulk"), AttributeKey.account: .string("\(index)")],
                    data: bulk
                )
            }
        )
        var pieces: [Int] = []
        _ = try fixture.store.exportEmbedded(
            passphrase: SecretBytes(utf8: "p"),
            availableOnly: false,
            sink: { pieces.append($0.count) },
            progress: { _, _ in }
        )
        #expect(pieces.count >= 6)
        #expect(pieces.allSatisfy { $0 <= (1 << 20) + (64 << 10) })
    }
}

@Suite("Backup edge cases")
struct BackupEdgeTests {
    @Test func anEmptyStoreRoundTrips() throws {
        let source = try StoreFixture(.hostKey)
        defer { source.remove() }
        let file = source.root.appending("empty.ksb")
        #expect(try source.store.exportBackup(to: file, passphrase: "p").exportedCount == 0)
        let target = try StoreFixture(.hostKey)
        defer { target.remove() }
        let report = try target.store.importBackup(from: file, passphrase: "p")
        #expect(report.total == 0)
        #expect(report.restoredCount == 0)
        #expect(report.skipped.isEmpty)
    }

    @Test func aFileThatIsNotABackupIsDecodeError() throws {
        let fixture = try StoreFixture(.hostKey)
        defer { fixture.remove() }
        let file = fixture.root.appending("notes.txt")
        try Data("KSBACKUX and then some text that is long enough".utf8).write(to: file)
        #expect(status { try fixture.store.importBackup(from: file, passphrase: "p") } == KeychainStatus.decode)
    }

    @Test func internetPasswordsAndAccessGroupsRoundTrip() throws {
        let source = try StoreFixture(.hostKey)
        defer { source.remove() }
        _ = try source.store.add(
            NewItem(
                itemClass: .internetPassword,
                attributes: [
                    AttributeKey.server: .string("example.com"), AttributeKey.account: .string("a"),
                    AttributeKey.port: .int(8443), AttributeKey.protocol: .string("htps"),
                ],
                accessGroup: "team",
                accessibility: .afterFirstUnlock,
                data: Data("web".utf8)
            )
        )
        let file = source.root.appending("backup.ksb")
        try source.store.exportBackup(to: file, passphrase: "p")
        let target = try StoreFixture(.hostKey)
        defer { target.remove() }
        try target.store.importBackup(from: file, passphrase: "p")
        let found = try target.store.copyMatching(
            ItemQuery(
                itemClass: .internetPassword,
                attributes: [AttributeKey.server: .string("example.com"), AttributeKey.port: .int(8443)],
                returns: [.data, .attributes]
            )
        )
        #expect(found.first?.data == Data("web".utf8))
        #expect(found.first?.string(AttributeKey.accessGroup) == "team")
        #expect(found.first?.accessibility == .afterFirstUnlock)
    }
}

@Suite("Backup import sessions")
struct BackupImportSessionTests {
    @Test func aLockDuringAnImportFailsItWithInteractionNotAllowedAndChangesNothing() throws {
        let source = try StoreFixture(.hostKey)
        defer { source.remove() }
        try source.store.addBatch(
            (0..<3000).map {
                NewItem.password(service: "bulk", account: "\($0)", secret: String(repeating: "x", count: 600))
            }
        )
        let file = source.root.appending("backup.ksb")
        try source.store.exportBackup(to: file, passphrase: "p")
        let bytes = [UInt8](try Data(contentsOf: file))

        let target = try StoreFixture(.hostKey)
        defer { target.remove() }
        try target.store.setPasscode("pw")
        let session = try target.store.beginBackupImport(passphrase: SecretBytes(utf8: "p"))
        try session.feed(Array(bytes.prefix(bytes.count / 2)))
        try target.store.lock()
        let failed = status {
            try session.feed(Array(bytes.dropFirst(bytes.count / 2)))
            _ = try session.finish(replace: false)
        }
        #expect(failed == KeychainStatus.interactionNotAllowed)
        try target.store.unlock(passcode: "pw")
        #expect(try target.store.status().itemCounts.isEmpty)
    }

    @Test func anAbandonedImportWritesNothing() throws {
        let source = try StoreFixture(.hostKey)
        defer { source.remove() }
        _ = try source.store.add(classItem(.whenUnlocked))
        let file = source.root.appending("backup.ksb")
        try source.store.exportBackup(to: file, passphrase: "p")
        let target = try StoreFixture(.hostKey)
        defer { target.remove() }
        let session = try target.store.beginBackupImport(passphrase: SecretBytes(utf8: "p"))
        try session.feed([UInt8](try Data(contentsOf: file)))
        session.cancel()
        #expect(try target.store.status().itemCounts.isEmpty)
    }
}
