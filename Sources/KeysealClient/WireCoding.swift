#if canImport(FoundationEssentials)
import FoundationEssentials
import Glibc
#else
import FoundationEssentials
#endif

// The payload encoding: fixed-width big-endian integers, byte strings as a u32 length and the bytes, strings
// as UTF-8 byte strings, optionals as a presence byte (0 or 1) and the value, attribute maps as a u16 count of
// (u8-length key, tagged value) pairs. Every read is bounds-checked and every count is checked against the
// bytes left, so no input can make the decoder crash or allocate more than the frame holds.

/// Request opcodes.
enum Opcode: UInt8 {
    case ping = 1
    case status = 2
    case lockState = 3
    case lock = 4
    case unlock = 5
    case setPasscode = 6
    case changePasscode = 7
    case removePasscode = 8
    case getSettings = 9
    case setSettings = 10
    case subscribeLockState = 11
    case add = 16
    case copyMatching = 17
    case update = 18
    case delete = 19
    case addReplacingAttributes = 20
    case exportBackup = 24
    case importBegin = 25
    case importChunk = 26
    case importEnd = 27
    case undecryptableItems = 32
    case deleteUndecryptable = 33
    case generateKey = 48
    case keyOperation = 49
    case certificates = 50
    case createCSR = 51
    case createRecoveryKey = 40
    case recover = 41
    case tpmReseal = 42
    case acceptRollback = 43
    case onBehalf = 56
    case authenticate = 57
    case authenticated = 58
    case attestation = 60
}

/// Response kinds.
enum ResponseKind: UInt8 {
    case ok = 0
    case failure = 1
    case records = 2
    case status = 3
    case lockState = 4
    case message = 5
    case settings = 6
    case lockStateChanged = 7
    case backupChunk = 8
    case exportReport = 9
    case importProgress = 10
    case importSkipped = 11
    case importReport = 12
    /// A piece of a response payload too large for one frame; more pieces follow.
    case part = 13
    /// The last piece: the joined pieces are the response payload.
    case lastPart = 14
    case undecryptable = 15
    case key = 16
    case keyResult = 17
    case certificates = 18
    case secret = 20
}

enum ValueTag: UInt8 {
    case string = 1
    case data = 2
    case bool = 3
    case int = 4
    case date = 5
}

// MARK: - Writer

/// Appends the encoding to a byte array. The first four bytes are reserved for the frame length.
struct WireWriter {
    var bytes: [UInt8]

    init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(contentsOf: [0, 0, 0, 0])
        bytes.append(Wire.version)
    }

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    mutating func u32(_ value: UInt32) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    mutating func u64(_ value: UInt64) {
        u32(UInt32(truncatingIfNeeded: value >> 32))
        u32(UInt32(truncatingIfNeeded: value))
    }

    mutating func i64(_ value: Int64) { u64(UInt64(bitPattern: value)) }
    mutating func int(_ value: Int) { i64(Int64(value)) }
    mutating func double(_ value: Double) { u64(value.bitPattern) }

    mutating func blob(_ value: some Collection<UInt8>) {
        u32(UInt32(clamping: value.count))
        bytes.append(contentsOf: value)
    }

    mutating func string(_ value: String) { blob(value.utf8) }

    /// A u16 count and the strings.
    mutating func strings(_ values: [String]) {
        u16(UInt16(min(values.count, Int(UInt16.max))))
        for value in values.prefix(Int(UInt16.max)) { string(value) }
    }

    mutating func shortString(_ value: String) {
        let utf8 = value.utf8
        u8(UInt8(clamping: utf8.count))
        bytes.append(contentsOf: utf8.prefix(255))
    }

    mutating func optional<T>(_ value: T?, _ write: (inout WireWriter, T) -> Void) {
        if let value {
            u8(1)
            write(&self, value)
        } else {
            u8(0)
        }
    }

    mutating func value(_ value: AttributeValue) {
        switch value {
        case .string(let text):
            u8(ValueTag.string.rawValue)
            string(text)
        case .data(let data):
            u8(ValueTag.data.rawValue)
            blob(data)
        case .bool(let flag):
            u8(ValueTag.bool.rawValue)
            bool(flag)
        case .int(let number):
            u8(ValueTag.int.rawValue)
            i64(number)
        case .date(let date):
            u8(ValueTag.date.rawValue)
            double(date.timeIntervalSinceReferenceDate)
        }
    }

    mutating func attributes(_ map: [String: AttributeValue]) {
        u16(UInt16(clamping: map.count))
        for (key, value) in map.prefix(Int(UInt16.max)) {
            shortString(key)
            self.value(value)
        }
    }

    mutating func secret(_ secret: SecretBytes) {
        secret.withUnsafeBytes { blob($0) }
    }

    mutating func lockState(_ state: LockState) {
        switch state {
        case .beforeFirstUnlock: u8(0)
        case .unlocked: u8(1)
        case .locked: u8(2)
        }
    }

    /// Fills in the frame length and returns the frame.
    mutating func finish() -> [UInt8] {
        let length = UInt32(truncatingIfNeeded: bytes.count - 4)
        bytes[0] = UInt8(truncatingIfNeeded: length >> 24)
        bytes[1] = UInt8(truncatingIfNeeded: length >> 16)
        bytes[2] = UInt8(truncatingIfNeeded: length >> 8)
        bytes[3] = UInt8(truncatingIfNeeded: length)
        return bytes
    }

    /// Zeroes the buffer (after a frame carrying a passcode was sent).
    mutating func wipe() {
        zeroize(&bytes)
    }
}

// MARK: - Reader

/// Reads the encoding from a payload (without the length prefix). Any overrun, bad tag, bad UTF-8 or
/// trailing byte is an `errSecDecode` error.
struct WireReader: ~Copyable {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    static func malformed(_ what: String) -> KeychainError {
        KeychainError(status: KeychainStatus.decode, message: "malformed frame: \(what)")
    }

    var remaining: Int { bytes.count - offset }

