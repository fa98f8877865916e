import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

/// The freedesktop Secret Service (org.freedesktop.secrets) over keyseald: every Secret Service item is a Keyseal
/// generic password of the calling user, reached through keyseald's wire as that user, so that the daemon's roles,
/// groups and lock state apply (docs/DECISIONS.md, "The Secret Service bridge is a wire client").
///
/// An item is the generic password with service `freedesktop-secret:<collection>` and an account of 32 hex digits
/// (its object path's last element); its Secret Service attributes are the item's string attributes
/// (``AttributeKey/stringAttributes``: sealed with it, each pair searchable by a keyed digest), its label `labl`,
/// its content type `desc`. Every method runs on the bus thread.
public final class SecretServiceBridge: BusObjects, @unchecked Sendable {
    public static let busName = "org.freedesktop.secrets"
    static let root = "/org/freedesktop/secrets"
    static let collectionPrefix = root + "/collection"
    static let aliasPrefix = root + "/aliases"
    static let sessionPrefix = root + "/session"
    static let promptPrefix = root + "/prompt"
    static let servicePrefix = "freedesktop-secret:"
    static let serviceInterface = "org.freedesktop.Secret.Service"
    static let collectionInterface = "org.freedesktop.Secret.Collection"
    static let itemInterface = "org.freedesktop.Secret.Item"
    static let sessionInterface = "org.freedesktop.Secret.Session"
    static let promptInterface = "org.freedesktop.Secret.Prompt"
    static let dhAlgorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7"
    static let schemaAttribute = "xdg:schema"
    static let genericSchema = "org.freedesktop.Secret.Generic"
    /// Open sessions kept for one client (one D-Bus unique name): opening one more closes that client's own oldest,
    /// never another client's.
    static let sessionsPerClient = 64
    /// Open sessions kept for one process, whatever number of bus connections it opens: opening one more closes that
    /// process's own oldest, never another process's. A sixty-fourth of ``sessionLimit``, so that one process
    /// cannot take the sessions every other process needs.
    static let sessionsPerProcess = 256
    /// Open sessions kept in all: beyond, OpenSession answers LimitsExceeded (no session of another client is closed).
    static let sessionLimit = 16_384
    /// Prompts kept for one client that it has not run: making one more completes that client's own oldest
    /// dismissed, never another client's; a client that leaves the bus takes its prompts with it.
    static let promptsPerClient = 16

    public struct Configuration: Sendable {
        public var socketPath: String
        /// The program (and its arguments) an Unlock prompt runs; it prints the passcode on its standard output
        /// (systemd-ask-password, ssh-askpass). nil: an Unlock prompt completes dismissed.
        public var askpass: [String]?
        public var askpassTimeoutSeconds: Int

        public init(socketPath: String, askpass: [String]? = nil, askpassTimeoutSeconds: Int = 120) {
            self.socketPath = socketPath
            self.askpass = askpass
            self.askpassTimeoutSeconds = askpassTimeoutSeconds
        }
    }

    enum Session {
        case plain
        case aes(SecretBytes)
    }

    struct OpenSession {
        var sender: String
        /// The process that opened it (``processKey(sender:)``).
        var process: String
        var kind: Session
    }

    final class Prompt: @unchecked Sendable {
        let objects: [String]
        /// The unique name of the client that asked for it.
        let owner: String
        var child: pid_t = 0
        var done = false
        init(objects: [String], owner: String) {
            self.objects = objects
            self.owner = owner
        }
    }

    let configuration: Configuration
    let keyseal: KeysealConnection
    var bus: BusConnection!
    var sessions: [String: OpenSession] = [:]
    /// Each client's open sessions, oldest first, by the client's unique name.
    var sessionOrder: [String: [String]] = [:]
    /// Each process's open sessions over all its bus connections, oldest first (``processKey(sender:)``).
    var processSessions: [String: [String]] = [:]
    var prompts: [String: Prompt] = [:]
    /// Each client's prompts not yet run, oldest first, by the client's unique name.
    var promptOrder: [String: [String]] = [:]
    var counter = 0
    /// Collection names, login and session first; labels by name.
    var collections: [String] = ["login", "session"]
    var labels: [String: String] = ["login": "Login", "session": "Session"]
    var aliases: [String: String] = ["default": "login", "login": "login", "session": "session"]
    /// The access group of each collection other than login and session (which are the caller's default group,
    /// which keyseald applies): name → group.
    var collectionGroups: [String: String] = [:]
    /// What the bridge knows of its items between requests, by object path (Bridge+Index.swift).
    var index: [String: IndexedItem] = [:]
    /// Whether ``index`` was built from a listing of every item (while unlocked), so that a search while locked can
    /// answer from it.
    var indexComplete = false
    /// Searches answered while locked without an index, by their placeholder item's path (Bridge+Index.swift).
    var pendingSearches: [String: PendingSearch] = [:]
    var pendingOrder: [String] = []
    static let pendingSearchLimit = 256
    let digester = SecretServicePairDigester()
    var lastLocked: Bool?
    /// Whether keyseald accepts this bridge as vouching (its policy names it): item requests then act for the
    /// D-Bus caller, whose executable and unit keyseald reads and applies.
    var vouching = false
    /// The last item record read, for the message being dispatched (a GetAll reads six properties of one item).
    var recordCache: (message: String, path: String, record: ItemRecord)?

