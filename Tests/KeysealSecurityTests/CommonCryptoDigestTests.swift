import Foundation
import KeysealSecurity
import KeysealTestSupport
import Testing

/// CommonCrypto's one-shot digests, called as Apple code calls them (`import CommonCrypto` → `import KeysealSecurity`),
/// each checked against the `openssl dgst` command.
@Suite("CommonCrypto digests")
struct CommonCryptoDigestTests {
    typealias Digest =
        @Sendable (UnsafeRawPointer?, CC_LONG, UnsafeMutablePointer<UInt8>?) -> UnsafeMutablePointer<UInt8>?

    static let digests: [(name: String, length: Int32, function: Digest)] = [
        ("sha1", CC_SHA1_DIGEST_LENGTH, { CC_SHA1($0, $1, $2) }),
        ("sha224", CC_SHA224_DIGEST_LENGTH, { CC_SHA224($0, $1, $2) }),
        ("sha256", CC_SHA256_DIGEST_LENGTH, { CC_SHA256($0, $1, $2) }),
        ("sha384", CC_SHA384_DIGEST_LENGTH, { CC_SHA384($0, $1, $2) }),
        ("sha512", CC_SHA512_DIGEST_LENGTH, { CC_SHA512($0, $1, $2) }),
    ]

    /// The digest as SwiftyRSA's `Data+SHA.swift` computes it.
    static func commonCrypto(_ digest: Digest, _ length: Int32, of data: Data) -> Data {
        var out = [UInt8](repeating: 0, count: Int(length))
        let returned = data.withUnsafeBytes { buffer in
            digest(buffer.baseAddress, CC_LONG(data.count), &out) != nil
        }
        #expect(returned)
        return Data(out)
    }

    static func openssl(_ name: String, of data: Data) throws -> Data {
        let result = try runProcess(
            try requireTool("openssl", package: "openssl"),
            ["dgst", "-\(name)", "-binary"],
            environment: nil,
            input: data
        )
        #expect(result.status == 0, "\(result.stderrText)")
        return result.stdout
    }

    @Test("each SHA digest equals openssl's, for empty, short and multi-block input")
    func digestsMatchOpenSSL() throws {
        let inputs = [Data(), Data("abc".utf8), Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) })]
        for (name, length, function) in Self.digests {
            for input in inputs {
                let ours = Self.commonCrypto(function, length, of: input)
                #expect(ours == (try Self.openssl(name, of: input)), "\(name) of \(input.count) bytes")
            }
        }
    }

    @Test("a nil output buffer computes nothing and returns nil")
    func nilOutput() {
        let data = [UInt8](repeating: 1, count: 8)
        for (name, _, function) in Self.digests {
            #expect(function(data, CC_LONG(data.count), nil) == nil, "\(name)")
        }
    }
}
