import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport

/// Runs `body` against a fresh temporary store made the default for this task, then removes the store.
func withStore<T>(_ body: (StoreFixture) throws -> T) throws -> T {
    let fixture = try StoreFixture()
    defer { fixture.remove() }
    return try KeychainStore.withDefault(fixture.store) { try body(fixture) }
}

/// A generic-password add dictionary.
func genericPassword(
    account: String = "alice",
    service: String = "svc",
    data: Data = Data("secret".utf8),
    _ extra: [String: Any] = [:]
) -> [String: Any] {
    var query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
        kSecAttrService as String: service,
        kSecValueData as String: data,
    ]
    query.merge(extra) { _, new in new }
    return query
}

/// A generic-password query (no value).
func genericQuery(
    account: String? = "alice",
    service: String? = "svc",
    _ extra: [String: Any] = [:]
)
    -> [String: Any]
{
    var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
    if let account { query[kSecAttrAccount] = account }
    if let service { query[kSecAttrService] = service }
    query.merge(extra) { _, new in new }
    return query
}

/// `SecItemAdd` without a result.
@discardableResult
func add(_ attributes: [String: Any]) -> OSStatus {
    SecItemAdd(attributes as CFDictionary, nil)
}

/// `SecItemCopyMatching` with a result pointer: the status and the result.
func copyMatching(_ query: [String: Any]) -> (status: OSStatus, result: CFTypeRef?) {
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    return (status, result)
}

/// The data of the one item `query` finds, or nil.
func findData(_ query: [String: Any]) -> Data? {
    var withReturn = query
    withReturn[kSecReturnData] = true
    return copyMatching(withReturn).result as? Data
}

/// The attributes of the one item `query` finds, or nil.
func findAttributes(_ query: [String: Any]) -> [String: Any]? {
    var withReturn = query
    withReturn[kSecReturnAttributes] = true
    return copyMatching(withReturn).result as? [String: Any]
}

/// Every item `query` finds, as attribute dictionaries with `v_Data` (empty when nothing matched).
func findAll(_ query: [String: Any]) -> [[String: Any]] {
    var withReturn = query
    withReturn[kSecReturnAttributes] = true
    withReturn[kSecReturnData] = true
    withReturn[kSecMatchLimit] = kSecMatchLimitAll
    return copyMatching(withReturn).result as? [[String: Any]] ?? []
}