    mutating func take(_ count: Int) throws(KeychainError) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw Self.malformed("truncated") }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    mutating func u8() throws(KeychainError) -> UInt8 {
        guard remaining >= 1 else { throw Self.malformed("truncated") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func bool() throws(KeychainError) -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        default: throw Self.malformed("bad boolean")
        }
    }

    mutating func u16() throws(KeychainError) -> UInt16 {
        let raw = try take(2)
        return UInt16(raw[0]) << 8 | UInt16(raw[1])
    }

    mutating func u32() throws(KeychainError) -> UInt32 {
        let raw = try take(4)
        return UInt32(raw[0]) << 24 | UInt32(raw[1]) << 16 | UInt32(raw[2]) << 8 | UInt32(raw[3])
    }

    mutating func u64() throws(KeychainError) -> UInt64 {
        let high = try u32()
        return UInt64(high) << 32 | UInt64(try u32())
    }

    mutating func i64() throws(KeychainError) -> Int64 { Int64(bitPattern: try u64()) }

    mutating func int() throws(KeychainError) -> Int {
        let value = try i64()
        guard let result = Int(exactly: value) else { throw Self.malformed("integer out of range") }
        return result
    }

    mutating func double() throws(KeychainError) -> Double { Double(bitPattern: try u64()) }

    mutating func blob() throws(KeychainError) -> UnsafeRawBufferPointer { try take(Int(try u32())) }

    mutating func data() throws(KeychainError) -> Data { Data(try blob()) }

    mutating func string() throws(KeychainError) -> String { try Self.text(try blob()) }

    mutating func strings() throws(KeychainError) -> [String] {
        let count = Int(try u16())
        // A string takes at least its 4-byte length.
        guard count <= remaining / 4 else { throw Self.malformed("string count over the payload") }
        var values: [String] = []
        for _ in 0..<count { values.append(try string()) }
        return values
    }

    mutating func shortString() throws(KeychainError) -> String { try Self.text(try take(Int(try u8()))) }

    static func text(_ raw: UnsafeRawBufferPointer) throws(KeychainError) -> String {
        guard let text = String(validating: raw.bindMemory(to: UInt8.self), as: UTF8.self) else {
            throw malformed("invalid UTF-8")
        }
        return text
    }

    mutating func optional<T>(_ read: (inout WireReader) throws(KeychainError) -> T) throws(KeychainError) -> T? {
        switch try u8() {
        case 0: return nil
        case 1: return try read(&self)
        default: throw Self.malformed("bad optional")
        }
    }

    mutating func value() throws(KeychainError) -> AttributeValue {
        guard let tag = ValueTag(rawValue: try u8()) else { throw Self.malformed("unknown value tag") }
        switch tag {
        case .string: return .string(try string())
        case .data: return .data(try data())
        case .bool: return .bool(try bool())
        case .int: return .int(try i64())
        case .date:
            let seconds = try double()
            guard seconds.isFinite else { throw Self.malformed("bad date") }
            return .date(Date(timeIntervalSinceReferenceDate: seconds))
        }
    }

    mutating func attributes() throws(KeychainError) -> [String: AttributeValue] {
        let count = Int(try u16())
        // Each entry takes at least 3 bytes (key length, tag, one value byte): a count the frame cannot hold is
        // rejected before anything is allocated.
        guard count * 3 <= remaining else { throw Self.malformed("attribute count exceeds the frame") }
        var map: [String: AttributeValue] = [:]
        map.reserveCapacity(count)
        for _ in 0..<count {
            let key = try shortString()
            let value = try self.value()
            guard map.updateValue(value, forKey: key) == nil else { throw Self.malformed("duplicate attribute") }
        }
        return map
    }

    mutating func secret() throws(KeychainError) -> SecretBytes { SecretBytes(copying: try blob()) }

    mutating func lockState() throws(KeychainError) -> LockState {
        switch try u8() {
        case 0: return .beforeFirstUnlock
        case 1: return .unlocked
        case 2: return .locked
        default: throw Self.malformed("unknown lock state")
        }
    }

    // Codes a well-formed frame may carry that name nothing the engine knows: refused with the engine's statuses
    // (the connection stays open, as for any refused request).

    mutating func itemClass() throws(KeychainError) -> ItemClass {
        let code = try shortString()
        guard let itemClass = ItemClass(rawValue: code) else {
            throw KeychainError(KeychainStatus.noSuchClass, "unknown item class \(code)")
        }
        return itemClass
    }

    mutating func accessibility() throws(KeychainError) -> Accessibility {
        let code = try shortString()
        guard let accessibility = Accessibility(rawValue: code) else {
            throw KeychainError(KeychainStatus.param, "unknown accessibility \(code)")
        }
        return accessibility
    }

    mutating func accessControlFlags() throws(KeychainError) -> UInt? {
        try optional { r throws(KeychainError) -> UInt in
            guard let flags = UInt(exactly: try r.u64()) else {
                throw KeychainError(KeychainStatus.param, "bad access control flags")
            }
            return flags
        }
    }

    func finish() throws(KeychainError) {
        guard remaining == 0 else { throw Self.malformed("trailing bytes") }
    }
}

// MARK: - Frames

/// Reads the payload length from a frame header, checking it against the frame limit.
public func wireFrameLength(_ header: some Collection<UInt8>) throws(KeychainError) -> Int {
    guard header.count >= 4 else { throw WireReader.malformed("truncated header") }
    var length = 0
    for byte in header.prefix(4) { length = length << 8 | Int(byte) }
    guard length <= Wire.maxFrame else {
        throw KeychainError(
            status: KeychainStatus.dataTooLarge,
            message: "frame of \(length) bytes exceeds the limit of \(Wire.maxFrame)"
        )
    }
    guard length >= 2 else { throw WireReader.malformed("frame too short") }
    return length
}

/// Checks the version byte that starts every payload.
func checkVersion(_ reader: inout WireReader) throws(KeychainError) {
    let version = try reader.u8()
    guard version == Wire.version else {
        throw KeychainError(
            status: KeychainStatus.decode,
            message: "unsupported protocol version \(version) (this side speaks \(Wire.version))"
        )
    }
}

// MARK: - Requests

extension WireRequest {
    /// The whole frame, length prefix included. Throws errSecDataTooLarge for a value over the limit or a frame
    /// over the frame limit, before anything is sent.
    public func encodedFrame() throws(KeychainError) -> [UInt8] {
        var writer = WireWriter()
        try encode(into: &writer)
        let frame = writer.finish()
        guard frame.count - 4 <= Wire.maxFrame else {
            throw KeychainError(
                status: KeychainStatus.dataTooLarge,
                message: "the request is \(frame.count - 4) bytes; the frame limit is \(Wire.maxFrame)"
            )
        }
        return frame
    }

    static func checkValue(_ data: Data?) throws(KeychainError) {
        guard let data, data.count > Wire.valueLimit else { return }
        throw KeychainError(
            status: KeychainStatus.dataTooLarge,
            message: "the secret is \(data.count) bytes; the limit is \(Wire.valueLimit)"
        )
    }

