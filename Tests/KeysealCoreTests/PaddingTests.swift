import Crypto
import Foundation
import Testing

@testable import KeysealCore

@Suite("Item plaintexts padded to size buckets")
struct PaddingTests {
    private let header = ItemHeader(
        storeID: Array(repeating: 1, count: 16),
        itemID: Array(repeating: 2, count: 16),
        itemClass: "genp",
        accessGroup: "default",
        accessibility: "ak",
        primaryKeyDigest: Data(repeating: 3, count: 32),
        digests: [Data(repeating: 4, count: 32), nil, nil, nil, nil, nil, nil, nil],
        generation: 1
    )

    private func sealed(_ secret: Data, attributes: [UInt8] = [], key: ClassKey) throws -> SealedItem {
        try ItemEnvelope.seal(
            attributes: attributes,
            secret: secret,
            aad: header.encoded(),
            itemID: header.itemID,
            classKey: key
        )
    }

    @Test("buckets: multiples of 32 bytes, never smaller than the length, at most 12 % larger from 512 bytes")
    func buckets() {
        for length in 0...70_000 {
            let bucket = Padding.bucket(length)
            #expect(bucket >= length && bucket >= Padding.minimum && bucket % 32 == 0)
            if length >= 512 { #expect(Double(bucket) <= Double(length) * 1.12 + 1) }
        }
        #expect(Padding.bucket(1 << 20 + 1) == 1_081_344)
        // Far fewer distinct sizes than lengths.
        #expect(Set((0...4096).map(Padding.bucket)).count < 100)
    }

    @Test("secrets of 0 to 31 bytes give value ciphertexts of one length; attributes of a few bytes more or less too")
    func equalLengthsForNearbySizes() throws {
        let key = ClassKey.generate(.whenUnlocked)
        let values = try (0..<32).map { try sealed(Data(repeating: 7, count: $0), key: key).value.count }
        #expect(Set(values).count == 1)
        let short = try sealed(Data(), attributes: Array(repeating: 1, count: 40), key: key)
        let long = try sealed(Data(), attributes: Array(repeating: 1, count: 44), key: key)
        #expect(short.attributes.count == long.attributes.count)
    }

    @Test(
        "padded values and attributes open to exactly what was sealed",
        arguments: [0, 1, 31, 32, 33, 127, 128, 4097, 70_000]
    )
    func roundTrip(length: Int) throws {
        let key = ClassKey.generate(.whenUnlocked)
        let secret = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 0x80) })  // may end in 0x80 or 0x00
        var attributes: [UInt8] = []
        appendField(&attributes, tag: 1, Array("acct".utf8))
        appendField(&attributes, tag: 1, Array(repeating: 0, count: length % 300))
        let item = try sealed(secret, attributes: attributes, key: key)
        #expect(try ItemEnvelope.openValue(item, aad: header.encoded(), classKey: key) == secret)
        let opened = try ItemEnvelope.openAttributes(item, aad: header.encoded(), itemID: header.itemID, classKey: key)
        #expect([UInt8](opened) == attributes)
    }

    /// Seals as rows were sealed before padding: no padding, value box `nonce ‖ ciphertext ‖ tag` under
    /// header ‖ SHA-256(attributes ciphertext).
    private func unpaddedRow(_ secret: Data, nonceFirstByte: UInt8, key: ClassKey) throws -> SealedItem {
        let aad = header.encoded()
        let attributesBox = try AEAD.seal([UInt8](), key: key.metadataKey(itemID: header.itemID), aad: aad)
        let itemKey = SymmetricKey(size: .bits256)
        let associated = attributesBox.withUnsafeBytes {
            ItemEnvelope.AssociatedData(header: aad, attributesBox: $0)
        }
        let wrapped = try itemKey.withUnsafeBytes {
            try AES.GCM.seal($0, using: key.symmetricKey, authenticating: associated.wrappedKey).combined!
        }
        let nonce = try AES.GCM.Nonce(data: [nonceFirstByte] + randomBytes(11))
        let value = try AEAD.seal(secret, key: itemKey, aad: associated.value, nonce: nonce)
        return SealedItem(attributes: attributesBox, wrappedKey: wrapped, value: value)
    }

    @Test(
        "rows sealed before padding still open, including one whose nonce starts with the padded format's byte",
        arguments: [UInt8(0x00), 0x02, 0xFF]
    )
    func unpaddedRowsOpen(nonceFirstByte: UInt8) throws {
        let key = ClassKey.generate(.whenUnlocked)
        let secret = Data("s3cr3t\u{0}\u{80}".utf8)
        let row = try unpaddedRow(secret, nonceFirstByte: nonceFirstByte, key: key)
        #expect(try ItemEnvelope.openValue(row, aad: header.encoded(), classKey: key) == secret)
    }

    @Test("a padded value cut to look unpadded, or an unpadded one marked padded, is errSecDecode")
    func formatsCannotBeSwapped() throws {
        let key = ClassKey.generate(.whenUnlocked)
        var padded = try sealed(Data("value".utf8), key: key)
        padded.value = padded.value.dropFirst()
        #expect(throws: KeychainError.self) { try ItemEnvelope.openValue(padded, aad: header.encoded(), classKey: key) }
        var unpadded = try unpaddedRow(Data("value".utf8), nonceFirstByte: 0x00, key: key)
        unpadded.value = Data([2]) + unpadded.value
        #expect(throws: KeychainError.self) {
            try ItemEnvelope.openValue(unpadded, aad: header.encoded(), classKey: key)
        }
    }
}
