import CKeysealPKCS11Entry
import FoundationEssentials
import Glibc
import KeysealClient

/// `CK_UNAVAILABLE_INFORMATION` (a cast in the header, which Swift does not import).
let unavailableInformation = CK_ULONG.max

/// The one slot, holding the one token (docs/PKCS11.md, "The PKCS#11 module").
let slotID: CK_SLOT_ID = 1

/// A PKCS#11 failure: the CKR the entry point returns.
struct P11Error: Error {
    let rv: CK_RV
    init(_ rv: CK_RV) { self.rv = rv }

    /// The CKR for a keyseald failure. An unreachable daemon is CKR_DEVICE_REMOVED (the token is absent until it
    /// answers again); a connection lost in the middle is CKR_DEVICE_ERROR; a locked class is
    /// CKR_USER_NOT_LOGGED_IN.
    init(_ error: KeychainError) {
        switch error.status {
        case KeychainStatus.noSuchKeychain: self.init(CKR_DEVICE_REMOVED)
        case KeychainStatus.io, KeychainStatus.decode: self.init(CKR_DEVICE_ERROR)
        case KeychainStatus.interactionNotAllowed: self.init(CKR_USER_NOT_LOGGED_IN)
        case KeychainStatus.authFailed: self.init(CKR_PIN_INCORRECT)
        case KeychainStatus.itemNotFound: self.init(CKR_KEY_HANDLE_INVALID)
        case KeychainStatus.missingEntitlement: self.init(CKR_FUNCTION_REJECTED)
        case KeychainStatus.param: self.init(CKR_ARGUMENTS_BAD)
        case KeychainStatus.dataTooLarge: self.init(CKR_DATA_LEN_RANGE)
        case KeychainStatus.duplicateItem: self.init(CKR_TEMPLATE_INCONSISTENT)
        case KeychainStatus.unimplemented, KeychainStatus.notAvailable: self.init(CKR_FUNCTION_NOT_SUPPORTED)
        case KeychainStatus.recoveryRequired, KeychainStatus.rolledBack: self.init(CKR_DEVICE_ERROR)
        default: self.init(CKR_FUNCTION_FAILED)
        }
    }
}

/// An operation started by `C_SignInit`, `C_VerifyInit` or `C_DecryptInit`.
struct PendingOperation {
    enum Kind {
        case sign
        case verify
        case decrypt
    }

    var kind: Kind
    var reference: Data
    /// Apple's `SecKeyAlgorithm` name keyseald uses.
    var algorithm: String
    /// The result's size (signature, or the most a decryption gives).
    var outputSize: Int
    /// Whether `C_SignUpdate` (`C_VerifyUpdate`) may add to `data` (a mechanism that hashes).
    var multipart: Bool
    /// What `C_Verify` checks with (verifications only).
    var verification: Verification? = nil
    var data: [UInt8] = []
    /// Whether `C_SignUpdate` (`C_VerifyUpdate`) was called (then `C_Sign`, `C_Verify` are refused).
    var updating = false
}

struct Session {
    var flags: CK_FLAGS
    /// The handles a `C_FindObjectsInit` matched, not yet returned.
    var found: [CK_OBJECT_HANDLE]?
    var operation: PendingOperation?
}

/// The module's state, used only under ``moduleLock``.
final class ModuleState {
    var initialized = false
    /// The process whose `C_Initialize` initialized the module: a child after `fork()` may initialize it again.
    var initializedPID: pid_t = 0
    /// The connection and the process it belongs to: a child after `fork()` opens its own.
    var connection: KeysealConnection?
    var connectionPID: pid_t = 0
    var sessions: [CK_SESSION_HANDLE: Session] = [:]
    var nextSession: CK_SESSION_HANDLE = 1
    var objects: [CK_OBJECT_HANDLE: P11Object] = [:]
    /// Handles by source, so that an object keeps its handle from one listing to the next.
    var handles: [P11Object.Source: CK_OBJECT_HANDLE] = [:]
    var nextObject: CK_OBJECT_HANDLE = 1
    var nextDerived: UInt64 = 1
    var loggedIn = false

    /// The connection of this process to keyseald (`KEYSEAL_SOCKET`, else the user's, else the system's socket).
    func client() -> KeysealConnection {
        let pid = getpid()
        if let connection, connectionPID == pid { return connection }
        // After fork(): the parent's connection is closed in this process only (its lock is free: every use of it
        // happens under the module lock, which the fork handlers hold across the fork) and never used again.
        connection?.disconnect()
        var environment: [String: String] = [:]
        for name in ["KEYSEAL_SOCKET", "XDG_RUNTIME_DIR"] {
            if let value = getenv(name) { environment[name] = String(cString: value) }
        }
        let fresh = KeysealConnection(socketPath: Wire.defaultSocketPath(environment: environment))
        connection = fresh
        connectionPID = pid
        return fresh
    }

