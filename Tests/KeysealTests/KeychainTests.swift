import Foundation
import Keyseal
import KeysealTestSupport
import Testing

@Suite("Keychain (Swifty API)")
struct KeychainTests {
    @Test func setGetRoundTripAndUpsert() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let keychain = Keychain(service: "com.example", store: fixture.store)
        try keychain.set("one", key: "token")
        try keychain.set("two", key: "token")
        #expect(try keychain.get("token") == "two")
        #expect(try keychain.allKeys() == ["token"])
    }

    @Test func getOfAnAbsentKeyIsNil() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let keychain = Keychain(service: "com.example", store: fixture.store)
        #expect(try keychain.get("missing") == nil)
        #expect(try keychain.getData("missing") == nil)
        #expect(try keychain.contains("missing") == false)
    }

    @Test func getWhileLockedThrowsInteractionNotAllowed() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let keychain = Keychain(service: "com.example", store: fixture.store)
        try keychain.set("v", key: "k")
        try fixture.store.setPasscode("pw")
        try fixture.store.lock()
        #expect(throws: KeychainError.interactionNotAllowed) { _ = try keychain.get("k") }
    }

    @Test func afterFirstUnlockItemsStayReadableWhenLocked() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        let keychain = Keychain(service: "com.example", store: fixture.store).accessibility(.afterFirstUnlock)
        try keychain.set("v", key: "k")
        try fixture.store.lock()
        #expect(try keychain.get("k") == "v")
    }

    @Test func labelsAndCommentsAreStored() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try Keychain(service: "s", store: fixture.store).label("L").comment("C").set("v", key: "k")
        let record = try #require(
            try fixture.store.copyMatching(.password(service: "s", account: "k", returns: .attributes)).first
        )
        #expect(record.string(AttributeKey.label) == "L")
        #expect(record.string(AttributeKey.comment) == "C")
        #expect(record.accessibility == .whenUnlocked)
    }

    @Test func upsertChangesTheAccessibility() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let keychain = Keychain(service: "s", store: fixture.store)
        try keychain.set("v", key: "k")
        try keychain.accessibility(.always).set("w", key: "k")
        let record = try #require(
            try fixture.store.copyMatching(.password(service: "s", account: "k", returns: .attributes)).first
        )
        #expect(record.accessibility == .always)
    }

    @Test func removeAndRemoveAll() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let keychain = Keychain(service: "s", store: fixture.store)
        let other = Keychain(service: "other", store: fixture.store)
        for key in ["a", "b", "c"] { try keychain.set(key, key: key) }
        try other.set("x", key: "a")
        try keychain.remove("b")
        try keychain.remove("b")
        #expect(try keychain.allKeys() == ["a", "c"])
        try keychain.removeAll()
        #expect(try keychain.allKeys() == [])
        #expect(try other.get("a") == "x")
    }

    @Test func nonUTF8DataIsAvailableAsDataAndRefusedAsText() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let keychain = Keychain(service: "s", store: fixture.store)
        let bytes = Data([0xff, 0x00, 0xfe])
        try keychain.set(bytes, key: "bin")
        #expect(try keychain.getData("bin") == bytes)
        #expect(throws: KeychainError.decode) { _ = try keychain.get("bin") }
    }

    @Test func accessGroupsSeparateItems() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try Keychain(service: "s", accessGroup: "team.a", store: fixture.store).set("a", key: "k")
        try Keychain(service: "s", accessGroup: "team.b", store: fixture.store).set("b", key: "k")
        #expect(try Keychain(service: "s", accessGroup: "team.a", store: fixture.store).get("k") == "a")
        #expect(try Keychain(service: "s", accessGroup: "team.b", store: fixture.store).get("k") == "b")
        #expect(try Keychain(service: "s", store: fixture.store).allKeys() == ["k", "k"])
    }

    @Test func aLookupWithoutAGroupFindsGroupsStoredBeforeAnAddInAnotherGroup() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try Keychain(service: "s", accessGroup: "team.a", store: fixture.store).set("a", key: "k")
        try fixture.reopen()
        // The first call after opening adds into another group; the lookup that follows names no group.
        try Keychain(service: "s", accessGroup: "team.b", store: fixture.store).set("b", key: "other")
        #expect(try Keychain(service: "s", store: fixture.store).get("k") == "a")
    }

    @Test func groupsSpelledWithDifferentBytesAreTwoGroups() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let composed = "caf\u{E9}"  // é as one scalar
        let decomposed = "cafe\u{301}"  // e and a combining accent: equal as Swift strings, other bytes
        try Keychain(service: "s", accessGroup: composed, store: fixture.store).set("a", key: "k")
        try Keychain(service: "s", accessGroup: decomposed, store: fixture.store).set("b", key: "k")
        #expect(try Keychain(service: "s", store: fixture.store).allKeys() == ["k", "k"])
    }

    @Test func aGroupWithANULByteRoundTrips() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let keychain = Keychain(service: "s", accessGroup: "team\u{0}x", store: fixture.store)
        try keychain.set("a", key: "k")
        #expect(try keychain.get("k") == "a")
        #expect(try Keychain(service: "s", accessGroup: "team", store: fixture.store).get("k") == nil)
    }

    @Test func closedStoreIsNotAvailable() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        fixture.store.close()
        #expect(throws: KeychainError.notAvailable) { _ = try Keychain(service: "s", store: fixture.store).get("k") }
    }

    /// SECURITY-MODEL.md "What the file alone reveals": lengths only to a size bucket.
    @Test func theFileShowsSecretAndNameLengthsOnlyToASizeBucket() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        // Secrets of 1 to 31 bytes, accounts of 1 to 31 characters: unpadded, 31 lengths of each.
        for length in 1...31 {
            _ = try fixture.store.add(
                .password(
                    service: "s",
                    account: String(repeating: "a", count: length),
                    secret: String(repeating: "x", count: length)
                )
            )
        }
        let values = try fixture.sqlOnDisk("SELECT count(DISTINCT length(value)) FROM items")
        let attributes = try fixture.sqlOnDisk("SELECT count(DISTINCT length(attrs)) FROM items")
        #expect(values == "1")
        #expect(Int(attributes) ?? 99 <= 2, "\(attributes) attribute ciphertext lengths")
        #expect(
            try fixture.store.copyMatching(.password(service: "s", account: "aaa", returns: .data)).first?.data
                == Data("xxx".utf8)
        )
    }
}
