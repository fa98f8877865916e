internal import CSDBus
import FoundationEssentials
import Glibc

/// A D-Bus error to answer a call with: an error name and a message (never empty, so that clients that show the
/// message have something to show).
struct BusError: Error, CustomStringConvertible {
    var name: String
    var message: String

    static let isLocked = "org.freedesktop.Secret.Error.IsLocked"
    static let noSession = "org.freedesktop.Secret.Error.NoSession"
    static let noSuchObject = "org.freedesktop.Secret.Error.NoSuchObject"
    static let notSupported = "org.freedesktop.DBus.Error.NotSupported"
    static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
    static let failed = "org.freedesktop.DBus.Error.Failed"
    static let limitsExceeded = "org.freedesktop.DBus.Error.LimitsExceeded"
    static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"

    /// A path that names no object, answered as gnome-keyring (GDBus) answers it: UnknownMethod, which clients
    /// map to "no such item" (SecretStorage's ItemNotFoundException), where sd-bus's own UnknownObject is a raw error.
    static func unknownObject(_ path: String) -> BusError {
        BusError(unknownMethod, "Object does not exist at path \u{201C}\(path)\u{201D}")
    }

    init(_ name: String, _ message: String) {
        self.name = name
        self.message = message.isEmpty ? name : message
    }

    var description: String { "\(name): \(message)" }
}

/// A failed sd-bus call (a negative errno).
struct SDBusFailure: Error, CustomStringConvertible {
    var function: String
    var code: Int32
    var description: String { "\(function): \(String(cString: strerror(-code)))" }
}

@discardableResult
func sdbus(_ result: Int32, _ function: String) throws(SDBusFailure) -> Int32 {
    guard result >= 0 else { throw SDBusFailure(function: function, code: result) }
    return result
}

/// One D-Bus type code as sd-bus takes it.
@inline(__always)
func code(_ character: Unicode.Scalar) -> CChar { CChar(UInt8(ascii: character)) }

/// Reads a message's arguments in order (sd-bus checks them against the method's signature before a handler runs).
struct MessageReader {
    let message: OpaquePointer

    func string() throws(SDBusFailure) -> String { try basic("s") }
    func objectPath() throws(SDBusFailure) -> String { try basic("o") }

    private func basic(_ type: Unicode.Scalar) throws(SDBusFailure) -> String {
        var pointer: UnsafePointer<CChar>?
        try sdbus(
            withUnsafeMutablePointer(to: &pointer) { sd_bus_message_read_basic(message, code(type), $0) },
            "sd_bus_message_read_basic"
        )
        return pointer.map { String(cString: $0) } ?? ""
    }

    /// A file descriptor argument (`h`), duplicated (close-on-exec) so that it outlives the message; the caller
    /// closes it.
    func fileDescriptor() throws(SDBusFailure) -> Int32 {
        var value: Int32 = -1
        try sdbus(sd_bus_message_read_basic(message, code("h"), &value), "sd_bus_message_read_basic")
        let copy = fcntl(value, F_DUPFD_CLOEXEC, 3)
        guard copy >= 0 else { throw SDBusFailure(function: "fcntl", code: -errno) }
        return copy
    }

    func bool() throws(SDBusFailure) -> Bool {
        var value: Int32 = 0
        try sdbus(sd_bus_message_read_basic(message, code("b"), &value), "sd_bus_message_read_basic")
        return value != 0
    }