    func encode(into writer: inout WireWriter) throws(KeychainError) {
        switch self {
        case .ping: writer.u8(Opcode.ping.rawValue)
        case .status: writer.u8(Opcode.status.rawValue)
        case .lockState: writer.u8(Opcode.lockState.rawValue)
        case .lock: writer.u8(Opcode.lock.rawValue)
        case .unlock(let passcode):
            writer.u8(Opcode.unlock.rawValue)
            writer.secret(passcode)
        case .setPasscode(let passcode):
            writer.u8(Opcode.setPasscode.rawValue)
            writer.secret(passcode)
        case .changePasscode(let old, let new):
            writer.u8(Opcode.changePasscode.rawValue)
            writer.secret(old)
            writer.secret(new)
        case .removePasscode(let passcode):
            writer.u8(Opcode.removePasscode.rawValue)
            writer.secret(passcode)
        case .getSettings: writer.u8(Opcode.getSettings.rawValue)
        case .setSettings(let settings):
            writer.u8(Opcode.setSettings.rawValue)
            writer.optional(settings.autoLockSeconds) { $0.int($1) }
        case .subscribeLockState: writer.u8(Opcode.subscribeLockState.rawValue)
        case .add(let item), .addReplacingAttributes(let item):
            try Self.checkValue(item.data)
            let opcode: Opcode = if case .add = self { .add } else { .addReplacingAttributes }
            writer.u8(opcode.rawValue)
            writer.shortString(item.itemClass.rawValue)
            writer.attributes(item.attributes)
            writer.optional(item.accessGroup) { $0.string($1) }
            writer.shortString(item.accessibility.rawValue)
            writer.optional(item.accessControlFlags) { $0.u64(UInt64($1)) }
            writer.bool(item.synchronizable)
            writer.blob(item.data)
            writer.u8(item.returns.rawValue)
        case .copyMatching(let query):
            writer.u8(Opcode.copyMatching.rawValue)
            writer.query(query)
        case .update(let query, let changes):
            try Self.checkValue(changes.data)
            writer.u8(Opcode.update.rawValue)
            writer.query(query)
            writer.attributes(changes.attributes)
            writer.optional(changes.accessGroup) { $0.string($1) }
            writer.optional(changes.accessibility) { $0.shortString($1.rawValue) }
            writer.optional(changes.accessControlFlags) { $0.u64(UInt64($1)) }
            writer.optional(changes.synchronizable) { $0.bool($1) }
            writer.optional(changes.data) { $0.blob($1) }
        case .delete(let query):
            writer.u8(Opcode.delete.rawValue)
            writer.query(query)
        case .exportBackup(let passphrase, let availableOnly):
            writer.u8(Opcode.exportBackup.rawValue)
            writer.secret(passphrase)
            writer.bool(availableOnly)
        case .importBegin(let passphrase, let replace):
            writer.u8(Opcode.importBegin.rawValue)
            writer.secret(passphrase)
            writer.bool(replace)
        case .importChunk(let bytes):
            guard bytes.count <= Wire.backupChunk else {
                throw KeychainError(
                    status: KeychainStatus.dataTooLarge,
                    message: "a backup chunk is \(bytes.count) bytes; the limit is \(Wire.backupChunk)"
                )
            }
            writer.u8(Opcode.importChunk.rawValue)
            writer.blob(bytes)
        case .generateKey(let generation):
            writer.u8(Opcode.generateKey.rawValue)
            writer.shortString(generation.keyType.typeCode)
            writer.int(generation.keyType.bits)
            writer.bool(generation.inHardware)
            writer.attributes(generation.attributes)
            writer.optional(generation.accessGroup) { $0.string($1) }
            writer.shortString(generation.accessibility.rawValue)
            writer.optional(generation.accessControlFlags) { $0.u64(UInt64($1)) }
            writer.bool(generation.synchronizable)
            writer.bool(generation.isExtractable)
        case .keyOperation(let operation):
            writer.u8(Opcode.keyOperation.rawValue)
            writer.blob(operation.reference)
            writer.u8(operation.kind.rawValue)
            writer.string(operation.algorithm)
            writer.blob(operation.data)
            writer.optional(operation.requestedSize) { $0.int($1) }
            writer.optional(operation.sharedInfo) { $0.blob($1) }
        case .certificates(let query):
            writer.u8(Opcode.certificates.rawValue)
            writer.query(query)
        case .createCSR(let reference, let subject):
            writer.u8(Opcode.createCSR.rawValue)
            writer.blob(reference)
            writer.string(subject)
        case .importEnd: writer.u8(Opcode.importEnd.rawValue)
        case .undecryptableItems: writer.u8(Opcode.undecryptableItems.rawValue)
        case .deleteUndecryptable(let ids):
            writer.u8(Opcode.deleteUndecryptable.rawValue)
            writer.optional(ids) { writer, ids in
                writer.u32(UInt32(clamping: ids.count))
                for id in ids { writer.string(id) }
            }
        case .createRecoveryKey(let passcode):
            writer.u8(Opcode.createRecoveryKey.rawValue)
            writer.optional(passcode) { $0.secret($1) }
        case .recover(let key, let passcode):
            writer.u8(Opcode.recover.rawValue)
            writer.secret(key)
            writer.optional(passcode) { $0.secret($1) }
        case .tpmReseal(let passcode, let pcrs):
            writer.u8(Opcode.tpmReseal.rawValue)
            writer.optional(passcode) { $0.secret($1) }
            writer.optional(pcrs) { writer, pcrs in
                writer.u8(UInt8(clamping: pcrs.count))
                for pcr in pcrs.prefix(255) { writer.u8(UInt8(clamping: pcr)) }
            }
        case .acceptRollback: writer.u8(Opcode.acceptRollback.rawValue)
        case .attestation(let step):
            writer.u8(Opcode.attestation.rawValue)
            switch step {
            case .enrollmentRequest: writer.u8(0)
            case .activate(let blob, let secret):
                writer.u8(1)
                writer.blob(blob)
                writer.blob(secret)
            case .install(let certificates):
                writer.u8(2)
                writer.u16(UInt16(clamping: certificates.count))
                for certificate in certificates.prefix(Int(UInt16.max)) { writer.blob(certificate) }
            }
        case .onBehalf(let pid, let request):
            guard request.mayBeSentOnBehalf else {
                throw KeychainError(
                    status: KeychainStatus.param,
                    message: "\(request.name) cannot be sent on behalf of another process"
                )
            }
            writer.u8(Opcode.onBehalf.rawValue)
            writer.u32(UInt32(bitPattern: pid))
            try request.encode(into: &writer)
        case .authenticate(let passcode):
            writer.u8(Opcode.authenticate.rawValue)
            writer.secret(passcode)
        case .authenticated(let authentication, let request):
            guard request.mayBeAuthenticated else {
                throw KeychainError(
                    status: KeychainStatus.param,
                    message: "\(request.name) cannot carry an authentication"
                )
            }
            writer.u8(Opcode.authenticated.rawValue)
            writer.optional(authentication.token) { w, token in w.secret(token) }
            writer.u32(UInt32(authentication.reuseSeconds))
            writer.u8(authentication.ui.rawValue)
            try request.encode(into: &writer)
        }
    }

    /// Decodes a request payload (the bytes after the length prefix).
    public static func decode(payload: UnsafeRawBufferPointer) throws(KeychainError) -> WireRequest {
        var reader = WireReader(payload)
        try checkVersion(&reader)
        let request = try decodeBody(&reader)
        if case .onBehalf(_, let inner) = request, !inner.mayBeSentOnBehalf {
            throw WireReader.malformed("an on-behalf request carries \(inner.name)")
        }
        try reader.finish()
        return request
    }

