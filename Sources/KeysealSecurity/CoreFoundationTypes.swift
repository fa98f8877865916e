import Foundation

@_exported import typealias KeysealCore.OSStatus

// Core Foundation's names for the Swift types that carry keychain queries and results on Linux.

public typealias CFTypeRef = AnyObject
public typealias CFDictionary = [String: Any]
public typealias CFMutableDictionary = [String: Any]
public typealias CFString = String
public typealias CFData = Data
public typealias CFArray = [Any]
/// A class, as on Apple (where `CFBoolean` bridges to `NSNumber`): wrappers put `kCFBooleanTrue` into
/// `[String: AnyObject]` queries and compare a `CFNumber` attribute with it.
public typealias CFBoolean = NSNumber
public typealias CFNumber = NSNumber
public typealias CFDate = Date
public typealias CFOptionFlags = UInt
public typealias CFIndex = Int
public typealias CFError = NSError
public typealias CFErrorDomain = String

/// Core Foundation's allocator: accepted and ignored.
public final class CFAllocator: @unchecked Sendable {
    init() {}
}

public let kCFAllocatorDefault: CFAllocator? = nil
/// Apple declares both `CFBoolean!`, so that Apple code writes `kCFBooleanTrue!` (and that compiles here too).
public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)

/// Core Foundation's Info.plist key for the bundle identifier, which wrappers read for a default service name.
public let kCFBundleIdentifierKey: CFString = "CFBundleIdentifier"

/// MacTypes' name for success, which Apple code often compares statuses with.
public let noErr: OSStatus = 0

/// Core Foundation's type identifiers: distinct constants here (Apple's are assigned at run time), so that Apple
/// code's `CFGetTypeID(ref) == SecKeyGetTypeID()` checks work.
public typealias CFTypeID = UInt

public func CFStringGetTypeID() -> CFTypeID { 7 }
public func CFDataGetTypeID() -> CFTypeID { 20 }
public func CFArrayGetTypeID() -> CFTypeID { 19 }
public func CFDictionaryGetTypeID() -> CFTypeID { 18 }
public func CFBooleanGetTypeID() -> CFTypeID { 21 }
public func CFNumberGetTypeID() -> CFTypeID { 22 }
public func CFDateGetTypeID() -> CFTypeID { 42 }
public func CFErrorGetTypeID() -> CFTypeID { 46 }

/// The type of a Core Foundation object: a Security object, or the Foundation object a CF type bridges to.
public func CFGetTypeID(_ cf: CFTypeRef!) -> CFTypeID {
    switch cf {
    case is SecKey: SecKeyGetTypeID()
    case is SecCertificate: SecCertificateGetTypeID()
    case is SecIdentity: SecIdentityGetTypeID()
    case is SecAccessControl: SecAccessControlGetTypeID()
    case is NSError: CFErrorGetTypeID()
    case is NSData: CFDataGetTypeID()
    case is NSString: CFStringGetTypeID()
    case is NSDictionary: CFDictionaryGetTypeID()
    case is NSArray: CFArrayGetTypeID()
    case is NSDate: CFDateGetTypeID()
    case let number as NSNumber:
        String(cString: number.objCType) == "c" ? CFBooleanGetTypeID() : CFNumberGetTypeID()
    default: 0
    }
}

public func CFErrorGetDomain(_ error: CFError) -> CFErrorDomain { error.domain }
public func CFErrorGetCode(_ error: CFError) -> CFIndex { error.code }
public func CFErrorCopyUserInfo(_ error: CFError) -> CFDictionary? { error.userInfo }