    func bytes() throws(SDBusFailure) -> [UInt8] {
        var pointer: UnsafeRawPointer?
        var size = 0
        try sdbus(sd_bus_message_read_array(message, code("y"), &pointer, &size), "sd_bus_message_read_array")
        guard let pointer, size > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: size))
    }

    func enter(_ type: Unicode.Scalar, _ contents: String) throws(SDBusFailure) {
        try sdbus(sd_bus_message_enter_container(message, code(type), contents), "sd_bus_message_enter_container")
    }

    /// Enters a container; false at the end of the enclosing array.
    func enterIfMore(_ type: Unicode.Scalar, _ contents: String) throws(SDBusFailure) -> Bool {
        try sdbus(sd_bus_message_enter_container(message, code(type), contents), "sd_bus_message_enter_container") > 0
    }

    func exit() throws(SDBusFailure) {
        try sdbus(sd_bus_message_exit_container(message), "sd_bus_message_exit_container")
    }

    func objectPaths() throws(SDBusFailure) -> [String] {
        try enter("a", "o")
        var paths: [String] = []
        while !(try atEnd()) { paths.append(try objectPath()) }
        try exit()
        return paths
    }

    func atEnd() throws(SDBusFailure) -> Bool {
        try sdbus(sd_bus_message_at_end(message, 0), "sd_bus_message_at_end") > 0
    }

    /// `a{ss}`.
    func stringMap() throws(SDBusFailure) -> [String: String] {
        try enter("a", "{ss}")
        var map: [String: String] = [:]
        while try enterIfMore("e", "ss") {
            let key = try string()
            map[key] = try string()
            try exit()
        }
        try exit()
        return map
    }

    /// `a{sv}` with the values this service reads (strings, string maps, booleans); other values are skipped.
    func properties() throws(SDBusFailure) -> [String: PropertyValue] {
        try enter("a", "{sv}")
        var map: [String: PropertyValue] = [:]
        while try enterIfMore("e", "sv") {
            let key = try string()
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            try sdbus(sd_bus_message_peek_type(message, &type, &contents), "sd_bus_message_peek_type")
            let inner = contents.map { String(cString: $0) } ?? ""
            switch inner {
            case "s":
                try enter("v", "s")
                map[key] = .string(try string())
                try exit()
            case "a{ss}":
                try enter("v", "a{ss}")
                map[key] = .stringMap(try stringMap())
                try exit()
            case "b":
                try enter("v", "b")
                map[key] = .bool(try bool())
                try exit()
            default:
                try sdbus(sd_bus_message_skip(message, "v"), "sd_bus_message_skip")
            }
            try exit()
        }
        try exit()
        return map
    }

    /// The secret struct `(oayays)`: session, parameters, value, content type.
    func secret() throws(SDBusFailure) -> WireSecretStruct {
        try enter("r", "oayays")
        let session = try objectPath()
        let parameters = try bytes()
        let value = try bytes()
        let contentType = try string()
        try exit()
        return WireSecretStruct(session: session, parameters: parameters, value: value, contentType: contentType)
    }
}

enum PropertyValue {
    case string(String)
    case stringMap([String: String])
    case bool(Bool)
}

/// A secret as the Secret Service carries it (`(oayays)`); `value` is plaintext under `plain`, ciphertext otherwise.
struct WireSecretStruct {
    var session: String
    var parameters: [UInt8]
    var value: [UInt8]
    var contentType: String
}

/// Appends values to a message being built.
struct MessageWriter {
    let message: OpaquePointer

    func string(_ text: String) throws(SDBusFailure) {
        try sdbus(sd_bus_message_append_basic(message, code("s"), text), "sd_bus_message_append_basic")
    }

    func objectPath(_ path: String) throws(SDBusFailure) {
        try sdbus(sd_bus_message_append_basic(message, code("o"), path), "sd_bus_message_append_basic")
    }

    func bool(_ value: Bool) throws(SDBusFailure) {
        var flag: Int32 = value ? 1 : 0
        try sdbus(sd_bus_message_append_basic(message, code("b"), &flag), "sd_bus_message_append_basic")
    }

    func uint32(_ value: UInt32) throws(SDBusFailure) {
        var number = value
        try sdbus(sd_bus_message_append_basic(message, code("u"), &number), "sd_bus_message_append_basic")
    }

    func uint64(_ value: UInt64) throws(SDBusFailure) {
        var number = value
        try sdbus(sd_bus_message_append_basic(message, code("t"), &number), "sd_bus_message_append_basic")
    }