    /// One request after the version byte; an on-behalf request's inner request is read by a second call.
    static func decodeBody(_ reader: inout WireReader, nested: Bool = false) throws(KeychainError) -> WireRequest {
        guard let opcode = Opcode(rawValue: try reader.u8()) else {
            throw KeychainError(status: KeychainStatus.decode, message: "unknown request")
        }
        let request: WireRequest
        switch opcode {
        case .ping: request = .ping
        case .status: request = .status
        case .lockState: request = .lockState
        case .lock: request = .lock
        case .unlock: request = .unlock(passcode: try reader.secret())
        case .setPasscode: request = .setPasscode(try reader.secret())
        case .changePasscode:
            let old = try reader.secret()
            request = .changePasscode(old: old, new: try reader.secret())
        case .removePasscode: request = .removePasscode(try reader.secret())
        case .getSettings: request = .getSettings
        case .setSettings:
            request = .setSettings(
                WireSettings(autoLockSeconds: try reader.optional { r throws(KeychainError) in try r.int() })
            )
        case .subscribeLockState: request = .subscribeLockState
        case .add, .addReplacingAttributes:
            let itemClass = try reader.itemClass()
            let attributes = try reader.attributes()
            let group = try reader.optional { r throws(KeychainError) in try r.string() }
            let accessibility = try reader.accessibility()
            let flags = try reader.accessControlFlags()
            let sync = try reader.bool()
            let data = try reader.data()
            let returns = try reader.u8()
            let item = NewItem(
                itemClass: itemClass,
                attributes: attributes,
                accessGroup: group,
                accessibility: accessibility,
                accessControlFlags: flags,
                synchronizable: sync,
                data: data,
                returns: ReturnOptions(rawValue: returns)
            )
            request = opcode == .add ? .add(item) : .addReplacingAttributes(item)
        case .copyMatching: request = .copyMatching(try reader.query())
        case .update:
            let query = try reader.query()
            let attributes = try reader.attributes()
            let group = try reader.optional { r throws(KeychainError) in try r.string() }
            let accessibility = try reader.optional { r throws(KeychainError) in try r.accessibility() }
            let flags = try reader.accessControlFlags()
            let sync = try reader.optional { r throws(KeychainError) in try r.bool() }
            let data = try reader.optional { r throws(KeychainError) in try r.data() }
            request = .update(
                query,
                ItemChanges(
                    attributes: attributes,
                    accessGroup: group,
                    accessibility: accessibility,
                    accessControlFlags: flags,
                    synchronizable: sync,
                    data: data
                )
            )
        case .delete: request = .delete(try reader.query())
        case .exportBackup:
            let passphrase = try reader.secret()
            request = .exportBackup(passphrase: passphrase, availableOnly: try reader.bool())
        case .importBegin:
            let passphrase = try reader.secret()
            request = .importBegin(passphrase: passphrase, replace: try reader.bool())
        case .importChunk:
            let raw = try reader.blob()
            guard raw.count <= Wire.backupChunk else { throw WireReader.malformed("backup chunk over the limit") }
            request = .importChunk(Array(raw))
        case .generateKey:
            let typeCode = try reader.shortString()
            let keyType = try KeyType(typeCode: typeCode, bits: try reader.int())
            let inHardware = try reader.bool()
            let attributes = try reader.attributes()
            let group = try reader.optional { r throws(KeychainError) in try r.string() }
            let accessibility = try reader.accessibility()
            let flags = try reader.accessControlFlags()
            let synchronizable = try reader.bool()
            // Through keyseald every generated key is stored.
            request = .generateKey(
                KeyGenerationRequest(
                    keyType: keyType,
                    inHardware: inHardware,
                    isPermanent: true,
                    attributes: attributes,
                    accessGroup: group,
                    accessibility: accessibility,
                    accessControlFlags: flags,
                    synchronizable: synchronizable,
                    isExtractable: try reader.bool()
                )
            )
        case .keyOperation:
            let reference = try reader.data()
            guard let kind = WireKeyOperation.Kind(rawValue: try reader.u8()) else {
                throw WireReader.malformed("unknown key operation")
            }
            let algorithm = try reader.string()
            let data = try reader.data()
            let size = try reader.optional { r throws(KeychainError) in try r.int() }
            request = .keyOperation(
                WireKeyOperation(
                    reference: reference,
                    kind: kind,
                    algorithm: algorithm,
                    data: data,
                    requestedSize: size,
                    sharedInfo: try reader.optional { r throws(KeychainError) in try r.data() }
                )
            )
        case .certificates: request = .certificates(try reader.query())
        case .createCSR:
            let reference = try reader.data()
            request = .createCSR(reference: reference, subject: try reader.string())
        case .importEnd: request = .importEnd
        case .undecryptableItems: request = .undecryptableItems
        case .deleteUndecryptable:
            let ids = try reader.optional { r throws(KeychainError) -> [String] in
                let count = Int(try r.u32())
                // An id takes at least 4 bytes: a count the frame cannot hold is rejected before allocating.
                guard count * 4 <= r.remaining else { throw WireReader.malformed("ids exceed the frame") }
                var ids: [String] = []
                ids.reserveCapacity(count)
                for _ in 0..<count { ids.append(try r.string()) }
                return ids
            }
            request = .deleteUndecryptable(ids: ids)
        case .createRecoveryKey:
            request = .createRecoveryKey(passcode: try reader.optional { r throws(KeychainError) in try r.secret() })
        case .recover:
            let key = try reader.secret()
            request = .recover(key: key, passcode: try reader.optional { r throws(KeychainError) in try r.secret() })
        case .tpmReseal:
            let passcode = try reader.optional { r throws(KeychainError) in try r.secret() }
            let pcrs = try reader.optional { r throws(KeychainError) -> [Int] in
                var pcrs: [Int] = []
                for _ in 0..<Int(try r.u8()) { pcrs.append(Int(try r.u8())) }
                return pcrs
            }
            request = .tpmReseal(passcode: passcode, pcrs: pcrs)
        case .acceptRollback: request = .acceptRollback
        case .attestation:
            switch try reader.u8() {
            case 0: request = .attestation(.enrollmentRequest)
            case 1:
                let blob = try reader.data()
                request = .attestation(.activate(credentialBlob: blob, secret: try reader.data()))
            case 2:
                let count = Int(try reader.u16())
                var certificates: [Data] = []
                for _ in 0..<count { certificates.append(try reader.data()) }
                request = .attestation(.install(certificates: certificates))
            default: throw WireReader.malformed("unknown attestation step")
            }
        case .onBehalf:
            guard !nested else { throw WireReader.malformed("an on-behalf request inside another") }
            let pid = Int32(bitPattern: try reader.u32())
            request = .onBehalf(pid: pid, try decodeBody(&reader, nested: true))
        case .authenticate: request = .authenticate(passcode: try reader.secret())
        case .authenticated:
            guard !nested else { throw WireReader.malformed("an authenticated request inside another") }
            let token = try reader.optional { r throws(KeychainError) in try r.secret() }
            let reuse = try reader.u32()
            guard reuse <= UInt32(ItemAuthentication.maximumReuseSeconds) else {
                throw WireReader.malformed("the reuse duration is over \(ItemAuthentication.maximumReuseSeconds) s")
            }
            guard let ui = AuthenticationUI(rawValue: try reader.u8()) else {
                throw WireReader.malformed("unknown authentication UI")
            }
            let inner = try decodeBody(&reader, nested: true)
            guard inner.mayBeAuthenticated else {
                throw WireReader.malformed("an authenticated request carries \(inner.name)")
            }
            request = .authenticated(ItemAuthentication(token: token, reuseSeconds: Int(reuse), ui: ui), inner)
        }
        return request
    }

    public static func decode(payload: [UInt8]) throws(KeychainError) -> WireRequest {
        do {
            return try payload.withUnsafeBytes { raw in try decode(payload: raw) }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw WireReader.malformed("\(error)")
        }
    }
}

