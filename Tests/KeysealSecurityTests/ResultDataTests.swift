import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// The object a data result carries: an `NSData` that must behave as one for every client idiom, byte-exact.
@Suite("SecItem data results as NSData")
struct ResultDataTests {
    static let values: [Data] = [
        Data(), Data([0]), Data([0xFF, 0xFE, 0x00, 0x80]), Data("pw".utf8),
        Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) }),
    ]

    @Test("a bare data result bridges back to the stored bytes", arguments: values)
    func bareResult(value: Data) throws {
        try withStore { _ in
            #expect(add(genericPassword(account: "a", data: value)) == errSecSuccess)
            let (status, result) = copyMatching(genericQuery(account: "a", [kSecReturnData as String: true]))
            #expect(status == errSecSuccess)
            let object = try #require(result)
            #expect(object as? Data == value)
            let data = try #require(object as? NSData)
            #expect(data.length == value.count)
            #expect(Data(bytes: data.bytes, count: data.length) == value)
            #expect(data.isEqual(to: value))
            #expect(data.base64EncodedString() == value.base64EncodedString())
        }
    }

    @Test("copies of a result are independent of it")
    func copies() throws {
        try withStore { _ in
            let value = Data("secret-value".utf8)
            #expect(add(genericPassword(account: "a", data: value)) == errSecSuccess)
            var (_, result) = copyMatching(genericQuery(account: "a", [kSecReturnData as String: true]))
            let data = try #require(result as? NSData)
            let copy = data.copy() as? NSData
            let mutable = try #require(data.mutableCopy() as? NSMutableData)
            mutable.append(Data([1]))
            let bridged = result as? Data
            result = nil
            #expect(copy as? Data == value)
            #expect(mutable.length == value.count + 1)
            #expect(bridged == value)
            #expect(data.subdata(with: NSRange(location: 0, length: 6)) == Data("secret".utf8))
        }
    }

    @Test("a result archives and unarchives as plain NSData")
    func archiving() throws {
        try withStore { _ in
            let value = Data([0x00, 0xC3, 0x28, 0xFF])
            #expect(add(genericPassword(account: "a", data: value)) == errSecSuccess)
            let (_, result) = copyMatching(genericQuery(account: "a", [kSecReturnData as String: true]))
            let object = try #require(result)
            let archive = try NSKeyedArchiver.archivedData(withRootObject: object, requiringSecureCoding: true)
            let decoded = try NSKeyedUnarchiver.unarchivedObject(ofClass: NSData.self, from: archive)
            #expect(decoded.map { Data(referencing: $0) } == value)
        }
    }

    @Test("v_Data in a result dictionary, and data in a result array, bridge to Data")
    func inContainers() throws {
        try withStore { _ in
            let values = [Data([0xC3, 0x28]), Data()]
            for (index, value) in values.enumerated() {
                #expect(add(genericPassword(account: "a\(index)", data: value)) == errSecSuccess)
            }
            let attributes = findAll(genericQuery(account: nil))
            // An empty value is stored as no value, and a dictionary has no v_Data for none, as Apple's has none for
            // an item added without kSecValueData (PortedProjectTests.itemWithoutValueHasNoValueData).
            #expect(attributes.map { $0[kSecValueData] as? Data } == [values[0], nil])
            let (_, array) = copyMatching(
                genericQuery(
                    account: nil,
                    [kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitAll]
                )
            )
            #expect(array as? [Data] == values)
        }
    }
}