    func bytes(_ bytes: [UInt8]) throws(SDBusFailure) {
        try sdbus(
            bytes.withUnsafeBytes { sd_bus_message_append_array(message, code("y"), $0.baseAddress, $0.count) },
            "sd_bus_message_append_array"
        )
    }

    func open(_ type: Unicode.Scalar, _ contents: String) throws(SDBusFailure) {
        try sdbus(sd_bus_message_open_container(message, code(type), contents), "sd_bus_message_open_container")
    }

    func close() throws(SDBusFailure) {
        try sdbus(sd_bus_message_close_container(message), "sd_bus_message_close_container")
    }

    func objectPaths(_ paths: [String]) throws(SDBusFailure) {
        try open("a", "o")
        for path in paths { try objectPath(path) }
        try close()
    }

    func stringMap(_ map: [String: String]) throws(SDBusFailure) {
        try open("a", "{ss}")
        for (key, value) in map.sorted(by: { $0.key < $1.key }) {
            try open("e", "ss")
            try string(key)
            try string(value)
            try close()
        }
        try close()
    }

    func secret(_ secret: WireSecretStruct) throws(SDBusFailure) {
        try open("r", "oayays")
        try objectPath(secret.session)
        try bytes(secret.parameters)
        try bytes(secret.value)
        try string(secret.contentType)
        try close()
    }
}

/// The vtable entries of one interface, kept alive (with their strings) for the connection's lifetime.
final class VTable {
    let entries: UnsafeMutablePointer<sd_bus_vtable>
    let count: Int
    private var strings: [UnsafeMutablePointer<CChar>] = []

    enum Entry {
        case method(String, String, String)
        case property(String, String)
        /// Announced as invalidated, without its value.
        case invalidatingProperty(String, String)
        case writableProperty(String, String)
        case signal(String, String)
    }

    init(_ list: [Entry]) {
        count = list.count + 2
        entries = .allocate(capacity: count)
        var index = 0
        func add(_ entry: sd_bus_vtable) {
            (entries + index).initialize(to: entry)
            index += 1
        }
        func keep(_ text: String) -> UnsafePointer<CChar> {
            let copy = strdup(text)!
            strings.append(copy)
            return UnsafePointer(copy)
        }
        add(keyseal_vtable_start())
        for entry in list {
            switch entry {
            case .method(let name, let signature, let result):
                add(keyseal_vtable_method(keep(name), keep(signature), keep(result), methodTrampoline))
            case .property(let name, let signature):
                add(keyseal_vtable_property(keep(name), keep(signature), getterTrampoline))
            case .invalidatingProperty(let name, let signature):
                add(keyseal_vtable_invalidating_property(keep(name), keep(signature), getterTrampoline))
            case .writableProperty(let name, let signature):
                add(keyseal_vtable_writable_property(keep(name), keep(signature), getterTrampoline, setterTrampoline))
            case .signal(let name, let signature):
                add(keyseal_vtable_signal(keep(name), keep(signature)))
            }
        }
        add(keyseal_vtable_end())
    }

    deinit {
        entries.deinitialize(count: count)
        entries.deallocate()
        for string in strings { free(string) }
    }
}

/// What the D-Bus objects' handlers call: one object answers every path and interface.
protocol BusObjects: AnyObject {
    func call(_ message: MessageReader, path: String, interface: String, member: String) throws -> ReplyBuilder
    func property(path: String, interface: String, name: String, into reply: MessageWriter) throws
    func setProperty(path: String, interface: String, name: String, from value: MessageReader) throws
    func exists(path: String, interface: String) -> Bool
    /// Whether `path` names an object that a call for `interface` (for the Properties interface: the interface
    /// whose properties it reads or writes) may be dispatched to.
    func serves(path: String, interface: String) -> Bool
}

/// Writes a method's reply values.
typealias ReplyBuilder = (MessageWriter) throws -> Void

/// Thrown by a method that answers later, through the ``PendingReply`` it kept.
struct ReplyLater: Error {}

/// A method call answered after its handler returned (on the bus thread, e.g. once a prompt completed).
final class PendingReply: @unchecked Sendable {
    private let message: OpaquePointer