extension WireWriter {
    mutating func query(_ query: ItemQuery) {
        shortString(query.itemClass.rawValue)
        attributes(query.attributes)
        optional(query.accessGroup) { $0.string($1) }
        optional(query.accessibility) { $0.shortString($1.rawValue) }
        switch query.synchronizable {
        case .no: u8(0)
        case .yes: u8(1)
        case .any: u8(2)
        }
        optional(query.persistentRef) { $0.blob($1) }
        switch query.limit {
        case .one: u8(0)
        case .all: u8(1)
        case .count(let n):
            u8(2)
            int(n)
        }
        bool(query.limitGiven)
        u8(query.returns.rawValue)
    }

    mutating func record(_ record: ItemRecord) {
        shortString(record.itemClass.rawValue)
        attributes(record.attributes)
        optional(record.data) { $0.blob($1) }
        optional(record.persistentRef) { $0.blob($1) }
        optional(record.keyPersistentRef) { $0.blob($1) }
    }
}

extension WireWriter {
    mutating func counts(_ counts: [Accessibility: Int]) {
        u16(UInt16(clamping: counts.count))
        for (accessibility, count) in counts.sorted(by: { $0.key.rawValue < $1.key.rawValue }).prefix(Int(UInt16.max)) {
            shortString(accessibility.rawValue)
            int(count)
        }
    }

    mutating func undecryptable(_ items: [UndecryptableItem]) {
        u32(UInt32(clamping: items.count))
        for item in items {
            string(item.id)
            string(item.itemClass)
            string(item.accessibility)
            string(item.accessGroup)
            shortString(item.reason.rawValue)
            string(item.detail)
        }
    }

    mutating func skippedKeys(_ keys: [ExportReport.SkippedKey]) {
        u32(UInt32(clamping: keys.count))
        for key in keys {
            string(key.accessGroup)
            optional(key.label) { $0.string($1) }
            optional(key.tag) { $0.blob($1) }
            shortString(key.reason.rawValue)
        }
    }

    mutating func skipped(_ items: [ImportReport.SkippedItem]) {
        u32(UInt32(clamping: items.count))
        for item in items {
            shortString(item.itemClass)
            shortString(item.accessibility.rawValue)
            string(item.accessGroup)
            optional(item.service) { $0.string($1) }
            optional(item.account) { $0.string($1) }
            shortString(item.reason.rawValue)
            string(item.detail)
        }
    }
}

extension WireReader {
    mutating func counts() throws(KeychainError) -> [Accessibility: Int] {
        let count = Int(try u16())
        guard count * 9 <= remaining else { throw Self.malformed("count entries exceed the frame") }
        var counts: [Accessibility: Int] = [:]
        for _ in 0..<count {
            guard let accessibility = Accessibility(rawValue: try shortString()) else {
                throw Self.malformed("unknown accessibility in a count")
            }
            guard counts.updateValue(try int(), forKey: accessibility) == nil else {
                throw Self.malformed("duplicate count")
            }
        }
        return counts
    }

    mutating func undecryptable() throws(KeychainError) -> [UndecryptableItem] {
        let count = Int(try u32())
        // An entry takes at least 21 bytes: a count the frame cannot hold is rejected before allocating.
        guard count * 21 <= remaining else { throw Self.malformed("undecryptable entries exceed the frame") }
        var items: [UndecryptableItem] = []
        items.reserveCapacity(count)
        for _ in 0..<count {
            let id = try string()
            let itemClass = try string()
            let accessibility = try string()
            let group = try string()
            guard let reason = UndecryptableItem.Reason(rawValue: try shortString()) else {
                throw Self.malformed("unknown reason for an undecryptable row")
            }
            items.append(
                UndecryptableItem(
                    id: id,
                    itemClass: itemClass,
                    accessibility: accessibility,
                    accessGroup: group,
                    reason: reason,
                    detail: try string()
                )
            )
        }
        return items
    }

    mutating func skippedKeys() throws(KeychainError) -> [ExportReport.SkippedKey] {
        let count = Int(try u32())
        // An entry takes at least 7 bytes: a count the frame cannot hold is rejected before allocating.
        guard count * 7 <= remaining else { throw Self.malformed("skipped keys exceed the frame") }
        var keys: [ExportReport.SkippedKey] = []
        keys.reserveCapacity(count)
        for _ in 0..<count {
            let group = try string()
            let label = try optional { r throws(KeychainError) in try r.string() }
            let tag = try optional { r throws(KeychainError) in try r.data() }
            guard let reason = ExportReport.SkippedKey.Reason(rawValue: try shortString()) else {
                throw Self.malformed("unknown reason for a key left out of a backup")
            }
            keys.append(ExportReport.SkippedKey(accessGroup: group, label: label, tag: tag, reason: reason))
        }
        return keys
    }

    mutating func skipped() throws(KeychainError) -> [ImportReport.SkippedItem] {
        let count = Int(try u32())
        // An entry takes at least 13 bytes: a count the frame cannot hold is rejected before allocating.
        guard count * 13 <= remaining else { throw Self.malformed("skipped entries exceed the frame") }
        var items: [ImportReport.SkippedItem] = []
        items.reserveCapacity(count)
        for _ in 0..<count {
            let itemClass = try shortString()
            let accessibility = try self.accessibility()
            let group = try string()
            let service = try optional { r throws(KeychainError) in try r.string() }
            let account = try optional { r throws(KeychainError) in try r.string() }
            guard let reason = ImportReport.SkipReason(rawValue: try shortString()) else {
                throw Self.malformed("unknown reason for a skipped item")
            }
            items.append(
                ImportReport.SkippedItem(
                    itemClass: itemClass,
                    accessibility: accessibility,
                    accessGroup: group,
                    service: service,
                    account: account,
                    reason: reason,
                    detail: try string()
                )
            )
        }
        return items
    }

    mutating func query() throws(KeychainError) -> ItemQuery {
        let itemClass = try self.itemClass()
        let attributes = try self.attributes()
        let group = try optional { r throws(KeychainError) in try r.string() }
        let accessibility = try optional { r throws(KeychainError) in try r.accessibility() }
        let sync: SyncMatch
        switch try u8() {
        case 0: sync = .no
        case 1: sync = .yes
        case 2: sync = .any
        default: throw Self.malformed("bad synchronizable match")
        }
        let persistentRef = try optional { r throws(KeychainError) in try r.data() }
        let limit: MatchLimit
        switch try u8() {
        case 0: limit = .one
        case 1: limit = .all
        case 2:
            let count = try int()
            guard count >= 1 else { throw KeychainError(KeychainStatus.param, "the match limit must be positive") }
            limit = .count(count)
        default: throw Self.malformed("bad match limit")
        }
        let limitGiven = try bool()
        let returns = try u8()
        return ItemQuery(
            itemClass: itemClass,
            attributes: attributes,
            accessGroup: group,
            accessibility: accessibility,
            synchronizable: sync,
            persistentRef: persistentRef,
            limit: limit,
            limitGiven: limitGiven,
            returns: ReturnOptions(rawValue: returns)
        )
    }

