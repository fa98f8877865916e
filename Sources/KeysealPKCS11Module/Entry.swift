import CKeysealPKCS11Entry
import FoundationEssentials
import Glibc
import KeysealClient
import KeysealModel

// The PKCS#11 entry points (entry.c's function list points at these). Each validates its pointers, holds the module
// lock for its call and answers a CKR; nothing here crashes on bad input.

// MARK: - General

@_cdecl("keyseal_p11_Initialize")
func p11Initialize(_ arguments: UnsafeMutableRawPointer?) -> CK_RV {
    if let arguments {
        let initialize = arguments.loadUnaligned(as: CK_C_INITIALIZE_ARGS.self)
        let callbacks = [
            initialize.CreateMutex != nil, initialize.DestroyMutex != nil, initialize.LockMutex != nil,
            initialize.UnlockMutex != nil,
        ]
        // Either all mutex callbacks or none; with none the module's own locks serve (CKF_OS_LOCKING_OK or not: it
        // uses the operating system's locks either way, which the standard allows).
        if callbacks.contains(true) && callbacks.contains(false) { return CK_RV(CKR_ARGUMENTS_BAD) }
        if initialize.pReserved != nil { return CK_RV(CKR_ARGUMENTS_BAD) }
        if callbacks.contains(true) && initialize.flags & CK_FLAGS(CKF_OS_LOCKING_OK) == 0 {
            return CK_RV(CKR_CANT_LOCK)
        }
    }
    return p11Call(requireInitialized: false) { state throws(P11Error) in
        // Initialized by this process, whether or not keyseald was reached since (PKCS#11 v2.40 §5.4).
        if state.initialized && state.initializedPID == getpid() {
            throw P11Error(CKR_CRYPTOKI_ALREADY_INITIALIZED)
        }
        // A child after fork() initializes again: what the parent had is dropped.
        state.reset()
        state.initialized = true
        state.initializedPID = getpid()
    }
}

@_cdecl("keyseal_p11_Finalize")
func p11Finalize(_ reserved: UnsafeMutableRawPointer?) -> CK_RV {
    guard reserved == nil else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { state throws(P11Error) in
        state.reset()
        state.initialized = false
    }
}

@_cdecl("keyseal_p11_GetInfo")
func p11GetInfo(_ info: UnsafeMutablePointer<CK_INFO>?) -> CK_RV {
    guard let info else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { _ throws(P11Error) in
        var value = CK_INFO()
        value.cryptokiVersion = CK_VERSION(major: 2, minor: 40)
        pad(&value.manufacturerID, "Keyseal")
        pad(&value.libraryDescription, "Keyseal PKCS#11 module")
        value.libraryVersion = CK_VERSION(major: 1, minor: 0)
        info.pointee = value
    }
}

// MARK: - Slots and tokens

@_cdecl("keyseal_p11_GetSlotList")
func p11GetSlotList(
    _ tokenPresent: CK_BBOOL,
    _ list: UnsafeMutablePointer<CK_SLOT_ID>?,
    _ count: UnsafeMutablePointer<CK_ULONG>?
) -> CK_RV {
    guard let count else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { _ throws(P11Error) in
        // The slot is listed even while keyseald does not answer: its token is then absent (C_GetTokenInfo says
        // CKR_TOKEN_NOT_PRESENT), and present again when the daemon returns.
        try deliverList([slotID], into: list, count)
    }
}

/// PKCS#11's convention for lists: without `list`, the count it needs; with room for fewer, that count and
/// CKR_BUFFER_TOO_SMALL; else the items and their count.
func deliverList<Item>(
    _ items: [Item],
    into list: UnsafeMutablePointer<Item>?,
    _ count: UnsafeMutablePointer<CK_ULONG>
) throws(P11Error) {
    let needed = CK_ULONG(items.count)
    defer { count.pointee = needed }
    guard let list else { return }
    guard count.pointee >= needed else { throw P11Error(CKR_BUFFER_TOO_SMALL) }
    for (index, item) in items.enumerated() { list[index] = item }
}

@_cdecl("keyseal_p11_GetSlotInfo")
func p11GetSlotInfo(_ slot: CK_SLOT_ID, _ info: UnsafeMutablePointer<CK_SLOT_INFO>?) -> CK_RV {
    guard let info else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { state throws(P11Error) in
        guard slot == slotID else { throw P11Error(CKR_SLOT_ID_INVALID) }
        var value = CK_SLOT_INFO()
        pad(&value.slotDescription, "keyseald")
        pad(&value.manufacturerID, "Keyseal")
        let present = (try? state.send(.ping)) != nil
        value.flags = present ? CK_FLAGS(CKF_TOKEN_PRESENT) : 0
        value.flags |= CK_FLAGS(CKF_HW_SLOT)
        value.hardwareVersion = CK_VERSION(major: 1, minor: 0)
        value.firmwareVersion = CK_VERSION(major: 1, minor: 0)
        info.pointee = value
    }
}

@_cdecl("keyseal_p11_GetTokenInfo")
func p11GetTokenInfo(_ slot: CK_SLOT_ID, _ info: UnsafeMutablePointer<CK_TOKEN_INFO>?) -> CK_RV {
    guard let info else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { state throws(P11Error) in
        guard slot == slotID else { throw P11Error(CKR_SLOT_ID_INVALID) }
        let status: StoreStatus
        do throws(P11Error) {
            guard case .status(let answered) = try state.send(.status) else { throw P11Error(CKR_DEVICE_ERROR) }
            status = answered
        } catch {
            throw error.rv == CK_RV(CKR_DEVICE_REMOVED) ? P11Error(CKR_TOKEN_NOT_PRESENT) : error
        }
        var value = CK_TOKEN_INFO()
        pad(&value.label, "Keyseal")
        pad(&value.manufacturerID, "Keyseal")
        pad(&value.model, status.device.backend)
        pad(&value.serialNumber, "keyseald")
        var flags = CK_FLAGS(CKF_TOKEN_INITIALIZED) | CK_FLAGS(CKF_USER_PIN_INITIALIZED) | CK_FLAGS(CKF_RNG)
        if status.passcodeSet { flags |= CK_FLAGS(CKF_LOGIN_REQUIRED) }
        // The keychain's own unlock (`keyseal unlock`, an askpass program) is the PIN pad: C_Login needs no PIN while
        // the store is unlocked ("Login is the store's unlock", docs/PKCS11.md).
        flags |= CK_FLAGS(CKF_PROTECTED_AUTHENTICATION_PATH)
        value.flags = flags
        value.ulMaxSessionCount = CK_ULONG(CK_EFFECTIVELY_INFINITE)
        value.ulMaxRwSessionCount = CK_ULONG(CK_EFFECTIVELY_INFINITE)
        value.ulSessionCount = CK_ULONG(state.sessions.count)
        value.ulRwSessionCount = CK_ULONG(
            state.sessions.values.filter { $0.flags & CK_FLAGS(CKF_RW_SESSION) != 0 }.count
        )
        value.ulMaxPinLen = 1024
        value.ulMinPinLen = status.passcodeSet ? 1 : 0
        value.ulTotalPublicMemory = unavailableInformation
        value.ulFreePublicMemory = unavailableInformation
        value.ulTotalPrivateMemory = unavailableInformation
        value.ulFreePrivateMemory = unavailableInformation
        value.hardwareVersion = CK_VERSION(major: 1, minor: 0)
        value.firmwareVersion = CK_VERSION(major: 1, minor: 0)
        pad(&value.utcTime, "")
        info.pointee = value
    }
}