    init(_ call: MessageReader) { message = sd_bus_message_ref(call.message) }
    deinit { sd_bus_message_unref(message) }

    /// Sends the reply `build` writes (on the bus thread).
    func send(_ build: ReplyBuilder) {
        var reply: OpaquePointer?
        guard sd_bus_message_new_method_return(message, &reply) >= 0, let reply else { return }
        defer { sd_bus_message_unref(reply) }
        guard (try? build(MessageWriter(message: reply))) != nil else { return }
        _ = sd_bus_send(nil, reply, nil)
    }
}

/// The sd-bus handler context: the objects (held unretained: the bus never outlives them).
func objects(_ userdata: UnsafeMutableRawPointer?) -> BusObjects {
    Unmanaged<BusBox>.fromOpaque(userdata!).takeUnretainedValue().objects
}

final class BusBox {
    unowned let objects: BusObjects
    init(_ objects: BusObjects) { self.objects = objects }
}

/// Sets `error` from a thrown error: a BusError as itself, anything else as org.freedesktop.DBus.Error.Failed.
func setError(_ error: Error, _ target: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
    let busError = (error as? BusError) ?? BusError(BusError.failed, "\(error)")
    return sd_bus_error_set(target, busError.name, busError.message)
}

private func text(_ pointer: UnsafePointer<CChar>?) -> String { pointer.map { String(cString: $0) } ?? "" }

let methodTrampoline: sd_bus_message_handler_t = { message, userdata, target in
    guard let message else { return -EINVAL }
    let path = text(sd_bus_message_get_path(message))
    let interface = text(sd_bus_message_get_interface(message))
    let member = text(sd_bus_message_get_member(message))
    do {
        let build = try objects(userdata).call(
            MessageReader(message: message),
            path: path,
            interface: interface,
            member: member
        )
        var reply: OpaquePointer?
        try sdbus(sd_bus_message_new_method_return(message, &reply), "sd_bus_message_new_method_return")
        defer { sd_bus_message_unref(reply) }
        try build(MessageWriter(message: reply!))
        return try sdbus(sd_bus_send(nil, reply, nil), "sd_bus_send")
    } catch is ReplyLater {
        return 1
    } catch {
        return setError(error, target)
    }
}

let getterTrampoline: sd_bus_property_get_t = { _, path, interface, property, reply, userdata, error in
    do {
        try objects(userdata).property(
            path: text(path),
            interface: text(interface),
            name: text(property),
            into: MessageWriter(message: reply!)
        )
        return 1
    } catch let failure {
        return setError(failure, error)
    }
}

let setterTrampoline: sd_bus_property_set_t = { _, path, interface, property, value, userdata, error in
    do {
        try objects(userdata).setProperty(
            path: text(path),
            interface: text(interface),
            name: text(property),
            from: MessageReader(message: value!)
        )
        return 1
    } catch let failure {
        return setError(failure, error)
    }
}

/// Runs for every path below the prefix it is added at that no vtable of a longer prefix answered: a call to a path
/// that names no object (or none a call for its interface may reach) is answered ``BusError/unknownObject(_:)``;
/// introspection and everything else go on.
let unknownObjectFilter: sd_bus_message_handler_t = { message, userdata, target in
    guard let message, sd_bus_message_is_method_call(message, nil, nil) > 0 else { return 0 }
    let path = text(sd_bus_message_get_path(message))
    var interface = text(sd_bus_message_get_interface(message))
    switch interface {
    case "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Peer": return 0
    case "org.freedesktop.DBus.Properties":
        // Get, GetAll and Set name the interface first; the handler that answers reads the message from the start.
        var named: UnsafePointer<CChar>?
        if withUnsafeMutablePointer(to: &named, { sd_bus_message_read_basic(message, code("s"), $0) }) > 0 {
            interface = text(named)
        }
        sd_bus_message_rewind(message, 1)
    default: break
    }
    guard !objects(userdata).serves(path: path, interface: interface) else { return 0 }
    return setError(BusError.unknownObject(path), target)
}

