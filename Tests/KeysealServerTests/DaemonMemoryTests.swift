import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// What keyseald's memory holds after passcodes went through it: passcodes travel in zeroizing types and the
/// connection buffers are zeroed when released, so no copy stays behind once a request is answered.
@Suite("Daemon memory", .serialized)
struct DaemonMemoryTests {
    /// Offsets of `needle` in every readable mapping of process `pid`, read through /proc/PID/mem. keyseald is not
    /// dumpable, so only root may read it; the test needs root (as CI runs) and fails rather than skips without it.
    static func occurrences(of needle: [UInt8], inProcess pid: Int32) throws -> [String] {
        let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
        let fd = open("/proc/\(pid)/mem", O_RDONLY)
        guard fd >= 0 else { throw FixtureError("cannot open /proc/\(pid)/mem: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var found: [String] = []
        var readable = 0
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
            let name = fields.count >= 6 ? String(fields[5]) : "[anonymous]"
            if name == "[vvar]" || name == "[vsyscall]" || name == "[vvar_vclock]" { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard bounds.count == 2, bounds[1] > bounds[0] else { continue }
            let length = Int(bounds[1] - bounds[0])
            var buffer = [UInt8](repeating: 0, count: length)
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, length, off_t(bounds[0])) }
            guard count > 0 else { continue }
            readable += count
            buffer.withUnsafeBytes { raw in
                needle.withUnsafeBytes { pattern in
                    let base = raw.baseAddress!
                    var offset = 0
                    while offset + pattern.count <= count,
                        let hit = memchr(base + offset, Int32(pattern[0]), count - offset - pattern.count + 1)
                    {
                        let position = base.distance(to: UnsafeRawPointer(hit))
                        if memcmp(hit, pattern.baseAddress!, pattern.count) == 0 {
                            found.append("\(name) +\(position)")
                        }
                        offset = position + 1
                    }
                }
            }
        }
        guard readable > 1 << 20 else { throw FixtureError("read only \(readable) bytes of process \(pid)") }
        return found
    }

    @Test("keyseald wipes freed memory: its free is the wiping one, and it says so at start")
    func keysealdWipesFreedMemory() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        #expect(daemon.log_().contains("freed memory is wiped"))
        #expect(!daemon.log_().contains("freed memory is not wiped"))
    }

    @Test("no copy of a passcode stays in keyseald's memory after set, unlock, a wrong try and change")
    func passcodesAreNotLeftBehind() throws {
        guard getuid() == 0 else {
            Issue.record("reading a non-dumpable process's memory needs root; run this suite as root (CI does)")
            return
        }
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let store = try daemon.client()
        // Long enough to live on the heap in any String, and unique to this run.
        let first = "memory-probe-first-" + randomBytes(12).map { String(format: "%02x", $0) }.joined()
        let second = "memory-probe-second-" + randomBytes(12).map { String(format: "%02x", $0) }.joined()
        _ = try store.add(.password(account: "probe"))
        try store.setPasscode(first)
        try store.lock()
        #expect(status { try store.unlock(passcode: first + "-wrong") } == KeychainStatus.authFailed)
        try store.unlock(passcode: first)
        try store.changePasscode(from: first, to: second)
        #expect(try store.copyMatching(.password(account: "probe", returns: .data)).first?.data == Data("secret".utf8))
        try store.lock()
        // Last on the connection, so that no later request overwrites what it left in the receive buffer.
        try store.unlock(passcode: second)

        let pid = try #require(daemon.process?.processIdentifier)
        for passcode in [first, first + "-wrong", second] {
            let found = try Self.occurrences(of: Array(passcode.utf8), inProcess: pid)
            #expect(found.isEmpty, "bytes of \(passcode.prefix(20))… found in keyseald at \(found)")
        }
        // The scan sees the whole process: its own name is in its read-only data.
        #expect(try !Self.occurrences(of: Array("keyseald".utf8), inProcess: pid).isEmpty)
    }
}