    mutating func record() throws(KeychainError) -> ItemRecord {
        let itemClass = try self.itemClass()
        let attributes = try self.attributes()
        let data = try optional { r throws(KeychainError) in try r.data() }
        let persistentRef = try optional { r throws(KeychainError) in try r.data() }
        return ItemRecord(
            itemClass: itemClass,
            attributes: attributes,
            data: data,
            persistentRef: persistentRef,
            keyPersistentRef: try optional { r throws(KeychainError) in try r.data() }
        )
    }
}

// MARK: - Responses

extension WireResponse {
    /// The whole frame, length prefix included. Records are written into a buffer sized for them up front, so
    /// that no outgrown copy of their values is left behind in freed memory.
    public func encodedFrame() -> [UInt8] {
        var writer = WireWriter(capacity: sizeBound)
        encode(into: &writer)
        return writer.finish()
    }

    /// At least the frame's size for records (their values can be large); a small default otherwise.
    public var sizeBound: Int {
        guard case .records(let records) = self else { return 256 }
        var bound = 16
        for record in records {
            bound +=
                24 + record.itemClass.rawValue.utf8.count + (record.data?.count ?? 0)
                + (record.persistentRef?.count ?? 0) + (record.keyPersistentRef?.count ?? 0)
            for (key, value) in record.attributes {
                bound += 16 + key.utf8.count
                switch value {
                case .string(let text): bound += text.utf8.count
                case .data(let data): bound += data.count
                case .bool, .int, .date: break
                }
            }
        }
        return bound
    }

    /// The frames that carry this response: one frame, or, when the payload is over the frame limit (many or large
    /// records), its bytes cut into `part` frames and a closing `lastPart` frame, each within the limit. The client
    /// joins the pieces and decodes the whole (``readResponse(limit:_:)``).
    public func encodedFrames() -> [[UInt8]] {
        var frame = encodedFrame()
        guard frame.count - 4 > Wire.maxFrame else { return [frame] }
        defer { zeroize(&frame) }
        let pieceSize = Wire.maxFrame - 2
        var frames: [[UInt8]] = []
        var offset = 4
        while offset < frame.count {
            let end = min(offset + pieceSize, frame.count)
            var writer = WireWriter(capacity: end - offset + 6)
            writer.u8(end == frame.count ? ResponseKind.lastPart.rawValue : ResponseKind.part.rawValue)
            writer.bytes.append(contentsOf: frame[offset..<end])
            frames.append(writer.finish())
            offset = end
        }
        return frames
    }
}

/// Encodes a `.records` response one record at a time into the frames ``WireResponse/encodedFrames()`` would send
/// (a single frame when the whole fits, else `part` frames and a closing `lastPart`), so that a sender never holds
/// more than about one frame of encoded records: the daemon streams a large lookup with it.
public struct WireRecordsEncoder {
    /// Payload bytes not yet cut into a frame.
    private var pending: [UInt8]
    /// Whether a `part` frame went out (then the end is a `lastPart`, never a whole frame).
    private var cut = false
    private static let pieceSize = Wire.maxFrame - 2

    public init(count: Int) {
        var writer = WireWriter(capacity: 16)
        writer.u8(ResponseKind.records.rawValue)
        writer.u32(UInt32(clamping: count))
        pending = Array(writer.bytes[4...])
        zeroize(&writer.bytes)
    }

    /// Appends one record's encoding.
    public mutating func append(_ record: ItemRecord) {
        var writer = WireWriter(capacity: WireResponse.records([record]).sizeBound)
        writer.record(record)
        if pending.capacity < pending.count + writer.bytes.count - 5 {
            // Grow by hand so that no reallocation leaves record bytes behind unzeroed.
            var larger: [UInt8] = []
            larger.reserveCapacity(max(2 * pending.capacity, pending.count + writer.bytes.count))
            larger.append(contentsOf: pending)
            zeroize(&pending)
            pending = larger
        }
        pending.append(contentsOf: writer.bytes[5...])
        zeroize(&writer.bytes)
    }

    /// A `part` frame when a whole piece is ready, else nil.
    public mutating func nextPart() -> [UInt8]? {
        guard pending.count > Self.pieceSize + 6 else { return nil }
        cut = true
        return take(Self.pieceSize, kind: .part)
    }

    /// The last frames: the whole response when nothing was cut yet and it fits one frame, else what is left as
    /// `part` frames and a closing `lastPart`. Call after ``nextPart()`` returned nil.
    public mutating func finish() -> [[UInt8]] {
        if !cut && pending.count <= Wire.maxFrame {
            var frame = [UInt8](repeating: 0, count: 4)
            frame.reserveCapacity(4 + pending.count)
            let length = UInt32(pending.count)
            for index in 0..<4 { frame[index] = UInt8(truncatingIfNeeded: length >> (24 - 8 * index)) }
            frame.append(contentsOf: pending)
            zeroize(&pending)
            pending = []
            return [frame]
        }
        var frames: [[UInt8]] = []
        while pending.count > Self.pieceSize { frames.append(take(Self.pieceSize, kind: .part)) }
        frames.append(take(pending.count, kind: .lastPart))
        cut = true
        return frames
    }

    private mutating func take(_ count: Int, kind: ResponseKind) -> [UInt8] {
        var writer = WireWriter(capacity: count + 6)
        writer.u8(kind.rawValue)
        writer.bytes.append(contentsOf: pending[..<count])
        var rest: [UInt8] = []
        if pending.count > count { rest.reserveCapacity(max(pending.count - count, Self.pieceSize + 6)) }
        rest.append(contentsOf: pending[count...])
        zeroize(&pending)
        pending = rest
        return writer.finish()
    }
}

extension WireResponse {
    /// Reads one response payload with `readPayload` (which reads one frame's payload), joining the pieces of a
    /// response sent in parts. Every buffer that held response bytes is zeroed before it is released.
    public static func readResponse(
        limit: Int = Wire.maxResponse,
        _ readPayload: () throws(KeychainError) -> [UInt8]
    ) throws(KeychainError) -> WireResponse {
        var payload = try readPayload()
        defer { zeroize(&payload) }
        guard isPiece(payload) else { return try decode(payload: payload) }
        var joined: [UInt8] = []
        defer { zeroize(&joined) }
        while true {
            guard isPiece(payload) else {
                throw WireReader.malformed("a response sent in parts was interrupted by another response")
            }
            guard joined.count + payload.count - 2 <= limit else {
                throw KeychainError(status: KeychainStatus.dataTooLarge, message: "the response is over \(limit) bytes")
            }
            if joined.capacity < joined.count + payload.count {
                // Grow by hand so that no reallocation leaves a copy of response bytes behind unzeroed.
                var larger: [UInt8] = []
                larger.reserveCapacity(max(2 * joined.capacity, joined.count + payload.count))
                larger.append(contentsOf: joined)
                zeroize(&joined)
                joined = larger
            }
            joined.append(contentsOf: payload[2...])
            let last = payload[1] == ResponseKind.lastPart.rawValue
            zeroize(&payload)
            if last { break }
            payload = try readPayload()
        }
        return try decode(payload: joined)
    }

    /// Whether a payload is a piece of a response sent in parts.
    static func isPiece(_ payload: [UInt8]) -> Bool {
        payload.withUnsafeBytes { isPiece($0) }
    }

