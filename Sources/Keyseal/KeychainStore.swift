import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore
@_exported import KeysealCore
import Synchronization

/// A keychain: the store of items, its lock state and its passcode.
///
/// An embedded store runs the engine in this process (one process at a time per store directory); a daemon
/// store forwards every call to keyseald over its Unix socket. Every method is synchronous and thread-safe;
/// calls are serialized.
public final class KeychainStore: Sendable {
    enum Backend {
        case embedded(KeychainEngine)
        case daemon(KeysealConnection)
        case unavailable(KeychainError)
        /// The device object's PCRs changed: nothing is open until ``recover(recoveryKey:passcode:)``.
        case recoveryPending(RecoveryPending)
        case closed
    }

    /// A store waiting for `keyseal recover`: what is needed to open it then.
    struct RecoveryPending {
        var directory: URL
        var device: DeviceKey
        var configuration: Configuration
        var reason: KeychainError
    }

    private let backend: Mutex<Backend>
    /// Whether a thread that waits for `backend` (not a keyseald event loop) holds it (``EngineWait``).
    private let engineHeldByWaiter = Atomic(false)
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
        directory: URL,
        device: DeviceKey,
        configuration: Configuration = Configuration()
    ) throws -> KeychainStore {
        let resolved = directory.standardizedFileURL.resolvingSymlinksInPath()
        try checkHostKeyOutside(device: device, directory: resolved)
        let engine: KeychainEngine
        do {
            engine = try KeychainEngine(directory: resolved, device: device, configuration: configuration)
        } catch let error as KeychainError where error.status == KeychainStatus.recoveryRequired {
            // The store opens in the recovery-required state: every call but `status` and `recover` fails with it.
            let pending = RecoveryPending(
                directory: resolved,
                device: device,
                configuration: configuration,
                reason: error
            )
            return KeychainStore(
                backend: .recoveryPending(pending),
                location: resolved.path,
                valueLimit: configuration.valueLimit
            )
        }
        return KeychainStore(
            backend: .embedded(engine),
            location: resolved.path,
            valueLimit: configuration.valueLimit
        )
    }

    private static func checkHostKeyOutside(device: DeviceKey, directory: URL) throws {
        guard let file = device.hostKeyFile else { return }
        let keyPath = file.standardizedFileURL.resolvingSymlinksInPath().path
        let directoryPath = directory.path.hasSuffix("/") ? directory.path : directory.path + "/"
        if keyPath.hasPrefix(directoryPath) {
            throw KeychainError(
                KeychainStatus.param,
                "the host key file must not be inside the store directory \(directory.path)"
            )
        }
    }

    /// The keychain of the keyseald listening on `socket`. Nothing is sent until the first call; an unreachable
    /// daemon is errSecNoSuchKeychain (−25294) naming the socket, on that call. Values over the limit are refused
    /// with errSecDataTooLarge before sending.
    public static func daemon(socket: String) throws -> KeychainStore {
        guard !socket.isEmpty else { throw KeychainError(KeychainStatus.param, "the socket path is empty") }
        return KeychainStore(
            backend: .daemon(KeysealConnection(socketPath: socket)),
            location: socket,
            valueLimit: Wire.valueLimit
        )
    }

    /// The daemon's socket by default: `$KEYSEAL_SOCKET`, else `$XDG_RUNTIME_DIR/keyseal/keyseal.sock`, else
    /// `/run/keyseal/keyseal.sock`.
    public static var defaultSocketPath: String {
        Wire.defaultSocketPath(environment: ProcessInfo.processInfo.environment)
    }

    /// A store whose every call fails with `error` (no keychain configured, or it failed to open).
    static func unavailable(_ error: KeychainError) -> KeychainStore {
        KeychainStore(backend: .unavailable(error), location: "(none)", valueLimit: 1 << 20)
    }

    // MARK: Default store

    private static let defaultStore = Mutex<KeychainStore?>(nil)

    /// The store the SecItem functions and `Keychain` use. Unless the program sets it, it comes from the
    /// environment: `KEYSEAL_SOCKET=PATH` talks to the daemon there; else `KEYSEAL_STORE=DIR` opens an embedded
    /// store whose device key is a TPM (`KEYSEAL_TCTI=TCTI`), a PKCS#11 token (`KEYSEAL_PKCS11_MODULE`,
    /// `KEYSEAL_PKCS11_TOKEN`, `KEYSEAL_PKCS11_PIN_FILE`) or the host key in `KEYSEAL_HOST_KEY` (or the default
    /// host key file); else the daemon at the default socket path (``defaultSocketPath``).
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

    static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    )
        -> KeychainStore
    {
        if let socket = environment["KEYSEAL_SOCKET"], !socket.isEmpty {
            return KeychainStore(
                backend: .daemon(KeysealConnection(socketPath: socket)),
                location: socket,
                valueLimit: Wire.valueLimit
            )
        }
        if let directory = environment["KEYSEAL_STORE"], !directory.isEmpty {
            do {
                let device = try deviceKey(environment: environment)
                return try embedded(directory: URL(fileURLWithPath: directory), device: device)
            } catch let error as KeychainError {
                return unavailable(error)
            } catch {
                return unavailable(KeychainError(KeychainStatus.notAvailable, "\(error)"))
            }
        }
        let socket = Wire.defaultSocketPath(environment: environment)
        return KeychainStore(
            backend: .daemon(KeysealConnection(socketPath: socket)),
            location: socket,
            valueLimit: Wire.valueLimit
        )
    }

    /// The device key an embedded store from the environment opens with: a TPM when `KEYSEAL_TCTI` is set, a
    /// PKCS#11 token when `KEYSEAL_PKCS11_MODULE` is (with `KEYSEAL_PKCS11_TOKEN`, the token's label, and
    /// optionally `KEYSEAL_PKCS11_PIN_FILE`), else the host key (`KEYSEAL_HOST_KEY` or the default file). Both a
    /// TCTI and a module, or a module without a token label, is errSecParam: a store never silently opens with
    /// another device key than the one asked for.
    static func deviceKey(environment: [String: String]) throws(KeychainError) -> DeviceKey {
        func value(_ name: String) -> String? {
            guard let value = environment[name], !value.isEmpty else { return nil }
            return value
        }
        let tcti = value("KEYSEAL_TCTI")
        let module = value("KEYSEAL_PKCS11_MODULE")
        switch (tcti, module) {
        case (.some, .some):
            throw KeychainError(
                KeychainStatus.param,
                "KEYSEAL_TCTI and KEYSEAL_PKCS11_MODULE are both set; a store has one device key"
            )
        case (.some(let tcti), nil):
            return .tpm(tcti: tcti)
        case (nil, .some(let module)):
            guard let token = value("KEYSEAL_PKCS11_TOKEN") else {
                throw KeychainError(
                    KeychainStatus.param,
                    "KEYSEAL_PKCS11_MODULE is set without KEYSEAL_PKCS11_TOKEN (the token's label)"
                )
            }
            return .pkcs11(
                module: module,
                token: token,
                pinFile: value("KEYSEAL_PKCS11_PIN_FILE").map { URL(fileURLWithPath: $0) }
            )
        case (nil, nil):
            return .hostKey(
                file: value("KEYSEAL_HOST_KEY").map { URL(fileURLWithPath: $0) } ?? DeviceKey.defaultHostKeyFile
            )
        }
    }

    // MARK: Engine access

    func withEngine<T: Sendable>(_ body: (KeychainEngine) throws -> T) throws(KeychainError) -> T {
        try route(body) { _ throws(KeychainError) -> T in
            throw KeychainError(KeychainStatus.unimplemented, "not available through the daemon")
        }
    }

    /// Runs `embedded` on the engine under the store's lock, or `daemon` on the connection (which serializes its
    /// own requests), outside the lock.
    func route<T: Sendable>(
        _ embedded: (KeychainEngine) throws -> T,
        daemon: (KeysealConnection) throws(KeychainError) -> T
    ) throws(KeychainError) -> T {
        do {
            let connection = try EngineWait.lock(backend, heldByWaiter: engineHeldByWaiter) {
                backend throws -> KeysealConnection? in
                switch backend {
                case .embedded: return nil
                case .daemon(let connection): return connection
                case .unavailable(let error): throw error
                case .recoveryPending(let pending): throw pending.reason
                case .closed: throw KeychainError(KeychainStatus.notAvailable, "the keychain store is closed")
                }
            }
            if let connection { return try daemon(connection) }
            return try EngineWait.lock(backend, heldByWaiter: engineHeldByWaiter) { backend throws -> T in
                switch backend {
                case .embedded(let engine): return try embedded(engine)
                case .daemon: throw KeychainError(KeychainStatus.internalComponent, "backend changed")
                case .unavailable(let error): throw error
                case .recoveryPending(let pending): throw pending.reason
                case .closed: throw KeychainError(KeychainStatus.notAvailable, "the keychain store is closed")
                }
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "\(error)")
        }
    }

    /// Sends one request to the daemon; a daemon failure becomes its KeychainError.
    static func request(_ connection: KeysealConnection, _ request: WireRequest) throws(KeychainError) -> WireResponse {
        // The task's authentication travels with the requests it concerns (KeychainStore+Authentication.swift).
        if let authentication = ItemAuthentication.current, request.mayBeAuthenticated {
            return try connection.send(.authenticated(authentication, request))
        }
        return try connection.send(request)
    }

    static func unexpected(_ response: WireResponse) -> KeychainError {
        KeychainError(KeychainStatus.decode, "unexpected response from keyseald")
    }

    static func expectOK(_ response: WireResponse) throws(KeychainError) {
        guard case .ok = response else { throw unexpected(response) }
    }

    /// Closes the store: keys are zeroized, the file and the device released. Reopening is a reboot.
    public func close() {
        backend.withLock { backend in
            switch backend {
            case .embedded(let engine): engine.close()
            case .daemon(let connection): connection.disconnect()
            default: break
            }
            backend = .closed
        }
    }

    // MARK: Lock state and passcode

    public var lockState: LockState {
        let state = try? route({ $0.lockState }) { connection throws(KeychainError) -> LockState in
            guard case .lockState(let state) = try Self.request(connection, .lockState) else {
                throw KeychainError(KeychainStatus.decode, "unexpected response from keyseald")
            }
            return state
        }
        return state ?? .locked
    }

    public func setPasscode(_ passcode: String) throws { try setPasscode(SecretBytes(utf8: passcode)) }

    public func changePasscode(from old: String, to new: String) throws {
        try changePasscode(from: SecretBytes(utf8: old), to: SecretBytes(utf8: new))
    }

    public func removePasscode(_ passcode: String) throws { try removePasscode(SecretBytes(utf8: passcode)) }

    public func unlock(passcode: String) throws { try unlock(passcode: SecretBytes(utf8: passcode)) }

    // The same calls with the passcode already in the zeroizing type, as keyseald holds it (checked as UTF-8
    // there): no String copy of it is made on the way. Package-internal, so that the public API takes passcodes
    // as text only, as it always has.

    package func setPasscode(_ passcode: SecretBytes) throws {
        try route({ try $0.setPasscode(passcode) }) { connection throws(KeychainError) in
            try Self.expectOK(try Self.request(connection, .setPasscode(passcode)))
        }
    }

    package func changePasscode(from old: SecretBytes, to new: SecretBytes) throws {
        try route({ try $0.changePasscode(from: old, to: new) }) { connection throws(KeychainError) in
            try Self.expectOK(
                try Self.request(connection, .changePasscode(old: old, new: new))
            )
        }
    }

    package func removePasscode(_ passcode: SecretBytes) throws {
        try route({ try $0.removePasscode(passcode) }) { connection throws(KeychainError) in
            try Self.expectOK(try Self.request(connection, .removePasscode(passcode)))
        }
    }

    package func unlock(passcode: SecretBytes) throws {
        try route({ try $0.unlock(passcode: passcode) }) { connection throws(KeychainError) in
            try Self.expectOK(try Self.request(connection, .unlock(passcode: passcode)))
        }
    }

    /// Locks now. With no passcode set nothing changes; the returned sentence says why.
    @discardableResult
    public func lock() throws -> String? {
        try route({ $0.lock() }) { connection throws(KeychainError) -> String? in
            let response = try Self.request(connection, .lock)
            guard case .message(let text) = response else { throw Self.unexpected(response) }
            return text
        }
    }

    public func status() throws -> StoreStatus { try status(itemCounts: true) }

    /// The status; without `itemCounts` (keyseald answering a client that is not an administrator), the items are
    /// not counted by class, which at 100,000 items costs tens of milliseconds of the event loop.
    package func status(itemCounts: Bool) throws -> StoreStatus {
        if let pending = recoveryPending {
            return KeychainEngine.recoveryStatus(
                directory: pending.directory,
                device: pending.device,
                configuration: pending.configuration,
                reason: pending.reason
            )
        }
        return try route({ try $0.status(itemCounts: itemCounts) }) { connection throws(KeychainError) -> StoreStatus in
            let response = try Self.request(connection, .status)
            guard case .status(let status) = response else { throw Self.unexpected(response) }
            return status
        }
    }

    /// The pending recovery, when the store waits for ``recover(recoveryKey:passcode:)``.
    var recoveryPending: RecoveryPending? {
        try? EngineWait.lock(backend, heldByWaiter: engineHeldByWaiter) { backend in
            if case .recoveryPending(let pending) = backend { return pending }
            return nil
        }
    }

    /// Whether the store waits for `keyseal recover` (its device object's PCRs changed).
    public var recoveryRequired: Bool { recoveryPending != nil }

    /// Opens a store that waits for recovery with its recovery key (as typed: 64 hex digits, dashes optional) and,
    /// when a passcode is set, the passcode; the device and passcode objects are sealed again to the PCRs' current
    /// values. A wrong recovery key is counted by the TPM (errSecAuthFailed with the tries left).
    package func recover(recoveryKey: SecretBytes, passcode: SecretBytes?) throws {
        let connection = try backend.withLock { backend throws -> KeysealConnection? in
            switch backend {
            case .daemon(let connection): return connection
            case .recoveryPending(let pending):
                let engine = try KeychainEngine(
                    directory: pending.directory,
                    device: pending.device,
                    configuration: pending.configuration,
                    recovery: RecoveryInput(key: recoveryKey, passcode: passcode)
                )
                backend = .embedded(engine)
                return nil
            case .embedded: throw KeychainError(KeychainStatus.param, "recovery is not required: the PCRs match")
            case .unavailable(let error): throw error
            case .closed: throw KeychainError(KeychainStatus.notAvailable, "the keychain store is closed")
            }
        }
        guard let connection else { return }
        try Self.expectOK(
            try Self.request(
                connection,
                .recover(key: recoveryKey, passcode: passcode)
            )
        )
    }

    /// A new recovery key (replacing any earlier one), returned once as text (16 groups of 4 hex digits). TPM
    /// stores; the passcode when one is set. Administrators only.
    package func createRecoveryKey(passcode: SecretBytes?) throws -> SecretBytes {
        try route({ try $0.createRecoveryKey(passcode: passcode) }) { connection throws(KeychainError) -> SecretBytes in
            let response = try Self.request(connection, .createRecoveryKey(passcode: passcode))
            guard case .secret(let secret) = response else { throw Self.unexpected(response) }
            return secret
        }
    }

    /// Seals the device and passcode objects again to the current values of their PCRs, or of `pcrs` (empty:
    /// unbound). The passcode when one is set. Administrators only.
    package func resealTPM(passcode: SecretBytes?, pcrs: [Int]?) throws {
        try route({ try $0.resealDeviceObjects(passcode: passcode, pcrs: pcrs) }) { connection throws(KeychainError) in
            try Self.expectOK(try Self.request(connection, .tpmReseal(passcode: passcode, pcrs: pcrs)))
        }
    }

    /// Keeps a rolled-back store as it is: the keybag takes the TPM counter's value (administrators only).
    package func acceptRollback() throws {
        try route({ try $0.acceptRollback() }) { connection throws(KeychainError) in
            try Self.expectOK(try Self.request(connection, .acceptRollback))
        }
    }

    /// How many items an access group holds and their stored size (sealed attributes and values). Embedded stores
    /// only (the daemon's quotas).
    package func usage(accessGroup group: String) throws -> (items: Int, bytes: Int) {
        try withEngine { try $0.usage(accessGroup: group) }
    }

    /// On a TPM whose lockout authorization is empty, sets it to a random value and returns it, once, for the
    /// administrator to keep offline; from then on the TPM limits passcode guessing. Other backends: errSecParam.
    /// Through the daemon: errSecUnimplemented (keyseald does this at start with `--tpm-protect-lockout`).
    public func protectHardwareLockout() throws -> SecretBytes { try withEngine { try $0.protectHardwareLockout() } }

    /// The rows no SecItem call can reach — they cannot be decrypted (edited, rolled back, or sealed under a key
    /// the store no longer has), or are of an item class Keyseal does not implement — in insertion order.
    /// Administrators only (through the daemon, others get errSecMissingEntitlement, −34018). A class that holds
    /// rows and is locked is errSecInteractionNotAllowed (−25308): unlock first.
    public func undecryptableItems() throws -> [UndecryptableItem] {
        try route({ try $0.undecryptableItems() }) { connection throws(KeychainError) -> [UndecryptableItem] in
            try Self.undecryptable(try Self.request(connection, .undecryptableItems))
        }
    }

    /// Deletes rows that ``undecryptableItems()`` lists, by id, without decrypting them (nil: every such row), in
    /// one transaction, and returns them. An id that names no row is errSecItemNotFound (−25300); one that names a
    /// row that can be served is errSecParam (−50) — delete that with ``delete(_:)``; either way nothing is deleted.
    /// Administrators only.
    @discardableResult
    public func deleteUndecryptable(ids: [String]?) throws -> [UndecryptableItem] {
        try route({ try $0.deleteUndecryptable(ids: ids) }) { connection throws(KeychainError) -> [UndecryptableItem] in
            try Self.undecryptable(try Self.request(connection, .deleteUndecryptable(ids: ids)))
        }
    }

    private static func undecryptable(_ response: WireResponse) throws(KeychainError) -> [UndecryptableItem] {
        guard case .undecryptable(let items) = response else { throw unexpected(response) }
        return items
    }

    /// Like ``protectHardwareLockout()``, handing the value to `keep` before the TPM is changed: `keep` puts it
    /// somewhere durable and throws when it cannot, and then the TPM stays as it was.
    public func protectHardwareLockout(keeping keep: (SecretBytes) throws -> Void) throws {
        try withEngine { try $0.protectHardwareLockout(keeping: keep) }
    }

    /// Idle seconds before auto-lock (nil: never).
    public func setAutoLock(seconds: Int?) throws {
        try route({ try $0.setAutoLock(seconds: seconds) }) { connection throws(KeychainError) in
            try Self.expectOK(try Self.request(connection, .setSettings(WireSettings(autoLockSeconds: seconds))))
        }
    }

    /// Idle seconds before auto-lock as stored (embedded) or in force in the daemon (nil: never).
    public func autoLockSeconds() throws -> Int? {
        try route({ $0.autoLockSeconds }) { connection throws(KeychainError) -> Int? in
            let response = try Self.request(connection, .getSettings)
            guard case .settings(let settings) = response else { throw Self.unexpected(response) }
            return settings.autoLockSeconds
        }
    }

    /// Calls `handler` with the lock state now and at every change, until it returns false. Through the daemon it
    /// blocks on a connection of its own; an embedded store has no other party to change its state, so the
    /// handler is called once.
    public func watchLockState(_ handler: (LockState) -> Bool) throws {
        let socket: String? = try route({ _ in nil }) { connection throws(KeychainError) -> String? in
            connection.socketPath
        }
        guard let socket else {
            _ = handler(lockState)
            return
        }
        try KeysealConnection.watchLockState(socketPath: socket) { handler($0) }
    }

    // MARK: Items

    public func add(_ item: NewItem) throws -> ItemRecord? { try add(item, caller: .application) }

    public func copyMatching(_ query: ItemQuery) throws -> [ItemRecord] { try copyMatching(query, caller: .owner) }

    public func update(_ query: ItemQuery, with changes: ItemChanges) throws {
        try update(query, with: changes, caller: .owner)
    }

    public func delete(_ query: ItemQuery) throws { try delete(query, caller: .owner) }

    /// Through the daemon the caller is ignored: the daemon decides who the caller is.
    /// `admit` (embedded stores: keyseald's quotas): ``GroupAdmission``, with the sealed item's exact size.
    package func add(_ item: NewItem, caller: Caller, admit: GroupAdmission? = nil) throws -> ItemRecord? {
        try route({ try $0.add(item, caller: caller, admit: admit) }) {
            connection throws(KeychainError) -> ItemRecord? in
            let response = try Self.request(connection, .add(item))
            guard case .records(let records) = response else { throw Self.unexpected(response) }
            return records.first
        }
    }

    /// Adds every item in one transaction: all are added, or none. Embedded stores only.
    package func addBatch(_ items: [NewItem], caller: Caller = .owner) throws {
        try withEngine { try $0.addBatch(items, caller: caller) }
    }

    /// `resultLimit`: the most stored bytes (sealed attributes and values) a result may gather; beyond it the call
    /// fails with errSecDataTooLarge before any value is opened (the daemon's bound on one response).
    package func copyMatching(_ query: ItemQuery, caller: Caller, resultLimit: Int? = nil) throws -> [ItemRecord] {
        try route({ try $0.copyMatching(query, caller: caller, resultLimit: resultLimit) }) {
            connection throws(KeychainError) -> [ItemRecord] in
            let response = try Self.request(connection, .copyMatching(query))
            guard case .records(let records) = response else { throw Self.unexpected(response) }
            return records
        }
    }

    /// ``copyMatching(_:caller:resultLimit:)`` with bounded work (``KeychainEngine/copyMatching(_:caller:resultLimit:within:)``):
    /// nil when the rows the query selects are over `bound`, and for a store that is not embedded.
    package func copyMatching(
        _ query: ItemQuery,
        caller: Caller,
        resultLimit: Int?,
        within bound: ScanBound
    ) throws -> [ItemRecord]? {
        try route({ try $0.copyMatching(query, caller: caller, resultLimit: resultLimit, within: bound) }) { _ in nil }
    }

    /// An update for `caller`; with `admit` (embedded stores: keyseald's quotas), each access group the update would
    /// grow is admitted first (``GroupAdmission``).
    package func update(
        _ query: ItemQuery,
        with changes: ItemChanges,
        caller: Caller,
        admit: GroupAdmission? = nil
    ) throws {
        try route({ try $0.update(query, changes: changes, caller: caller, admit: admit) }) {
            connection throws(KeychainError) in
            try Self.expectOK(
                try Self.request(connection, .update(query, changes))
            )
        }
    }

    /// Adds `item`, or gives its label, description and value to the item of the same class, access group and
    /// service whose string attributes equal `item`'s (``KeychainEngine/addReplacingAttributes(_:caller:)``), in
    /// one step. Returns nil when it added, else the replaced item's account.
    /// ``addReplacingAttributes(_:caller:)`` with bounded work (``KeychainEngine/addReplacingAttributes(_:caller:scan:)``):
    /// `.overBound`, with nothing written, when its search steps through more than `bound`; always `.overBound` for a
    /// store that is not embedded.
    package func addReplacingAttributes(
        _ item: NewItem,
        caller: Caller,
        within bound: ScanBound,
        admit: GroupAdmission? = nil
    ) throws -> ReplacingAdd {
        try route({ try $0.addReplacingAttributes(item, caller: caller, scan: bound, admit: admit) }) { _ in .overBound
        }
    }

    package func addReplacingAttributes(_ item: NewItem, caller: Caller, admit: GroupAdmission? = nil) throws -> String?
    {
        try route({ try $0.addReplacingAttributes(item, caller: caller, admit: admit) }) {
            connection throws(KeychainError) -> String? in
            let response = try Self.request(connection, .addReplacingAttributes(item))
            guard case .records(let records) = response, records.count <= 1 else { throw Self.unexpected(response) }
            return try records.first.map(Wire.replacedAccount)
        }
    }

    package func delete(_ query: ItemQuery, caller: Caller) throws {
        try route({ try $0.delete(query, caller: caller) }) { connection throws(KeychainError) in
            try Self.expectOK(try Self.request(connection, .delete(query)))
        }
    }
}

