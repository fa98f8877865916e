import Foundation
import Testing

@testable import KeysealClient

@Suite("Wire encoding: authenticate and authenticated")
struct AuthenticationWireTests {
    static let query = ItemQuery(itemClass: .genericPassword, returns: [.data])

    @Test("an authenticated lookup round-trips its token, reuse duration and UI mode")
    func authenticatedRoundTrip() throws {
        let token = SecretBytes(copying: Data((0..<32).map { UInt8($0) }))
        let request = WireRequest.authenticated(
            ItemAuthentication(token: token, reuseSeconds: 120, ui: .skip),
            .copyMatching(Self.query)
        )
        let decoded = try WireCodingTests.roundTrip(request)
        guard case .authenticated(let authentication, .copyMatching(let inner)) = decoded else {
            Issue.record("decoded \(decoded.name)")
            return
        }
        #expect(authentication.token == token)
        #expect(authentication.reuseSeconds == 120)
        #expect(authentication.ui == .skip)
        #expect(inner == Self.query)
        guard case .authenticate(let passcode) = try WireCodingTests.roundTrip(.authenticate(passcode: token)) else {
            Issue.record("authenticate did not round-trip")
            return
        }
        #expect(passcode == token)
    }

    @Test("only a lookup, update or key operation may be authenticated, never a nested or management request")
    func authenticatedCarriesItemRequestsOnly() throws {
        let authentication = ItemAuthentication(token: nil, reuseSeconds: 0, ui: .fail)
        #expect(throws: KeychainError.self) { try WireRequest.authenticated(authentication, .lock).encodedFrame() }
        #expect(throws: KeychainError.self) {
            try WireRequest.authenticated(authentication, .authenticated(authentication, .copyMatching(Self.query)))
                .encodedFrame()
        }
        // A hand-made frame with a management request inside is refused by the decoder.
        var frame = try WireRequest.authenticated(authentication, .copyMatching(Self.query)).encodedFrame()
        let payload = Array(frame.dropFirst(4))
        // version, opcode 58, no token (0), reuse u32, ui u8, then the inner opcode.
        #expect(payload[1] == 58)
        let innerOpcode = 12  // frame header 4, version, opcode, token presence, reuse 4, ui
        frame[innerOpcode] = 4  // lock
        frame.removeSubrange((innerOpcode + 1)...)
        let length = UInt32(frame.count - 4).bigEndian
        withUnsafeBytes(of: length) { frame.replaceSubrange(0..<4, with: $0) }
        #expect(throws: KeychainError.self) { try WireRequest.decode(payload: Array(frame.dropFirst(4))) }
    }

    @Test("a reuse duration over 300 s is a decode error")
    func reuseOverMaximumRefused() throws {
        var frame = try WireRequest.authenticated(
            ItemAuthentication(token: nil, reuseSeconds: 300, ui: .fail),
            .copyMatching(Self.query)
        ).encodedFrame()
        // version, opcode, no token, then the u32 reuse duration: made 301.
        let offset = 4 + 1 + 1 + 1
        #expect(Array(frame[offset..<(offset + 4)]) == [0, 0, 1, 44])
        frame[offset + 3] = 45
        #expect(throws: KeychainError.self) { try WireRequest.decode(payload: Array(frame.dropFirst(4))) }
    }
}
