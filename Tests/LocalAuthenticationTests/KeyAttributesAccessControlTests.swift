import Foundation
import KeysealSecurity
import KeysealTestSupport
import LocalAuthentication
import Testing

extension LocalAuthenticationSuites {
    @Suite("SecKeyCopyAttributes gives a key's access control as a SecAccessControl")
    struct KeyAttributesAccessControlTests {
        @Test(
            "kSecAttrAccessControl is a SecAccessControl with the key's flags and protection, stored or not",
            arguments: [false, true]
        )
        func accessControlIsAnObject(permanent: Bool) throws {
            try withPasscodeStore(on: .hostKey) { _ in
                let key = try makeProtectedKey(inHardware: false, permanent: permanent)
                let attributes = try #require(SecKeyCopyAttributes(key) as? [String: Any])
                // Apple code reads it with `as! SecAccessControl`; an Int there traps.
                let control = try #require(attributes[kSecAttrAccessControl as String] as? SecAccessControl)
                #expect(control.flags == .userPresence)
                #expect(control.protection == kSecAttrAccessibleWhenUnlockedThisDeviceOnly as String)
                #expect(
                    attributes[kSecAttrAccessible as String] as? String
                        == kSecAttrAccessibleWhenUnlockedThisDeviceOnly as String
                )
            }
        }
    }
}
