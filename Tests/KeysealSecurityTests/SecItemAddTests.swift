import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// docs/COMPATIBILITY.md, "The four calls" (Add) and "What wrappers rely on" 2, 5 and 7, through `SecItemAdd`.
@Suite("SecItemAdd")
struct SecItemAddTests {
    @Test func addWithoutAccessGroupGoesToTheDefaultGroup() throws {
        try withStore { _ in
            var result: CFTypeRef?
            let status = SecItemAdd(genericPassword([kSecReturnAttributes as String: true]) as CFDictionary, &result)
            #expect(status == errSecSuccess)
            #expect((result as? [String: Any])?[kSecAttrAccessGroup] as? String == "default")
        }
    }

    @Test func findReportsTheDefaultGroupOfAnItemAddedWithoutOne() throws {
        try withStore { _ in
            #expect(add(genericPassword()) == errSecSuccess)
            #expect(findAttributes(genericQuery())?[kSecAttrAccessGroup] as? String == "default")
        }
    }

    @Test func duplicatePrimaryKeyIsRefusedEvenWithAnotherAccessibility() throws {
        try withStore { _ in
            #expect(
                add(genericPassword([kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlocked])) == errSecSuccess
            )
            let status = add(
                genericPassword(
                    data: Data("other".utf8),
                    [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock]
                )
            )
            #expect(status == errSecDuplicateItem)
        }
    }

    @Test func duplicateLeavesTheFirstItemUnchanged() throws {
        try withStore { _ in
            #expect(add(genericPassword(data: Data("first".utf8))) == errSecSuccess)
            #expect(add(genericPassword(data: Data("second".utf8))) == errSecDuplicateItem)
            #expect(findData(genericQuery()) == Data("first".utf8))
        }
    }

    @Test func queryWithADifferentAccessibilityFindsNothing() throws {
        try withStore { _ in
            #expect(
                add(genericPassword([kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlocked])) == errSecSuccess
            )
            let status = SecItemCopyMatching(
                genericQuery([kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock]) as CFDictionary,
                nil
            )
            #expect(status == errSecItemNotFound)
        }
    }

    @Test(arguments: [kSecValuePersistentRef as String, kSecValueRef as String])
    func valueReferencesAreRefusedInAnAdd(key: String) throws {
        try withStore { _ in
            #expect(add(genericPassword([key: Data("ksr1-not-a-ref".utf8)])) == errSecParam)
        }
    }

    @Test func whenPasscodeSetItemWithoutPasscodeFailsAuthentication() throws {
        try withStore { _ in
            let status = add(
                genericPassword([kSecAttrAccessible as String: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly])
            )
            #expect(status == errSecAuthFailed)
        }
    }

    @Test func returnKeysOnAddGiveTheItem() throws {
        try withStore { _ in
            var result: CFTypeRef?
            let query = genericPassword(
                data: Data("pw".utf8),
                [kSecReturnAttributes as String: true, kSecReturnData as String: true]
            )
            #expect(SecItemAdd(query as CFDictionary, &result) == errSecSuccess)
            let item = result as? [String: Any]
            #expect(item?[kSecValueData] as? Data == Data("pw".utf8))
            #expect(item?[kSecAttrAccount] as? String == "alice")
            #expect(item?[kSecAttrService] as? String == "svc")
        }
    }

    @Test func addWithoutReturnKeysLeavesTheResultNil() throws {
        try withStore { _ in
            var result: CFTypeRef?
            #expect(SecItemAdd(genericPassword() as CFDictionary, &result) == errSecSuccess)
            #expect(result == nil)
        }
    }

    @Test func missingClassIsAParameterError() throws {
        try withStore { _ in
            var query = genericPassword()
            query[kSecClass] = nil
            #expect(add(query) == errSecParam)
        }
    }

    @Test func unknownClassIsNoSuchClass() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecClass as String: "zzzz"])) == errSecNoSuchClass)
        }
    }

    /// A certificate that is not DER, a key without its class and type, an identity given as data: errSecParam.
    @Test(arguments: [kSecClassCertificate as String, kSecClassKey as String, kSecClassIdentity as String])
    func keyClassesWithBadDataAreParameterErrors(itemClass: String) throws {
        try withStore { _ in
            let query: [String: Any] = [
                kSecClass as String: itemClass, kSecAttrLabel as String: "x", kSecValueData as String: Data([1]),
            ]
            #expect(add(query) == errSecParam)
        }
    }

    @Test(arguments: ["zzzz", kSecAttrServer as String, kSecAttrPort as String])
    func attributeNotOfTheClassIsNoSuchAttr(key: String) throws {
        try withStore { _ in
            #expect(add(genericPassword([key: "x"])) == errSecNoSuchAttr)
        }
    }

    /// The same sizes as through keyseald (RequestValidation): at the limit stored, one byte over errSecDataTooLarge.
    @Test func attributesAndGroupsOverTheirLimitsAreDataTooLarge() throws {
        try withStore { _ in
            let label = String(repeating: "l", count: RequestValidation.attributeLimit)
            #expect(add(genericPassword([kSecAttrLabel as String: label])) == errSecSuccess)
            #expect(
                add(genericPassword([kSecAttrAccount as String: "b", kSecAttrLabel as String: label + "l"]))
                    == errSecDataTooLarge
            )
            #expect(
                add(
                    genericPassword([
                        kSecAttrAccount as String: "c",
                        kSecAttrGeneric as String: Data(count: RequestValidation.attributeLimit + 1),
                    ])
                )
                    == errSecDataTooLarge
            )
            let group = String(repeating: "g", count: RequestValidation.groupLimit + 1)
            #expect(
                add(genericPassword([kSecAttrAccount as String: "d", kSecAttrAccessGroup as String: group]))
                    == errSecDataTooLarge
            )
        }
    }

    @Test(arguments: ["nonsense", "x_Thing", "v_Nothing", "r_Nothing"])
    func unknownNonAttributeKeysAreParameterErrors(key: String) throws {
        try withStore { _ in
            #expect(add(genericPassword([key: true])) == errSecParam)
        }
    }

    @Test func accountAsIntIsAParameterError() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrAccount as String: 42])) == errSecParam)
        }
    }

    @Test func synchronizableAsAStringIsAParameterError() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrSynchronizable as String: "yes"])) == errSecParam)
        }
    }

    @Test func portAsAStringIsAParameterError() throws {
        try withStore { _ in
            let query: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecAttrAccount as String: "alice",
                kSecAttrPort as String: "443", kSecValueData as String: Data("pw".utf8),
            ]
            #expect(add(query) == errSecParam)
        }
    }

    @Test func dataAsAStringIsAParameterError() throws {
        try withStore { _ in
            var query = genericPassword()
            query[kSecValueData] = "secret"
            #expect(add(query) == errSecParam)
        }
    }

    @Test func labelAsDataIsAParameterError() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrLabel as String: Data("l".utf8)])) == errSecParam)
        }
    }

    @Test func valueOverOneMebibyteIsTooLarge() throws {
        try withStore { _ in
            #expect(add(genericPassword(data: Data(repeating: 7, count: (1 << 20) + 1))) == errSecDataTooLarge)
        }
    }

    @Test func valueOfExactlyOneMebibyteRoundTrips() throws {
        try withStore { _ in
            let value = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            #expect(add(genericPassword(data: value)) == errSecSuccess)
            #expect(findData(genericQuery()) == value)
        }
    }

    @Test func emptyDataRoundTrips() throws {
        try withStore { _ in
            #expect(add(genericPassword(data: Data())) == errSecSuccess)
            #expect(findData(genericQuery()) == Data())
        }
    }

    @Test func nonUTF8DataRoundTripsByteExact() throws {
        try withStore { _ in
            let value = Data([0xFF, 0xFE, 0x00, 0xC3, 0x28, 0x80, 0x00, 0xF8])
            #expect(add(genericPassword(data: value)) == errSecSuccess)
            #expect(findData(genericQuery()) == value)
        }
    }

    @Test func addWithoutDataStoresAnEmptySecret() throws {
        try withStore { _ in
            var query = genericPassword()
            query[kSecValueData] = nil
            #expect(add(query) == errSecSuccess)
            #expect(findData(genericQuery()) == Data())
        }
    }

    @Test func accountGivenAsDataIsFoundByTheSameBytesAsAString() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrAccount as String: Data("alice".utf8)])) == errSecSuccess)
            #expect(SecItemCopyMatching(genericQuery(account: "alice") as CFDictionary, nil) == errSecSuccess)
        }
    }

    @Test func serviceGivenAsStringIsFoundByTheSameBytesAsData() throws {
        try withStore { _ in
            #expect(add(genericPassword(service: "svc")) == errSecSuccess)
            let status = SecItemCopyMatching(
                genericQuery([kSecAttrService as String: Data("svc".utf8)]) as CFDictionary,
                nil
            )
            #expect(status == errSecSuccess)
        }
    }

    @Test func genericGivenAsStringOrDataMatchesByBytes() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrGeneric as String: "blob"])) == errSecSuccess)
            let status = SecItemCopyMatching(
                genericQuery([kSecAttrGeneric as String: Data("blob".utf8)]) as CFDictionary,
                nil
            )
            #expect(status == errSecSuccess)
        }
    }

    @Test func accountAsDataAndAsStringWithTheSameBytesAreOnePrimaryKey() throws {
        try withStore { _ in
            #expect(add(genericPassword([kSecAttrAccount as String: "alice"])) == errSecSuccess)
            #expect(add(genericPassword([kSecAttrAccount as String: Data("alice".utf8)])) == errSecDuplicateItem)
        }
    }

    @Test func accessControlSetsTheAccessibilityOnAdd() throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let control = try #require(
                SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleAfterFirstUnlock, [], &error)
            )
            #expect(add(genericPassword([kSecAttrAccessControl as String: control])) == errSecSuccess)
            let accessible = findAttributes(genericQuery())?[kSecAttrAccessible] as? String
            #expect(accessible == kSecAttrAccessibleAfterFirstUnlock)
        }
    }

    @Test(arguments: [SecAccessControlCreateFlags.watch, .applicationPassword])
    func unenforceableAccessControlFlagsAreUnimplementedOnAdd(flags: SecAccessControlCreateFlags) throws {
        try withStore { _ in
            var error: Unmanaged<CFError>?
            let control = try #require(
                SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlocked, flags, &error)
            )
            #expect(add(genericPassword([kSecAttrAccessControl as String: control])) == errSecUnimplemented)
        }
    }

    @Test(.enabled(if: TestBackend.throughDaemon, "the daemon's clock; embedded runs check the test clock"))
    func addThroughTheDaemonReportsTheDaemonsClockTime() throws {
        try withStore { _ in
            let before = Date()
            #expect(add(genericPassword()) == errSecSuccess)
            let after = Date()
            let attributes = findAttributes(genericQuery())
            let created = try #require(attributes?[kSecAttrCreationDate] as? Date)
            #expect(created >= before && created <= after)
            #expect(attributes?[kSecAttrModificationDate] as? Date == created)
        }
    }

    @Test(.disabled(if: TestBackend.throughDaemon, "sets the test clock, which only an embedded engine reads"))
    func addReportsCreationAndModificationDates() throws {
        try withStore { fixture in
            #expect(add(genericPassword()) == errSecSuccess)
            let attributes = findAttributes(genericQuery())
            #expect(attributes?[kSecAttrCreationDate] as? Date == fixture.clock.now)
            #expect(attributes?[kSecAttrModificationDate] as? Date == fixture.clock.now)
        }
    }
}

