import Foundation
import Keyseal
import KeysealSecurity
import Testing

/// docs/COMPATIBILITY.md, "What wrappers rely on" 10: with no store set up, the SecItem functions answer; without
/// KEYSEAL_SOCKET and KEYSEAL_STORE the default store is the daemon at the default socket path, and with no daemon
/// there the answer is errSecNoSuchKeychain. Runs only when the test process has neither variable and no daemon listens
/// at the default socket.
@Suite(
    "Default store from the environment",
    .enabled(
        if: ProcessInfo.processInfo.environment["KEYSEAL_STORE"] == nil
            && ProcessInfo.processInfo.environment["KEYSEAL_SOCKET"] == nil
            && !FileManager.default.fileExists(atPath: KeychainStore.defaultSocketPath)
    )
)
struct DefaultStoreTests {
    @Test func addWithoutADaemonIsNoSuchKeychain() {
        #expect(SecItemAdd(genericPassword() as CFDictionary, nil) == errSecNoSuchKeychain)
    }

    @Test func findWithoutADaemonIsNoSuchKeychain() {
        #expect(SecItemCopyMatching(genericQuery() as CFDictionary, nil) == errSecNoSuchKeychain)
    }

    @Test func updateWithoutADaemonIsNoSuchKeychain() {
        let status = SecItemUpdate(genericQuery() as CFDictionary, [kSecValueData: Data()] as CFDictionary)
        #expect(status == errSecNoSuchKeychain)
    }

    @Test func deleteWithoutADaemonIsNoSuchKeychain() {
        #expect(SecItemDelete(genericQuery() as CFDictionary) == errSecNoSuchKeychain)
    }
}