/// The application identifier a process declares, as an app's identity on Apple's platforms: its default access
/// group. Apple derives an app's default group from its signed identity (its first keychain access group) and
/// invents no service, so neither does Keyseal: a generic password without `svce` keeps the empty service.
public enum ApplicationIdentity {
    private static let bundleIdentifierSource = Mutex<(@Sendable () -> String?)?>(nil)

    @TaskLocal private static var declared: String?

    /// The identifier set by ``withIdentifier(_:_:)`` for this task, else `KEYSEAL_APPLICATION_ID` when set and
    /// not empty, else the bundle identifier the SecItem layer reports (`Bundle.main.bundleIdentifier`, nil for a
    /// plain Linux executable), else nil.
    public static var identifier: String? {
        if let declared { return declared }
        // One variable read, not the whole environment copied into a dictionary (this runs on every add).
        if let value = getenv("KEYSEAL_APPLICATION_ID").map({ String(cString: $0) }),
            let declared = identifier(environment: ["KEYSEAL_APPLICATION_ID": value])
        {
            return declared
        }
        return bundleIdentifierSource.withLock { $0 }?()
    }

    /// `KEYSEAL_APPLICATION_ID` from `environment`, nil when unset or empty.
    public static func identifier(environment: [String: String]) -> String? {
        guard let value = environment["KEYSEAL_APPLICATION_ID"], !value.isEmpty else { return nil }
        return value
    }

    /// Runs `body` as the application `identifier` (for this task only), like a process that declares it.
    public static func withIdentifier<T>(_ identifier: String?, _ body: () throws -> T) rethrows -> T {
        try $declared.withValue(identifier, operation: body)
    }

    /// Where the bundle identifier comes from (the SecItem layer, which links Foundation's `Bundle`).
    public static func setBundleIdentifierSource(_ source: @escaping @Sendable () -> String?) {
        bundleIdentifierSource.withLock { $0 = source }
    }
}

extension Caller {
    /// The process that owns an embedded store, with its declared application identifier (if any) as its
    /// default group. Through keyseald the daemon's policy decides instead: a client cannot vouch for itself.
    static var application: Caller {
        guard let identifier = ApplicationIdentity.identifier else { return .owner }
        return Caller(accessGroups: nil, defaultGroup: identifier, isAdministrator: true)
    }
}
