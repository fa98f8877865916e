import Foundation
import KeysealClient
import Testing

@Suite("Wire coding of key requests")
struct WireKeyCodingTests {
    static let generation = KeyGenerationRequest(
        keyType: .p256,
        inHardware: true,
        attributes: ["atag": .data(Data([1, 2])), "labl": .string("k")],
        accessGroup: "g",
        accessibility: .whenUnlockedThisDeviceOnly,
        accessControlFlags: 1 << 30,
        synchronizable: false,
        isExtractable: false
    )
    static let operation = WireKeyOperation(
        reference: Data("ksr1-reference".utf8),
        kind: .keyExchange,
        algorithm: "algid:keyexchange:ECDH:KDFX963:SHA256",
        data: Data(repeating: 4, count: 65),
        requestedSize: 32,
        sharedInfo: Data([9])
    )
    static let key = WireKey(
        reference: Data([1]),
        keyType: "73",
        bits: 256,
        publicKey: Data(repeating: 4, count: 65),
        isPrivate: true,
        inHardware: true,
        extractable: false,
        attributes: ["tkid": .string("com.apple.setoken")]
    )

    static func payload(_ frame: [UInt8]) -> [UInt8] { Array(frame.dropFirst(4)) }

    @Test func keyRequestsRoundTrip() throws {
        guard
            case .generateKey(let generation) = try WireRequest.decode(
                payload: Self.payload(try WireRequest.generateKey(Self.generation).encodedFrame())
            )
        else {
            Issue.record("not a key generation")
            return
        }
        #expect(generation == Self.generation)
        guard
            case .keyOperation(let operation) = try WireRequest.decode(
                payload: Self.payload(try WireRequest.keyOperation(Self.operation).encodedFrame())
            )
        else {
            Issue.record("not a key operation")
            return
        }
        #expect(operation == Self.operation)
    }

    /// A key held by keyseald for its connection (a PKCS#11 session key) says so in one trailing byte; a stored key's
    /// request has none (as earlier clients send it), and any other trailing byte is malformed.
    @Test func aKeyThatIsNotStoredRoundTripsAndAStoredKeyHasNoTrailingByte() throws {
        var session = Self.generation
        session.isPermanent = false
        let stored = Self.payload(try WireRequest.generateKey(Self.generation).encodedFrame())
        let held = Self.payload(try WireRequest.generateKey(session).encodedFrame())
        #expect(held == stored + [1])
        guard case .generateKey(let decoded) = try WireRequest.decode(payload: held) else {
            Issue.record("not a key generation")
            return
        }
        #expect(decoded == session && !decoded.isPermanent)
        #expect(throws: KeychainError.self) { try WireRequest.decode(payload: stored + [0]) }
        #expect(throws: KeychainError.self) { try WireRequest.decode(payload: stored + [1, 1]) }
    }

    @Test func keyResponsesRoundTrip() throws {
        for response: WireResponse in [.key(Self.key), .keyResult(Data([1, 2, 3]))] {
            #expect(try WireResponse.decode(payload: Self.payload(response.encodedFrame())) == response)
        }
    }

    @Test func everyTruncationOfAKeyFrameIsAnError() throws {
        let frames = [
            Self.payload(try WireRequest.generateKey(Self.generation).encodedFrame()),
            Self.payload(try WireRequest.keyOperation(Self.operation).encodedFrame()),
        ]
        for full in frames {
            for cut in 0..<full.count {
                #expect(throws: KeychainError.self) { try WireRequest.decode(payload: Array(full.prefix(cut))) }
            }
        }
        let response = Self.payload(WireResponse.key(Self.key).encodedFrame())
        for cut in 0..<response.count {
            #expect(throws: KeychainError.self) { try WireResponse.decode(payload: Array(response.prefix(cut))) }
        }
    }
}
