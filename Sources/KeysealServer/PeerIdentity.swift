import CKeysealSys
import FoundationEssentials
import Glibc
import KeysealCore

/// What a connection's peer runs: its executable and systemd unit, read once per connection from /proc through a
/// pidfd so that a process that exits and whose pid is reused cannot lend its identity to another.
///
/// The pidfd comes from `SO_PEERPIDFD` (the peer as of connect(), Linux 6.5) or else from pidfd_open on the
/// `SO_PEERCRED` pid; the latter is accepted only if that pid's process still has the peer's uid and started
/// before the connection was accepted (/proc/PID/stat field 22), since a reused pid belongs to a later process.
/// Either way the start time is read again after the executable and cgroup, and the pidfd must still show a
/// running process: what was read belongs to the peer. Anything that does not check out leaves both unknown,
/// and rules by executable or unit then do not apply (uid and gid rules still do).
///
/// The executable is the file the process really runs, seen from keyseald's mount namespace: the path
/// `/proc/PID/exe` names is kept only if that path, looked up by keyseald, is the same file (device and inode) as
/// the one the process executes. A process in a mount namespace of its own can make any path name any file for
/// itself (a bind mount or an overlay over a granted binary), and `/proc/PID/exe` then reads the granted path;
/// the file behind it is still its own, so it is not identified.
public struct PeerIdentity: Sendable, Hashable, CustomStringConvertible {
    /// `/proc/PID/exe`, when keyseald finds that very file at that path; nil for a deleted or replaced binary, or
    /// a path that names another file in the peer's mount namespace than in keyseald's.
    public var executable: String?
    /// The systemd system unit (`foo.service`, `run-u7.scope`), nil outside one.
    public var unit: String?
    /// The unit under a user manager (`user@UID.service`), nil outside one.
    public var userUnit: String?

    public init(executable: String? = nil, unit: String? = nil, userUnit: String? = nil) {
        self.executable = executable
        self.unit = unit
        self.userUnit = userUnit
    }

    public static let unknown = PeerIdentity()

    public var description: String {
        "exe \(executable ?? "?") unit \(unit ?? "-")" + (userUnit.map { " user-unit \($0)" } ?? "")
    }

    /// How the peer's pidfd was obtained.
    public enum Source: String, Sendable {
        case peerPidfd = "SO_PEERPIDFD"
        case pidfdOpen = "pidfd_open"
    }

    /// Identifies `peer`. `peerPidfd` is the pidfd from `SO_PEERPIDFD` if the kernel gave one (this function
    /// closes it); `acceptedTicks` is when the connection was accepted, in boot clock ticks. With `connection` (the
    /// `SO_COOKIE` of keyseald's end, and which executables it matters for), an executable it matters for counts
    /// only if the peer holds that connection as its own (``holdsConnection(pid:cookie:proc:)``).
    public static func resolve(
        peer: PeerCredentials,
        peerPidfd: Int32?,
        acceptedTicks: UInt64 = bootTicks(),
        proc: String = "/proc",
        connection: (cookie: UInt64, matters: (String) -> Bool)? = nil
    ) -> (identity: PeerIdentity, source: Source?) {
        let pidfd: Int32
        let source: Source
        if let peerPidfd, peerPidfd >= 0 {
            pidfd = peerPidfd
            source = .peerPidfd
        } else {
            pidfd = keyseal_pidfd_open(peer.pid)
            source = .pidfdOpen
            guard pidfd >= 0 else { return (.unknown, nil) }
        }
        defer { close(pidfd) }
        guard peer.pid > 0, let before = processStart(pid: peer.pid, proc: proc),
            effectiveUID(pid: peer.pid, proc: proc) == peer.uid
        else { return (.unknown, source) }
        if source == .pidfdOpen && before > acceptedTicks { return (.unknown, source) }
        var identity = PeerIdentity()
        // A process in a user namespace of its own may set its own /proc/PID/exe to any file it can read
        // (prctl PR_SET_MM_MAP), without ever running it: only a peer in keyseald's user namespace is identified by
        // its executable.
        if let own = readLink("\(proc)/self/ns/user"), readLink("\(proc)/\(peer.pid)/ns/user") == own {
            identity.executable = readLink("\(proc)/\(peer.pid)/exe").flatMap { path in
                isSameFile(path, "\(proc)/\(peer.pid)/exe") ? path : nil
            }
        }
        if let connection, let executable = identity.executable, connection.matters(executable),
            !holdsConnection(pid: peer.pid, cookie: connection.cookie, proc: proc)
        {
            identity.executable = nil
        }
        if let cgroup = readSmallFile("\(proc)/\(peer.pid)/cgroup") {
            (identity.unit, identity.userUnit) = units(fromCgroup: cgroup)
        }
        guard processStart(pid: peer.pid, proc: proc) == before, isRunning(pidfd: pidfd) else {
            return (.unknown, source)
        }
        return (identity, source)
    }

