import FoundationEssentials
import Glibc
import KeysealCore
import KeysealStore

/// Hooks for the package's own tests (not part of the public API).
package enum KeychainStoreTestHooks {
    /// The host-key provider, so that tests can wrap it.
    package static func hostKeyProvider(file: URL) throws -> any DeviceKeyProvider { HostKeyDevice(file: file) }
}

/// Hooks for the package's benchmarks (not part of the public API).
package enum KeysealBenchHooks {
    /// Runs Argon2id as an unlock does, so that its cost can be shown apart from the hardware's.
    package static func deriveArgon2id(passcode: String, salt: Data, parameters: Argon2Parameters) throws {
        _ = try Argon2id.derive(SecretBytes(utf8: passcode), salt: salt, parameters: parameters)
    }
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

extension KeysealBenchHooks {
    /// The floor of a hardware signature through the library: the key resolved once (blob and derived
    /// authorization), then the device key's `HardwareKeyProvider.sign` called directly for each digest.
    package static func hardwareSigner(_ store: KeychainStore, _ reference: KeyReference) throws -> ([UInt8]) throws
        -> Data
    {
        // Resolved under the store's lock; the provider is then called as the engine calls it (one thread).
        nonisolated(unsafe) var resolved: HardwareKeyHandle?
        try store.withEngine { engine in
            try engine.withPrivateKey(reference, caller: .owner) { handle in
                guard case .hardware(let key) = handle else { throw KeychainError.param }
                resolved = key
            }
        }
        guard let handle = resolved else { throw KeychainError.param }
        return { digest in
            try handle.provider.sign(digest: digest, keyBlob: handle.blob, authorization: handle.authorization)
        }
    }
}
