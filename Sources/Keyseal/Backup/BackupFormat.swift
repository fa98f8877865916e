import Crypto
import FoundationEssentials
import Glibc
import KeysealCore

// The backup file (docs/BACKUP-FORMAT.md, DESIGN §7):
//
//   file     = preamble ‖ header ‖ checksum ‖ record(0) ‖ … ‖ record(n−1) ‖ end record(n)
//   preamble = "KSBACKUP" ‖ version (u16 BE) ‖ header length (u32 BE)
//   header   = F(1, backup id) ‖ F(2, Argon2id m ‖ t ‖ p) ‖ F(3, salt) ‖ F(4, created) ‖ F(5, item count)
//              ‖ F(6, backend) ‖ F(7, device identity) ‖ F(8, sealed D) ‖ F(9, wrapped class keys) ‖ F(10, verifier)
//   checksum = SHA-256(preamble ‖ header)
//   record i = u32 BE length ‖ AES-256-GCM(SK, nonce 0 ‖ i, aad "…/record" ‖ i) (ciphertext ‖ tag)
//
// BK = Argon2id(passphrase, salt); SK = HKDF(BK, "…/stream" ‖ checksum); the backup class keys BCK(c) are random
// and wrapped by HKDF(BK, "…/kek/" ‖ c ‖ id) (ak, ck, dk) or HKDF(BK ‖ D, "…/kek-device/" ‖ c ‖ id) (aku, cku,
// dku), D a random secret sealed by the exporting device. Every item's attributes and secret are sealed a second
// time under BCK(c) inside its record.

/// F(tag, bytes) = tag ‖ 32-bit big-endian length ‖ bytes (as in the store's encodings).
private func appendField(_ buffer: inout [UInt8], tag: UInt8, _ bytes: some Collection<UInt8>) {
    let length = UInt32(bytes.count)
    buffer.append(tag)
    buffer.append(UInt8(truncatingIfNeeded: length >> 24))
    buffer.append(UInt8(truncatingIfNeeded: length >> 16))
    buffer.append(UInt8(truncatingIfNeeded: length >> 8))
    buffer.append(UInt8(truncatingIfNeeded: length))
    buffer.append(contentsOf: bytes)
}

/// Constants and key names of the backup format, version 1.
enum BackupFormat {
    static let magic: [UInt8] = Array("KSBACKUP".utf8)
    static let version: UInt16 = 1
    /// Magic, version and header length.
    static let preambleSize = 14
    static let checksumSize = 32
    /// The largest header accepted (a real one is under 1 KiB).
    static let maxHeader = 64 << 10
    /// The largest sealed record accepted: a value at the largest configurable limit and its attributes fit.
    static let maxRecord = 64 << 20
    static let tagSize = 16
    /// The size of the pieces handed to a sink (and of wire chunks).
    static let chunkSize = 1 << 20

    /// Restorable on any device with the passphrase.
    static let portableClasses: [Accessibility] = [.whenUnlocked, .afterFirstUnlock, .always]
    /// Restorable only on the exporting device, with the passphrase.
    static let deviceClasses: [Accessibility] = [
        .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly,
    ]
    /// Every class a backup may hold (never when-passcode-set-this-device-only), in header order.
    static let exportedClasses = portableClasses + deviceClasses

    /// The most Argon2id work a backup header may ask for. A header asking for more (or for less than libargon2
    /// accepts) is refused as corrupt before any work is done.
    static let argon2Cap = Argon2Parameters(memoryKiB: 1 << 20, iterations: 16, parallelism: 8)

    static func argon2Acceptable(_ parameters: Argon2Parameters) -> Bool {
        parameters.parallelism >= 1 && parameters.parallelism <= argon2Cap.parallelism
            && parameters.memoryKiB >= 8 * parameters.parallelism && parameters.memoryKiB <= argon2Cap.memoryKiB
            && parameters.iterations >= 1 && parameters.iterations <= argon2Cap.iterations
    }