    /// Whether the process `pid` holds the client end of the connection whose socket is `cookie` (`SO_COOKIE` of
    /// keyseald's end), with every copy close-on-exec.
    ///
    /// What a process runs counts for a connection only if that program made the connection: a process that
    /// connects and then execs a granted program either loses the socket at the exec (close-on-exec) or keeps it
    /// open across the exec, which only a socket without close-on-exec survives. A program that connects after it
    /// started holds its socket close-on-exec (Keyseal's client, Python, Go and most runtimes create sockets so);
    /// a child forked before the exec to use the connection is not the process the identity was read from.
    ///
    /// Each Unix socket among the peer's first ``descriptorLimit`` descriptors is looked up by inode in the kernel's
    /// socket diagnostics, in the peer's network namespace (where both ends of its connection live): two exact
    /// requests a socket, whatever the number of sockets on the system. A peer with more descriptors than that is
    /// not identified.
    public static func holdsConnection(pid: Int32, cookie: UInt64, proc: String = "/proc") -> Bool {
        guard let peerNamespace = readLink("\(proc)/\(pid)/ns/net") else { return false }
        var namespace: Int32 = -1
        if peerNamespace != readLink("\(proc)/self/ns/net") {
            namespace = open("\(proc)/\(pid)/ns/net", O_RDONLY | O_CLOEXEC)
            guard namespace >= 0 else { return false }
        }
        defer { if namespace >= 0 { close(namespace) } }
        let diagnostics = keyseal_sock_diag_socket(namespace)
        guard diagnostics >= 0 else { return false }
        defer { close(diagnostics) }
        guard let directory = opendir("\(proc)/\(pid)/fd") else { return false }
        defer { closedir(directory) }
        var held = false
        var seen = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.first?.isNumber == true else { continue }
            seen += 1
            guard seen <= descriptorLimit else { return false }
            guard let link = readLink("\(proc)/\(pid)/fd/\(name)"), link.hasPrefix("socket:["), link.hasSuffix("]"),
                let inode = UInt32(link.dropFirst(8).dropLast())
            else { continue }
            var peer: UInt32 = 0
            var unused: UInt32 = 0
            guard keyseal_unix_diag_peer(diagnostics, inode, ~0, &peer) == 0, peer != 0,
                keyseal_unix_diag_peer(diagnostics, peer, cookie, &unused) == 0
            else { continue }
            guard let info = readSmallFile("\(proc)/\(pid)/fdinfo/\(name)"), isCloseOnExec(fdinfo: info) else {
                return false
            }
            held = true
        }
        return held
    }

    /// The descriptors of a peer ``holdsConnection(pid:cookie:proc:)`` looks through: it is on the event loop.
    public static let descriptorLimit = 1024

    /// Whether a /proc/PID/fdinfo text's `flags:` (octal open flags) include O_CLOEXEC.
    static func isCloseOnExec(fdinfo: String) -> Bool {
        for line in fdinfo.split(separator: "\n") where line.hasPrefix("flags:") {
            guard let flags = Int(line.dropFirst(6).filter { !$0.isWhitespace }, radix: 8) else { return false }
            return flags & Int(O_CLOEXEC) != 0
        }
        return false
    }

    /// Clock ticks since boot (CLOCK_BOOTTIME), the unit of /proc/PID/stat's start time.
    public static func bootTicks() -> UInt64 {
        var now = timespec()
        guard clock_gettime(CLOCK_BOOTTIME, &now) == 0 else { return 0 }
        let hertz = UInt64(max(sysconf(Int32(_SC_CLK_TCK)), 1))
        return UInt64(now.tv_sec) * hertz + UInt64(now.tv_nsec) / (1_000_000_000 / hertz)
    }

    /// Whether the process behind `pidfd` still runs: a pidfd becomes readable when its process exits.
    static func isRunning(pidfd: Int32) -> Bool {
        var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 0
    }

    /// The pidfd `SO_PEERPIDFD` gives for a connected Unix socket, nil where the kernel has no such option.
    public static func peerPidfd(socket: Int32) -> Int32? {
        var pidfd: Int32 = -1
        var size = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(socket, SOL_SOCKET, keyseal_so_peerpidfd, &pidfd, &size) == 0, pidfd >= 0 else { return nil }
        return pidfd
    }

    // MARK: /proc parsing

    /// Field 22 of /proc/PID/stat: the start time in clock ticks since boot. The command name (field 2) may hold
    /// spaces and parentheses, so fields are counted after its last `)`. Parsed as bytes: this runs twice for every
    /// connection.
    public static func processStart(pid: Int32, proc: String = "/proc") -> UInt64? {
        guard let stat = readSmallBytes("\(proc)/\(pid)/stat") else { return nil }
        return startTime(fromStat: stat)
    }

    public static func startTime(fromStat stat: String) -> UInt64? { startTime(fromStat: Array(stat.utf8)) }

    static func startTime(fromStat stat: [UInt8]) -> UInt64? {
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // The fields after the command name: [0] is field 3 (state); field 22 is [19].
        return field(19, of: stat[(close + 1)...]).flatMap(decimal)
    }

    /// The effective uid from /proc/PID/status (`Uid:` real effective saved fs).
    static func effectiveUID(pid: Int32, proc: String) -> UInt32? {
        guard let status = readSmallBytes("\(proc)/\(pid)/status") else { return nil }
        let key = Array("Uid:".utf8)
        var lineStart = status.startIndex
        while lineStart < status.endIndex {
            let lineEnd = status[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? status.endIndex
            let line = status[lineStart..<lineEnd]
            if line.starts(with: key) {
                return field(1, of: line.dropFirst(key.count)).flatMap(decimal).flatMap { UInt32(exactly: $0) }
            }
            lineStart = lineEnd + 1
        }
        return nil
    }

    /// The `index`th field (from 0) of `bytes` separated by ASCII whitespace.
    static func field(_ index: Int, of bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        var current = -1
        var start: Int?
        for position in bytes.indices {
            let byte = bytes[position]
            let space = byte == 0x20 || byte == 0x09 || byte == 0x0A
            if space {
                if let begun = start {
                    if current == index { return bytes[begun..<position] }
                    start = nil
                }
            } else if start == nil {
                current += 1
                start = position
            }
        }
        if let begun = start, current == index { return bytes[begun...] }
        return nil
    }

    /// A decimal number of ASCII digits only, nil otherwise or on overflow.
    static func decimal(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowSum) = times.addingReportingOverflow(UInt64(byte - 0x30))
            guard !overflowTimes, !overflowSum else { return nil }
            value = sum
        }
        return value
    }

    /// The system unit and user unit from /proc/PID/cgroup. The unified hierarchy's line (`0::PATH`) is used, or
    /// else cgroup v1's `name=systemd` line. Slices are skipped; the first other component is the unit, and under
    /// a user manager (`user@UID.service`) the next one is the user unit. Later components are the unit's own
    /// (a unit with delegation may create any names there), so they never name a unit.
    public static func units(fromCgroup text: String) -> (unit: String?, userUnit: String?) {
        let lines = text.split(separator: "\n")
        let path =
            lines.first { $0.hasPrefix("0::") }.map { $0.dropFirst(3) }
            ?? lines.first { $0.contains(":name=systemd:") }.flatMap { line in
                line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).last
            }
        guard let path else { return (nil, nil) }
        var unit: String?
        for component in path.split(separator: "/") where !component.hasSuffix(".slice") {
            let name = String(component)
            guard name.hasSuffix(".service") || name.hasSuffix(".scope") else { return (unit, nil) }
            if let unit { return (unit, name) }
            guard name.hasPrefix("user@") else { return (name, nil) }
            unit = name
        }
        return (unit, nil)
    }

    /// Whether two paths, each followed to its file, are one file: the same device and inode.
    static func isSameFile(_ first: String, _ second: String) -> Bool {
        var firstDevice: UInt64 = 0
        var firstInode: UInt64 = 0
        var secondDevice: UInt64 = 0
        var secondInode: UInt64 = 0
        guard keyseal_file_id(first, &firstDevice, &firstInode) == 0,
            keyseal_file_id(second, &secondDevice, &secondInode) == 0
        else { return false }
        return firstDevice == secondDevice && firstInode == secondInode
    }

    static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Reads a /proc file (their size reads as 0) up to 64 KiB.
    static func readSmallFile(_ path: String) -> String? {
        readSmallBytes(path).map { String(decoding: $0, as: UTF8.self) }
    }

    static func readSmallBytes(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65536 {
            let count = Posix.read(fd, &buffer, buffer.count)
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes += buffer.prefix(count)
        }
        return bytes
    }
}