    static func isPiece(_ payload: UnsafeRawBufferPointer) -> Bool {
        payload.count >= 2 && payload[0] == Wire.version
            && (payload[1] == ResponseKind.part.rawValue || payload[1] == ResponseKind.lastPart.rawValue)
    }

    func encode(into writer: inout WireWriter) {
        switch self {
        case .ok: writer.u8(ResponseKind.ok.rawValue)
        case .failure(let error):
            writer.u8(ResponseKind.failure.rawValue)
            writer.u32(UInt32(bitPattern: error.status))
            writer.string(error.message)
            writer.optional(error.retryAfterSeconds) { $0.int($1) }
            writer.optional(error.triesLeft) { $0.int($1) }
        case .records(let records):
            writer.u8(ResponseKind.records.rawValue)
            writer.u32(UInt32(clamping: records.count))
            for record in records { writer.record(record) }
        case .status(let status):
            writer.u8(ResponseKind.status.rawValue)
            writer.lockState(status.lockState)
            writer.bool(status.passcodeSet)
            writer.shortString(status.device.backend)
            writer.bool(status.device.hardwareBacked)
            writer.bool(status.device.guessingHardwareLimited)
            writer.string(status.device.detail)
            writer.optional(status.device.hardwareTriesLeft) { $0.int($1) }
            writer.optional(status.device.lockoutRetrySeconds) { $0.int($1) }
            writer.int(status.failedAttempts)
            writer.optional(status.triesLeft) { $0.int($1) }
            writer.optional(status.nextTryAt) { $0.double($1.timeIntervalSince1970) }
            writer.optional(status.autoLockSeconds) { $0.int($1) }
            writer.u16(UInt16(clamping: status.itemCounts.count))
            for (accessibility, count) in status.itemCounts.prefix(Int(UInt16.max)) {
                writer.shortString(accessibility.rawValue)
                writer.int(count)
            }
            // A verified ledger is sent as none (and so is a client's, which keyseald clears).
            writer.optional(status.ledger.verified ? nil : status.ledger) { writer, ledger in
                writer.u16(UInt16(clamping: ledger.refusedBuckets.count))
                for bucket in ledger.refusedBuckets.prefix(Int(UInt16.max)) { writer.u16(UInt16(clamping: bucket)) }
                writer.int(ledger.missingEntries)
                writer.int(ledger.unexpectedEntries)
                writer.optional(ledger.recordProblem) { $0.string($1) }
                writer.string(ledger.summary)
            }
            writer.optional(status.boot) { writer, boot in
                writer.u8(UInt8(clamping: boot.pcrs.count))
                for pcr in boot.pcrs.prefix(255) { writer.u8(UInt8(clamping: pcr)) }
                writer.bool(boot.pcrsMatch)
                writer.bool(boot.recoveryRequired)
                writer.bool(boot.recoveryKeySet)
                writer.bool(boot.rolledBack)
                writer.optional(boot.counterIndex) { $0.u32($1) }
                writer.optional(boot.counterValue) { $0.u64($1) }
                writer.string(boot.detail)
            }
        case .secret(let secret):
            writer.u8(ResponseKind.secret.rawValue)
            writer.secret(secret)
        case .lockState(let state):
            writer.u8(ResponseKind.lockState.rawValue)
            writer.lockState(state)
        case .message(let text):
            writer.u8(ResponseKind.message.rawValue)
            writer.optional(text) { $0.string($1) }
        case .settings(let settings):
            writer.u8(ResponseKind.settings.rawValue)
            writer.optional(settings.autoLockSeconds) { $0.int($1) }
        case .lockStateChanged(let state):
            writer.u8(ResponseKind.lockStateChanged.rawValue)
            writer.lockState(state)
        case .backupChunk(let bytes, let done, let total):
            writer.u8(ResponseKind.backupChunk.rawValue)
            writer.blob(bytes)
            writer.int(done)
            writer.int(total)
        case .exportReport(let report):
            writer.u8(ResponseKind.exportReport.rawValue)
            writer.counts(report.exported)
            writer.int(report.skippedPasscodeOnly)
            writer.counts(report.skippedUnavailable)
            writer.double(report.keyDerivationSeconds)
            writer.undecryptable(report.undecryptable)
            writer.skippedKeys(report.skippedKeys)
        case .importProgress(let done, let total):
            writer.u8(ResponseKind.importProgress.rawValue)
            writer.int(done)
            writer.int(total)
        case .importSkipped(let items):
            writer.u8(ResponseKind.importSkipped.rawValue)
            writer.skipped(items)
        case .importReport(let report):
            writer.u8(ResponseKind.importReport.rawValue)
            writer.int(report.total)
            writer.counts(report.restored)
            writer.int(report.replaced)
            writer.skipped(report.skipped)
            writer.double(report.keyDerivationSeconds)
        case .undecryptable(let items):
            writer.u8(ResponseKind.undecryptable.rawValue)
            writer.undecryptable(items)
        case .key(let key):
            writer.u8(ResponseKind.key.rawValue)
            writer.blob(key.reference)
            writer.shortString(key.keyType)
            writer.int(key.bits)
            writer.blob(key.publicKey)
            writer.bool(key.isPrivate)
            writer.bool(key.inHardware)
            writer.bool(key.extractable)
            writer.attributes(key.attributes)
            writer.blob(key.subjectPublicKeyInfo)
        case .keyResult(let data):
            writer.u8(ResponseKind.keyResult.rawValue)
            writer.blob(data)
        case .certificates(let certificates):
            writer.u8(ResponseKind.certificates.rawValue)
            writer.u32(UInt32(certificates.count))
            for certificate in certificates {
                writer.blob(certificate.reference)
                writer.optional(certificate.keyReference) { $0.blob($1) }
                writer.blob(certificate.der)
                writer.blob(certificate.sha1)
                writer.blob(certificate.sha256)
                writer.optional(certificate.subjectSummary) { $0.string($1) }
                writer.strings(certificate.commonNames)
                writer.strings(certificate.emailAddresses)
                writer.double(certificate.notBefore)
                writer.double(certificate.notAfter)
                writer.attributes(certificate.attributes)
            }
        }
    }

