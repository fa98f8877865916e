import FoundationEssentials
import Glibc
import KeysealCore

/// Who a connection's peer is, from `SO_PEERCRED`.
public struct PeerCredentials: Sendable, Hashable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    public var description: String { "uid \(uid) gid \(gid) pid \(pid)" }
}

/// Roles and access groups (DESIGN §6): administrators are the daemon's own uid and root; the policy file maps
/// other users and groups, and executables and systemd units of any user, to access groups; anyone else gets
/// the private group `uid.<n>`.
///
/// Policy file format (docs/OPERATIONS.md): one rule per line, `#` starts a comment,
///
///     user NAME-OR-UID: GROUP [GROUP …]
///     group NAME-OR-GID: GROUP [GROUP …]
///     exe /ABSOLUTE/PATH: GROUP [GROUP …]
///     unit NAME.service|NAME.scope: GROUP [GROUP …]
///     vouching exe /ABSOLUTE/PATH
///     vouching unit NAME.service
///
/// A `vouching` client (the Secret Service bridge) may send requests on behalf of another process of its own
/// uid; keyseald then identifies that process itself and applies its rules.
/// One group of a rule may be marked `*GROUP`: the client's default group. A client's groups are those of every
/// `exe` rule naming its executable, then every `unit` rule naming its unit, then every `user` rule naming its
/// uid, then every `group` rule naming its primary gid or one of its account's supplementary groups, in file
/// order, without repeats; its default group is the first marked one in that order, else the first. An
/// administrator keeps every group; a marked group of a matching `exe` or `unit` rule becomes its default group.
/// Names are resolved when the file is read; an unknown name is an error.
public struct AccessPolicy: Sendable {
    public struct Rule: Sendable, Hashable {
        public enum Subject: Sendable, Hashable {
            case user(UInt32)
            case group(UInt32)
            case executable(String)
            case unit(String)
        }

        public var subject: Subject
        public var groups: [String]
        /// The group marked `*`, if any.
        public var defaultGroup: String?

        public init(subject: Subject, groups: [String], defaultGroup: String? = nil) {
            self.subject = subject
            self.groups = groups
            self.defaultGroup = defaultGroup
        }
    }

    public var rules: [Rule]
    /// The executables and units that may act on behalf of other processes of their uid (`.executable`, `.unit`).
    public var vouching: [Rule.Subject]
    /// The daemon's own uid: an administrator, like root.
    public var daemonUID: UInt32

    public init(rules: [Rule] = [], vouching: [Rule.Subject] = [], daemonUID: UInt32 = getuid()) {
        self.rules = rules
        self.vouching = vouching
        self.daemonUID = daemonUID
    }

    /// Reads a policy file.
    public static func load(file: URL, daemonUID: UInt32 = getuid()) throws -> AccessPolicy {
        let text: String
        do {
            text = try String(contentsOf: file, encoding: .utf8)
        } catch {
            throw KeychainError(KeychainStatus.param, "cannot read the policy file \(file.path)")
        }
        return try parse(text, source: file.path, daemonUID: daemonUID)
    }

