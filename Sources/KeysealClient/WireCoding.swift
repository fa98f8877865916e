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
//
// This file holds the opcodes, the frame checks and the two dispatches (a request or response to its kind byte and
// payload, and back). Each payload's encoding stands beside its decoding, as a `WireWriter` method and the
// `WireReader` method of the same name, in the file of its family: WireCoding+Session.swift (lock state,
// passcodes, settings, status, recovery), WireCoding+Items.swift, WireCoding+Backup.swift, WireCoding+Keys.swift
// and WireCoding+Envelopes.swift (on-behalf and authenticated requests). A payload of one primitive (a passcode, a
// lock state, a query) is written and read here. WireParts.swift cuts a large response into pieces and joins them.

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
    case revokeAuthentication = 59
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

/// Runs `decode` on the bytes of `payload`; an error other than a `KeychainError` is errSecDecode.
func decodeArray<T>(
    _ payload: [UInt8],
    _ decode: (UnsafeRawBufferPointer) throws(KeychainError) -> T
) throws(KeychainError) -> T {
    do {
        return try payload.withUnsafeBytes { raw in try decode(raw) }
    } catch let error as KeychainError {
        throw error
    } catch {
        throw WireReader.malformed("\(error)")
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

    /// The opcode and the payload; the payload is written by the `WireWriter` method named after it.
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
            writer.changePasscode(old: old, new: new)
        case .removePasscode(let passcode):
            writer.u8(Opcode.removePasscode.rawValue)
            writer.secret(passcode)
        case .getSettings: writer.u8(Opcode.getSettings.rawValue)
        case .setSettings(let settings):
            writer.u8(Opcode.setSettings.rawValue)
            writer.settings(settings)
        case .subscribeLockState: writer.u8(Opcode.subscribeLockState.rawValue)
        case .add(let item):
            writer.u8(Opcode.add.rawValue)
            try writer.newItem(item)
        case .addReplacingAttributes(let item):
            writer.u8(Opcode.addReplacingAttributes.rawValue)
            try writer.newItem(item)
        case .copyMatching(let query):
            writer.u8(Opcode.copyMatching.rawValue)
            writer.query(query)
        case .update(let query, let changes):
            writer.u8(Opcode.update.rawValue)
            try writer.update(query, changes)
        case .delete(let query):
            writer.u8(Opcode.delete.rawValue)
            writer.query(query)
        case .exportBackup(let passphrase, let availableOnly):
            writer.u8(Opcode.exportBackup.rawValue)
            writer.exportBackup(passphrase: passphrase, availableOnly: availableOnly)
        case .importBegin(let passphrase, let replace):
            writer.u8(Opcode.importBegin.rawValue)
            writer.importBegin(passphrase: passphrase, replace: replace)
        case .importChunk(let bytes):
            writer.u8(Opcode.importChunk.rawValue)
            try writer.importChunk(bytes)
        case .importEnd: writer.u8(Opcode.importEnd.rawValue)
        case .undecryptableItems: writer.u8(Opcode.undecryptableItems.rawValue)
        case .deleteUndecryptable(let ids):
            writer.u8(Opcode.deleteUndecryptable.rawValue)
            writer.undecryptableIDs(ids)
        case .generateKey(let generation):
            writer.u8(Opcode.generateKey.rawValue)
            writer.keyGeneration(generation)
        case .keyOperation(let operation):
            writer.u8(Opcode.keyOperation.rawValue)
            writer.keyOperation(operation)
        case .certificates(let query):
            writer.u8(Opcode.certificates.rawValue)
            writer.query(query)
        case .createCSR(let reference, let subject):
            writer.u8(Opcode.createCSR.rawValue)
            writer.createCSR(reference: reference, subject: subject)
        case .createRecoveryKey(let passcode):
            writer.u8(Opcode.createRecoveryKey.rawValue)
            writer.optional(passcode) { $0.secret($1) }
        case .recover(let key, let passcode):
            writer.u8(Opcode.recover.rawValue)
            writer.recover(key: key, passcode: passcode)
        case .tpmReseal(let passcode, let pcrs):
            writer.u8(Opcode.tpmReseal.rawValue)
            writer.tpmReseal(passcode: passcode, pcrs: pcrs)
        case .acceptRollback: writer.u8(Opcode.acceptRollback.rawValue)
        case .attestation(let step):
            writer.u8(Opcode.attestation.rawValue)
            writer.attestation(step)
        case .onBehalf(let pid, let request):
            writer.u8(Opcode.onBehalf.rawValue)
            try writer.onBehalf(pid: pid, request)
        case .authenticate(let passcode):
            writer.u8(Opcode.authenticate.rawValue)
            writer.secret(passcode)
        case .authenticated(let authentication, let request):
            writer.u8(Opcode.authenticated.rawValue)
            try writer.authenticated(authentication, request)
        case .revokeAuthentication(let token):
            writer.u8(Opcode.revokeAuthentication.rawValue)
            writer.secret(token)
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

    /// One request after the version byte; an on-behalf request's inner request is read by a second call. The
    /// payload is read by the `WireReader` method named after it.
    static func decodeBody(_ reader: inout WireReader, nested: Bool = false) throws(KeychainError) -> WireRequest {
        guard let opcode = Opcode(rawValue: try reader.u8()) else {
            throw KeychainError(status: KeychainStatus.decode, message: "unknown request")
        }
        switch opcode {
        case .ping: return .ping
        case .status: return .status
        case .lockState: return .lockState
        case .lock: return .lock
        case .unlock: return .unlock(passcode: try reader.secret())
        case .setPasscode: return .setPasscode(try reader.secret())
        case .changePasscode: return try reader.changePasscode()
        case .removePasscode: return .removePasscode(try reader.secret())
        case .getSettings: return .getSettings
        case .setSettings: return .setSettings(try reader.settings())
        case .subscribeLockState: return .subscribeLockState
        case .add: return .add(try reader.newItem())
        case .addReplacingAttributes: return .addReplacingAttributes(try reader.newItem())
        case .copyMatching: return .copyMatching(try reader.query())
        case .update: return try reader.update()
        case .delete: return .delete(try reader.query())
        case .exportBackup: return try reader.exportBackup()
        case .importBegin: return try reader.importBegin()
        case .importChunk: return .importChunk(try reader.importChunk())
        case .importEnd: return .importEnd
        case .undecryptableItems: return .undecryptableItems
        case .deleteUndecryptable: return .deleteUndecryptable(ids: try reader.undecryptableIDs())
        case .generateKey: return .generateKey(try reader.keyGeneration())
        case .keyOperation: return .keyOperation(try reader.keyOperation())
        case .certificates: return .certificates(try reader.query())
        case .createCSR: return try reader.createCSR()
        case .createRecoveryKey:
            return .createRecoveryKey(passcode: try reader.optional { r throws(KeychainError) in try r.secret() })
        case .recover: return try reader.recover()
        case .tpmReseal: return try reader.tpmReseal()
        case .acceptRollback: return .acceptRollback
        case .attestation: return .attestation(try reader.attestation())
        case .onBehalf: return try reader.onBehalf(nested: nested)
        case .authenticate: return .authenticate(passcode: try reader.secret())
        case .authenticated: return try reader.authenticated(nested: nested)
        case .revokeAuthentication: return .revokeAuthentication(token: try reader.secret())
        }
    }

    public static func decode(payload: [UInt8]) throws(KeychainError) -> WireRequest {
        try decodeArray(payload) { raw throws(KeychainError) in try decode(payload: raw) }
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

    /// The kind and the payload; the payload is written by the `WireWriter` method named after it.
    func encode(into writer: inout WireWriter) {
        switch self {
        case .ok: writer.u8(ResponseKind.ok.rawValue)
        case .failure(let error):
            writer.u8(ResponseKind.failure.rawValue)
            writer.failure(error)
        case .records(let records):
            writer.u8(ResponseKind.records.rawValue)
            writer.records(records)
        case .status(let status):
            writer.u8(ResponseKind.status.rawValue)
            writer.storeStatus(status)
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
            writer.settings(settings)
        case .lockStateChanged(let state):
            writer.u8(ResponseKind.lockStateChanged.rawValue)
            writer.lockState(state)
        case .backupChunk(let bytes, let done, let total):
            writer.u8(ResponseKind.backupChunk.rawValue)
            writer.backupChunk(bytes: bytes, done: done, total: total)
        case .exportReport(let report):
            writer.u8(ResponseKind.exportReport.rawValue)
            writer.exportReport(report)
        case .importProgress(let done, let total):
            writer.u8(ResponseKind.importProgress.rawValue)
            writer.importProgress(done: done, total: total)
        case .importSkipped(let items):
            writer.u8(ResponseKind.importSkipped.rawValue)
            writer.skipped(items)
        case .importReport(let report):
            writer.u8(ResponseKind.importReport.rawValue)
            writer.importReport(report)
        case .undecryptable(let items):
            writer.u8(ResponseKind.undecryptable.rawValue)
            writer.undecryptable(items)
        case .key(let key):
            writer.u8(ResponseKind.key.rawValue)
            writer.key(key)
        case .keyResult(let data):
            writer.u8(ResponseKind.keyResult.rawValue)
            writer.blob(data)
        case .certificates(let certificates):
            writer.u8(ResponseKind.certificates.rawValue)
            writer.certificates(certificates)
        }
    }

    /// Decodes a response payload (the bytes after the length prefix); the payload is read by the `WireReader`
    /// method named after it.
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
        case .failure: response = .failure(try reader.failure())
        case .records: response = .records(try reader.records())
        case .status: response = .status(try reader.storeStatus())
        case .secret: response = .secret(try reader.secret())
        case .lockState: response = .lockState(try reader.lockState())
        case .message: response = .message(try reader.optional { r throws(KeychainError) in try r.string() })
        case .settings: response = .settings(try reader.settings())
        case .lockStateChanged: response = .lockStateChanged(try reader.lockState())
        case .backupChunk: response = try reader.backupChunk()
        case .exportReport: response = .exportReport(try reader.exportReport())
        case .importProgress: response = try reader.importProgress()
        case .importSkipped: response = .importSkipped(try reader.skipped())
        case .importReport: response = .importReport(try reader.importReport())
        case .undecryptable: response = .undecryptable(try reader.undecryptable())
        case .key: response = .key(try reader.key())
        case .keyResult: response = .keyResult(try reader.data())
        case .certificates: response = .certificates(try reader.certificates())
        }
        try reader.finish()
        return response
    }

    public static func decode(payload: [UInt8]) throws(KeychainError) -> WireResponse {
        try decodeArray(payload) { raw throws(KeychainError) in try decode(payload: raw) }
    }
}
