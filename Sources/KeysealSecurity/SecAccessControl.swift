import Foundation
import KeysealCore

/// Access-control flags (`SecAccessControlCreateFlags`), Apple's bit values. Keyseal enforces the protection
/// class, and user presence, device passcode and biometry at each use of the item or key (Authentication.swift);
/// constraints it cannot enforce (companion, application password) make an add or update fail with
/// `errSecUnimplemented` rather than be ignored.
public struct SecAccessControlCreateFlags: OptionSet, Sendable {
    public let rawValue: CFOptionFlags
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }

    public static let userPresence = SecAccessControlCreateFlags(rawValue: 1 << 0)
    public static let biometryAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    public static let touchIDAny = biometryAny
    public static let biometryCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    public static let touchIDCurrentSet = biometryCurrentSet
    public static let devicePasscode = SecAccessControlCreateFlags(rawValue: 1 << 4)
    public static let watch = SecAccessControlCreateFlags(rawValue: 1 << 5)
    public static let companion = watch
    public static let or = SecAccessControlCreateFlags(rawValue: 1 << 14)
    public static let and = SecAccessControlCreateFlags(rawValue: 1 << 15)
    public static let privateKeyUsage = SecAccessControlCreateFlags(rawValue: 1 << 30)
    public static let applicationPassword = SecAccessControlCreateFlags(rawValue: 1 << 31)
}

/// An item's access control: its protection (an accessibility class) and flags.
public final class SecAccessControl: AccessControlConvertible, @unchecked Sendable {
    public let protection: String
    public let flags: SecAccessControlCreateFlags

    init(protection: String, flags: SecAccessControlCreateFlags) {
        self.protection = protection
        self.flags = flags
    }

    public var accessibilityCode: String { protection }
    public var flagsRawValue: UInt { flags.rawValue }
}

/// Equal when protection and flags are, as Core Foundation compares Apple's; hashable like every CF type, so that
/// code keeping queries as `[String: AnyHashable]` (Valet) can hold one.
extension SecAccessControl: Hashable {
    public static func == (lhs: SecAccessControl, rhs: SecAccessControl) -> Bool {
        lhs.protection == rhs.protection && lhs.flags.rawValue == rhs.flags.rawValue
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(protection)
        hasher.combine(flags.rawValue)
    }
}

public func SecAccessControlGetTypeID() -> CFTypeID { 0x5eca }

/// Creates an access control. An unknown protection fails with an `NSOSStatusErrorDomain` error.
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?,
    _ protection: CFTypeRef,
    _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    guard let code = protection as? String, Accessibility(rawValue: code) != nil else {
        // Apple's text (SecAccessControl.m: "%@: %@", "SecAccessControl: invalid protection", the protection).
        let failure = KeychainError(KeychainStatus.param, "SecAccessControl: invalid protection: \(protection)")
        error?.pointee = Unmanaged.passRetained(secError(failure))
        return nil
    }
    return SecAccessControl(protection: code, flags: flags)
}

/// `SecRandomCopyBytes`'s generator handle; only the default exists.
public final class SecRandom: @unchecked Sendable {
    init() {}
}

public typealias SecRandomRef = SecRandom
public let kSecRandomDefault: SecRandomRef? = nil

/// Fills `bytes` with `count` cryptographically secure random bytes. Returns 0.
@discardableResult
public func SecRandomCopyBytes(_ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    guard count > 0 else { return errSecSuccess }
    fillRandom(UnsafeMutableRawBufferPointer(start: bytes, count: count))
    return errSecSuccess
}
