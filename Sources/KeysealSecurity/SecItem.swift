import Foundation
import Keyseal
import KeysealCore

// The four SecItem calls over `KeychainStore.default`, with Apple's statuses and result shapes.

/// Adds an item. Returns the item per the return keys when `result` is given.
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    _ = bundleIdentifierInstalled
    return secItemCall {
        let store = KeychainStore.default
        guard let attributes = try ValueRefs.add(swiftDictionary(attributes), store: store) else { return }
        let item = try DictionaryRequests.add(attributes)
        try checkSize(item.data, store)
        let record = try store.add(item)
        if let result, let record {
            result.pointee = DictionaryRequests.result(
                [record],
                returns: item.returns,
                limit: .one,
                accessControl: makeAccessControl
            )
        }
    }
}

/// Finds items. One return key gives the bare value, several a dictionary per item; a limit above one gives an
/// array. With no return key only the status says whether something matched.
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    result?.pointee = nil
    return secItemCall {
        let dictionary = try swiftDictionary(query)
        let authentication = ItemAuthenticationRunner.options(dictionary)
        var parsed = try DictionaryRequests.query(ValueRefs.query(dictionary))
        let refs = parsed.returns.contains(.ref) && ![.genericPassword, .internetPassword].contains(parsed.itemClass)
        if (!parsed.returns.effective.isEmpty || refs) && result == nil {
            throw KeychainError(KeychainStatus.param, "a return key was given without a result pointer")
        }
        let returns = parsed.returns
        parsed.returns = ValueRefs.engineReturns(parsed)
        let store = KeychainStore.default
        let records = try ItemAuthenticationRunner.run(authentication) { try store.copyMatching(parsed) }
        if refs, let result {
            result.pointee = try ValueRefs.result(
                records,
                returns: returns,
                limit: parsed.limit,
                store: store,
                accessControl: makeAccessControl
            )
            ItemAuthenticationRunner.attach(result.pointee, authentication)
        } else if let result {
            result.pointee = DictionaryRequests.result(
                records,
                returns: parsed.returns,
                limit: parsed.limit,
                accessControl: makeAccessControl
            )
        }
    }
}

/// Changes every item that matches `query`.
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    secItemCall {
        var parsed = try DictionaryRequests.query(ValueRefs.query(swiftDictionary(query)))
        if !parsed.returns.isEmpty {
            throw KeychainError(KeychainStatus.param, "return keys have no meaning in an update query")
        }
        parsed.limit = .all
        let changes = try DictionaryRequests.changes(swiftDictionary(attributesToUpdate), for: parsed.itemClass)
        let store = KeychainStore.default
        if let data = changes.data { try checkSize(data, store) }
        let authentication = ItemAuthenticationRunner.options(try swiftDictionary(query))
        try ItemAuthenticationRunner.run(authentication) { try store.update(parsed, with: changes) }
    }
}

/// Deletes every item that matches `query`.
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    secItemCall {
        let parsed = try DictionaryRequests.query(ValueRefs.query(swiftDictionary(query)))
        try KeychainStore.default.delete(parsed)
    }
}

/// The message for a status, as Apple's `SecCopyErrorMessageString`.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    NSString(string: KeychainStatus.message(status) ?? "OSStatus \(status)")
}

private func checkSize(_ data: Data, _ store: KeychainStore) throws {
    guard data.count <= store.valueLimit else {
        throw KeychainError(
            KeychainStatus.dataTooLarge,
            "the secret is \(data.count) bytes; the limit is \(store.valueLimit)"
        )
    }
}

private func makeAccessControl(_ accessibility: Accessibility, _ flags: UInt) -> Any {
    SecAccessControl(protection: accessibility.rawValue, flags: SecAccessControlCreateFlags(rawValue: flags))
}

private func secItemCall(_ body: () throws -> Void) -> OSStatus {
    do {
        try body()
        return errSecSuccess
    } catch let error as KeychainError {
        return error.status
    } catch {
        return errSecInternalComponent
    }
}

/// Gives the engine the app's bundle identifier (`Bundle.main.bundleIdentifier`, where one exists) as its
/// application identifier when `KEYSEAL_APPLICATION_ID` is not set; done once, before the first add.
let bundleIdentifierInstalled: Bool = {
    ApplicationIdentity.setBundleIdentifierSource { Bundle.main.bundleIdentifier }
    return true
}()
