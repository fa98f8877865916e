import KeysealClient

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

// A benchmark helper (Scripts/bench-ssh-agent.sh): the sign round trip through `keyseal ssh-agent` next to Keyseal's
// own wire sign of the same key, same algorithm and same data, in one process, interleaved in rounds so that both
// see the same machine. Not installed; not a user interface.
//
//   keyseal-ssh-agent-bench KEYSEALD-SOCKET AGENT-SOCKET TAG ROUNDS PER-ROUND
//
// Prints one JSON object: the median microseconds of each, and agent throughput as a fraction of wire throughput.

func printError(_ line: String) {
    var text = line + "\n"
    _ = text.withUTF8 { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments
guard arguments.count == 6, let rounds = Int(arguments[4]), let perRound = Int(arguments[5]) else {
    printError("usage: keyseal-ssh-agent-bench KEYSEALD-SOCKET AGENT-SOCKET TAG ROUNDS PER-ROUND")
    exit(64)
}
// What ssh signs at a login: a session identifier and the userauth request, about 150 bytes.
let data = Data((0..<150).map { UInt8($0 & 0xFF) })

func fail(_ message: String) -> Never {
    printError("keyseal-ssh-agent-bench: \(message)")
    exit(1)
}

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

// Keyseal's wire: the key's reference, found by tag.
let keyseald = KeysealConnection(socketPath: arguments[1])
let query = ItemQuery(
    itemClass: .key,
    attributes: ["atag": .data(Data(arguments[3].utf8)), "kcls": .string("1")],
    limit: .one,
    returns: [.persistentRef]
)
guard case .records(let records)? = try? keyseald.send(.copyMatching(query)),
    let reference = records.first?.persistentRef
else { fail("no key tagged \(arguments[3])") }
let operation = WireKeyOperation(
    reference: reference,
    kind: .sign,
    algorithm: "algid:sign:ECDSA:message-X962:SHA256",
    data: data
)

// The agent: one connection, its first identity.
let agent = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
var address = sockaddr_un()
address.sun_family = sa_family_t(AF_UNIX)
withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(arguments[2].utf8) + [0]) }
let connected = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(agent, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
    }
}
guard connected else { fail("cannot connect to \(arguments[2])") }

func exchange(_ payload: [UInt8]) -> [UInt8] {
    let frame =
        [
            UInt8(payload.count >> 24), UInt8(payload.count >> 16 & 0xFF), UInt8(payload.count >> 8 & 0xFF),
            UInt8(payload.count & 0xFF),
        ] + payload
    guard frame.withUnsafeBytes({ send(agent, $0.baseAddress!, $0.count, 0) }) == frame.count else {
        fail("send failed")
    }
    func readExactly(_ count: Int) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = buffer.withUnsafeMutableBytes { read(agent, $0.baseAddress! + filled, count - filled) }
            guard got > 0 else { fail("the agent closed the connection") }
            filled += got
        }
        return buffer
    }
    let header = readExactly(4)
    return readExactly(header.reduce(0) { $0 << 8 | Int($1) })
}

func sshString(_ bytes: [UInt8]) -> [UInt8] {
    [
        UInt8(bytes.count >> 24), UInt8(bytes.count >> 16 & 0xFF), UInt8(bytes.count >> 8 & 0xFF),
        UInt8(bytes.count & 0xFF),
    ] + bytes
}

let identities = exchange([11])
guard identities.count > 9, identities[0] == 12 else { fail("the agent lists no keys") }
let blobLength = identities[5..<9].reduce(0) { $0 << 8 | Int($1) }
let blob = Array(identities[9..<9 + blobLength])
let signRequest = [UInt8(13)] + sshString(blob) + sshString(Array(data)) + [0, 0, 0, 0]

var wire: [Double] = []
var viaAgent: [Double] = []
for _ in 0..<rounds {
    for _ in 0..<perRound {
        let start = now()
        guard case .keyResult? = try? keyseald.send(.keyOperation(operation)) else { fail("wire sign failed") }
        wire.append(Double(now() - start) / 1000)
    }
    for _ in 0..<perRound {
        let start = now()
        guard exchange(signRequest).first == 14 else { fail("agent sign failed") }
        viaAgent.append(Double(now() - start) / 1000)
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

let wireMedian = median(wire)
let agentMedian = median(viaAgent)
print(
    "{\"samples\": \(wire.count), \"wireSignMedianMicroseconds\": \(wireMedian), "
        + "\"agentSignMedianMicroseconds\": \(agentMedian), \"agentThroughputOfWire\": \(wireMedian / agentMedian)}"
)