/// A declared application identifier (KEYSEAL_APPLICATION_ID, or the bundle identifier) is the default access
/// group of an embedded store's adds, as an app's first keychain group is on Apple's platforms; no service is
/// invented for a generic password without one. Through keyseald the identifier is not sent (a client cannot
/// vouch for itself): the daemon's policy decides, and its administrator's default group is `default`.
@Suite("Application identifier")
struct ApplicationIdentifierTests {
    @Test("an embedded add without an access group goes to the declared application's group; no service is invented")
    func defaultGroup() throws {
        try withStore { _ in
            let add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "app",
                kSecValueData as String: Data("v".utf8),
            ]
            let status = ApplicationIdentity.withIdentifier("com.example.app") { SecItemAdd(add as CFDictionary, nil) }
            #expect(status == errSecSuccess)
            var result: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "app",
                kSecReturnAttributes as String: true,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let attributes = result as? [String: Any]
            let expected = TestBackend.throughDaemon ? "default" : "com.example.app"
            #expect(attributes?[kSecAttrAccessGroup as String] as? String == expected)
            #expect(attributes?[kSecAttrService as String] as? String == "")
        }
    }

    @Test("without a declared identifier an embedded add goes to the group `default`")
    func noIdentifier() throws {
        try withStore { _ in
            let status = ApplicationIdentity.withIdentifier(nil) {
                SecItemAdd(genericPassword(account: "plain") as CFDictionary, nil)
            }
            #expect(status == errSecSuccess)
            var result: CFTypeRef?
            let query = genericQuery(account: "plain", [kSecReturnAttributes as String: true])
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect((result as? [String: Any])?[kSecAttrAccessGroup as String] as? String == "default")
        }
    }

    /// The variable as a process sets it: an exit test runs in a child process of its own, so that setting the
    /// environment cannot touch other tests.
    @Test("a process whose environment declares KEYSEAL_APPLICATION_ID adds to that application's group")
    func environmentOfAProcess() async {
        await #expect(processExitsWith: .success) {
            setenv("KEYSEAL_APPLICATION_ID", "com.example.environment", 1)
            let group: String? = try? withStore { _ in
                let add: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "env",
                    kSecValueData as String: Data("v".utf8),
                ]
                guard SecItemAdd(add as CFDictionary, nil) == errSecSuccess else { return nil }
                var result: CFTypeRef?
                let query: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "env",
                    kSecReturnAttributes as String: true,
                ]
                guard SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess else { return nil }
                return (result as? [String: Any])?[kSecAttrAccessGroup as String] as? String
            }
            exit(group == (TestBackend.throughDaemon ? "default" : "com.example.environment") ? 0 : 1)
        }
    }

    @Test("KEYSEAL_APPLICATION_ID is read when set and not empty")
    func environment() {
        let declared = ApplicationIdentity.identifier(environment: ["KEYSEAL_APPLICATION_ID": "com.example.app"])
        #expect(declared == "com.example.app")
        #expect(ApplicationIdentity.identifier(environment: ["KEYSEAL_APPLICATION_ID": ""]) == nil)
        #expect(ApplicationIdentity.identifier(environment: [:]) == nil)
    }
}
