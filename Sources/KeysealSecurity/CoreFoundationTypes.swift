import Foundation
import KeysealCore

@_exported import typealias KeysealCore.OSStatus

// Core Foundation's names for the Swift types that carry keychain queries and results on Linux.

public typealias CFTypeRef = AnyObject
/// What Apple code converts its queries to with `as CFDictionary`: Swift dictionaries keyed by `String`, `String?`
/// (`String!`) or `CFString` all do. Not `NSDictionary`, which would make every call bridge each key to an `NSString`
/// and back (3.1 µs a call against 0.74 µs here, measured with swiftc -O on 4-entry queries; an embedded lookup takes
/// about 10 µs); an `NSDictionary` converts with `as! CFDictionary`.
public typealias CFDictionary = [AnyHashable: Any]
public typealias CFMutableDictionary = [AnyHashable: Any]
/// An object, as on Apple (where `CFString` bridges to `NSString`): the `kSec…` constants pass where `AnyObject` is
/// taken, and convert to `String` with `as String` or `String(_:)`.
public typealias CFString = NSString
public typealias CFData = Data
/// An object, as on Apple (where `CFArray` bridges to `NSArray`): the arrays Security returns (`SecPKCS12Import`'s
/// items) read with `as? [[String: Any]]`, `as NSArray` or `unsafeBitCast(_:to: NSArray.self)`, as there. Only
/// results are arrays, so the bridging costs nothing on a hot path; a Swift array converts with `NSArray(array:)`.
public typealias CFArray = NSArray
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
nonisolated(unsafe) public let kCFBundleIdentifierKey: CFString = "CFBundleIdentifier"

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

// MARK: - NSString keys and String keys

/// An `NSString` becomes a `String` when it becomes an `AnyHashable`, as on Apple (where `NSString` conforms so through
/// the Objective-C bridge): `AnyHashable(kSecAttrAccount) == AnyHashable("acct")`, with the same hash. So a result
/// dictionary keyed by `String` answers `result[kSecAttrAccount]` in `[AnyHashable: Any]` (`CFDictionary`), a query
/// keyed by `CFString` reaches Security as `String` keys, and `NSDictionary.isEqual(to:)` finds a `String` key of the
/// other dictionary under the `NSString` it holds. swift-corelibs-foundation keeps an `NSString` as itself, so without
/// this neither lookup crosses over (docs/COMPATIBILITY.md).
///
/// Process-wide, as on Apple: every `AnyHashable` of an `NSString` in a program that links KeysealSecurity holds a
/// `String`. An `NSString` made from a Swift string (every `kSec…` constant) hands back its own `String`, so the
/// conversion copies nothing.
extension NSString: @retroactive _HasCustomAnyHashableRepresentation {
    public func _toCustomAnyHashable() -> AnyHashable? { AnyHashable(self as String) }
}

// MARK: - Apple's dictionaries and names inside this package

/// The `[String: Any]` a `CFDictionary` carries. A key that is not a string (`String`, or a `CFString`, which its
/// `AnyHashable` holds as a `String`) is errSecParam.
package func swiftDictionary(_ dictionary: CFDictionary) throws(KeychainError) -> [String: Any] {
    var result = [String: Any](minimumCapacity: dictionary.count)
    for (key, value) in dictionary {
        guard let name = key.base as? String else {
            throw KeychainError(KeychainStatus.param, "a dictionary key is not a string: \(type(of: key.base))")
        }
        result[name] = value
    }
    return result
}

extension Dictionary where Key == String {
    /// A `[String: Any]` read and written with Apple's `CFString` names, as Keyseal's own code does.
    package subscript(_ name: CFString) -> Value? {
        get { self[name as String] }
        set { self[name as String] = newValue }
    }
}

/// A `String` matched against one of Apple's `CFString` names (`case kSecClassKey:`).
package func ~= (pattern: CFString, value: String) -> Bool { value == pattern as String }

package func == (lhs: String?, rhs: CFString) -> Bool { lhs == rhs as String }
