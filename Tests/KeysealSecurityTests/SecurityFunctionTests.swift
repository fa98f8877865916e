import Foundation
import Keyseal
import KeysealSecurity
import Testing

/// The Security functions besides the four SecItem calls: error messages, randomness, access control.
@Suite("Security functions")
struct SecurityFunctionTests {
    @Test func errorMessageForNotFoundIsApples() {
        #expect(
            SecCopyErrorMessageString(errSecItemNotFound, nil)
                == "The specified item could not be found in the keychain."
        )
    }

    @Test func errorMessageForDuplicateIsApples() {
        #expect(
            SecCopyErrorMessageString(errSecDuplicateItem, nil)
                == "The specified item already exists in the keychain."
        )
    }

    @Test func errorMessageForAnUnknownStatusIsNotNil() {
        #expect(SecCopyErrorMessageString(-1_234_567, nil) != nil)
    }

    @Test func randomCopyBytesReturnsSuccess() {
        var bytes = [UInt8](repeating: 0, count: 32)
        let status = bytes.withUnsafeMutableBytes { SecRandomCopyBytes(kSecRandomDefault, 32, $0.baseAddress!) }
        #expect(status == errSecSuccess)
    }

    @Test func randomCopyBytesFillsTheBuffer() {
        var first = [UInt8](repeating: 0, count: 64)
        var second = [UInt8](repeating: 0, count: 64)
        _ = first.withUnsafeMutableBytes { SecRandomCopyBytes(kSecRandomDefault, 64, $0.baseAddress!) }
        _ = second.withUnsafeMutableBytes { SecRandomCopyBytes(kSecRandomDefault, 64, $0.baseAddress!) }
        #expect(first != [UInt8](repeating: 0, count: 64))
        #expect(first != second)
    }

    @Test func randomCopyBytesWritesOnlyCountBytes() {
        var bytes = [UInt8](repeating: 0xAA, count: 16)
        _ = bytes.withUnsafeMutableBytes { SecRandomCopyBytes(kSecRandomDefault, 8, $0.baseAddress!) }
        #expect(bytes[8...] == [UInt8](repeating: 0xAA, count: 8)[...])
    }

    @Test func accessControlWithABadProtectionFailsWithParam() throws {
        var error: Unmanaged<CFError>?
        let control = SecAccessControlCreateWithFlags(kCFAllocatorDefault, "bogus" as CFString, [], &error)
        #expect(control == nil)
        let failure = try #require(error?.takeRetainedValue())
        #expect(CFErrorGetCode(failure) == Int(errSecParam))
    }

    @Test func accessControlWithABadProtectionFailsInTheOSStatusDomain() throws {
        var error: Unmanaged<CFError>?
        _ = SecAccessControlCreateWithFlags(kCFAllocatorDefault, 42 as CFTypeRef, [], &error)
        let failure = try #require(error?.takeRetainedValue())
        #expect(CFErrorGetDomain(failure) == "NSOSStatusErrorDomain")
    }

    @Test func accessControlKeepsItsProtectionAndFlags() throws {
        var error: Unmanaged<CFError>?
        let control = try #require(
            SecAccessControlCreateWithFlags(
                kCFAllocatorDefault,
                kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                [.userPresence],
                &error
            )
        )
        #expect(control.protection == kSecAttrAccessibleWhenUnlockedThisDeviceOnly)
        #expect(control.flags == .userPresence)
        #expect(error == nil)
    }

    @Test func accessControlAcceptsTheProtectionAsACFTypeRef() throws {
        var error: Unmanaged<CFError>?
        let protection = kSecAttrAccessibleAfterFirstUnlock as CFTypeRef
        let control = try #require(SecAccessControlCreateWithFlags(kCFAllocatorDefault, protection, [], &error))
        #expect(control.protection == kSecAttrAccessibleAfterFirstUnlock)
    }

    @Test func accessControlFlagsHaveApplesBits() {
        #expect(SecAccessControlCreateFlags.userPresence.rawValue == 1 << 0)
        #expect(SecAccessControlCreateFlags.biometryAny.rawValue == 1 << 1)
        #expect(SecAccessControlCreateFlags.biometryCurrentSet.rawValue == 1 << 3)
        #expect(SecAccessControlCreateFlags.devicePasscode.rawValue == 1 << 4)
        #expect(SecAccessControlCreateFlags.watch.rawValue == 1 << 5)
        #expect(SecAccessControlCreateFlags.or.rawValue == 1 << 14)
        #expect(SecAccessControlCreateFlags.and.rawValue == 1 << 15)
        #expect(SecAccessControlCreateFlags.privateKeyUsage.rawValue == 1 << 30)
        #expect(SecAccessControlCreateFlags.applicationPassword.rawValue == 1 << 31)
    }
}