let findTrampoline: sd_bus_object_find_t = { _, path, interface, userdata, found, _ in
    guard objects(userdata).exists(path: text(path), interface: text(interface)) else { return 0 }
    found?.pointee = userdata
    return 1
}

/// A session-bus connection on a thread of its own: sd-bus attached to an sd-event loop, which also watches a pipe
/// through which other threads hand it work (``post(_:)``), since sd-bus objects belong to one thread.
final class BusConnection: @unchecked Sendable {
    private var bus: OpaquePointer?
    private var event: OpaquePointer?
    private var slots: [OpaquePointer?] = []
    private var tables: [VTable] = []
    private let box: BusBox
    private let wake: (read: Int32, write: Int32)
    private let pending = PendingWork()
    /// Called on the bus thread when another connection takes the name.
    var onNameLost: (() -> Void)?
    /// Called on the bus thread when a client's unique name leaves the bus (the client disconnected or exited).
    var onClientGone: ((String) -> Void)?
    /// The pid behind each caller's unique name (a unique name belongs to one process and is never reused).
    fileprivate var senderPids: [String: Int32] = [:]

    /// Connects to the session bus (`$DBUS_SESSION_BUS_ADDRESS`).
    init(objects: BusObjects) throws {
        box = BusBox(objects)
        var fds: [Int32] = [0, 0]
        guard makePipe(&fds, nonBlocking: true) else { throw SDBusFailure(function: "pipe", code: -errno) }
        wake = (fds[0], fds[1])
        try sdbus(sd_bus_open_user(&bus), "sd_bus_open_user")
        try sdbus(sd_event_new(&event), "sd_event_new")
        try sdbus(sd_bus_attach_event(bus, event, 0), "sd_bus_attach_event")
        var source: OpaquePointer?
        try sdbus(
            sd_event_add_io(
                event,
                &source,
                wake.read,
                UInt32(EPOLLIN.rawValue),
                { _, fd, _, userdata in
                    var drain = [UInt8](repeating: 0, count: 64)
                    while read(fd, &drain, drain.count) > 0 {}
                    Unmanaged<BusConnection>.fromOpaque(userdata!).takeUnretainedValue().runPending()
                    return 0
                },
                Unmanaged.passUnretained(self).toOpaque()
            ),
            "sd_event_add_io"
        )
        var match: OpaquePointer?
        try sdbus(
            sd_bus_match_signal(
                bus,
                &match,
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "NameLost",
                { message, userdata, _ in
                    var name: UnsafePointer<CChar>?
                    _ = withUnsafeMutablePointer(to: &name) { sd_bus_message_read_basic(message, code("s"), $0) }
                    if let name, String(cString: name) == SecretServiceBridge.busName {
                        Unmanaged<BusConnection>.fromOpaque(userdata!).takeUnretainedValue().onNameLost?()
                    }
                    return 0
                },
                Unmanaged.passUnretained(self).toOpaque()
            ),
            "sd_bus_match_signal"
        )
        slots.append(match)
        // A unique name whose owner becomes "" has left the bus for good (unique names are never reused).
        var gone: OpaquePointer?
        try sdbus(
            sd_bus_match_signal(
                bus,
                &gone,
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "NameOwnerChanged",
                { message, userdata, _ in
                    let reader = MessageReader(message: message!)
                    guard let name = try? reader.string(), name.hasPrefix(":"), (try? reader.string()) != nil,
                        let owner = try? reader.string(), owner.isEmpty
                    else { return 0 }
                    let connection = Unmanaged<BusConnection>.fromOpaque(userdata!).takeUnretainedValue()
                    connection.senderPids[name] = nil
                    connection.onClientGone?(name)
                    return 0
                },
                Unmanaged.passUnretained(self).toOpaque()
            ),
            "sd_bus_match_signal"
        )
        slots.append(gone)
    }

    deinit {
        for slot in slots { sd_bus_slot_unref(slot) }
        sd_bus_flush_close_unref(bus)
        sd_event_unref(event)
        close(wake.read)
        close(wake.write)
    }

