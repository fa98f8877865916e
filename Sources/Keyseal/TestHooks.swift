import Foundation
import KeysealCore

/// Hooks for the package's own tests (not part of the public API).
package enum KeychainStoreTestHooks {
    /// The host-key provider, so that tests can wrap it.
    package static func hostKeyProvider(file: URL) throws -> any DeviceKeyProvider { HostKeyDevice(file: file) }
}
