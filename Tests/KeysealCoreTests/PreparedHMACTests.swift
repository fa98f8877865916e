import Crypto
import Foundation
import Testing

@testable import KeysealCore

@Suite("Prepared HMAC")
struct PreparedHMACTests {
    @Test(
        "equals swift-crypto's HMAC-SHA256 for keys up to a block and messages across block boundaries",
        arguments: [0, 1, 31, 32, 55, 56, 63, 64, 65, 200]
    )
    func matchesHMAC(messageLength: Int) {
        for keyLength in [0, 1, 16, 32, 64] {
            let key = (0..<keyLength).map { _ in UInt8.random(in: 0...255) }
            let message = (0..<messageLength).map { _ in UInt8.random(in: 0...255) }
            let expected = Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
            let prepared = key.withUnsafeBytes { PreparedHMAC(key: $0) }
            #expect(message.withUnsafeBytes { prepared.authenticate($0) } == expected)
            let split = messageLength / 3
            #expect(
                prepared.authenticate(
                    Array(message[..<split]),
                    Array(message[split..<(2 * split)]),
                    Array(message[(2 * split)...])
                ) == expected
            )
            #expect(message.withUnsafeBytes { prepared.authenticateData($0) } == Data(expected))
        }
    }

    @Test("RFC 4231 test case 2")
    func rfc4231() {
        let prepared = Array("Jefe".utf8).withUnsafeBytes { PreparedHMAC(key: $0) }
        let mac = Array("what do ya want for nothing?".utf8).withUnsafeBytes { prepared.authenticate($0) }
        #expect(
            mac.map { String(format: "%02x", $0) }.joined()
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        )
    }

    @Test(
        "sha256(_:into:) writes swift-crypto's SHA-256 into the first 32 bytes and nothing after them",
        arguments: [0, 1, 55, 56, 64, 1000]
    )
    func sha256(length: Int) {
        let bytes = (0..<length).map { _ in UInt8.random(in: 0...255) }
        var out = [UInt8](repeating: 0xA5, count: 35)
        bytes.withUnsafeBytes { input in out.withUnsafeMutableBytes { KeysealCore.sha256(input, into: $0) } }
        #expect(out == Array(SHA256.hash(data: bytes)) + [0xA5, 0xA5, 0xA5])
    }
}