    public init(configuration: Configuration) {
        self.configuration = configuration
        keyseal = KeysealConnection(socketPath: configuration.socketPath)
    }

    /// Connects to keyseald and the session bus, owns the bus name (taking it from its owner with `replace`) and
    /// serves until the name is lost or the process ends. Throws when another provider owns the name.
    public func run(replace: Bool, onReady: () -> Void = {}) throws {
        try keyseal.connect()
        vouching = (try? keyseal.send(.onBehalf(pid: getpid(), .ping))) != nil
        let bus = try BusConnection(objects: self)
        self.bus = bus
        try registerObjects(bus)
        try Self.requestName(bus, replace: replace)
        bus.onNameLost = { [weak self] in
            printError("keyseal-secret-service: another provider took \(Self.busName); exiting")
            self?.bus.stop()
        }
        bus.onClientGone = { [weak self] name in self?.clientGone(name) }
        lastLocked = isLocked()
        if lastLocked == false { rebuildIndex() }
        watchLockState()
        onReady()
        try bus.run()
    }

    static func requestName(_ bus: BusConnection, replace: Bool) throws {
        do {
            try bus.requestName(busName, replace: replace)
        } catch {
            guard error.code == -EEXIST else { throw error }
            throw BusError(
                BusError.failed,
                "another Secret Service provider owns \(busName) on this session bus (gnome-keyring, KeePassXC…); "
                    + "stop it, or start keyseal-secret-service with --replace"
            )
        }
    }

    func registerObjects(_ bus: BusConnection) throws {
        try bus.add(
            path: Self.root,
            interface: Self.serviceInterface,
            VTable([
                .method("OpenSession", "sv", "vo"), .method("CreateCollection", "a{sv}s", "oo"),
                .method("SearchItems", "a{ss}", "aoao"), .method("Unlock", "ao", "aoo"), .method("Lock", "ao", "aoo"),
                .method("GetSecrets", "aoo", "a{o(oayays)}"), .method("ReadAlias", "s", "o"),
                .method("SetAlias", "so", ""), .property("Collections", "ao"),
                .signal("CollectionCreated", "o"), .signal("CollectionDeleted", "o"), .signal("CollectionChanged", "o"),
            ])
        )
        let collection = VTable([
            .method("Delete", "", "o"), .method("SearchItems", "a{ss}", "ao"),
            .method("CreateItem", "a{sv}(oayays)b", "oo"), .invalidatingProperty("Items", "ao"),
            .writableProperty("Label", "s"), .property("Locked", "b"), .property("Created", "t"),
            .property("Modified", "t"), .signal("ItemCreated", "o"), .signal("ItemDeleted", "o"),
            .signal("ItemChanged", "o"),
        ])
        try bus.add(prefix: Self.collectionPrefix, interface: Self.collectionInterface, collection)
        try bus.add(prefix: Self.aliasPrefix, interface: Self.collectionInterface, collection)
        try bus.add(
            prefix: Self.collectionPrefix,
            interface: Self.itemInterface,
            VTable([
                .method("Delete", "", "o"), .method("GetSecret", "o", "(oayays)"), .method("SetSecret", "(oayays)", ""),
                .property("Locked", "b"), .writableProperty("Attributes", "a{ss}"), .writableProperty("Label", "s"),
                .property("Type", "s"), .property("Created", "t"), .property("Modified", "t"),
            ])
        )
        try bus.add(prefix: Self.sessionPrefix, interface: Self.sessionInterface, VTable([.method("Close", "", "")]))
        try bus.add(
            prefix: Self.promptPrefix,
            interface: Self.promptInterface,
            VTable([.method("Prompt", "s", ""), .method("Dismiss", "", ""), .signal("Completed", "bv")])
        )
        // Below the collections too, where the collections' and items' vtables would answer first otherwise (an
        // item's vtable claims its path for a collection's GetAll).
        try bus.answerUnknownObjects(below: Self.collectionPrefix)
        try bus.answerUnknownObjects(below: "/")
        try registerPortal(bus)
    }
}

extension SecretBytes {
    /// A copy as Data, for the wire (which wipes its request frame after sending).
    var data: Data { withUnsafeBytes { Data($0) } }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

func printError(_ text: String) {
    var line = text + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// Starts a detached thread that runs `body`.
func startThread(_ body: @escaping @Sendable () -> Void) {
    var thread = pthread_t()
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    let created = pthread_create(&thread, nil, threadEntry, context)
    if created == 0 { pthread_detach(thread) } else { Unmanaged<ThreadBody>.fromOpaque(context).release() }
}

private func threadEntry(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().body()
    return nil
}

final class ThreadBody {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