    /// Owns `name`; with `replace`, takes it from its owner. Another owner without `replace` is EEXIST.
    func requestName(_ name: String, replace: Bool) throws(SDBusFailure) {
        var flags = UInt64(SD_BUS_NAME_ALLOW_REPLACEMENT)
        if replace { flags |= UInt64(SD_BUS_NAME_REPLACE_EXISTING) }
        try sdbus(sd_bus_request_name(bus, name, flags), "sd_bus_request_name")
    }

    /// Serves `interface` at exactly `path`.
    func add(path: String, interface: String, _ table: VTable) throws(SDBusFailure) {
        var slot: OpaquePointer?
        try sdbus(
            sd_bus_add_object_vtable(
                bus,
                &slot,
                path,
                interface,
                table.entries,
                Unmanaged.passUnretained(box).toOpaque()
            ),
            "sd_bus_add_object_vtable"
        )
        slots.append(slot)
        tables.append(table)
    }

    /// Serves `interface` below `prefix`, wherever the objects say a path exists.
    func add(prefix: String, interface: String, _ table: VTable) throws(SDBusFailure) {
        var slot: OpaquePointer?
        try sdbus(
            sd_bus_add_fallback_vtable(
                bus,
                &slot,
                prefix,
                interface,
                table.entries,
                findTrampoline,
                Unmanaged.passUnretained(box).toOpaque()
            ),
            "sd_bus_add_fallback_vtable"
        )
        slots.append(slot)
        tables.append(table)
    }

    /// Answers calls to paths below `prefix` (and to it) that name no object as gnome-keyring does
    /// (``unknownObjectFilter``).
    func answerUnknownObjects(below prefix: String) throws(SDBusFailure) {
        var slot: OpaquePointer?
        try sdbus(
            sd_bus_add_fallback(bus, &slot, prefix, unknownObjectFilter, Unmanaged.passUnretained(box).toOpaque()),
            "sd_bus_add_fallback"
        )
        slots.append(slot)
    }

    /// Runs the loop until ``stop()``.
    func run() throws(SDBusFailure) {
        try sdbus(sd_event_loop(event), "sd_event_loop")
    }

    func stop() { sd_event_exit(event, 0) }

    /// Runs `work` on the bus thread (from any thread).
    func post(_ work: @escaping @Sendable () -> Void) {
        pending.append(work)
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    private func runPending() {
        for work in pending.takeAll() { work() }
    }

    /// Emits `member` on `interface` from `path` with the arguments `body` writes.
    func emit(path: String, interface: String, member: String, _ body: ReplyBuilder) {
        var message: OpaquePointer?
        guard sd_bus_message_new_signal(bus, &message, path, interface, member) >= 0, let message else { return }
        defer { sd_bus_message_unref(message) }
        guard (try? body(MessageWriter(message: message))) != nil else { return }
        _ = sd_bus_send(bus, message, nil)
    }

    /// PropertiesChanged for `names` of `interface` at `path`, with their new values.
    func propertiesChanged(path: String, interface: String, _ names: [String]) {
        var pointers: [UnsafeMutablePointer<CChar>?] = names.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        _ = sd_bus_emit_properties_changed_strv(bus, path, interface, &pointers)
    }

    /// An identifier of the message being dispatched (its sender and cookie), for caches that live as long as one
    /// call or one GetAll.
    var currentMessage: String {
        let cookie = keyseal_current_cookie(bus)
        let sender = sd_bus_get_current_message(bus).flatMap { sd_bus_message_get_sender($0) }.map {
            String(cString: $0)
        }
        return "\(sender ?? "")#\(cookie)"
    }

    /// The caller of `message` as the bus reports it (uid, pid, executable, systemd unit).
    static func caller(_ message: MessageReader) -> BusCaller {
        var creds: OpaquePointer?
        guard sd_bus_query_sender_creds(message.message, keyseal_creds_mask(), &creds) >= 0 else { return BusCaller() }
        defer { sd_bus_creds_unref(creds) }
        var result = BusCaller()
        var uid: uid_t = 0
        if sd_bus_creds_get_euid(creds, &uid) >= 0 { result.uid = uid }
        var pid: pid_t = 0
        if sd_bus_creds_get_pid(creds, &pid) >= 0 { result.pid = pid }
        var text: UnsafePointer<CChar>?
        if sd_bus_creds_get_exe(creds, &text) >= 0, let text { result.executable = String(cString: text) }
        text = nil
        if sd_bus_creds_get_user_unit(creds, &text) >= 0, let text {
            result.unit = String(cString: text)
        } else if sd_bus_creds_get_unit(creds, &text) >= 0, let text {
            result.unit = String(cString: text)
        }
        return result
    }
}

/// Who called a method, from the bus's credentials of the sender.
struct BusCaller: Sendable {
    var uid: UInt32?
    var pid: Int32?
    var executable: String?
    var unit: String?
}

/// Work posted to the bus thread.
final class PendingWork: @unchecked Sendable {
    private var lock = pthread_mutex_t()
    private var items: [@Sendable () -> Void] = []