    /// Parses policy text; `lookUpUser`/`lookUpGroup` resolve names (the system databases by default).
    public static func parse(
        _ text: String,
        source: String = "policy",
        daemonUID: UInt32 = getuid(),
        lookUpUser: (String) -> UInt32? = systemUserID,
        lookUpGroup: (String) -> UInt32? = systemGroupID
    ) throws -> AccessPolicy {
        var rules: [Rule] = []
        var vouching: [Rule.Subject] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let trimmed = line.trimmed()
            if trimmed.isEmpty { continue }
            func fail(_ why: String) -> KeychainError {
                KeychainError(KeychainStatus.param, "\(source):\(index + 1): \(why)")
            }
            if trimmed.hasPrefix("vouching"), trimmed.dropFirst(8).first?.isWhitespace == true {
                let words = trimmed.dropFirst(8).split(maxSplits: 1, whereSeparator: \.isWhitespace)
                    .map { String($0).trimmed() }
                guard words.count == 2 else { throw fail("expected `vouching exe PATH` or `vouching unit NAME`") }
                vouching.append(try identitySubject(kind: words[0], name: words[1], fail: fail))
                continue
            }
            // A path may hold `:`; the separator is the first `:` followed by a space or the end of the line.
            let colon = trimmed.indices.first { index in
                trimmed[index] == ":"
                    && (trimmed.index(after: index) == trimmed.endIndex
                        || trimmed[trimmed.index(after: index)].isWhitespace)
            }
            guard let colon else { throw fail("expected `user NAME: GROUP …`") }
            let head = trimmed[..<colon].split(maxSplits: 1, whereSeparator: \.isWhitespace)
                .map { String($0).trimmed() }
            var groups = trimmed[trimmed.index(after: colon)...].split(whereSeparator: \.isWhitespace).map(String.init)
            guard head.count == 2, !head[1].isEmpty else {
                throw fail("expected `user|group|exe|unit NAME: GROUP …`")
            }
            guard !groups.isEmpty else { throw fail("no access group given for \(head[1])") }
            let marked = groups.indices.filter { groups[$0].hasPrefix("*") }
            guard marked.count <= 1 else { throw fail("more than one default group (`*`) for \(head[1])") }
            var defaultGroup: String?
            if let mark = marked.first {
                groups[mark].removeFirst()
                guard !groups[mark].isEmpty else { throw fail("`*` without a group name for \(head[1])") }
                defaultGroup = groups[mark]
            }
            let subject: Rule.Subject
            switch head[0] {
            case "user":
                guard let uid = UInt32(head[1]) ?? lookUpUser(head[1]) else { throw fail("unknown user \(head[1])") }
                subject = .user(uid)
            case "group":
                guard let gid = UInt32(head[1]) ?? lookUpGroup(head[1]) else { throw fail("unknown group \(head[1])") }
                subject = .group(gid)
            case "exe", "unit":
                subject = try identitySubject(kind: head[0], name: head[1], fail: fail)
            default:
                throw fail("unknown rule \(head[0]) (expected user, group, exe or unit)")
            }
            rules.append(Rule(subject: subject, groups: groups, defaultGroup: defaultGroup))
        }
        return AccessPolicy(rules: rules, vouching: vouching, daemonUID: daemonUID)
    }

    private static func identitySubject(
        kind: String,
        name: String,
        fail: (String) -> KeychainError
    ) throws
        -> Rule.Subject
    {
        switch kind {
        case "exe":
            guard name.hasPrefix("/") else { throw fail("an exe rule needs an absolute path") }
            return .executable(name)
        case "unit":
            guard name.hasSuffix(".service") || name.hasSuffix(".scope"), !name.contains("/") else {
                throw fail("a unit rule names a .service or .scope unit")
            }
            return .unit(name)
        default:
            throw fail("expected exe or unit, not \(kind)")
        }
    }

    /// Whether any rule or vouching entry names an executable or a unit: only then does keyseald need to know what a
    /// peer runs (``PeerIdentity``, read from `/proc` for every connection). A policy of uids and gids decides without.
    public var identifiesPeers: Bool {
        !vouching.isEmpty
            || rules.contains { rule in
                switch rule.subject {
                case .executable, .unit: true
                case .user, .group: false
                }
            }
    }

    /// Whether any rule or vouching entry names an executable.
    public var namesExecutables: Bool {
        (rules.map(\.subject) + vouching).contains { if case .executable = $0 { true } else { false } }
    }

    /// Whether a rule or vouching entry names the executable `path`: only then does it matter who holds a
    /// connection made by a process running it (``PeerIdentity/holdsConnection(pid:cookie:proc:)``).
    public func names(executable path: String) -> Bool {
        (rules.map(\.subject) + vouching).contains { $0 == .executable(path) }
    }

    /// Whether a peer may send requests on behalf of other processes of its uid.
    public func vouches(for peer: PeerCredentials, identity: PeerIdentity) -> Bool {
        vouching.contains { subject in matches(subject, peer: peer, identity: identity) }
    }

    private func matches(_ subject: Rule.Subject, peer: PeerCredentials, identity: PeerIdentity) -> Bool {
        switch subject {
        case .executable(let path): path == identity.executable
        case .unit(let name): name == identity.unit || (peer.uid == daemonUID && name == identity.userUnit)
        case .user(let uid): uid == peer.uid
        case .group: false
        }
    }

    public func isAdministrator(_ peer: PeerCredentials) -> Bool { peer.uid == 0 || peer.uid == daemonUID }

    /// The caller a peer acts as. `identity` is what it runs (executable, unit); `supplementaryGroups` are the
    /// gids of the peer's account.
    public func caller(
        for peer: PeerCredentials,
        identity: PeerIdentity = .unknown,
        supplementaryGroups: (UInt32) -> [UInt32] = systemGroupList
    ) -> Caller {
        let matched = matchingRules(peer: peer, identity: identity, supplementaryGroups: supplementaryGroups)
        if isAdministrator(peer) {
            let appDefault = matched.first { rule in
                switch rule.subject {
                case .executable, .unit: rule.defaultGroup != nil
                case .user, .group: false
                }
            }?.defaultGroup
            guard let appDefault else { return .owner }
            return Caller(accessGroups: nil, defaultGroup: appDefault, isAdministrator: true)
        }
        var groups: [String] = []
        for rule in matched { append(rule.groups, to: &groups) }
        if groups.isEmpty { groups = ["uid.\(peer.uid)"] }
        let defaultGroup = matched.lazy.compactMap(\.defaultGroup).first ?? groups[0]
        return Caller(accessGroups: groups, defaultGroup: defaultGroup, isAdministrator: false)
    }

    /// The rules that apply to a peer: by executable, by unit, by uid, by gid, each in file order. A `unit` rule
    /// names a system unit; it names a user-manager unit only for the daemon's own uid, since any user may name
    /// the units of their own manager.
    func matchingRules(
        peer: PeerCredentials,
        identity: PeerIdentity,
        supplementaryGroups: (UInt32) -> [UInt32]
    )
        -> [Rule]
    {
        var matched: [Rule] = []
        for rule in rules {
            if case .executable = rule.subject, matches(rule.subject, peer: peer, identity: identity) {
                matched.append(rule)
            }
        }
        for rule in rules {
            if case .unit = rule.subject, matches(rule.subject, peer: peer, identity: identity) { matched.append(rule) }
        }
        for rule in rules {
            if case .user(let uid) = rule.subject, uid == peer.uid { matched.append(rule) }
        }
        let groupRules = rules.filter { if case .group = $0.subject { true } else { false } }
        if !groupRules.isEmpty {
            let memberOf = Set([peer.gid] + supplementaryGroups(peer.uid))
            for rule in groupRules {
                if case .group(let gid) = rule.subject, memberOf.contains(gid) { matched.append(rule) }
            }
        }
        return matched
    }

    private func append(_ new: [String], to groups: inout [String]) {
        for group in new where !groups.contains(group) { groups.append(group) }
    }

    // MARK: System databases

    public static func systemUserID(_ name: String) -> UInt32? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.pw_uid
    }

    public static func systemGroupID(_ name: String) -> UInt32? {
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.gr_gid
    }

    /// The gids of the account `uid` (from the group database), empty when the account is unknown.
    public static func systemGroupList(_ uid: UInt32) -> [UInt32] {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name
        else { return [] }
        var count: Int32 = 64
        var gids = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(name, entry.pw_gid, &gids, &count) < 0 {
            gids = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(name, entry.pw_gid, &gids, &count) >= 0 else { return [] }
        }
        return Array(gids.prefix(Int(count)))
    }
}
