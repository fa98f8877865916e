import Foundation
import KeysealCore
import KeysealServer
import Testing

@Suite("Access policy")
struct AccessPolicyTests {
    static func users(_ name: String) -> UInt32? { ["alice": 1001, "bob": 1002][name] }
    static func groups(_ name: String) -> UInt32? { ["staff": 50, "ops": 60][name] }

    static func parse(_ text: String) throws -> AccessPolicy {
        try AccessPolicy.parse(text, daemonUID: 999, lookUpUser: users, lookUpGroup: groups)
    }

    @Test("the daemon's uid and root are administrators holding every group")
    func administrators() throws {
        let policy = try Self.parse("")
        for uid: UInt32 in [0, 999] {
            let caller = policy.caller(for: PeerCredentials(pid: 1, uid: uid, gid: 1)) { _ in [] }
            #expect(caller == .owner)
        }
    }

    @Test("a client not in the policy gets only uid.<n>")
    func privateGroup() throws {
        let policy = try Self.parse("user alice: mail\n")
        let caller = policy.caller(for: PeerCredentials(pid: 1, uid: 1002, gid: 1002)) { _ in [] }
        #expect(caller.accessGroups == ["uid.1002"])
        #expect(caller.defaultGroup == "uid.1002")
        #expect(!caller.isAdministrator)
    }

    @Test("user rules come first, then group rules by primary or supplementary group, without repeats")
    func rules() throws {
        let policy = try Self.parse(
            """
            # comment
            group staff: shared  team   # trailing comment
            user alice: mail shared
            group 60: ops
            user 1001: extra
            """)
        let caller = policy.caller(for: PeerCredentials(pid: 1, uid: 1001, gid: 1001)) { _ in [50, 60] }
        #expect(caller.accessGroups == ["mail", "shared", "extra", "team", "ops"])
        #expect(caller.defaultGroup == "mail")
        let staffOnly = policy.caller(for: PeerCredentials(pid: 1, uid: 1002, gid: 50)) { _ in [] }
        #expect(staffOnly.accessGroups == ["shared", "team"])
    }

    @Test("bad lines are one-line errors naming the line", arguments: [
        "user alice mail", "user nobody-known: g", "group nogroup: g", "role alice: g", "user alice:", "user: g",
    ])
    func badLines(line: String) {
        #expect(throws: KeychainError.self) { try Self.parse("\n" + line) }
        do {
            _ = try Self.parse("\n" + line)
        } catch {
            #expect("\(error)".contains("policy:2"))
        }
    }
}