    func send(_ request: WireRequest) throws(P11Error) -> WireResponse {
        do {
            return try client().send(request)
        } catch {
            throw P11Error(error)
        }
    }

    func reset() {
        connection?.disconnect()
        connection = nil
        sessions = [:]
        objects = [:]
        handles = [:]
        loggedIn = false
    }

    func session(_ handle: CK_SESSION_HANDLE) throws(P11Error) -> Session {
        guard initialized else { throw P11Error(CKR_CRYPTOKI_NOT_INITIALIZED) }
        guard let session = sessions[handle] else { throw P11Error(CKR_SESSION_HANDLE_INVALID) }
        return session
    }

    // MARK: Objects

    /// Lists the caller's keys and certificates again from keyseald; handles stay those of earlier listings.
    func refreshObjects() throws(P11Error) {
        let keyQuery = ItemQuery(
            itemClass: .key,
            synchronizable: .any,
            limit: .all,
            limitGiven: true,
            returns: [.attributes, .persistentRef]
        )
        var listed: [P11Object] = []
        var records: [ItemRecord] = []
        do throws(KeychainError) {
            if case .records(let found) = try client().send(.copyMatching(keyQuery)) { records = found }
        } catch  where error.status == KeychainStatus.itemNotFound {
            records = []
        } catch {
            throw P11Error(error)
        }
        for record in records {
            guard let reference = record.persistentRef else { continue }
            do throws(KeychainError) {
                let operation = WireKeyOperation(reference: reference, kind: .describe)
                if case .key(let key) = try client().send(.keyOperation(operation)) {
                    listed += P11Object.keyObjects(key)
                }
            } catch  where error.status == KeychainStatus.noSuchKeychain || error.status == KeychainStatus.io {
                throw P11Error(error)
            } catch {
                // A key of a class that cannot be read now (locked) or gone meanwhile: not listed.
            }
        }
        do throws(KeychainError) {
            let certificateQuery = ItemQuery(
                itemClass: .certificate,
                synchronizable: .any,
                limit: .all,
                limitGiven: true
            )
            if case .certificates(let certificates) = try client().send(.certificates(certificateQuery)) {
                listed += certificates.compactMap(P11Object.certificateObject)
            }
        } catch  where error.status == KeychainStatus.noSuchKeychain || error.status == KeychainStatus.io {
            throw P11Error(error)
        } catch {
            // No certificates (or none readable now).
        }
        // Session objects are not items: they stay as they are.
        var fresh: [CK_OBJECT_HANDLE: P11Object] = objects.filter { $0.value.isSessionObject }
        for object in listed {
            let handle: CK_OBJECT_HANDLE
            if let known = handles[object.source] {
                handle = known
            } else {
                handle = nextObject
                nextObject += 1
                handles[object.source] = handle
            }
            fresh[handle] = object
        }
        objects = fresh
    }

    func object(_ handle: CK_OBJECT_HANDLE) throws(P11Error) -> P11Object {
        if let object = objects[handle] { return object }
        throw P11Error(CKR_OBJECT_HANDLE_INVALID)
    }

    func handle(for source: P11Object.Source) -> CK_OBJECT_HANDLE? {
        guard let handle = handles[source], objects[handle] != nil else { return nil }
        return handle
    }

    /// The store's status (passcode set, lock state), asked of keyseald now.
    func status() throws(P11Error) -> StoreStatus {
        guard case .status(let status) = try send(.status) else { throw P11Error(CKR_DEVICE_ERROR) }
        return status
    }

    /// Unlocks the store with `passcode` (keyseald's `unlock`, an administrator's request): a wrong one is
    /// CKR_PIN_INCORRECT and counts as a failed try, a hardware lockout CKR_PIN_LOCKED.
    func unlock(_ passcode: SecretBytes) throws(P11Error) {
        do throws(KeychainError) {
            _ = try client().send(.unlock(passcode: passcode))
        } catch {
            switch error.status {
            case KeychainStatus.authFailed:
                throw P11Error(error.triesLeft == 0 ? CKR_PIN_LOCKED : CKR_PIN_INCORRECT)
            default: throw P11Error(error)
            }
        }
    }

