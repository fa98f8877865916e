import FoundationEssentials
import Glibc
import KeysealCore
import KeysealStore

/// Hooks for the package's own tests (not part of the public API).
package enum KeychainStoreTestHooks {
    /// The host-key provider, so that tests can wrap it.
    package static func hostKeyProvider(file: URL) throws -> any DeviceKeyProvider { HostKeyDevice(file: file) }
}

extension KeychainStore {
    /// Makes the keybag of an embedded store mark no ledger record, as the code before the record wrote it (tests of
    /// the upgrade also drop the record's table and schema version).
    package func unmarkLedgerForTests() throws { try withEngine { try $0.unmarkLedgerForTests() } }
}

extension KeychainEngine {
    func unmarkLedgerForTests() throws {
        keybag.ledgerVersion = nil
        try store.transaction { () throws(KeychainError) in try saveKeybag() }
    }
}

extension KeychainStoreTestHooks {
    /// The sealed device object of the store in `directory`, read from a closed store's keybag without
    /// authenticating it: what a copy of the file gives an attacker.
    package static func sealedDeviceSecret(directory: URL) throws -> Data {
        let store = try ItemStore(directory: directory)
        defer { store.close() }
        guard let stored = try store.loadKeybag() else { throw KeychainError(KeychainStatus.decode, "no keybag") }
        return try Keybag.parseUnverified(stored.body).sealedDeviceSecret
    }

    /// The sealed passcode object of the store in `directory` (nil without a passcode), read as
    /// ``sealedDeviceSecret(directory:)`` reads the device object.
    package static func sealedPasscodeSecret(directory: URL) throws -> Data? {
        let store = try ItemStore(directory: directory)
        defer { store.close() }
        guard let stored = try store.loadKeybag() else { throw KeychainError(KeychainStatus.decode, "no keybag") }
        return try Keybag.parseUnverified(stored.body).passcode?.sealedSecret
    }
}

extension KeychainStore {
    /// Makes the keybag of an embedded TPM store record no anti-rollback counter, as stores created before it.
    package func unsetCounterForTests() throws { try withEngine { try $0.unsetCounterForTests() } }
}

extension KeychainEngine {
    func unsetCounterForTests() throws {
        keybag.counter = nil
        try store.transaction { () throws(KeychainError) in try saveKeybag() }
    }

    func dropCounterNameForTests() throws {
        keybag.counter?.name = nil
        try store.transaction { () throws(KeychainError) in try saveKeybag() }
    }
}

extension KeychainStore {
    /// Makes the keybag of an embedded TPM store record its counter without the counter's Name, as keybags written
    /// before the Name was recorded.
    package func dropCounterNameForTests() throws { try withEngine { try $0.dropCounterNameForTests() } }
}

extension KeychainStoreTestHooks {
    /// Copies the keybag row of the closed store in `source` over the one in `target`: a copy of the store whose
    /// keybag and ledger record come from different copies.
    package static func copyKeybag(from source: URL, to target: URL) throws {
        let from = try ItemStore(directory: source)
        defer { from.close() }
        guard let stored = try from.loadKeybag() else { throw KeychainError(KeychainStatus.decode, "no keybag") }
        let into = try ItemStore(directory: target)
        defer { into.close() }
        try into.saveKeybag(body: stored.body, mac: stored.mac)
    }
}

extension KeychainStore {
    /// The counter value the ledger record of an embedded store carries now (nil: none).
    package func ledgerCheckpointForTests() throws -> UInt64? { try withEngine { $0.store.ledgerRecord.checkpoint } }

    /// Writes the ledger record of an embedded store without a counter value, as the code before checkpoints did.
    package func dropLedgerCheckpointForTests() throws { try withEngine { try $0.dropLedgerCheckpointForTests() } }
}

extension KeychainEngine {
    func dropLedgerCheckpointForTests() throws {
        store.setLedgerCheckpoint(nil)
        try store.transaction { () throws(KeychainError) in }
    }
}

extension KeychainStore {
    /// How many stored keys the engine of an embedded store keeps prepared (tests of the cache's drop rules).
    package func preparedKeyCountForTests() throws -> Int { try withEngine { $0.preparedKeys.count } }

    /// The authorization the engine keeps for a prepared hardware key, each byte inverted, so that a test can look
    /// for the real bytes in memory without holding them; nil when the key is not prepared.
    package func preparedAuthorizationInvertedForTests(_ key: KeyReference) throws -> [UInt8]? {
        guard case .item(let reference) = key else { return nil }
        return try withEngine { engine in
            guard case .hardware(let handle)? = engine.preparedKeys.peek(reference)?.handle else { return nil }
            return handle.authorization.withUnsafeBytes { $0.map { ~$0 } }
        }
    }
}
