import Foundation
import KeysealCore
import Synchronization

@_exported import KeysealCore

/// A keychain: the store of items, its lock state and its passcode.
///
/// An embedded store runs the engine in this process (one process at a time per store directory). Every
/// method is synchronous and thread-safe; calls are serialized.
public final class KeychainStore: Sendable {
    enum Backend {
        case embedded(KeychainEngine)
        case unavailable(KeychainError)
        case closed
    }

    private let backend: Mutex<Backend>
    /// A description for messages (the store directory, or why none is available).
    public let location: String
    /// The largest secret this store accepts.
    public let valueLimit: Int

    private init(backend: sending Backend, location: String, valueLimit: Int) {
        self.backend = Mutex(backend)
        self.location = location
        self.valueLimit = valueLimit
    }

    /// Opens the store in `directory`, creating and provisioning it on first use (no passcode: unlocked).
    /// Opening an existing store is a reboot: with a passcode set it starts before first unlock.
    public static func embedded(
        directory: URL, device: DeviceKey, configuration: Configuration = Configuration()
    ) throws -> KeychainStore {
        let resolved = directory.standardizedFileURL.resolvingSymlinksInPath()
        try checkHostKeyOutside(device: device, directory: resolved)
        let engine = try KeychainEngine(directory: resolved, device: device, configuration: configuration)
        return KeychainStore(
            backend: .embedded(engine), location: resolved.path, valueLimit: configuration.valueLimit)
    }

    private static func checkHostKeyOutside(device: DeviceKey, directory: URL) throws {
        guard let file = device.hostKeyFile else { return }
        let keyPath = file.standardizedFileURL.resolvingSymlinksInPath().path
        let directoryPath = directory.path.hasSuffix("/") ? directory.path : directory.path + "/"
        if keyPath.hasPrefix(directoryPath) {
            throw KeychainError(
                KeychainStatus.param, "the host key file must not be inside the store directory \(directory.path)")
        }
    }

    /// A store whose every call fails with `error` (no keychain configured, or it failed to open).
    static func unavailable(_ error: KeychainError) -> KeychainStore {
        KeychainStore(backend: .unavailable(error), location: "(none)", valueLimit: 1 << 20)
    }

    // MARK: Default store

    private static let defaultStore = Mutex<KeychainStore?>(nil)

    /// The store the SecItem functions and `Keychain` use. Unless the program sets it, it comes from the
    /// environment: `KEYSEAL_STORE=DIR` opens an embedded store with the host key in `KEYSEAL_HOST_KEY` (or
    /// the default host key file).
    public static var `default`: KeychainStore {
        get {
            if let scoped = scopedDefault { return scoped }
            return defaultStore.withLock { current in
                if let current { return current }
                let made = fromEnvironment()
                current = made
                return made
            }
        }
        set { defaultStore.withLock { $0 = newValue } }
    }

    @TaskLocal static var scopedDefault: KeychainStore?

    /// Runs `body` with `store` as the default store for the current task and its child tasks only (other
    /// threads and tasks keep theirs). Useful for tests that run in parallel.
    public static func withDefault<T>(_ store: KeychainStore, _ body: () throws -> T) rethrows -> T {
        try $scopedDefault.withValue(store) { try body() }
    }

    static func fromEnvironment() -> KeychainStore {
        let environment = ProcessInfo.processInfo.environment
        if let directory = environment["KEYSEAL_STORE"], !directory.isEmpty {
            let keyFile = environment["KEYSEAL_HOST_KEY"].map { URL(fileURLWithPath: $0) } ?? DeviceKey.defaultHostKeyFile
            do {
                return try embedded(directory: URL(fileURLWithPath: directory), device: .hostKey(file: keyFile))
            } catch let error as KeychainError {
                return unavailable(error)
            } catch {
                return unavailable(KeychainError(KeychainStatus.notAvailable, "\(error)"))
            }
        }
        return unavailable(
            KeychainError(
                KeychainStatus.notAvailable,
                "no keychain is configured: set KEYSEAL_STORE (and KEYSEAL_HOST_KEY) or KeychainStore.default"))
    }

    // MARK: Engine access

    func withEngine<T: Sendable>(_ body: (KeychainEngine) throws -> T) throws(KeychainError) -> T {
        do {
            return try backend.withLock { backend throws -> T in
                switch backend {
                case .embedded(let engine): return try body(engine)
                case .unavailable(let error): throw error
                case .closed: throw KeychainError(KeychainStatus.notAvailable, "the keychain store is closed")
                }
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "\(error)")
        }
    }

    /// Closes the store: keys are zeroized, the file and the device released. Reopening is a reboot.
    public func close() {
        backend.withLock { backend in
            if case .embedded(let engine) = backend { engine.close() }
            backend = .closed
        }
    }

    // MARK: Lock state and passcode

    public var lockState: LockState {
        (try? withEngine { $0.lockState }) ?? .locked
    }

    public func setPasscode(_ passcode: String) throws { try withEngine { try $0.setPasscode(passcode) } }

    public func changePasscode(from old: String, to new: String) throws {
        try withEngine { try $0.changePasscode(from: old, to: new) }
    }

    public func removePasscode(_ passcode: String) throws { try withEngine { try $0.removePasscode(passcode) } }

    public func unlock(passcode: String) throws { try withEngine { try $0.unlock(passcode: passcode) } }

    /// Locks now. With no passcode set nothing changes; the returned sentence says why.
    @discardableResult
    public func lock() throws -> String? { try withEngine { $0.lock() } }

    public func status() throws -> StoreStatus { try withEngine { try $0.status() } }

    /// On a TPM whose lockout authorization is empty, sets it to a random value and returns it, once, for the
    /// administrator to keep offline; from then on the TPM limits passcode guessing. Other backends: errSecParam.
    public func protectHardwareLockout() throws -> SecretBytes { try withEngine { try $0.protectHardwareLockout() } }

    /// Idle seconds before auto-lock (nil: never).
    public func setAutoLock(seconds: Int?) throws { try withEngine { try $0.setAutoLock(seconds: seconds) } }

    // MARK: Items

    public func add(_ item: NewItem) throws -> ItemRecord? { try add(item, caller: .owner) }

    public func copyMatching(_ query: ItemQuery) throws -> [ItemRecord] { try copyMatching(query, caller: .owner) }

    public func update(_ query: ItemQuery, with changes: ItemChanges) throws {
        try update(query, with: changes, caller: .owner)
    }

    public func delete(_ query: ItemQuery) throws { try delete(query, caller: .owner) }

    package func add(_ item: NewItem, caller: Caller) throws -> ItemRecord? {
        try withEngine { try $0.add(item, caller: caller) }
    }

    /// Adds every item in one transaction: all are added, or none.
    package func addBatch(_ items: [NewItem], caller: Caller = .owner) throws {
        try withEngine { try $0.addBatch(items, caller: caller) }
    }

    package func copyMatching(_ query: ItemQuery, caller: Caller) throws -> [ItemRecord] {
        try withEngine { try $0.copyMatching(query, caller: caller) }
    }

    package func update(_ query: ItemQuery, with changes: ItemChanges, caller: Caller) throws {
        try withEngine { try $0.update(query, changes: changes, caller: caller) }
    }

    package func delete(_ query: ItemQuery, caller: Caller) throws {
        try withEngine { try $0.delete(query, caller: caller) }
    }
}