    init() { pthread_mutex_init(&lock, nil) }
    deinit { pthread_mutex_destroy(&lock) }

    func append(_ work: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(&lock)
        items.append(work)
        pthread_mutex_unlock(&lock)
    }

    func takeAll() -> [@Sendable () -> Void] {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        let taken = items
        items = []
        return taken
    }
}

/// A variant argument that is a string or a byte array (OpenSession's input).
enum VariantInput {
    case string(String)
    case bytes([UInt8])
    case other
}

extension BusConnection {
    /// The pid of the process that sent the message being dispatched (a method call or a property access), as
    /// the bus daemon reports it; nil outside a dispatch.
    func currentSenderPid() -> Int32? {
        guard let message = sd_bus_get_current_message(bus) else { return nil }
        let reader = MessageReader(message: message)
        let sender = Self.sender(reader)
        if let pid = senderPids[sender] { return pid }
        guard let pid = Self.caller(reader).pid, pid > 0 else { return nil }
        if senderPids.count >= 4096 { senderPids.removeAll() }
        senderPids[sender] = pid
        return pid
    }

    /// The unique name of the sender of the message being dispatched; empty outside a dispatch.
    func currentSender() -> String {
        sd_bus_get_current_message(bus).map { Self.sender(MessageReader(message: $0)) } ?? ""
    }

    /// The pid of the connection `name` as the bus daemon reports it now (asked, not cached); nil once the name has
    /// left the bus.
    func connectionPid(_ name: String) -> Int32? {
        var creds: OpaquePointer?
        guard sd_bus_get_name_creds(bus, name, keyseal_creds_pid_mask(), &creds) >= 0 else { return nil }
        defer { sd_bus_creds_unref(creds) }
        var pid: pid_t = 0
        guard sd_bus_creds_get_pid(creds, &pid) >= 0, pid > 0 else { return nil }
        return pid
    }

    static func sender(_ message: MessageReader) -> String {
        sd_bus_message_get_sender(message.message).map { String(cString: $0) } ?? ""
    }

    static func variantBytesOrString(_ message: MessageReader) throws(SDBusFailure) -> VariantInput {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        try sdbus(sd_bus_message_peek_type(message.message, &type, &contents), "sd_bus_message_peek_type")
        switch contents.map({ String(cString: $0) }) {
        case "s":
            try message.enter("v", "s")
            defer { _ = try? message.exit() }
            return .string(try message.string())
        case "ay":
            try message.enter("v", "ay")
            defer { _ = try? message.exit() }
            return .bytes(try message.bytes())
        default:
            try sdbus(sd_bus_message_skip(message.message, "v"), "sd_bus_message_skip")
            return .other
        }
    }
}

/// A pipe with both ends close-on-exec (and non-blocking if asked).
func makePipe(_ fds: inout [Int32], nonBlocking: Bool) -> Bool {
    guard pipe(&fds) == 0 else { return false }
    for fd in fds {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        if nonBlocking { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
    }
    return true
}
