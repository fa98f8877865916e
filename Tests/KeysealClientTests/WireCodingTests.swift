import Foundation
import Testing

@testable import KeysealClient

@Suite("Wire encoding")
struct WireCodingTests {
    static let attributes: [String: AttributeValue] = [
        "acct": .string("alice"), "svce": .data(Data([0, 0xff, 0x80])), "invi": .bool(true), "port": .int(-443),
        "cdat": .date(Date(timeIntervalSinceReferenceDate: 812_345_678.25)), "labl": .string(""),
    ]

    static func payload(_ frame: [UInt8]) -> [UInt8] { Array(frame.dropFirst(4)) }

    static func roundTrip(_ request: WireRequest) throws -> WireRequest {
        let frame = try request.encodedFrame()
        #expect(try wireFrameLength(frame.prefix(4)) == frame.count - 4)
        return try WireRequest.decode(payload: payload(frame))
    }

    static func roundTrip(_ response: WireResponse) throws -> WireResponse {
        try WireResponse.decode(payload: payload(response.encodedFrame()))
    }

    @Test("records encoded one at a time join to the same response, in one frame or in parts", arguments: [3, 7])
    func recordsEncoderMatchesWholeEncoding(count: Int) throws {
        let records = (0..<count).map { index in
            ItemRecord(
                itemClass: .genericPassword,
                attributes: ["acct": .string("a\(index)")],
                data: Data(repeating: UInt8(index), count: count == 3 ? 100 : 700_000)
            )
        }
        var encoder = WireRecordsEncoder(count: records.count)
        var frames: [[UInt8]] = []
        for record in records {
            encoder.append(record)
            while let part = encoder.nextPart() { frames.append(part) }
        }
        frames += encoder.finish()
        #expect(frames.allSatisfy { $0.count - 4 <= Wire.maxFrame })
        #expect(frames.count == (count == 3 ? 1 : 3))
        var remaining = frames[...]
        let response = try WireResponse.readResponse { () throws(KeychainError) -> [UInt8] in
            guard let frame = remaining.popFirst() else { throw KeychainError(status: -36, message: "no more frames") }
            return Array(frame.dropFirst(4))
        }
        #expect(remaining.isEmpty)
        #expect(response == .records(records))
    }

    @Test("an add round-trips every attribute type and a non-UTF-8 value byte-exact")
    func addRoundTrip() throws {
        let item = NewItem(
            itemClass: .genericPassword,
            attributes: Self.attributes,
            accessGroup: "com.example",
            accessibility: .afterFirstUnlockThisDeviceOnly,
            accessControlFlags: 1 << 31,
            synchronizable: true,
            data: Data([0xc3, 0x28, 0, 1]),
            returns: ReturnOptions(rawValue: 3)
        )
        guard case .add(let decoded) = try Self.roundTrip(.add(item)) else {
            Issue.record("not an add")
            return
        }
        #expect(decoded == item)
    }