@_cdecl("keyseal_p11_GetMechanismList")
func p11GetMechanismList(
    _ slot: CK_SLOT_ID,
    _ list: UnsafeMutablePointer<CK_MECHANISM_TYPE>?,
    _ count: UnsafeMutablePointer<CK_ULONG>?
) -> CK_RV {
    guard let count else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { _ throws(P11Error) in
        guard slot == slotID else { throw P11Error(CKR_SLOT_ID_INVALID) }
        try deliverList(Mechanisms.all, into: list, count)
    }
}

@_cdecl("keyseal_p11_GetMechanismInfo")
func p11GetMechanismInfo(
    _ slot: CK_SLOT_ID,
    _ type: CK_MECHANISM_TYPE,
    _ info: UnsafeMutablePointer<CK_MECHANISM_INFO>?
) -> CK_RV {
    guard let info else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { _ throws(P11Error) in
        guard slot == slotID else { throw P11Error(CKR_SLOT_ID_INVALID) }
        guard let value = Mechanisms.info(type) else { throw P11Error(CKR_MECHANISM_INVALID) }
        info.pointee = value
    }
}

// MARK: - Sessions

@_cdecl("keyseal_p11_OpenSession")
func p11OpenSession(
    _ slot: CK_SLOT_ID,
    _ flags: CK_FLAGS,
    _ application: UnsafeMutableRawPointer?,
    _ notify: CK_NOTIFY?,
    _ session: UnsafeMutablePointer<CK_SESSION_HANDLE>?
) -> CK_RV {
    guard let session else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { state throws(P11Error) in
        guard slot == slotID else { throw P11Error(CKR_SLOT_ID_INVALID) }
        guard flags & CK_FLAGS(CKF_SERIAL_SESSION) != 0 else { throw P11Error(CKR_SESSION_PARALLEL_NOT_SUPPORTED) }
        do throws(P11Error) {
            _ = try state.send(.ping)
        } catch {
            throw error.rv == CK_RV(CKR_DEVICE_REMOVED) ? P11Error(CKR_TOKEN_NOT_PRESENT) : error
        }
        let handle = state.nextSession
        state.nextSession += 1
        state.sessions[handle] = Session(flags: flags)
        session.pointee = handle
    }
}

@_cdecl("keyseal_p11_CloseSession")
func p11CloseSession(_ handle: CK_SESSION_HANDLE) -> CK_RV {
    p11Call { state throws(P11Error) in
        _ = try state.session(handle)
        state.sessions[handle] = nil
        state.removeSessionObjects { $0.session == handle }
        if state.sessions.isEmpty { state.loggedIn = false }
    }
}

@_cdecl("keyseal_p11_CloseAllSessions")
func p11CloseAllSessions(_ slot: CK_SLOT_ID) -> CK_RV {
    p11Call { state throws(P11Error) in
        guard slot == slotID else { throw P11Error(CKR_SLOT_ID_INVALID) }
        state.sessions = [:]
        state.removeSessionObjects { _ in true }
        state.loggedIn = false
    }
}

@_cdecl("keyseal_p11_GetSessionInfo")
func p11GetSessionInfo(_ handle: CK_SESSION_HANDLE, _ info: UnsafeMutablePointer<CK_SESSION_INFO>?) -> CK_RV {
    guard let info else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { state throws(P11Error) in
        let session = try state.session(handle)
        let rw = session.flags & CK_FLAGS(CKF_RW_SESSION) != 0
        var value = CK_SESSION_INFO()
        value.slotID = slotID
        value.flags = session.flags
        value.state =
            state.loggedIn
            ? CK_STATE(rw ? CKS_RW_USER_FUNCTIONS : CKS_RO_USER_FUNCTIONS)
            : CK_STATE(rw ? CKS_RW_PUBLIC_SESSION : CKS_RO_PUBLIC_SESSION)
        value.ulDeviceError = 0
        info.pointee = value
    }
}

@_cdecl("keyseal_p11_Login")
func p11Login(
    _ handle: CK_SESSION_HANDLE,
    _ userType: CK_USER_TYPE,
    _ pin: UnsafeMutablePointer<CK_UTF8CHAR>?,
    _ pinLength: CK_ULONG
) -> CK_RV {
    var askpass: [String]?
    let first = p11Call { state throws(P11Error) in
        _ = try state.session(handle)
        guard userType == CK_USER_TYPE(CKU_USER) else { throw P11Error(CKR_USER_TYPE_INVALID) }
        guard !state.loggedIn else { throw P11Error(CKR_USER_ALREADY_LOGGED_IN) }
        let status = try state.status()
        // No passcode: nothing to check (the token does not set CKF_LOGIN_REQUIRED); any PIN is accepted.
        guard status.passcodeSet else {
            state.loggedIn = true
            return
        }
        guard pinLength > 0 else {
            // No PIN (the protected authentication path): the store's own unlock stands. Unlocked, the login is
            // done; locked, the askpass program asks for the passcode, or the login fails without a try counted.
            if status.lockState.allows(.whenUnlocked, passcodeSet: true) {
                state.loggedIn = true
                return
            }
            guard let program = askpassProgram() else { throw P11Error(CKR_PIN_INCORRECT) }
            askpass = program
            return
        }
        guard let pin else { throw P11Error(CKR_ARGUMENTS_BAD) }
        guard pinLength <= 1024 else { throw P11Error(CKR_PIN_INCORRECT) }
        // A PIN given: the passcode, tried as `keyseal unlock` tries it.
        try state.unlock(SecretBytes(copying: UnsafeBufferPointer(start: pin, count: Int(pinLength))))
        state.loggedIn = true
    }
    guard first == CK_RV(CKR_OK), let askpass else { return first }
    // The askpass program runs without the module's lock: the process's other threads go on meanwhile.
    let passcode: SecretBytes
    do {
        let child = try PromptProgram.spawn(askpass + ["Unlock the Keyseal keychain"])
        guard case .exited(0, let output) = child.finish(timeoutSeconds: askpassTimeoutSeconds()) else {
            return CK_RV(CKR_FUNCTION_CANCELED)
        }
        passcode = PromptProgram.firstLine(output)
    } catch {
        return CK_RV(CKR_FUNCTION_FAILED)
    }
    guard !passcode.isEmpty else { return CK_RV(CKR_FUNCTION_CANCELED) }
    return p11Call { state throws(P11Error) in
        _ = try state.session(handle)
        guard !state.loggedIn else { return }
        try state.unlock(passcode)
        state.loggedIn = true
    }
}