    static func label(_ text: String) -> [UInt8] { Array("keyseal/backup/v1/\(text)".utf8) }

    static func be64(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
    static func be32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    static func readBE(_ bytes: some Collection<UInt8>) -> UInt64 { bytes.reduce(0) { $0 << 8 | UInt64($1) } }

    /// A 96-bit nonce: a 32-bit domain and the record's sequence number. Each key seals at most one message per
    /// (domain, sequence) pair, and every key is fresh for each backup.
    static func nonce(domain: UInt32, sequence: UInt64) -> AES.GCM.Nonce {
        try! AES.GCM.Nonce(data: be32(domain) + be64(sequence))  // 12 bytes: always a valid nonce.
    }

    static let recordNonceDomain: UInt32 = 0
    static let itemNonceDomain: UInt32 = 1

    static func recordAAD(_ sequence: UInt64) -> [UInt8] { label("record") + be64(sequence) }

    static func itemAAD(_ sequence: UInt64, itemClass: String, group: String, checksum: [UInt8]) -> [UInt8] {
        var aad = label("item") + be64(sequence)
        appendField(&aad, tag: 1, itemClass.utf8)
        appendField(&aad, tag: 2, group.utf8)
        appendField(&aad, tag: 3, checksum)
        return aad
    }

    static func classKEK(
        _ accessibility: Accessibility,
        backupKey: SecretBytes,
        deviceSecret: SecretBytes?,
        backupID: [UInt8]
    )
        -> SecretBytes
    {
        if let deviceSecret {
            return KeyDerivation.hkdf(
                SecretBytes.concatenating([backupKey, deviceSecret]),
                info: label("kek-device/") + Array(accessibility.rawValue.utf8) + backupID
            )
        }
        return KeyDerivation.hkdf(backupKey, info: label("kek/") + Array(accessibility.rawValue.utf8) + backupID)
    }

    static func wrapAAD(_ accessibility: Accessibility, backupID: [UInt8]) -> [UInt8] {
        label("bck/") + Array(accessibility.rawValue.utf8) + backupID
    }

    static func verifierKey(backupKey: SecretBytes, backupID: [UInt8]) -> SecretBytes {
        KeyDerivation.hkdf(backupKey, info: label("verify") + backupID)
    }

    static func streamKey(backupKey: SecretBytes, checksum: [UInt8]) -> SymmetricKey {
        SymmetricKey(data: KeyDerivation.hkdf(backupKey, info: label("stream") + checksum))
    }

    static func constantTimeEqual(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
        guard lhs.count == rhs.count else { return false }
        return zip(lhs, rhs).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The longest name a report gives (in UTF-8 bytes); longer names are cut.
    static let maxName = 512

    /// The name a report gives an item: service (or server) and account, as text (cut to ``maxName`` bytes).
    static func name(_ attributes: [String: AttributeValue]) -> (service: String?, account: String?) {
        func text(_ key: String) -> String? {
            switch attributes[key] {
            case .string(let value)?: String(decoding: value.utf8.prefix(maxName), as: UTF8.self)
            case .data(let value)?: String(decoding: value.prefix(maxName), as: UTF8.self)
            default: nil
            }
        }
        return (text(AttributeKey.service) ?? text(AttributeKey.server), text(AttributeKey.account))
    }
}

/// BK = Argon2id(passphrase, salt): the one expensive step of an export or import, done once per file.
struct BackupPassphraseKey {
    let key: SecretBytes
    let salt: [UInt8]
    let argon2: Argon2Parameters

    static func derive(
        passphrase: SecretBytes,
        salt: [UInt8],
        argon2: Argon2Parameters
    ) throws(KeychainError)
        -> BackupPassphraseKey
    {
        guard !passphrase.isEmpty else { throw KeychainError(KeychainStatus.param, "the backup passphrase is empty") }
        let key = try Argon2id.derive(passphrase, salt: Data(salt), parameters: argon2)
        return BackupPassphraseKey(key: key, salt: salt, argon2: argon2)
    }

    /// A fresh salt and the store's Argon2id cost, for an export.
    static func forExport(
        passphrase: SecretBytes,
        argon2: Argon2Parameters
    ) throws(KeychainError) -> BackupPassphraseKey {
        guard BackupFormat.argon2Acceptable(argon2) else {
            throw KeychainError(KeychainStatus.param, "the Argon2id cost is beyond what a backup may ask for")
        }
        return try derive(passphrase: passphrase, salt: randomBytes(16), argon2: argon2)
    }
}

/// The exporting device as a backup header records it.
struct BackupDevice {
    var backend: String
    var identity: Data
    var sealedSecret: Data
}

/// Writes a backup: the header first, then one record per item, then the end record.
final class BackupWriter {
    let header: [UInt8]
    let itemCount: UInt64
    private let streamKey: SymmetricKey
    private let classKeys: [Accessibility: SymmetricKey]
    private let checksum: [UInt8]
    private var sequence: UInt64 = 0
    private var counts: [Accessibility: UInt64] = [:]

    init(
        key: BackupPassphraseKey,
        itemCount: Int,
        device: BackupDevice,
        deviceSecret: SecretBytes,
        created: Date
    ) throws(KeychainError) {
        let backupID = randomBytes(16)
        var fields: [UInt8] = []
        fields.reserveCapacity(1024)
        appendField(&fields, tag: 1, backupID)
        appendField(
            &fields,
            tag: 2,
            BackupFormat.be32(key.argon2.memoryKiB) + BackupFormat.be32(key.argon2.iterations)
                + BackupFormat.be32(key.argon2.parallelism)
        )
        appendField(&fields, tag: 3, key.salt)
        appendField(&fields, tag: 4, BackupFormat.be64(UInt64(max(0, created.timeIntervalSince1970))))
        appendField(&fields, tag: 5, BackupFormat.be64(UInt64(itemCount)))
        appendField(&fields, tag: 6, device.backend.utf8)
        appendField(&fields, tag: 7, device.identity)
        appendField(&fields, tag: 8, device.sealedSecret)
        var wrapped: [UInt8] = []
        var classKeys: [Accessibility: SymmetricKey] = [:]
        for accessibility in BackupFormat.exportedClasses {
            let secret = SecretBytes.random(count: 32)
            let kek = BackupFormat.classKEK(
                accessibility,
                backupKey: key.key,
                deviceSecret: BackupFormat.deviceClasses.contains(accessibility) ? deviceSecret : nil,
                backupID: backupID
            )
            let blob = try AEAD.sealSecret(
                secret,
                key: SymmetricKey(data: kek),
                aad: BackupFormat.wrapAAD(accessibility, backupID: backupID)
            )
            appendField(&wrapped, tag: 1, accessibility.rawValue.utf8)
            appendField(&wrapped, tag: 2, blob)
            classKeys[accessibility] = SymmetricKey(data: secret)
        }
        appendField(&fields, tag: 9, wrapped)
        let headerLength = fields.count + 5 + 32
        var preamble = BackupFormat.magic + withUnsafeBytes(of: BackupFormat.version.bigEndian) { Array($0) }
        preamble += BackupFormat.be32(UInt32(headerLength))
        let verifier = HMAC<SHA256>.authenticationCode(
            for: preamble + fields,
            using: SymmetricKey(data: BackupFormat.verifierKey(backupKey: key.key, backupID: backupID))
        )
        appendField(&fields, tag: 10, Array(verifier))
        let checksum = Array(SHA256.hash(data: preamble + fields))
        header = preamble + fields + checksum
        self.checksum = checksum
        self.itemCount = UInt64(itemCount)
        self.classKeys = classKeys
        streamKey = BackupFormat.streamKey(backupKey: key.key, checksum: checksum)
    }

    /// Appends one item's record to `output`. `name` (service or server, and account) is given for the
    /// this-device-only classes only, so that another device can say which items it skipped.
    func appendItem(
        to output: inout [UInt8],
        accessibility: Accessibility,
        itemClass: String,
        group: String,
        name: (service: String?, account: String?)?,
        attributes: Data,
        secret: Data
    ) throws(KeychainError) {
        guard let classKey = classKeys[accessibility] else {
            throw KeychainError(KeychainStatus.internalComponent, "\(accessibility.name) items are never exported")
        }
        guard sequence < itemCount else {
            throw KeychainError(KeychainStatus.internalComponent, "more items than the backup header announced")
        }
        var inner: [UInt8] = []
        inner.reserveCapacity(attributes.count + secret.count + 16)
        appendField(&inner, tag: 1, attributes)
        appendField(&inner, tag: 2, secret)
        let innerBox: AES.GCM.SealedBox
        do {
            innerBox = try AES.GCM.seal(
                inner,
                using: classKey,
                nonce: BackupFormat.nonce(domain: BackupFormat.itemNonceDomain, sequence: sequence),
                authenticating: BackupFormat.itemAAD(sequence, itemClass: itemClass, group: group, checksum: checksum)
            )
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "encryption failed")
        }
        zeroize(&inner)
        var plain: [UInt8] = [1]
        plain.reserveCapacity(innerBox.ciphertext.count + 128)
        appendField(&plain, tag: 1, accessibility.rawValue.utf8)
        appendField(&plain, tag: 2, itemClass.utf8)
        appendField(&plain, tag: 3, group.utf8)
        if let name {
            if let service = name.service { appendField(&plain, tag: 4, service.utf8) }
            if let account = name.account { appendField(&plain, tag: 5, account.utf8) }
        }
        var sealed = [UInt8](innerBox.ciphertext)
        sealed += innerBox.tag
        appendField(&plain, tag: 6, sealed)
        try appendRecord(to: &output, plain)
        counts[accessibility, default: 0] += 1
    }

    /// Appends the end record: the item count and the count per class. Nothing may follow it.
    func appendEnd(to output: inout [UInt8]) throws(KeychainError) {
        guard sequence == itemCount else {
            throw KeychainError(KeychainStatus.internalComponent, "fewer items than the backup header announced")
        }
        var plain: [UInt8] = [2]
        appendField(&plain, tag: 1, BackupFormat.be64(itemCount))
        for accessibility in BackupFormat.exportedClasses {
            appendField(&plain, tag: 2, accessibility.rawValue.utf8)
            appendField(&plain, tag: 3, BackupFormat.be64(counts[accessibility] ?? 0))
        }
        try appendRecord(to: &output, plain)
    }

    private func appendRecord(to output: inout [UInt8], _ plain: [UInt8]) throws(KeychainError) {
        let box: AES.GCM.SealedBox
        do {
            box = try AES.GCM.seal(
                plain,
                using: streamKey,
                nonce: BackupFormat.nonce(domain: BackupFormat.recordNonceDomain, sequence: sequence),
                authenticating: BackupFormat.recordAAD(sequence)
            )
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "encryption failed")
        }
        output += BackupFormat.be32(UInt32(box.ciphertext.count + BackupFormat.tagSize))
        output += box.ciphertext
        output += box.tag
        sequence += 1
    }
}

