import Crypto
import Foundation
import Testing

@testable import KeysealCore

@Suite("AES-256-GCM opening through libcrypto")
struct GCMTests {
    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    static func random(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }

    static func seal(_ plaintext: [UInt8], key: [UInt8], aad: [UInt8]) throws -> Data {
        try AES.GCM.seal(plaintext, using: SymmetricKey(data: key), authenticating: aad).combined!
    }

    static func open(_ box: Data, key: [UInt8], aad: [UInt8]) throws(KeychainError) -> Data {
        try key.withBytes { keyBytes throws(KeychainError) in
            try aad.withBytes { aadBytes throws(KeychainError) in try GCMContext.open(box, key: keyBytes, aad: aadBytes)
            }
        }
    }

    @Test("opens the GCM specification's test case 16 (AES-256, 96-bit nonce, associated data)")
    func knownAnswer() throws {
        let key = Self.hex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
        let nonce = Self.hex("cafebabefacedbaddecaf888")
        let aad = Self.hex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
        let plaintext = Self.hex(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39"
        )
        let ciphertext = Self.hex(
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662"
        )
        let tag = Self.hex("76fc6ece0f4e1768cddf8853bb2d551b")
        #expect(try Self.open(Data(nonce + ciphertext + tag), key: key, aad: aad) == Data(plaintext))
    }

    @Test(
        "opens what swift-crypto sealed, byte-exact, from empty to 1 MiB",
        arguments: [0, 1, 15, 16, 17, 1000, 1 << 20]
    )
    func opensSwiftCryptoBoxes(length: Int) throws {
        for aadLength in [0, 1, 300] {
            let key = Self.random(32)
            let aad = Self.random(aadLength)
            let plaintext = Self.random(length)
            let box = try Self.seal(plaintext, key: key, aad: aad)
            #expect(try Self.open(box, key: key, aad: aad) == Data(plaintext))
        }
    }

    @Test("refuses a box with any byte changed, other associated data, or another key")
    func refusesTampering() throws {
        let key = Self.random(32)
        let aad = Self.random(40)
        let box = try Self.seal(Self.random(24), key: key, aad: aad)
        // Nonce, ciphertext and tag: every byte position.
        for position in 0..<box.count {
            var altered = box
            altered[position] ^= 0x01
            #expect(throws: KeychainError.decode) { try Self.open(altered, key: key, aad: aad) }
        }
        var otherAAD = aad
        otherAAD[7] ^= 0x80
        #expect(throws: KeychainError.decode) { try Self.open(box, key: key, aad: otherAAD) }
        #expect(throws: KeychainError.decode) { try Self.open(box, key: key, aad: aad + [0]) }
        #expect(throws: KeychainError.decode) { try Self.open(box, key: Self.random(32), aad: aad) }
    }

    @Test("refuses boxes too short to hold a nonce and a tag, without reading past them", arguments: [0, 1, 12, 27])
    func refusesShortBoxes(length: Int) {
        #expect(throws: KeychainError.decode) {
            try Self.open(Data(Self.random(length)), key: Self.random(32), aad: [])
        }
    }

    @Test("a keyed context opens many boxes in turn and zeroes the output of one that fails")
    func keyedContext() throws {
        let key = Self.random(32)
        let context = key.withUnsafeBytes { GCMContext(key: $0) }
        for length in [32, 0, 32, 5] {
            let plaintext = Self.random(length)
            let box = try Self.seal(plaintext, key: key, aad: [1, 2, 3])
            var out = [UInt8](repeating: 0xAA, count: length)
            try out.withUnsafeMutableBytes { raw in
                try [UInt8]([1, 2, 3]).withBytes { aad throws(KeychainError) in
                    try box.withBytes { bytes throws(KeychainError) in
                        try context.open(bytes, aad: aad, exactlyInto: raw)
                    }
                }
            }
            #expect(out == plaintext)
        }
        let box = try Self.seal(Self.random(32), key: key, aad: [])
        var tampered = box
        tampered[20] ^= 0xFF
        var out = [UInt8](repeating: 0xAA, count: 32)
        #expect(throws: KeychainError.decode) {
            try out.withUnsafeMutableBytes { raw in
                try tampered.withBytes { bytes throws(KeychainError) in
                    try context.open(bytes, aad: UnsafeRawBufferPointer(start: nil, count: 0), exactlyInto: raw)
                }
            }
        }
        #expect(out == [UInt8](repeating: 0, count: 32))
        // The wrong output size is refused too.
        var short = [UInt8](repeating: 0xAA, count: 31)
        #expect(throws: KeychainError.decode) {
            try short.withUnsafeMutableBytes { raw in
                try box.withBytes { bytes throws(KeychainError) in
                    try context.open(bytes, aad: UnsafeRawBufferPointer(start: nil, count: 0), exactlyInto: raw)
                }
            }
        }
    }

    @Test("one keyed context is safe to use from several threads at once")
    func concurrentUse() async throws {
        let key = Self.random(32)
        let context = key.withUnsafeBytes { GCMContext(key: $0) }
        let plaintexts = (0..<16).map { _ in Self.random(48) }
        let boxes = try plaintexts.enumerated().map { index, plain in
            try Self.seal(plain, key: key, aad: [UInt8(index)])
        }
        let opened = await withTaskGroup(of: (Int, Data?).self) { group in
            for (index, box) in boxes.enumerated() {
                group.addTask {
                    var last: Data?
                    for _ in 0..<500 {
                        last = try? [UInt8(index)].withBytes { aad throws(KeychainError) in
                            try context.open(box, aad: aad)
                        }
                    }
                    return (index, last)
                }
            }
            var results: [Int: Data] = [:]
            for await (index, data) in group { results[index] = data }
            return results
        }
        for (index, plain) in plaintexts.enumerated() { #expect(opened[index] == Data(plain)) }
    }
}