/// The askpass program a login without a PIN runs while the store is locked: `$KEYSEAL_ASKPASS` (not
/// `$SSH_ASKPASS`: the module runs inside any program, a server among them, which should not start a prompt unasked).
func askpassProgram() -> [String]? {
    guard let value = getenv("KEYSEAL_ASKPASS"), value.pointee != 0 else { return nil }
    return [String(cString: value)]
}

/// `$KEYSEAL_ASKPASS_TIMEOUT` seconds, default 120.
func askpassTimeoutSeconds() -> Int {
    guard let value = getenv("KEYSEAL_ASKPASS_TIMEOUT"), let seconds = Int(String(cString: value)), seconds > 0 else {
        return PromptProgram.defaultTimeoutSeconds
    }
    return seconds
}

@_cdecl("keyseal_p11_Logout")
func p11Logout(_ handle: CK_SESSION_HANDLE) -> CK_RV {
    p11Call { state throws(P11Error) in
        _ = try state.session(handle)
        guard state.loggedIn else { throw P11Error(CKR_USER_NOT_LOGGED_IN) }
        // The module's login ends; the store stays as it is (locking it is an administrator's `keyseal lock`).
        state.loggedIn = false
    }
}

// MARK: - Objects

@_cdecl("keyseal_p11_FindObjectsInit")
func p11FindObjectsInit(
    _ handle: CK_SESSION_HANDLE,
    _ attributes: UnsafeMutablePointer<CK_ATTRIBUTE>?,
    _ count: CK_ULONG
) -> CK_RV {
    p11Call { state throws(P11Error) in
        var session = try state.session(handle)
        guard session.found == nil else { throw P11Error(CKR_OPERATION_ACTIVE) }
        let wanted = try template(attributes, count)
        try state.refreshObjects()
        // Session objects are the application's: every session of this process sees them (PKCS#11 v2.40 §4.4).
        session.found = state.objects.filter { $0.value.matches(wanted) }.keys.sorted()
        state.sessions[handle] = session
    }
}

@_cdecl("keyseal_p11_FindObjects")
func p11FindObjects(
    _ handle: CK_SESSION_HANDLE,
    _ objects: UnsafeMutablePointer<CK_OBJECT_HANDLE>?,
    _ maximum: CK_ULONG,
    _ count: UnsafeMutablePointer<CK_ULONG>?
) -> CK_RV {
    guard let count else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { state throws(P11Error) in
        var session = try state.session(handle)
        guard var found = session.found else { throw P11Error(CKR_OPERATION_NOT_INITIALIZED) }
        guard let objects else {
            guard maximum == 0 else { throw P11Error(CKR_ARGUMENTS_BAD) }
            count.pointee = 0
            return
        }
        let taken = Array(found.prefix(Int(min(maximum, CK_ULONG(Int32.max)))))
        for (index, object) in taken.enumerated() { objects[index] = object }
        found.removeFirst(taken.count)
        count.pointee = CK_ULONG(taken.count)
        session.found = found
        state.sessions[handle] = session
    }
}

@_cdecl("keyseal_p11_FindObjectsFinal")
func p11FindObjectsFinal(_ handle: CK_SESSION_HANDLE) -> CK_RV {
    p11Call { state throws(P11Error) in
        var session = try state.session(handle)
        guard session.found != nil else { throw P11Error(CKR_OPERATION_NOT_INITIALIZED) }
        session.found = nil
        state.sessions[handle] = session
    }
}