/// One item read from a backup, decrypted, ready to be sealed under the importing store's keys.
struct BackupItem {
    var accessibility: Accessibility
    var itemClass: String
    var accessGroup: String
    var attributes: [String: AttributeValue]
    /// `attributes` in the canonical encoding (what the store seals).
    var encodedAttributes: [UInt8]
    var secret: Data
}

/// Whether the importing store runs on the device that made the backup.
enum BackupDeviceMatch {
    /// The same device: the recovered D.
    case same(SecretBytes)
    /// Another device (or D could not be recovered): why, for the report.
    case other(String)
}

/// Reads a backup pushed to it in pieces of any size. Every record is authenticated as it arrives; nothing is
/// returned before the end record has been checked, so a truncated, reordered or edited file is refused whole.
///
/// Used by one thread at a time (a daemon connection hands it from one pool job to the next).
package final class BackupReader: @unchecked Sendable {
    private enum Phase {
        case preamble
        case header(length: Int)
        case records
        case finished
    }

    private let passphrase: SecretBytes
    private let matchDevice: (BackupDevice) throws -> BackupDeviceMatch
    private var phase = Phase.preamble
    private var buffer: [UInt8] = []
    private var offset = 0
    private var streamKey: SymmetricKey?
    private var classKeys: [Accessibility: SymmetricKey] = [:]
    private var checksum: [UInt8] = []
    private var sequence: UInt64 = 0
    private var counts: [Accessibility: UInt64] = [:]
    private var deviceSkipReason: String?

    /// Items announced by the header (nil until the header has been read).
    package private(set) var total: Int?
    /// Items read so far.
    package var done: Int { Int(sequence) }
    /// Time spent in Argon2id (once per file).
    package private(set) var keyDerivationSeconds: Double = 0
    private(set) var items: [BackupItem] = []
    private(set) var skipped: [ImportReport.SkippedItem] = []

    init(passphrase: SecretBytes, matchDevice: @escaping (BackupDevice) throws -> BackupDeviceMatch) {
        self.passphrase = passphrase
        self.matchDevice = matchDevice
    }

    static func corrupt(_ what: String) -> KeychainError {
        KeychainError(KeychainStatus.decode, "the backup is corrupt, truncated or was edited: \(what)")
    }

    /// Takes the next piece of the file. Throws as soon as something fails to authenticate.
    package func feed(_ bytes: UnsafeRawBufferPointer) throws(KeychainError) {
        if case .finished = phase {
            guard bytes.isEmpty else { throw Self.corrupt("data after the end record") }
            return
        }
        buffer.append(contentsOf: bytes)
        try parse()
        if offset > 0 && (offset >= buffer.count || offset > BackupFormat.chunkSize) {
            buffer.removeFirst(offset)
            offset = 0
        }
    }

    package func feed(_ bytes: [UInt8]) throws(KeychainError) {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(KeychainError) in try feed(raw) } }
        try result.get()
    }

    /// Checks that the end record was read and nothing follows it.
    package func finish() throws(KeychainError) {
        switch phase {
        case .finished:
            guard offset == buffer.count else { throw Self.corrupt("data after the end record") }
        case .preamble where buffer.isEmpty:
            throw KeychainError(KeychainStatus.decode, "the backup file is empty")
        default:
            throw Self.corrupt("the file ends before its end record (truncated)")
        }
    }

    private var available: Int { buffer.count - offset }

    private func parse() throws(KeychainError) {
        while true {
            switch phase {
            case .preamble:
                guard available >= BackupFormat.preambleSize else { return }
                let magic = buffer[offset..<offset + 8]
                guard magic.elementsEqual(BackupFormat.magic) else {
                    throw KeychainError(KeychainStatus.decode, "not a Keyseal backup file")
                }
                let version = UInt16(buffer[offset + 8]) << 8 | UInt16(buffer[offset + 9])
                guard version == BackupFormat.version else {
                    throw KeychainError(
                        KeychainStatus.decode,
                        "unknown backup format version \(version) (this Keyseal reads version \(BackupFormat.version))"
                    )
                }
                let length = Int(BackupFormat.readBE(buffer[offset + 10..<offset + 14]))
                guard length >= 5 + 32, length <= BackupFormat.maxHeader else {
                    throw Self.corrupt("impossible header length")
                }
                phase = .header(length: length)
            case .header(let length):
                guard available >= BackupFormat.preambleSize + length + BackupFormat.checksumSize else { return }
                try readHeader(length: length)
                offset += BackupFormat.preambleSize + length + BackupFormat.checksumSize
                phase = .records
            case .records:
                guard available >= 4 else { return }
                let length = Int(BackupFormat.readBE(buffer[offset..<offset + 4]))
                guard length >= BackupFormat.tagSize + 1, length <= BackupFormat.maxRecord else {
                    throw Self.corrupt("impossible record length at record \(sequence)")
                }
                guard available >= 4 + length else { return }
                let start = offset + 4
                offset += 4 + length
                let ended = try readRecord(buffer[start..<start + length])
                if ended {
                    phase = .finished
                    guard offset == buffer.count else { throw Self.corrupt("data after the end record") }
                    return
                }
            case .finished:
                return
            }
        }
    }

    /// Fields of the header, each present exactly once and in order.
    private static func fields(_ bytes: ArraySlice<UInt8>) throws(KeychainError) -> [(UInt8, ArraySlice<UInt8>)] {
        var result: [(UInt8, ArraySlice<UInt8>)] = []
        var index = bytes.startIndex
        while index < bytes.endIndex {
            guard bytes.endIndex - index >= 5 else { throw corrupt("a field is cut short") }
            let tag = bytes[index]
            let length = Int(BackupFormat.readBE(bytes[index + 1..<index + 5]))
            index += 5
            guard length <= bytes.endIndex - index else { throw corrupt("a field is cut short") }
            result.append((tag, bytes[index..<index + length]))
            index += length
        }
        return result
    }

    private func readHeader(length: Int) throws(KeychainError) {
        let preambleStart = offset
        let fieldsStart = offset + BackupFormat.preambleSize
        let fieldsEnd = fieldsStart + length
        let stored = buffer[fieldsEnd..<fieldsEnd + BackupFormat.checksumSize]
        let computed = Array(SHA256.hash(data: buffer[preambleStart..<fieldsEnd]))
        // Accidental damage and truncation anywhere in the header end here; only a deliberate edit that also
        // recomputes the checksum reaches the passphrase check below (and then reads as a wrong passphrase).
        guard BackupFormat.constantTimeEqual(computed, stored) else { throw Self.corrupt("header checksum mismatch") }
        let fields = try Self.fields(buffer[fieldsStart..<fieldsEnd])
        guard fields.count == 10, fields.enumerated().allSatisfy({ $0.element.0 == UInt8($0.offset + 1) }) else {
            throw Self.corrupt("unexpected header fields")
        }
        let backupID = Array(fields[0].1)
        let cost = fields[1].1
        guard backupID.count == 16, cost.count == 12, fields[2].1.count >= 8, fields[4].1.count == 8,
            fields[9].1.count == 32
        else { throw Self.corrupt("bad header field sizes") }
        let argon2 = Argon2Parameters(
            memoryKiB: UInt32(BackupFormat.readBE(cost.prefix(4))),
            iterations: UInt32(BackupFormat.readBE(cost.dropFirst(4).prefix(4))),
            parallelism: UInt32(BackupFormat.readBE(cost.suffix(4)))
        )
        guard BackupFormat.argon2Acceptable(argon2) else {
            throw KeychainError(
                KeychainStatus.decode,
                "the backup asks for Argon2id work beyond the limit (\(argon2.memoryKiB) KiB, \(argon2.iterations) passes, "
                    + "\(argon2.parallelism) lanes; at most \(BackupFormat.argon2Cap.memoryKiB) KiB, "
                    + "\(BackupFormat.argon2Cap.iterations) passes, \(BackupFormat.argon2Cap.parallelism) lanes)"
            )
        }
        let itemCount = BackupFormat.readBE(fields[4].1)
        guard itemCount <= UInt64(Int32.max) else { throw Self.corrupt("impossible item count") }

        let started = Date()
        let key = try BackupPassphraseKey.derive(passphrase: passphrase, salt: Array(fields[2].1), argon2: argon2)
        keyDerivationSeconds = Date().timeIntervalSince(started)
        let verifierEnd = fieldsEnd - (5 + 32)
        let expected = HMAC<SHA256>.authenticationCode(
            for: buffer[preambleStart..<verifierEnd],
            using: SymmetricKey(data: BackupFormat.verifierKey(backupKey: key.key, backupID: backupID))
        )
        guard BackupFormat.constantTimeEqual(Array(expected), fields[9].1) else {
            throw KeychainError(KeychainStatus.authFailed, "wrong backup passphrase")
        }

        // Authenticated from here on.
        checksum = Array(stored)
        total = Int(itemCount)
        let device = BackupDevice(
            backend: String(decoding: fields[5].1, as: UTF8.self),
            identity: Data(fields[6].1),
            sealedSecret: Data(fields[7].1)
        )
        var deviceSecret: SecretBytes?
        let match: BackupDeviceMatch
        do {
            match = try matchDevice(device)
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "\(error)")
        }
        switch match {
        case .same(let secret): deviceSecret = secret
        case .other(let reason): deviceSkipReason = reason
        }
        let wrapped = try Self.fields(fields[8].1)
        guard wrapped.count == 2 * BackupFormat.exportedClasses.count else { throw Self.corrupt("bad class keys") }
        for (index, accessibility) in BackupFormat.exportedClasses.enumerated() {
            let (codeTag, code) = wrapped[2 * index]
            let (blobTag, blob) = wrapped[2 * index + 1]
            guard codeTag == 1, blobTag == 2, code.elementsEqual(accessibility.rawValue.utf8) else {
                throw Self.corrupt("bad class keys")
            }
            let isDevice = BackupFormat.deviceClasses.contains(accessibility)
            if isDevice && deviceSecret == nil { continue }
            let kek = BackupFormat.classKEK(
                accessibility,
                backupKey: key.key,
                deviceSecret: isDevice ? deviceSecret : nil,
                backupID: backupID
            )
            let secret: SecretBytes
            do {
                secret = try AEAD.openSecret(
                    Data(blob),
                    key: SymmetricKey(data: kek),
                    aad: BackupFormat.wrapAAD(accessibility, backupID: backupID)
                )
            } catch {
                if isDevice {
                    // D was recovered but does not open the device classes: not the device that made the backup.
                    deviceSkipReason = "the backup's device secret does not match this device"
                    continue
                }
                throw Self.corrupt("a class key does not open")
            }
            classKeys[accessibility] = SymmetricKey(data: secret)
        }
        streamKey = BackupFormat.streamKey(backupKey: key.key, checksum: checksum)
    }

    /// Opens one record; returns true for the end record.
    private func readRecord(_ sealed: ArraySlice<UInt8>) throws(KeychainError) -> Bool {
        guard let streamKey, let total else { throw Self.corrupt("records before the header") }
        let plain: Data
        do {
            let box = try AES.GCM.SealedBox(
                nonce: BackupFormat.nonce(domain: BackupFormat.recordNonceDomain, sequence: sequence),
                ciphertext: sealed.dropLast(BackupFormat.tagSize),
                tag: sealed.suffix(BackupFormat.tagSize)
            )
            plain = try AES.GCM.open(box, using: streamKey, authenticating: BackupFormat.recordAAD(sequence))
        } catch {
            throw Self.corrupt("record \(sequence) fails authentication (edited, reordered or from another file)")
        }
        let bytes = [UInt8](plain)
        guard let kind = bytes.first else { throw Self.corrupt("empty record") }
        let fields = try Self.fields(bytes[1...])
        switch kind {
        case 1:
            guard sequence < UInt64(total) else { throw Self.corrupt("more items than the header announced") }
            try readItem(fields)
            sequence += 1
            return false
        case 2:
            guard sequence == UInt64(total), fields.count == 1 + 2 * BackupFormat.exportedClasses.count,
                fields[0].0 == 1, BackupFormat.readBE(fields[0].1) == UInt64(total)
            else { throw Self.corrupt("the end record does not match the items read") }
            for (index, accessibility) in BackupFormat.exportedClasses.enumerated() {
                let (codeTag, code) = fields[1 + 2 * index]
                let (countTag, count) = fields[2 + 2 * index]
                guard codeTag == 2, countTag == 3, code.elementsEqual(accessibility.rawValue.utf8),
                    BackupFormat.readBE(count) == counts[accessibility] ?? 0
                else { throw Self.corrupt("the end record does not match the items read") }
            }
            return true
        default:
            throw Self.corrupt("unknown record kind")
        }
    }

    private func readItem(_ fields: [(UInt8, ArraySlice<UInt8>)]) throws(KeychainError) {
        var values = [ArraySlice<UInt8>?](repeating: nil, count: 7)
        for (tag, value) in fields {
            guard (1...6).contains(tag), values[Int(tag)] == nil else { throw Self.corrupt("bad item record") }
            values[Int(tag)] = value
        }
        guard let code = values[1], let classCode = values[2], let group = values[3], let sealed = values[6],
            let accessibility = Accessibility(rawValue: String(decoding: code, as: UTF8.self)),
            BackupFormat.exportedClasses.contains(accessibility), sealed.count >= BackupFormat.tagSize
        else { throw Self.corrupt("bad item record") }
        let itemClass = String(decoding: classCode, as: UTF8.self)
        let accessGroup = String(decoding: group, as: UTF8.self)
        counts[accessibility, default: 0] += 1
        guard let classKey = classKeys[accessibility] else {
            // A this-device-only item on another device: named, counted, skipped.
            skipped.append(
                ImportReport.SkippedItem(
                    itemClass: itemClass,
                    accessibility: accessibility,
                    accessGroup: accessGroup,
                    service: values[4].map { String(decoding: $0, as: UTF8.self) },
                    account: values[5].map { String(decoding: $0, as: UTF8.self) },
                    reason: .otherDevice,
                    detail: deviceSkipReason ?? "made on another device"
                )
            )
            return
        }
        var inner: Data
        do {
            let box = try AES.GCM.SealedBox(
                nonce: BackupFormat.nonce(domain: BackupFormat.itemNonceDomain, sequence: sequence),
                ciphertext: sealed.dropLast(BackupFormat.tagSize),
                tag: sealed.suffix(BackupFormat.tagSize)
            )
            inner = try AES.GCM.open(
                box,
                using: classKey,
                authenticating: BackupFormat.itemAAD(
                    sequence,
                    itemClass: itemClass,
                    group: accessGroup,
                    checksum: checksum
                )
            )
        } catch {
            throw Self.corrupt("item \(sequence) fails authentication")
        }
        var innerBytes = [UInt8](inner)
        inner.resetBytes(in: 0..<inner.count)
        defer { zeroize(&innerBytes) }
        let parts = try Self.fields(innerBytes[...])
        guard parts.count == 2, parts[0].0 == 1, parts[1].0 == 2 else { throw Self.corrupt("bad item contents") }
        let attributes = try AttributeCodec.decode(Data(parts[0].1))
        // Kept as read only when canonical (sorted, no repeated key: what encode gives); otherwise re-encoded.
        let canonical = Self.isCanonical(parts[0].1, count: attributes.count)
        items.append(
            BackupItem(
                accessibility: accessibility,
                itemClass: itemClass,
                accessGroup: accessGroup,
                attributes: attributes,
                encodedAttributes: canonical ? Array(parts[0].1) : AttributeCodec.encode(attributes),
                secret: Data(parts[1].1)
            )
        )
    }

    /// Whether an attribute encoding lists its keys in strictly increasing order, `count` of them (so that it is
    /// exactly what `AttributeCodec.encode` gives for what `decode` read from it).
    private static func isCanonical(_ bytes: ArraySlice<UInt8>, count: Int) -> Bool {
        var index = bytes.startIndex
        var previous: ArraySlice<UInt8>?
        var keys = 0
        func field() -> ArraySlice<UInt8>? {
            guard bytes.endIndex - index >= 5 else { return nil }
            let length = Int(BackupFormat.readBE(bytes[index + 1..<index + 5]))
            guard length <= bytes.endIndex - index - 5 else { return nil }
            defer { index += 5 + length }
            return bytes[index + 5..<index + 5 + length]
        }
        while index < bytes.endIndex {
            guard let key = field(), field() != nil else { return false }
            if let previous, !previous.lexicographicallyPrecedes(key) { return false }
            previous = key
            keys += 1
        }
        return keys == count
    }
}