    /// Adds `object` with a new handle.
    func add(_ object: P11Object) -> CK_OBJECT_HANDLE {
        let handle = nextObject
        nextObject += 1
        objects[handle] = object
        return handle
    }

    /// Removes the session objects `condition` selects; a session key's private half is released in keyseald too
    /// (its connection's close releases it anyway, whatever fails here).
    func removeSessionObjects(where condition: (P11Object) -> Bool) {
        for (handle, object) in objects where object.isSessionObject && condition(object) {
            objects[handle] = nil
            if case .privateKey(let reference) = object.source { releaseSessionKey(reference) }
        }
    }

    /// Asks keyseald to forget a session key it holds for this connection.
    func releaseSessionKey(_ reference: Data) {
        guard connection != nil, connectionPID == getpid() else { return }
        let query = ItemQuery(itemClass: .key, synchronizable: .any, persistentRef: reference, limit: .all)
        _ = try? client().send(.delete(query))
    }
}

/// The module lock: every entry point holds it for its whole call (keyseald answers one request at a time per
/// connection anyway); the fork handlers hold it across `fork()`.
nonisolated(unsafe) let moduleLock: UnsafeMutablePointer<pthread_mutex_t> = {
    let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    pthread_mutex_init(lock, nil)
    keyseal_p11_install_fork_handlers(
        { pthread_mutex_lock(moduleLock) },
        { pthread_mutex_unlock(moduleLock) },
        { pthread_mutex_unlock(moduleLock) }
    )
    return lock
}()

nonisolated(unsafe) let moduleState = ModuleState()

/// Runs an entry point's body under the module lock and turns its outcome into a CKR.
func p11Call(requireInitialized: Bool = true, _ body: (ModuleState) throws(P11Error) -> Void) -> CK_RV {
    let lock = moduleLock
    pthread_mutex_lock(lock)
    defer { pthread_mutex_unlock(lock) }
    if requireInitialized && !moduleState.initialized { return CK_RV(CKR_CRYPTOKI_NOT_INITIALIZED) }
    do {
        try body(moduleState)
        return CK_RV(CKR_OK)
    } catch {
        return error.rv
    }
}

/// `count` bytes at `pointer`, or nil when the pointer is null and count is not zero.
func bytes(_ pointer: UnsafeMutablePointer<CK_BYTE>?, _ count: CK_ULONG) -> [UInt8]? {
    guard count > 0 else { return [] }
    guard let pointer, count <= CK_ULONG(Wire.valueLimit) else { return nil }
    return Array(UnsafeBufferPointer(start: pointer, count: Int(count)))
}

/// Copies `string` into a fixed blank-padded field of a PKCS#11 info structure.
func pad<T>(_ field: inout T, _ string: String) {
    withUnsafeMutableBytes(of: &field) { raw in
        for index in raw.indices { raw[index] = 0x20 }
        let utf8 = Array(string.utf8.prefix(raw.count))
        for (index, byte) in utf8.enumerated() { raw[index] = byte }
    }
}

/// The template's attributes as (type, value) pairs; a value pointer that is null with a length is bad arguments.
func template(
    _ pointer: UnsafeMutablePointer<CK_ATTRIBUTE>?,
    _ count: CK_ULONG
) throws(P11Error)
    -> [(CK_ATTRIBUTE_TYPE, [UInt8])]
{
    guard count > 0 else { return [] }
    guard let pointer, count < 4096 else { throw P11Error(CKR_ARGUMENTS_BAD) }
    var result: [(CK_ATTRIBUTE_TYPE, [UInt8])] = []
    for index in 0..<Int(count) {
        let attribute = pointer[index]
        let length = attribute.ulValueLen
        if length == 0 {
            result.append((attribute.type, []))
            continue
        }
        guard let value = attribute.pValue, length <= CK_ULONG(Wire.valueLimit) else {
            throw P11Error(CKR_ATTRIBUTE_VALUE_INVALID)
        }
        result.append((attribute.type, Array(UnsafeRawBufferPointer(start: value, count: Int(length)))))
    }
    return result
}

func ulongValue(_ bytes: [UInt8]) -> CK_ULONG? {
    guard bytes.count == MemoryLayout<CK_ULONG>.size else { return nil }
    return bytes.withUnsafeBytes { $0.loadUnaligned(as: CK_ULONG.self) }
}

func boolValue(_ bytes: [UInt8]) -> Bool? {
    guard bytes.count == 1 else { return nil }
    return bytes[0] != 0
}