@_cdecl("keyseal_p11_GetAttributeValue")
func p11GetAttributeValue(
    _ handle: CK_SESSION_HANDLE,
    _ objectHandle: CK_OBJECT_HANDLE,
    _ attributes: UnsafeMutablePointer<CK_ATTRIBUTE>?,
    _ count: CK_ULONG
) -> CK_RV {
    p11Call { state throws(P11Error) in
        _ = try state.session(handle)
        let object = try state.object(objectHandle)
        guard count > 0 else { return }
        guard let attributes, count < 4096 else { throw P11Error(CKR_ARGUMENTS_BAD) }
        // Every attribute is answered; the result is the last failure (as the standard orders: sensitive, then
        // invalid type, then too small).
        var result = CK_RV(CKR_OK)
        let unavailable = unavailableInformation
        for index in 0..<Int(count) {
            let type = attributes[index].type
            if type == CK_ATTRIBUTE_TYPE(CKA_VALUE), let secret = object.secret {
                if let destination = attributes[index].pValue {
                    guard attributes[index].ulValueLen >= CK_ULONG(secret.count) else {
                        attributes[index].ulValueLen = unavailable
                        result = CK_RV(CKR_BUFFER_TOO_SMALL)
                        continue
                    }
                    secret.withUnsafeBytes { destination.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                }
                attributes[index].ulValueLen = CK_ULONG(secret.count)
                continue
            }
            if object.sensitive.contains(type) {
                attributes[index].ulValueLen = unavailable
                result = CK_RV(CKR_ATTRIBUTE_SENSITIVE)
                continue
            }
            guard let value = object.attributes[type] else {
                attributes[index].ulValueLen = unavailable
                result = CK_RV(CKR_ATTRIBUTE_TYPE_INVALID)
                continue
            }
            if let destination = attributes[index].pValue {
                guard attributes[index].ulValueLen >= CK_ULONG(value.count) else {
                    attributes[index].ulValueLen = unavailable
                    result = CK_RV(CKR_BUFFER_TOO_SMALL)
                    continue
                }
                value.withUnsafeBytes { raw in
                    if raw.count > 0 { destination.copyMemory(from: raw.baseAddress!, byteCount: raw.count) }
                }
            }
            attributes[index].ulValueLen = CK_ULONG(value.count)
        }
        if result != CK_RV(CKR_OK) { throw P11Error(result) }
    }
}

@_cdecl("keyseal_p11_CreateObject")
func p11CreateObject(
    _ handle: CK_SESSION_HANDLE,
    _ attributes: UnsafeMutablePointer<CK_ATTRIBUTE>?,
    _ count: CK_ULONG,
    _ object: UnsafeMutablePointer<CK_OBJECT_HANDLE>?
) -> CK_RV {
    guard let object else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { state throws(P11Error) in
        let session = try state.session(handle)
        let given = Dictionary(try template(attributes, count), uniquingKeysWith: { _, last in last })
        guard let objectClass = given[CK_ATTRIBUTE_TYPE(CKA_CLASS)].flatMap(ulongValue) else {
            throw P11Error(CKR_TEMPLATE_INCOMPLETE)
        }
        // Keys are generated inside keyseald (C_GenerateKeyPair), never imported through here.
        guard ![CKO_PRIVATE_KEY, CKO_SECRET_KEY].map({ CK_ULONG($0) }).contains(objectClass) else {
            throw P11Error(CKR_FUNCTION_NOT_SUPPORTED)
        }
        // CKA_TOKEN defaults to false: a session object, which a read-only session may make too.
        guard try isTokenObject(given) else {
            object.pointee = state.add(try sessionObject(state, objectClass, given, session: handle))
            return
        }
        guard session.flags & CK_FLAGS(CKF_RW_SESSION) != 0 else { throw P11Error(CKR_SESSION_READ_ONLY) }
        object.pointee = try storeCertificate(state, objectClass, given)
    }
}

/// The template's CKA_TOKEN (default false); a value that is not a CK_BBOOL is CKR_ATTRIBUTE_VALUE_INVALID.
func isTokenObject(_ given: [CK_ATTRIBUTE_TYPE: [UInt8]]) throws(P11Error) -> Bool {
    guard let value = given[CK_ATTRIBUTE_TYPE(CKA_TOKEN)] else { return false }
    guard let flag = boolValue(value) else { throw P11Error(CKR_ATTRIBUTE_VALUE_INVALID) }
    return flag
}

/// A session object of `objectClass` (a certificate, a public key, data): every attribute as the caller gave it,
/// byte for byte, with the standard's defaults for the ones not given. A certificate's DER must parse; its subject,
/// issuer and serial number are read from it where the template has none.
func sessionObject(
    _ state: ModuleState,
    _ objectClass: CK_ULONG,
    _ given: [CK_ATTRIBUTE_TYPE: [UInt8]],
    session: CK_SESSION_HANDLE
) throws(P11Error) -> P11Object {
    var attributes: [CK_ATTRIBUTE_TYPE: [UInt8]] = [
        CK_ATTRIBUTE_TYPE(CKA_TOKEN): Encode.bool(false),
        CK_ATTRIBUTE_TYPE(CKA_PRIVATE): Encode.bool(false),
        CK_ATTRIBUTE_TYPE(CKA_MODIFIABLE): Encode.bool(true),
        CK_ATTRIBUTE_TYPE(CKA_LABEL): [],
    ]
    switch objectClass {
    case CK_ULONG(CKO_CERTIFICATE):
        let type = given[CK_ATTRIBUTE_TYPE(CKA_CERTIFICATE_TYPE)].flatMap(ulongValue) ?? CK_ULONG(CKC_X_509)
        guard type == CK_ULONG(CKC_X_509) else { throw P11Error(CKR_ATTRIBUTE_VALUE_INVALID) }
        guard let der = given[CK_ATTRIBUTE_TYPE(CKA_VALUE)] else { throw P11Error(CKR_TEMPLATE_INCOMPLETE) }
        guard let fields = DERReader.certificateFields(der) else { throw P11Error(CKR_ATTRIBUTE_VALUE_INVALID) }
        attributes[CK_ATTRIBUTE_TYPE(CKA_CERTIFICATE_TYPE)] = Encode.ulong(CK_ULONG(CKC_X_509))
        attributes[CK_ATTRIBUTE_TYPE(CKA_TRUSTED)] = Encode.bool(false)
        attributes[CK_ATTRIBUTE_TYPE(CKA_CERTIFICATE_CATEGORY)] = Encode.ulong(CK_ULONG(0))
        attributes[CK_ATTRIBUTE_TYPE(CKA_ID)] = []
        attributes[CK_ATTRIBUTE_TYPE(CKA_SUBJECT)] = fields.subject
        attributes[CK_ATTRIBUTE_TYPE(CKA_ISSUER)] = fields.issuer
        attributes[CK_ATTRIBUTE_TYPE(CKA_SERIAL_NUMBER)] = fields.serial
    case CK_ULONG(CKO_PUBLIC_KEY):
        guard given[CK_ATTRIBUTE_TYPE(CKA_KEY_TYPE)].flatMap(ulongValue) != nil else {
            throw P11Error(CKR_TEMPLATE_INCOMPLETE)
        }
        attributes[CK_ATTRIBUTE_TYPE(CKA_ID)] = []
        attributes[CK_ATTRIBUTE_TYPE(CKA_LOCAL)] = Encode.bool(false)
    case CK_ULONG(CKO_DATA):
        attributes[CK_ATTRIBUTE_TYPE(CKA_APPLICATION)] = []
        attributes[CK_ATTRIBUTE_TYPE(CKA_OBJECT_ID)] = []
        attributes[CK_ATTRIBUTE_TYPE(CKA_VALUE)] = []
    default:
        throw P11Error(CKR_ATTRIBUTE_VALUE_INVALID)
    }
    attributes.merge(given) { _, caller in caller }
    state.nextDerived += 1
    return P11Object(source: .created(state.nextDerived), attributes: attributes, session: session)
}

/// A token certificate: stored in keyseald as a certificate item, which keeps its DER and a UTF-8 label; every other
/// attribute of the template must be one the item gives back equal (its CKA_ID is its key's ID, the SHA-1 of its public
/// key). What the item cannot keep is refused, never accepted and lost: an attribute it does not have
/// (`CKA_HASH_OF_SUBJECT_PUBLIC_KEY`, …) is CKR_ATTRIBUTE_TYPE_INVALID, a value it would give back otherwise (a label
/// that is not UTF-8, another CKA_ID, CKA_PRIVATE true) CKR_ATTRIBUTE_VALUE_INVALID.
func storeCertificate(
    _ state: ModuleState,
    _ objectClass: CK_ULONG,
    _ given: [CK_ATTRIBUTE_TYPE: [UInt8]]
) throws(P11Error) -> CK_OBJECT_HANDLE {
    // Certificates only: data objects and public keys have no item to live in.
    guard objectClass == CK_ULONG(CKO_CERTIFICATE) else { throw P11Error(CKR_FUNCTION_NOT_SUPPORTED) }
    if let type = given[CK_ATTRIBUTE_TYPE(CKA_CERTIFICATE_TYPE)].flatMap(ulongValue), type != CK_ULONG(CKC_X_509) {
        throw P11Error(CKR_ATTRIBUTE_VALUE_INVALID)
    }
    guard let der = given[CK_ATTRIBUTE_TYPE(CKA_VALUE)], let fields = DERReader.certificateFields(der) else {
        throw P11Error(
            given[CK_ATTRIBUTE_TYPE(CKA_VALUE)] == nil ? CKR_TEMPLATE_INCOMPLETE : CKR_ATTRIBUTE_VALUE_INVALID
        )
    }
    var text: String?
    if let label = given[CK_ATTRIBUTE_TYPE(CKA_LABEL)] {
        guard let utf8 = String(validating: label, as: UTF8.self) else { throw P11Error(CKR_ATTRIBUTE_VALUE_INVALID) }
        text = utf8
    }
    // What the item gives back without being told: the template may repeat it, not change it.
    let derived = P11Object.tokenCertificateAttributes(der: der, fields: fields)
    for (type, value) in given where type != CK_ATTRIBUTE_TYPE(CKA_LABEL) && type != CK_ATTRIBUTE_TYPE(CKA_ID) {
        guard let kept = derived[type] else { throw P11Error(CKR_ATTRIBUTE_TYPE_INVALID) }
        guard kept == value else { throw P11Error(CKR_ATTRIBUTE_VALUE_INVALID) }
    }
    var itemAttributes: [String: AttributeValue] = [:]
    if let text { itemAttributes[AttributeKey.label] = .string(text) }
    _ = try state.send(.add(NewItem(itemClass: .certificate, attributes: itemAttributes, data: Data(der))))
    try state.refreshObjects()
    guard
        let created = state.objects.first(where: {
            if case .certificate = $0.value.source {
                $0.value.attributes[CK_ATTRIBUTE_TYPE(CKA_VALUE)] == der
            } else {
                false
            }
        })
    else { throw P11Error(CKR_DEVICE_ERROR) }
    // The item's CKA_ID is its key's ID: another one asked for is refused, and the item made is taken back.
    if let id = given[CK_ATTRIBUTE_TYPE(CKA_ID)], created.value.attributes[CK_ATTRIBUTE_TYPE(CKA_ID)] != id {
        if let reference = created.value.reference {
            let query = ItemQuery(itemClass: .certificate, synchronizable: .any, persistentRef: reference, limit: .all)
            _ = try? state.send(.delete(query))
            try? state.refreshObjects()
        }
        throw P11Error(CKR_ATTRIBUTE_VALUE_INVALID)
    }
    return created.key
}

@_cdecl("keyseal_p11_DestroyObject")
func p11DestroyObject(_ handle: CK_SESSION_HANDLE, _ objectHandle: CK_OBJECT_HANDLE) -> CK_RV {
    p11Call { state throws(P11Error) in
        let session = try state.session(handle)
        let object = try state.object(objectHandle)
        // A session object, which a read-only session may destroy too: a session key's private half is released in
        // keyseald; its public half is attributes in this process.
        if object.isSessionObject {
            state.objects[objectHandle] = nil
            if case .privateKey(let reference) = object.source { state.releaseSessionKey(reference) }
            return
        }
        guard session.flags & CK_FLAGS(CKF_RW_SESSION) != 0 else { throw P11Error(CKR_SESSION_READ_ONLY) }
        let query: ItemQuery
        switch object.source {
        case .privateKey(let reference), .publicKey(let reference):
            // A key item is one pair: destroying either object deletes the item (and a hardware key's object).
            query = ItemQuery(itemClass: .key, synchronizable: .any, persistentRef: reference, limit: .all)
        case .certificate(let reference):
            query = ItemQuery(itemClass: .certificate, synchronizable: .any, persistentRef: reference, limit: .all)
        case .derived, .created: return
        }
        do throws(KeychainError) {
            _ = try state.client().send(.delete(query))
        } catch {
            throw error.status == KeychainStatus.itemNotFound ? P11Error(CKR_OBJECT_HANDLE_INVALID) : P11Error(error)
        }
        try state.refreshObjects()
    }
}

// MARK: - Signing and decryption

/// The key of an operation, checked as every operation checks it: known to the session's module and allowed the use
/// (`permission`: CKA_SIGN, CKA_VERIFY, CKA_DECRYPT or CKA_DERIVE true). No login of the module's own is asked for:
/// keyseald decides each use by the key's class and the store's lock state (a locked class is
/// CKR_USER_NOT_LOGGED_IN), as it does for every client. Programs that log in only for CKA_PRIVATE objects (OpenSSL's
/// pkcs11 engine) sign while the store is unlocked.
func operationKey(
    _ state: ModuleState,
    _ keyHandle: CK_OBJECT_HANDLE,
    permission: CK_ATTRIBUTE_TYPE
) throws(P11Error) -> P11Object {
    guard let key = state.objects[keyHandle] else { throw P11Error(CKR_KEY_HANDLE_INVALID) }
    guard key.attributes[permission] == Encode.bool(true) else { throw P11Error(CKR_KEY_FUNCTION_NOT_PERMITTED) }
    return key
}

/// What every `C_…Init` does: the session, no operation active in it, the key allowed `permission`; then `make`
/// turns the mechanism and key into the session's operation.
func beginOperation(
    _ handle: CK_SESSION_HANDLE,
    _ mechanism: UnsafeMutablePointer<CK_MECHANISM>?,
    _ keyHandle: CK_OBJECT_HANDLE,
    permission: CK_ATTRIBUTE_TYPE,
    _ make: (CK_MECHANISM, P11Object) throws(P11Error) -> PendingOperation
) -> CK_RV {
    guard let mechanism else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { state throws(P11Error) in
        var session = try state.session(handle)
        guard session.operation == nil else { throw P11Error(CKR_OPERATION_ACTIVE) }
        let key = try operationKey(state, keyHandle, permission: permission)
        session.operation = try make(mechanism.pointee, key)
        state.sessions[handle] = session
    }
}

/// `C_SignUpdate` and `C_VerifyUpdate`: adds `part` to the session's operation of `kind` (a mechanism that hashes).
/// A failure ends the operation.
func updateOperation(
    _ handle: CK_SESSION_HANDLE,
    _ kind: PendingOperation.Kind,
    _ part: UnsafeMutablePointer<CK_BYTE>?,
    _ length: CK_ULONG
) -> CK_RV {
    p11Call { state throws(P11Error) in
        var session = try state.session(handle)
        guard var operation = session.operation, operation.kind == kind else {
            throw P11Error(CKR_OPERATION_NOT_INITIALIZED)
        }
        // The session table lets go of the operation while the part is appended: its data then has one owner and
        // grows in place, instead of being copied whole at every part.
        session.operation = nil
        state.sessions[handle] = session
        guard operation.multipart, let input = bytes(part, length),
            operation.data.count + input.count <= Wire.valueLimit
        else {
            throw P11Error(
                !operation.multipart ? CKR_FUNCTION_NOT_SUPPORTED : part == nil ? CKR_ARGUMENTS_BAD : CKR_DATA_LEN_RANGE
            )
        }
        operation.data += input
        operation.updating = true
        session.operation = operation
        state.sessions[handle] = session
    }
}

@_cdecl("keyseal_p11_SignInit")
func p11SignInit(
    _ handle: CK_SESSION_HANDLE,
    _ mechanism: UnsafeMutablePointer<CK_MECHANISM>?,
    _ keyHandle: CK_OBJECT_HANDLE
) -> CK_RV {
    beginOperation(handle, mechanism, keyHandle, permission: CK_ATTRIBUTE_TYPE(CKA_SIGN), Mechanisms.signing)
}

/// Answers a size query or a short buffer (the operation stays active), or writes `result` and ends it.
func deliver(
    _ output: UnsafeMutablePointer<CK_BYTE>?,
    _ length: UnsafeMutablePointer<CK_ULONG>,
    size: Int,
    _ produce: () throws(P11Error) -> [UInt8]
) throws(P11Error) -> Bool {
    guard let output else {
        length.pointee = CK_ULONG(size)
        return false
    }
    guard length.pointee >= CK_ULONG(size) else {
        length.pointee = CK_ULONG(size)
        throw P11Error(CKR_BUFFER_TOO_SMALL)
    }
    let result = try produce()
    guard CK_ULONG(result.count) <= length.pointee else { throw P11Error(CKR_DEVICE_ERROR) }
    for (index, byte) in result.enumerated() { output[index] = byte }
    length.pointee = CK_ULONG(result.count)
    return true
}

/// Runs the session's `operation` on `input` through keyseald and delivers its result (``deliver``): the operation
/// ends once the result is out, or on any error but CKR_BUFFER_TOO_SMALL, which leaves it for the retry with room.
func finishOperation(
    _ state: ModuleState,
    _ handle: CK_SESSION_HANDLE,
    _ session: inout Session,
    _ operation: PendingOperation,
    input: [UInt8],
    into output: UnsafeMutablePointer<CK_BYTE>?,
    _ length: UnsafeMutablePointer<CK_ULONG>
) throws(P11Error) {
    defer { state.sessions[handle] = session }
    do throws(P11Error) {
        let done = try deliver(output, length, size: operation.outputSize) { () throws(P11Error) in
            try runOperation(state, operation, data: input)
        }
        if done { session.operation = nil }
    } catch {
        if error.rv != CK_RV(CKR_BUFFER_TOO_SMALL) { session.operation = nil }
        throw error
    }
}

func runOperation(_ state: ModuleState, _ operation: PendingOperation, data: [UInt8]) throws(P11Error) -> [UInt8] {
    let kind: WireKeyOperation.Kind = operation.kind == .sign ? .sign : .decrypt
    let request = WireKeyOperation(
        reference: operation.reference,
        kind: kind,
        algorithm: operation.algorithm,
        data: Data(data)
    )
    let response: WireResponse
    do throws(KeychainError) {
        response = try state.client().send(.keyOperation(request))
    } catch {
        if error.status == KeychainStatus.param {
            throw P11Error(operation.kind == .sign ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_INVALID)
        }
        if error.status == KeychainStatus.itemNotFound { throw P11Error(CKR_KEY_HANDLE_INVALID) }
        throw P11Error(error)
    }
    guard case .keyResult(let result) = response else { throw P11Error(CKR_DEVICE_ERROR) }
    return Array(result)
}

@_cdecl("keyseal_p11_Sign")
func p11Sign(
    _ handle: CK_SESSION_HANDLE,
    _ data: UnsafeMutablePointer<CK_BYTE>?,
    _ dataLength: CK_ULONG,
    _ signature: UnsafeMutablePointer<CK_BYTE>?,
    _ signatureLength: UnsafeMutablePointer<CK_ULONG>?
) -> CK_RV {
    p11Call { state throws(P11Error) in
        var session = try state.session(handle)
        guard let operation = session.operation, operation.kind == .sign else {
            throw P11Error(CKR_OPERATION_NOT_INITIALIZED)
        }
        guard let signatureLength, let input = bytes(data, dataLength), !operation.updating else {
            session.operation = nil
            state.sessions[handle] = session
            throw P11Error(signatureLength == nil || operation.updating ? CKR_ARGUMENTS_BAD : CKR_DATA_LEN_RANGE)
        }
        try finishOperation(state, handle, &session, operation, input: input, into: signature, signatureLength)
    }
}

@_cdecl("keyseal_p11_SignUpdate")
func p11SignUpdate(_ handle: CK_SESSION_HANDLE, _ part: UnsafeMutablePointer<CK_BYTE>?, _ length: CK_ULONG) -> CK_RV {
    updateOperation(handle, .sign, part, length)
}

@_cdecl("keyseal_p11_SignFinal")
func p11SignFinal(
    _ handle: CK_SESSION_HANDLE,
    _ signature: UnsafeMutablePointer<CK_BYTE>?,
    _ signatureLength: UnsafeMutablePointer<CK_ULONG>?
) -> CK_RV {
    p11Call { state throws(P11Error) in
        var session = try state.session(handle)
        guard let operation = session.operation, operation.kind == .sign else {
            throw P11Error(CKR_OPERATION_NOT_INITIALIZED)
        }
        guard let signatureLength, operation.multipart else {
            session.operation = nil
            state.sessions[handle] = session
            throw P11Error(signatureLength == nil ? CKR_ARGUMENTS_BAD : CKR_FUNCTION_NOT_SUPPORTED)
        }
        try finishOperation(state, handle, &session, operation, input: operation.data, into: signature, signatureLength)
    }
}

@_cdecl("keyseal_p11_DecryptInit")
func p11DecryptInit(
    _ handle: CK_SESSION_HANDLE,
    _ mechanism: UnsafeMutablePointer<CK_MECHANISM>?,
    _ keyHandle: CK_OBJECT_HANDLE
) -> CK_RV {
    beginOperation(handle, mechanism, keyHandle, permission: CK_ATTRIBUTE_TYPE(CKA_DECRYPT), Mechanisms.decryption)
}

@_cdecl("keyseal_p11_Decrypt")
func p11Decrypt(
    _ handle: CK_SESSION_HANDLE,
    _ encrypted: UnsafeMutablePointer<CK_BYTE>?,
    _ encryptedLength: CK_ULONG,
    _ data: UnsafeMutablePointer<CK_BYTE>?,
    _ dataLength: UnsafeMutablePointer<CK_ULONG>?
) -> CK_RV {
    p11Call { state throws(P11Error) in
        var session = try state.session(handle)
        guard let operation = session.operation, operation.kind == .decrypt else {
            throw P11Error(CKR_OPERATION_NOT_INITIALIZED)
        }
        guard let dataLength, let input = bytes(encrypted, encryptedLength) else {
            session.operation = nil
            state.sessions[handle] = session
            throw P11Error(CKR_ARGUMENTS_BAD)
        }
        // The size asked before decrypting is the modulus's (an upper bound); the answer has the real length.
        try finishOperation(state, handle, &session, operation, input: input, into: data, dataLength)
    }
}

@_cdecl("keyseal_p11_VerifyInit")
func p11VerifyInit(
    _ handle: CK_SESSION_HANDLE,
    _ mechanism: UnsafeMutablePointer<CK_MECHANISM>?,
    _ keyHandle: CK_OBJECT_HANDLE
) -> CK_RV {
    beginOperation(handle, mechanism, keyHandle, permission: CK_ATTRIBUTE_TYPE(CKA_VERIFY), Mechanisms.verification)
}

/// Checks `signature` over `data` with the session's verification, which ends whatever the outcome.
///
/// The module's lock covers only taking the operation out of the session: libcrypto then runs without it, so a
/// libcrypto configuration that loads a PKCS#11 provider onto this module (which calls back into it) cannot deadlock
/// on the lock, and other threads' calls are not held up by the check.
func finishVerification(
    _ handle: CK_SESSION_HANDLE,
    _ data: (PendingOperation) throws(P11Error) -> [UInt8],
    _ signature: UnsafeMutablePointer<CK_BYTE>?,
    _ signatureLength: CK_ULONG
) -> CK_RV {
    var pending: (verification: Verification, data: [UInt8], signature: [UInt8])?
    let taken = p11Call { state throws(P11Error) in
        var session = try state.session(handle)
        guard let operation = session.operation, operation.kind == .verify, let verification = operation.verification
        else { throw P11Error(CKR_OPERATION_NOT_INITIALIZED) }
        session.operation = nil
        state.sessions[handle] = session
        guard let given = bytes(signature, signatureLength) else {
            throw P11Error(signature == nil ? CKR_ARGUMENTS_BAD : CKR_SIGNATURE_LEN_RANGE)
        }
        pending = (verification, try data(operation), given)
    }
    guard taken == CK_RV(CKR_OK), let pending else { return taken }
    do throws(P11Error) {
        try pending.verification.verify(data: pending.data, signature: pending.signature)
        return CK_RV(CKR_OK)
    } catch {
        return error.rv
    }
}

@_cdecl("keyseal_p11_Verify")
func p11Verify(
    _ handle: CK_SESSION_HANDLE,
    _ data: UnsafeMutablePointer<CK_BYTE>?,
    _ dataLength: CK_ULONG,
    _ signature: UnsafeMutablePointer<CK_BYTE>?,
    _ signatureLength: CK_ULONG
) -> CK_RV {
    finishVerification(
        handle,
        { operation throws(P11Error) in
            guard !operation.updating else { throw P11Error(CKR_ARGUMENTS_BAD) }
            guard let input = bytes(data, dataLength) else {
                throw P11Error(data == nil ? CKR_ARGUMENTS_BAD : CKR_DATA_LEN_RANGE)
            }
            return input
        },
        signature,
        signatureLength
    )
}

@_cdecl("keyseal_p11_VerifyUpdate")
func p11VerifyUpdate(_ handle: CK_SESSION_HANDLE, _ part: UnsafeMutablePointer<CK_BYTE>?, _ length: CK_ULONG) -> CK_RV {
    updateOperation(handle, .verify, part, length)
}

@_cdecl("keyseal_p11_VerifyFinal")
func p11VerifyFinal(
    _ handle: CK_SESSION_HANDLE,
    _ signature: UnsafeMutablePointer<CK_BYTE>?,
    _ signatureLength: CK_ULONG
) -> CK_RV {
    finishVerification(
        handle,
        { operation throws(P11Error) in
            guard operation.multipart else { throw P11Error(CKR_FUNCTION_NOT_SUPPORTED) }
            return operation.data
        },
        signature,
        signatureLength
    )
}

// MARK: - Keys

@_cdecl("keyseal_p11_GenerateKeyPair")
func p11GenerateKeyPair(
    _ handle: CK_SESSION_HANDLE,
    _ mechanism: UnsafeMutablePointer<CK_MECHANISM>?,
    _ publicTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
    _ publicCount: CK_ULONG,
    _ privateTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
    _ privateCount: CK_ULONG,
    _ publicKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?,
    _ privateKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?
) -> CK_RV {
    guard let mechanism, let publicKey, let privateKey else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { state throws(P11Error) in
        let session = try state.session(handle)
        guard mechanism.pointee.mechanism == CK_MECHANISM_TYPE(CKM_EC_KEY_PAIR_GEN) else {
            throw P11Error(CKR_MECHANISM_INVALID)
        }
        let publicAttributes = Dictionary(try template(publicTemplate, publicCount), uniquingKeysWith: { _, b in b })
        let privateAttributes = Dictionary(try template(privateTemplate, privateCount), uniquingKeysWith: { _, b in b })
        // CKA_TOKEN defaults to false: a session key, which keyseald holds for this connection and never stores. The
        // two halves are one key item or one session key: a template that splits them is inconsistent.
        let token = try isTokenObject(privateAttributes)
        if publicAttributes[CK_ATTRIBUTE_TYPE(CKA_TOKEN)] != nil, try isTokenObject(publicAttributes) != token {
            throw P11Error(CKR_TEMPLATE_INCONSISTENT)
        }
        if token && session.flags & CK_FLAGS(CKF_RW_SESSION) == 0 { throw P11Error(CKR_SESSION_READ_ONLY) }
        guard let parameters = publicAttributes[CK_ATTRIBUTE_TYPE(CKA_EC_PARAMS)] else {
            throw P11Error(CKR_TEMPLATE_INCOMPLETE)
        }
        guard let bits = Encode.curveBits(oid: parameters) else { throw P11Error(CKR_CURVE_NOT_SUPPORTED) }
        // In the hardware: P-256 on a backend with hardware (TPM, PKCS#11 token), unless the private template sets
        // the Keyseal attribute to CK_FALSE; CK_TRUE insists (refused where there is no hardware).
        let asked = privateAttributes[ckaKeysealHardware].flatMap(boolValue)
        let status: StoreStatus
        guard case .status(let answered) = try state.send(.status) else { throw P11Error(CKR_DEVICE_ERROR) }
        status = answered
        let hardware = asked ?? (bits == 256 && status.device.hardwareBacked)
        if hardware && bits != 256 { throw P11Error(CKR_TEMPLATE_INCONSISTENT) }
        let label = privateAttributes[CK_ATTRIBUTE_TYPE(CKA_LABEL)] ?? publicAttributes[CK_ATTRIBUTE_TYPE(CKA_LABEL)]
        let id = privateAttributes[CK_ATTRIBUTE_TYPE(CKA_ID)] ?? publicAttributes[CK_ATTRIBUTE_TYPE(CKA_ID)]
        var attributes: [String: AttributeValue] = [:]
        if let label, let text = String(validating: label, as: UTF8.self) {
            attributes[AttributeKey.label] = .string(text)
        }
        // The application tag: the CKA_ID asked for, else the label, else random (CKA_ID itself is the key's
        // application label, SHA-1 of its public key, as Keyseal computes it).
        var tag = id ?? label ?? []
        if tag.isEmpty {
            var generator = SystemRandomNumberGenerator()
            tag =
                Array("pkcs11-".utf8)
                + (0..<8).map { _ in UInt8.random(in: 0...255, using: &generator) }
                .flatMap { Array(String($0, radix: 16).utf8) }
        }
        attributes["atag"] = .data(Data(tag))
        let extractable = privateAttributes[CK_ATTRIBUTE_TYPE(CKA_EXTRACTABLE)].flatMap(boolValue) ?? false
        let request = KeyGenerationRequest(
            keyType: .ec(bits: bits),
            inHardware: hardware,
            isPermanent: token,
            attributes: attributes,
            isExtractable: extractable && !hardware
        )
        guard case .key(let key) = try state.send(.generateKey(request)) else { throw P11Error(CKR_DEVICE_ERROR) }
        guard token else {
            let objects = P11Object.keyObjects(key)
            guard objects.count == 2 else {
                state.releaseSessionKey(key.reference)
                throw P11Error(CKR_DEVICE_ERROR)
            }
            // The session key's objects: the public key's attributes and the private key's view, with the caller's
            // CKA_LABEL and CKA_ID as given (bytes), in this process until their session closes.
            for object in objects {
                var sessionObject = object
                sessionObject.session = handle
                sessionObject.attributes[CK_ATTRIBUTE_TYPE(CKA_TOKEN)] = Encode.bool(false)
                let isPrivate = if case .privateKey = object.source { true } else { false }
                let own = isPrivate ? privateAttributes : publicAttributes
                let other = isPrivate ? publicAttributes : privateAttributes
                if let label = own[CK_ATTRIBUTE_TYPE(CKA_LABEL)] ?? other[CK_ATTRIBUTE_TYPE(CKA_LABEL)] {
                    sessionObject.attributes[CK_ATTRIBUTE_TYPE(CKA_LABEL)] = label
                }
                if let id = own[CK_ATTRIBUTE_TYPE(CKA_ID)] ?? other[CK_ATTRIBUTE_TYPE(CKA_ID)] {
                    sessionObject.attributes[CK_ATTRIBUTE_TYPE(CKA_ID)] = id
                }
                if isPrivate {
                    privateKey.pointee = state.add(sessionObject)
                } else {
                    publicKey.pointee = state.add(sessionObject)
                }
            }
            return
        }
        try state.refreshObjects()
        guard let privateHandle = state.handle(for: .privateKey(key.reference)),
            let publicHandle = state.handle(for: .publicKey(key.reference))
        else { throw P11Error(CKR_DEVICE_ERROR) }
        publicKey.pointee = publicHandle
        privateKey.pointee = privateHandle
    }
}

@_cdecl("keyseal_p11_DeriveKey")
func p11DeriveKey(
    _ handle: CK_SESSION_HANDLE,
    _ mechanism: UnsafeMutablePointer<CK_MECHANISM>?,
    _ baseKey: CK_OBJECT_HANDLE,
    _ attributes: UnsafeMutablePointer<CK_ATTRIBUTE>?,
    _ count: CK_ULONG,
    _ key: UnsafeMutablePointer<CK_OBJECT_HANDLE>?
) -> CK_RV {
    guard let mechanism, let key else { return CK_RV(CKR_ARGUMENTS_BAD) }
    return p11Call { state throws(P11Error) in
        _ = try state.session(handle)
        guard mechanism.pointee.mechanism == CK_MECHANISM_TYPE(CKM_ECDH1_DERIVE) else {
            throw P11Error(CKR_MECHANISM_INVALID)
        }
        let base = try operationKey(state, baseKey, permission: CK_ATTRIBUTE_TYPE(CKA_DERIVE))
        guard case .privateKey(let reference) = base.source, let keyType = base.keyType, keyType.isEC else {
            throw P11Error(CKR_KEY_TYPE_INCONSISTENT)
        }
        guard mechanism.pointee.ulParameterLen == CK_ULONG(MemoryLayout<CK_ECDH1_DERIVE_PARAMS>.size),
            let raw = mechanism.pointee.pParameter
        else { throw P11Error(CKR_MECHANISM_PARAM_INVALID) }
        let parameters = raw.loadUnaligned(as: CK_ECDH1_DERIVE_PARAMS.self)
        guard parameters.kdf == CKD_NULL, parameters.ulSharedDataLen == 0,
            var peer = bytes(parameters.pPublicData, parameters.ulPublicDataLen)
        else { throw P11Error(CKR_MECHANISM_PARAM_INVALID) }
        // The peer's point, raw or as a DER OCTET STRING (both are seen in the field).
        let pointSize = 1 + 2 * ((keyType.bits + 7) / 8)
        if peer.count != pointSize, peer.first == 0x04, peer.count > 2 {
            var reader = DERReader(peer)
            if let element = reader.next(), element.tag == 0x04, element.whole.count == peer.count {
                peer = Array(peer[element.contents])
            }
        }
        let wanted = Dictionary(try template(attributes, count), uniquingKeysWith: { _, b in b })
        let request = WireKeyOperation(
            reference: reference,
            kind: .keyExchange,
            algorithm: "algid:keyexchange:ECDH",
            data: Data(peer)
        )
        let response: WireResponse
        do throws(KeychainError) {
            response = try state.client().send(.keyOperation(request))
        } catch {
            throw error.status == KeychainStatus.param ? P11Error(CKR_MECHANISM_PARAM_INVALID) : P11Error(error)
        }
        guard case .keyResult(let shared) = response else { throw P11Error(CKR_DEVICE_ERROR) }
        var secret = Array(shared)
        if let length = wanted[CK_ATTRIBUTE_TYPE(CKA_VALUE_LEN)].flatMap(ulongValue) {
            guard length > 0, length <= CK_ULONG(secret.count) else { throw P11Error(CKR_ATTRIBUTE_VALUE_INVALID) }
            secret = Array(secret.prefix(Int(length)))
        }
        let derived = P11Object(
            source: .derived(state.nextDerived),
            attributes: [
                CK_ATTRIBUTE_TYPE(CKA_CLASS): Encode.ulong(CK_ULONG(CKO_SECRET_KEY)),
                CK_ATTRIBUTE_TYPE(CKA_KEY_TYPE): Encode.ulong(CK_ULONG(CKK_GENERIC_SECRET)),
                CK_ATTRIBUTE_TYPE(CKA_TOKEN): Encode.bool(false),
                CK_ATTRIBUTE_TYPE(CKA_PRIVATE): Encode.bool(false),
                CK_ATTRIBUTE_TYPE(CKA_SENSITIVE): Encode.bool(false),
                CK_ATTRIBUTE_TYPE(CKA_EXTRACTABLE): Encode.bool(true),
                CK_ATTRIBUTE_TYPE(CKA_VALUE_LEN): Encode.ulong(CK_ULONG(secret.count)),
                CK_ATTRIBUTE_TYPE(CKA_LABEL): wanted[CK_ATTRIBUTE_TYPE(CKA_LABEL)] ?? [],
            ],
            session: handle,
            secret: SecretBytes(copying: secret)
        )
        for index in secret.indices { secret[index] = 0 }
        state.nextDerived += 1
        let newHandle = state.nextObject
        state.nextObject += 1
        state.objects[newHandle] = derived
        key.pointee = newHandle
    }
}

@_cdecl("keyseal_p11_GenerateRandom")
func p11GenerateRandom(
    _ handle: CK_SESSION_HANDLE,
    _ output: UnsafeMutablePointer<CK_BYTE>?,
    _ length: CK_ULONG
)
    -> CK_RV
{
    p11Call { state throws(P11Error) in
        _ = try state.session(handle)
        guard length > 0 else { return }
        guard let output, length <= CK_ULONG(Int.max) else { throw P11Error(CKR_ARGUMENTS_BAD) }
        // The operating system's generator (getrandom), as keyseald's own randomness.
        var generator = SystemRandomNumberGenerator()
        for index in 0..<Int(length) { output[index] = UInt8.random(in: 0...255, using: &generator) }
    }
}
