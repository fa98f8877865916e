import Crypto
import Foundation
import KeysealCore
import Testing

@Suite("Key derivation and encodings")
struct CoreTests {
    @Test func metadataKeyIsHKDFOfTheClassKey() throws {
        let secret = SecretBytes.random(count: 32)
        let classKey = ClassKey(accessibility: .whenUnlocked, secret: secret)
        let itemID = randomBytes(16)
        let expected = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: secret),
            info: Array("metadata".utf8) + itemID,
            outputByteCount: 32
        )
        let derived = classKey.metadataKey(itemID: itemID)
        #expect(derived.withUnsafeBytes { Array($0) } == expected.withUnsafeBytes { Array($0) })
    }

    @Test func digestsOfDifferentTuplesDiffer() {
        let index = IndexKey(SecretBytes.random(count: 32))
        // Length prefixes keep ("ab", "c") apart from ("a", "bc").
        let one = index.primaryKeyDigest(
            group: "g",
            itemClass: .genericPassword,
            attributes: [AttributeKey.account: .string("ab"), AttributeKey.service: .string("c")],
            synchronizable: false
        )
        let two = index.primaryKeyDigest(
            group: "g",
            itemClass: .genericPassword,
            attributes: [AttributeKey.account: .string("a"), AttributeKey.service: .string("bc")],
            synchronizable: false
        )
        #expect(one != two)
        let otherGroup = index.primaryKeyDigest(
            group: "h",
            itemClass: .genericPassword,
            attributes: [AttributeKey.account: .string("ab"), AttributeKey.service: .string("c")],
            synchronizable: false
        )
        #expect(one != otherGroup)
    }

    /// Stored digests must not change between versions: both digests are HMAC-SHA256(IX, …) over the encoding of
    /// docs/STORE-FORMAT.md, F(tag, bytes) = tag ‖ 32-bit big-endian length ‖ bytes.
    @Test func digestsAreTheDocumentedEncoding() {
        let key = randomBytes(32)
        let index = IndexKey(SecretBytes(copying: Data(key)))
        func field(_ tag: UInt8, _ bytes: [UInt8]) -> [UInt8] {
            [tag] + withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { Array($0) } + bytes
        }
        func hmac(_ message: [UInt8]) -> Data {
            Data(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
        }
        let prefix = field(1, Array("team".utf8)) + field(2, Array("genp".utf8))
        #expect(
            index.attributeDigest(group: "team", itemClass: .genericPassword, key: "acct", value: .string("ann"))
                == hmac(prefix + field(3, Array("acct".utf8)) + field(4, Array("ann".utf8)))
        )
        #expect(
            index.attributeDigest(
                group: "team",
                itemClass: .genericPassword,
                key: "svce",
                value: .data(Data([0, 255]))
            )
                == hmac(prefix + field(3, Array("svce".utf8)) + field(4, [0, 255]))
        )
        let whole =
            prefix + field(3, Array("acct".utf8)) + field(4, Array("ann".utf8)) + field(3, Array("svce".utf8))
            + field(4, []) + field(3, Array("sync".utf8)) + field(5, [1])
        #expect(
            index.primaryKeyDigest(
                group: "team",
                itemClass: .genericPassword,
                attributes: [AttributeKey.account: .string("ann")],
                synchronizable: true
            ) == hmac(whole)
        )
    }

    @Test func stringAndDataOfTheSameBytesHaveTheSameDigest() {
        let index = IndexKey(SecretBytes.random(count: 32))
        let text = index.attributeDigest(group: "g", itemClass: .genericPassword, key: "acct", value: .string("x"))
        let data = index.attributeDigest(
            group: "g",
            itemClass: .genericPassword,
            key: "acct",
            value: .data(Data("x".utf8))
        )
        #expect(text == data)
    }

    @Test func attributeEncodingRoundTrips() throws {
        let attributes: [String: AttributeValue] = [
            "acct": .string("ålice"), "gena": .data(Data([0, 255])), "sync": .bool(true), "port": .int(-443),
            "cdat": .date(Date(timeIntervalSinceReferenceDate: 12345.678)),
        ]
        #expect(try AttributeCodec.decode(Data(AttributeCodec.encode(attributes))) == attributes)
    }

    @Test func truncatedAttributeEncodingIsDecodeError() {
        let encoded = AttributeCodec.encode(["acct": .string("alice")])
        #expect(throws: KeychainError.decode) { _ = try AttributeCodec.decode(Data(encoded.dropLast())) }
    }

    @Test func itemHeaderEncodesAsVersionThenLengthPrefixedFields() {
        let header = ItemHeader(
            storeID: [1, 2, 3],
            itemID: [4, 5],
            itemClass: "genp",
            accessGroup: "tëam",
            accessibility: "ak",
            primaryKeyDigest: Data([6, 7, 8]),
            digests: [Data([9]), nil, Data()],
            generation: 258
        )
        // The layout stored items were sealed with (docs/ARCHITECTURE.md, "Store and search digests"): tag, 32-bit
        // big-endian length, bytes.
        func field(_ tag: UInt8, _ bytes: [UInt8]) -> [UInt8] {
            [tag, 0, 0, UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
        }
        var expected: [UInt8] = [1]
        expected += field(1, [1, 2, 3]) + field(2, [4, 5]) + field(3, Array("genp".utf8))
        expected += field(4, Array("tëam".utf8)) + field(5, Array("ak".utf8)) + field(6, [6, 7, 8])
        expected += field(7, [9]) + field(8, []) + field(7, [])
        expected += field(9, [0, 0, 0, 0, 0, 0, 1, 2])
        #expect(header.encoded() == expected)
    }

    @Test(arguments: ItemClass.allCases)
    func eachClassKindTableHoldsExactlyItsAllowedAttributes(itemClass: ItemClass) {
        let kinds = AttributeKey.kinds(for: itemClass)
        #expect(Set(kinds.keys) == AttributeKey.allowed(for: itemClass))
        // A key's `type` (its key type) and `crtr` stay strings; elsewhere they are four-character codes.
        let keyStrings: Set<String> =
            itemClass == .key || itemClass == .identity ? [AttributeKey.type, AttributeKey.creator] : []
        for (key, kind) in kinds {
            #expect(kind == (keyStrings.contains(key) ? .string : AttributeKey.kinds[key] ?? .string), "\(key)")
        }
    }

    @Test func classesAndAccessibilitiesAreEqualAndHashedByCase() {
        #expect(Set(Accessibility.allCases).count == Accessibility.allCases.count)
        #expect(Set(ItemClass.allCases).count == ItemClass.allCases.count)
        for accessibility in Accessibility.allCases {
            #expect(Accessibility(rawValue: accessibility.rawValue) == accessibility)
            #expect(Accessibility(rawValue: accessibility.rawValue)?.hashValue == accessibility.hashValue)
            #expect(Accessibility.allCases.filter { $0 == accessibility }.count == 1)
        }
        for itemClass in ItemClass.allCases {
            #expect(ItemClass(rawValue: itemClass.rawValue) == itemClass)
            #expect(ItemClass.allCases.filter { $0 == itemClass }.count == 1)
        }
    }

    @Test func secretsNeverPrint() {
        let secret = SecretBytes(utf8: "hunter2")
        #expect("\(secret)" == "<redacted 7 bytes>")
        #expect(!String(reflecting: secret).contains("hunter2"))
    }

    @Test func lockStatesFollowTheTable() {
        #expect(LockState.locked.allows(.afterFirstUnlock, passcodeSet: true))
        #expect(!LockState.locked.allows(.whenUnlocked, passcodeSet: true))
        #expect(LockState.beforeFirstUnlock.allows(.alwaysThisDeviceOnly, passcodeSet: true))
        #expect(!LockState.beforeFirstUnlock.allows(.afterFirstUnlockThisDeviceOnly, passcodeSet: true))
        #expect(!LockState.unlocked.allows(.whenPasscodeSetThisDeviceOnly, passcodeSet: false))
    }

    @Test(arguments: ["ak", "when-unlocked", "kSecAttrAccessibleWhenUnlocked"])
    func accessibilityParsesEveryName(name: String) {
        #expect(Accessibility(parsing: name) == .whenUnlocked)
    }
}