    /// Decodes a response payload (the bytes after the length prefix).
    public static func decode(payload: UnsafeRawBufferPointer) throws(KeychainError) -> WireResponse {
        var reader = WireReader(payload)
        try checkVersion(&reader)
        guard let kind = ResponseKind(rawValue: try reader.u8()) else {
            throw KeychainError(status: KeychainStatus.decode, message: "unknown response")
        }
        let response: WireResponse
        switch kind {
        case .ok: response = .ok
        case .part, .lastPart: throw WireReader.malformed("a piece of a response where a whole one was expected")
        case .failure:
            let status = Int32(bitPattern: try reader.u32())
            let message = try reader.string()
            let retry = try reader.optional { r throws(KeychainError) in try r.int() }
            let tries = try reader.optional { r throws(KeychainError) in try r.int() }
            response = .failure(
                KeychainError(status: status, message: message, retryAfterSeconds: retry, triesLeft: tries)
            )
        case .records:
            let count = Int(try reader.u32())
            // A record takes at least 6 bytes: a count the frame cannot hold is rejected before allocating.
            guard count * 6 <= reader.remaining else { throw WireReader.malformed("record count exceeds the frame") }
            var records: [ItemRecord] = []
            records.reserveCapacity(count)
            for _ in 0..<count { records.append(try reader.record()) }
            response = .records(records)
        case .status:
            let state = try reader.lockState()
            let passcodeSet = try reader.bool()
            let backend = try reader.shortString()
            let hardwareBacked = try reader.bool()
            let limited = try reader.bool()
            let detail = try reader.string()
            let hardwareTries = try reader.optional { r throws(KeychainError) in try r.int() }
            let lockoutRetry = try reader.optional { r throws(KeychainError) in try r.int() }
            let failed = try reader.int()
            let tries = try reader.optional { r throws(KeychainError) in try r.int() }
            let next = try reader.optional { r throws(KeychainError) in try r.double() }
            let autoLock = try reader.optional { r throws(KeychainError) in try r.int() }
            let countEntries = Int(try reader.u16())
            var counts: [Accessibility: Int] = [:]
            for _ in 0..<countEntries {
                let code = try reader.shortString()
                let count = try reader.int()
                // A code this side does not know (a newer keyseald's) is left out of the counts.
                if let accessibility = Accessibility(rawValue: code) { counts[accessibility] = count }
            }
            let ledger = try reader.optional { r throws(KeychainError) -> LedgerStatus in
                var buckets: [Int] = []
                for _ in 0..<Int(try r.u16()) { buckets.append(Int(try r.u16())) }
                let missing = try r.int()
                let unexpected = try r.int()
                let problem = try r.optional { r throws(KeychainError) in try r.string() }
                // The sender's summary: this side words it from the same counts.
                _ = try r.string()
                return LedgerStatus(
                    refusedBuckets: buckets,
                    missingEntries: missing,
                    unexpectedEntries: unexpected,
                    recordProblem: problem
                )
            }
            let boot = try reader.optional { r throws(KeychainError) -> BootStatus in
                var pcrs: [Int] = []
                for _ in 0..<Int(try r.u8()) { pcrs.append(Int(try r.u8())) }
                let match = try r.bool()
                let recoveryRequired = try r.bool()
                let recoveryKeySet = try r.bool()
                let rolledBack = try r.bool()
                let index = try r.optional { r throws(KeychainError) in try r.u32() }
                let value = try r.optional { r throws(KeychainError) in try r.u64() }
                return BootStatus(
                    pcrs: pcrs,
                    pcrsMatch: match,
                    recoveryRequired: recoveryRequired,
                    recoveryKeySet: recoveryKeySet,
                    rolledBack: rolledBack,
                    counterIndex: index,
                    counterValue: value,
                    detail: try r.string()
                )
            }
            response = .status(
                StoreStatus(
                    lockState: state,
                    passcodeSet: passcodeSet,
                    device: DeviceKeyStatus(
                        backend: backend,
                        hardwareBacked: hardwareBacked,
                        guessingHardwareLimited: limited,
                        detail: detail,
                        hardwareTriesLeft: hardwareTries,
                        lockoutRetrySeconds: lockoutRetry
                    ),
                    failedAttempts: failed,
                    triesLeft: tries,
                    nextTryAt: next.map { Date(timeIntervalSince1970: $0) },
                    autoLockSeconds: autoLock,
                    itemCounts: counts,
                    ledger: ledger ?? LedgerStatus(),
                    boot: boot
                )
            )
        case .secret: response = .secret(try reader.secret())
        case .lockState: response = .lockState(try reader.lockState())
        case .message: response = .message(try reader.optional { r throws(KeychainError) in try r.string() })
        case .settings:
            response = .settings(
                WireSettings(autoLockSeconds: try reader.optional { r throws(KeychainError) in try r.int() })
            )
        case .lockStateChanged: response = .lockStateChanged(try reader.lockState())
        case .backupChunk:
            let bytes = Array(try reader.blob())
            let done = try reader.int()
            response = .backupChunk(bytes: bytes, done: done, total: try reader.int())
        case .exportReport:
            let exported = try reader.counts()
            let passcodeOnly = try reader.int()
            let unavailable = try reader.counts()
            let seconds = try reader.double()
            response = .exportReport(
                ExportReport(
                    exported: exported,
                    skippedPasscodeOnly: passcodeOnly,
                    skippedUnavailable: unavailable,
                    keyDerivationSeconds: seconds,
                    undecryptable: try reader.undecryptable(),
                    skippedKeys: try reader.skippedKeys()
                )
            )
        case .importProgress:
            let done = try reader.int()
            response = .importProgress(done: done, total: try reader.int())
        case .importSkipped: response = .importSkipped(try reader.skipped())
        case .importReport:
            let total = try reader.int()
            let restored = try reader.counts()
            let replaced = try reader.int()
            let skipped = try reader.skipped()
            response = .importReport(
                ImportReport(
                    total: total,
                    restored: restored,
                    replaced: replaced,
                    skipped: skipped,
                    keyDerivationSeconds: try reader.double()
                )
            )
        case .undecryptable: response = .undecryptable(try reader.undecryptable())
        case .key:
            let reference = try reader.data()
            let keyType = try reader.shortString()
            let bits = try reader.int()
            let publicKey = try reader.data()
            let isPrivate = try reader.bool()
            let inHardware = try reader.bool()
            let extractable = try reader.bool()
            response = .key(
                WireKey(
                    reference: reference,
                    keyType: keyType,
                    bits: bits,
                    publicKey: publicKey,
                    isPrivate: isPrivate,
                    inHardware: inHardware,
                    extractable: extractable,
                    attributes: try reader.attributes(),
                    subjectPublicKeyInfo: try reader.data()
                )
            )
        case .keyResult: response = .keyResult(try reader.data())
        case .certificates:
            let count = Int(try reader.u32())
            // A certificate takes well over 16 bytes: a count the payload cannot hold is refused before allocating.
            guard count <= reader.remaining / 16 else {
                throw WireReader.malformed("certificate count over the payload")
            }
            var certificates: [WireCertificate] = []
            certificates.reserveCapacity(count)
            for _ in 0..<count {
                let reference = try reader.data()
                let keyReference = try reader.optional { r throws(KeychainError) in try r.data() }
                let der = try reader.data()
                let sha1 = try reader.data()
                let sha256 = try reader.data()
                let summary = try reader.optional { r throws(KeychainError) in try r.string() }
                let commonNames = try reader.strings()
                let emailAddresses = try reader.strings()
                let notBefore = try reader.double()
                let notAfter = try reader.double()
                certificates.append(
                    WireCertificate(
                        reference: reference,
                        keyReference: keyReference,
                        der: der,
                        sha1: sha1,
                        sha256: sha256,
                        subjectSummary: summary,
                        commonNames: commonNames,
                        emailAddresses: emailAddresses,
                        notBefore: notBefore,
                        notAfter: notAfter,
                        attributes: try reader.attributes()
                    )
                )
            }
            response = .certificates(certificates)
        }
        try reader.finish()
        return response
    }

    public static func decode(payload: [UInt8]) throws(KeychainError) -> WireResponse {
        do {
            return try payload.withUnsafeBytes { raw in try decode(payload: raw) }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw WireReader.malformed("\(error)")
        }
    }
}