    @Test("an add replacing by string attributes round-trips, alone and on behalf; a replaced answer names the account")
    func addReplacingAttributesRoundTrip() throws {
        let item = NewItem(
            itemClass: .genericPassword,
            attributes: [
                "acct": .string("a"), "svce": .string("s"), "ksat": .data(Data([1, 0, 0, 0, 1, 0x6b, 2, 0, 0, 0, 0])),
            ],
            accessGroup: "g",
            data: Data([0xc3, 0x28])
        )
        guard case .addReplacingAttributes(let decoded) = try Self.roundTrip(.addReplacingAttributes(item)) else {
            Issue.record("not an add replacing by attributes")
            return
        }
        #expect(decoded == item)
        guard
            case .onBehalf(7, .addReplacingAttributes(let inner)) = try Self.roundTrip(
                .onBehalf(pid: 7, .addReplacingAttributes(item))
            )
        else {
            Issue.record("not on behalf")
            return
        }
        #expect(inner == item)
        // The opcode is its own: the frame differs from a plain add's in that byte only.
        let plain = Self.payload(try WireRequest.add(item).encodedFrame())
        let replacing = Self.payload(try WireRequest.addReplacingAttributes(item).encodedFrame())
        #expect(plain.count == replacing.count && zip(plain, replacing).filter { $0 != $1 }.count == 1)
        // The answer: the replaced item's account in one record; any other record is a decode error.
        let record = try #require(
            try { () throws -> ItemRecord? in
                guard case .records(let records) = try Self.roundTrip(.records([Wire.replacedRecord(account: "acc")]))
                else { return nil }
                return records.first
            }()
        )
        #expect(try Wire.replacedAccount(record) == "acc")
        #expect(throws: KeychainError.self) {
            try Wire.replacedAccount(
                ItemRecord(itemClass: .genericPassword, attributes: ["acct": .string("a"), "labl": .string("")])
            )
        }
        #expect(throws: KeychainError.self) {
            try Wire.replacedAccount(ItemRecord(itemClass: .key, attributes: ["acct": .string("a")]))
        }
    }

    @Test("queries with every limit round-trip", arguments: [MatchLimit.one, .all, .count(7)])
    func queryRoundTrip(limit: MatchLimit) throws {
        let query = ItemQuery(
            itemClass: .internetPassword,
            attributes: Self.attributes,
            accessGroup: nil,
            accessibility: .whenUnlocked,
            synchronizable: .any,
            persistentRef: Data([1, 2, 3]),
            limit: limit,
            limitGiven: true,
            returns: ReturnOptions(rawValue: 7)
        )
        guard case .copyMatching(let decoded) = try Self.roundTrip(.copyMatching(query)) else {
            Issue.record("not a copy-matching")
            return
        }
        #expect(decoded == query)
    }

    @Test("an update round-trips its query and changes")
    func updateRoundTrip() throws {
        let query = ItemQuery(itemClass: .genericPassword, attributes: ["acct": .string("a")])
        let changes = ItemChanges(
            attributes: ["labl": .string("new")],
            accessGroup: "g",
            accessibility: .always,
            accessControlFlags: nil,
            synchronizable: false,
            data: Data()
        )
        guard case .update(let q, let c) = try Self.roundTrip(.update(query, changes)) else {
            Issue.record("not an update")
            return
        }
        #expect(q == query)
        #expect(c == changes)
    }

    @Test("passcodes round-trip and print redacted")
    func passcodes() throws {
        guard
            case .changePasscode(let old, let new) = try Self.roundTrip(
                .changePasscode(old: SecretBytes(utf8: "old pass"), new: SecretBytes(utf8: "nouveau ✓"))
            )
        else {
            Issue.record("not a change")
            return
        }
        #expect(old.utf8String == "old pass")
        #expect(old.isValidUTF8 && new.isValidUTF8)
        #expect(!SecretBytes(copying: [0x61, 0xC3]).isValidUTF8)  // a truncated two-byte sequence
        #expect(!SecretBytes(copying: [0xFF]).isValidUTF8)
        #expect(new.utf8String == "nouveau ✓")
        #expect("\(new)".hasPrefix("<redacted") && !"\(new)".contains("nouveau"))
    }

    @Test("simple requests round-trip")
    func simpleRequests() throws {
        for request: WireRequest in [.ping, .status, .lockState, .lock, .getSettings, .subscribeLockState] {
            #expect(try Self.roundTrip(request).name == request.name)
        }
        guard case .setSettings(let settings) = try Self.roundTrip(.setSettings(WireSettings(autoLockSeconds: 60)))
        else {
            Issue.record("not settings")
            return
        }
        #expect(settings.autoLockSeconds == 60)
    }

    @Test("an on-behalf request carries one item request and its pid; nothing else decodes")
    func onBehalf() throws {
        let query = ItemQuery(
            itemClass: .genericPassword,
            attributes: ["acct": .string("a")],
            accessGroup: nil,
            limit: .one
        )
        let decoded = try Self.roundTrip(.onBehalf(pid: 4242, .copyMatching(query)))
        guard case .onBehalf(let pid, .copyMatching(let inner)) = decoded else {
            Issue.record("not an on-behalf copy-matching")
            return
        }
        #expect(pid == 4242 && inner.attributes["acct"] == .string("a"))
        #expect(throws: KeychainError.self) { try WireRequest.onBehalf(pid: 1, .lock).encodedFrame() }
        // Hand-made frames: a management request inside, and an on-behalf request inside another.
        let version = try WireRequest.ping.encodedFrame()[4]
        for body: [UInt8] in [[56, 0, 0, 0, 1, 4], [56, 0, 0, 0, 1, 56, 0, 0, 0, 1, 1]] {
            #expect(throws: KeychainError.self) { try WireRequest.decode(payload: [version] + body) }
        }
        #expect(try WireRequest.decode(payload: [version, 56, 0, 0, 0, 1, 1]).name == "ping")
    }

    @Test("responses round-trip")
    func responses() throws {
        let records = [
            ItemRecord(itemClass: .genericPassword, attributes: Self.attributes, data: Data(repeating: 7, count: 1000)),
            ItemRecord(itemClass: .internetPassword, attributes: [:], persistentRef: Data([9])),
        ]
        let status = StoreStatus(
            lockState: .locked,
            passcodeSet: true,
            device: DeviceKeyStatus(
                backend: "tpm",
                hardwareBacked: false,
                guessingHardwareLimited: false,
                detail: "swtpm",
                hardwareTriesLeft: 3,
                lockoutRetrySeconds: nil
            ),
            failedAttempts: 2,
            triesLeft: 3,
            nextTryAt: Date(timeIntervalSince1970: 1_800_000_000.5),
            autoLockSeconds: 300,
            itemCounts: [.whenUnlocked: 3, .alwaysThisDeviceOnly: 1]
        )
        let responses: [WireResponse] = [
            .ok, .records(records), .records([]), .status(status), .lockState(.beforeFirstUnlock),
            .message("no passcode is set"), .message(nil), .settings(WireSettings(autoLockSeconds: nil)),
            .lockStateChanged(.unlocked),
            .failure(KeychainError(status: -25293, message: "wrong passcode", retryAfterSeconds: 60, triesLeft: 2)),
            .status(
                StoreStatus(
                    lockState: .unlocked,
                    passcodeSet: false,
                    device: DeviceKeyStatus(
                        backend: "host-key",
                        hardwareBacked: false,
                        guessingHardwareLimited: false,
                        detail: ""
                    ),
                    ledger: LedgerStatus(
                        refusedBuckets: [1, 127],
                        missingEntries: 1,
                        unexpectedEntries: 0,
                        recordProblem: nil
                    )
                )
            ),
        ]
        for response in responses {
            #expect(try Self.roundTrip(response) == response)
        }
    }

    /// Reads the frames one after another as the client reads them from its socket.
    static func join(_ frames: [[UInt8]]) throws(KeychainError) -> WireResponse {
        var remaining = frames[...]
        return try WireResponse.readResponse { () throws(KeychainError) -> [UInt8] in
            guard let frame = remaining.popFirst() else {
                throw KeychainError(status: KeychainStatus.io, message: "no more frames")
            }
            #expect(try wireFrameLength(frame.prefix(4)) == frame.count - 4)
            return Self.payload(frame)
        }
    }

    @Test("a response over the frame limit goes in parts within the limit and joins to the same response")
    func responseInParts() throws {
        // Three values at the limit, with attributes: about 3 MiB, over the 2 MiB frame limit.
        let records = (0..<3).map { index in
            ItemRecord(
                itemClass: .genericPassword,
                attributes: Self.attributes.merging(["acct": .string("item-\(index)")]) { $1 },
                data: Data((0..<Wire.valueLimit).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) })
            )
        }
        let response = WireResponse.records(records)
        let frames = response.encodedFrames()
        #expect(frames.count == 2)
        for frame in frames { #expect(frame.count - 4 <= Wire.maxFrame) }
        #expect(try Self.join(frames) == response)
        // A response within the limit is one ordinary frame.
        #expect(
            WireResponse.records(Array(records.prefix(1))).encodedFrames() == [
                WireResponse.records(Array(records.prefix(1))).encodedFrame()
            ]
        )
    }

    @Test("a payload of exactly the frame limit is one frame; one byte more goes in parts")
    func partsBoundary() throws {
        let overhead =
            WireResponse.records([ItemRecord(itemClass: .genericPassword, attributes: [:], data: Data())])
            .encodedFrame().count - 4
        let exact = WireResponse.records([
            ItemRecord(itemClass: .genericPassword, attributes: [:], data: Data(count: Wire.maxFrame - overhead))
        ])
        #expect(exact.encodedFrame().count - 4 == Wire.maxFrame)
        #expect(exact.encodedFrames().count == 1)
        let over = WireResponse.records([
            ItemRecord(itemClass: .genericPassword, attributes: [:], data: Data(count: Wire.maxFrame - overhead + 1))
        ])
        let frames = over.encodedFrames()
        #expect(frames.count == 2)
        #expect(frames.map { $0.count - 4 } == [Wire.maxFrame, 5])  // version and kind, then 3 bytes left
        #expect(try Self.join(frames) == over)
    }

    @Test("a response in parts over the client's limit is errSecDataTooLarge")
    func partsLimit() throws {
        let frames = WireResponse.records(
            (0..<3).map {
                ItemRecord(itemClass: .genericPassword, attributes: [:], data: Data(count: Wire.valueLimit + $0))
            }
        ).encodedFrames()
        var remaining = frames[...]
        do {
            _ = try WireResponse.readResponse(limit: Wire.maxFrame) { () throws(KeychainError) -> [UInt8] in
                Self.payload(remaining.popFirst() ?? [])
            }
            Issue.record("a response over the limit was joined")
        } catch {
            #expect(error.status == KeychainStatus.dataTooLarge)
        }
    }

    @Test("parts cut short, or interrupted by another response, are a decode error")
    func brokenParts() throws {
        let big = WireResponse.records(
            (0..<3).map {
                ItemRecord(itemClass: .genericPassword, attributes: [:], data: Data(count: Wire.valueLimit - $0))
            }
        )
        let frames = big.encodedFrames()
        #expect(frames.count > 1)
        #expect(throws: KeychainError.self) { try Self.join(Array(frames.dropLast())) }
        do {
            _ = try Self.join(Array(frames.dropLast()) + [WireResponse.ok.encodedFrame()])
            Issue.record("an interrupted response decoded")
        } catch {
            #expect(error.status == KeychainStatus.decode)
        }
        // A piece where a whole response is expected (the decoder alone) is refused too.
        #expect(throws: KeychainError.self) { try WireResponse.decode(payload: Self.payload(frames[0])) }
    }

    @Test("a value over the limit is refused with errSecDataTooLarge before encoding")
    func valueLimit() throws {
        let big = NewItem(itemClass: .genericPassword, data: Data(count: Wire.valueLimit + 1))
        #expect(throws: KeychainError.self) { try WireRequest.add(big).encodedFrame() }
        do {
            _ = try WireRequest.add(big).encodedFrame()
        } catch {
            #expect(error.status == KeychainStatus.dataTooLarge)
        }
        let atLimit = NewItem(itemClass: .genericPassword, data: Data(count: Wire.valueLimit))
        #expect(try WireRequest.add(atLimit).encodedFrame().count <= Wire.maxFrame + 4)
    }

    @Test("frame headers over the frame limit are refused")
    func frameLimit() {
        #expect(throws: KeychainError.self) { try wireFrameLength([0xff, 0xff, 0xff, 0xff]) }
        #expect(throws: KeychainError.self) { try wireFrameLength([0, 0, 0, 1]) }
        #expect(throws: KeychainError.self) { try wireFrameLength([0, 0]) }
    }

    @Test("a wrong version, unknown opcode or trailing byte is a decode error")
    func malformed() throws {
        var frame = Self.payload(try WireRequest.status.encodedFrame())
        frame[0] = 9
        #expect(throws: KeychainError.self) { try WireRequest.decode(payload: frame) }
        #expect(throws: KeychainError.self) { try WireRequest.decode(payload: [Wire.version, 200]) }
        #expect(throws: KeychainError.self) {
            try WireRequest.decode(payload: Self.payload(try WireRequest.status.encodedFrame()) + [0])
        }
        // A huge attribute count in a tiny frame is rejected before allocating.
        #expect(throws: KeychainError.self) {
            try WireRequest.decode(payload: [Wire.version, 17, 4] + Array("genp".utf8) + [0xff, 0xff])
        }
        // Invalid UTF-8 in a string.
        #expect(throws: KeychainError.self) { try WireRequest.decode(payload: [Wire.version, 17, 2, 0xc3, 0x28]) }
    }

    @Test("every truncation of valid frames is an error, never a crash")
    func truncations() throws {
        let item = NewItem(
            itemClass: .genericPassword,
            attributes: Self.attributes,
            accessGroup: "g",
            data: Data([1, 2])
        )
        for request in [
            WireRequest.add(item), .addReplacingAttributes(item), .onBehalf(pid: 3, .addReplacingAttributes(item)),
        ] {
            let full = Self.payload(try request.encodedFrame())
            for cut in 0..<full.count {
                #expect(throws: KeychainError.self) { try WireRequest.decode(payload: Array(full.prefix(cut))) }
            }
        }
        let response = Self.payload(
            WireResponse.records([ItemRecord(itemClass: .genericPassword, attributes: Self.attributes, data: Data([1]))]
            )
            .encodedFrame()
        )
        for cut in 0..<response.count {
            #expect(throws: KeychainError.self) { try WireResponse.decode(payload: Array(response.prefix(cut))) }
        }
    }

    @Test("random bytes never crash the decoders")
    func randomBytes() {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<5000 {
            let count = Int.random(in: 0..<64, using: &generator)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if round % 2 == 0, !bytes.isEmpty { bytes[0] = Wire.version }
            _ = try? WireRequest.decode(payload: bytes)
            _ = try? WireResponse.decode(payload: bytes)
        }
    }

    @Test("an unreachable socket is errSecNoSuchKeychain naming the path")
    func unreachable() {
        let path = "/nonexistent-keyseal-dir/keyseal.sock"
        let connection = KeysealConnection(socketPath: path)
        do {
            _ = try connection.send(.status)
            Issue.record("no error")
        } catch {
            #expect(error.status == KeychainStatus.noSuchKeychain)
            #expect(error.message.contains(path))
        }
    }

    @Test("the default socket path follows KEYSEAL_SOCKET, then XDG_RUNTIME_DIR")
    func defaultSocket() {
        #expect(Wire.defaultSocketPath(environment: ["KEYSEAL_SOCKET": "/a/s", "XDG_RUNTIME_DIR": "/r"]) == "/a/s")
        #expect(Wire.defaultSocketPath(environment: ["XDG_RUNTIME_DIR": "/r"]) == "/r/keyseal/keyseal.sock")
        #expect(Wire.defaultSocketPath(environment: [:]) == "/run/keyseal/keyseal.sock")
    }
}
