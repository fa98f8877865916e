import Foundation

@_exported import typealias KeysealCore.OSStatus

// Core Foundation's names for the Swift types that carry keychain queries and results on Linux.

public typealias CFTypeRef = AnyObject
public typealias CFDictionary = [String: Any]
public typealias CFMutableDictionary = [String: Any]
public typealias CFString = String
public typealias CFData = Data
public typealias CFArray = [Any]
public typealias CFBoolean = Bool
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
public let kCFBooleanTrue: Bool = true
public let kCFBooleanFalse: Bool = false

public func CFErrorGetDomain(_ error: CFError) -> CFErrorDomain { error.domain }
public func CFErrorGetCode(_ error: CFError) -> CFIndex { error.code }
public func CFErrorCopyUserInfo(_ error: CFError) -> CFDictionary? { error.userInfo }
