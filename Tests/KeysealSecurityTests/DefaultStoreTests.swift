import Foundation
import Keyseal
import KeysealSecurity
import Testing

/// SECURITY-COMPAT.md Semantics 10: with no store set up, the SecItem functions answer; without KEYSEAL_STORE
/// the answer is errSecNotAvailable. Runs only when the test process has no KEYSEAL_STORE.
@Suite("Default store from the environment", .enabled(if: ProcessInfo.processInfo.environment["KEYSEAL_STORE"] == nil))
struct DefaultStoreTests {
    @Test func addWithoutAConfiguredStoreIsNotAvailable() {
        #expect(SecItemAdd(genericPassword() as CFDictionary, nil) == errSecNotAvailable)
    }

    @Test func findWithoutAConfiguredStoreIsNotAvailable() {
        #expect(SecItemCopyMatching(genericQuery() as CFDictionary, nil) == errSecNotAvailable)
    }

    @Test func updateWithoutAConfiguredStoreIsNotAvailable() {
        let status = SecItemUpdate(genericQuery() as CFDictionary, [kSecValueData: Data()] as CFDictionary)
        #expect(status == errSecNotAvailable)
    }

    @Test func deleteWithoutAConfiguredStoreIsNotAvailable() {
        #expect(SecItemDelete(genericQuery() as CFDictionary) == errSecNotAvailable)
    }
}
