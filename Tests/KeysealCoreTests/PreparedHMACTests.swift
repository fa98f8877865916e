import Crypto
import Foundation
import Testing

@testable import KeysealCore

@Suite("Prepared HMAC")
struct PreparedHMACTests {
    @Test("equals swift-crypto's HMAC-SHA256 for keys up to a block and messages across block boundaries",
        arguments: [0, 1, 31, 32, 55, 56, 63, 64, 65, 200])
    func matchesHMAC(messageLength: Int) {
        for keyLength in [16, 32, 64] {
            let key = (0..<keyLength).map { _ in UInt8.random(in: 0...255) }
            let message = (0..<messageLength).map { _ in UInt8.random(in: 0...255) }
            let expected = Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
            let prepared = key.withUnsafeBytes { PreparedHMAC(key: $0) }
            #expect(message.withUnsafeBytes { prepared.authenticate($0) } == expected)
            let split = messageLength / 3
            #expect(prepared.authenticate(
                Array(message[..<split]), Array(message[split..<(2 * split)]), Array(message[(2 * split)...])) == expected)
        }
    }
}
