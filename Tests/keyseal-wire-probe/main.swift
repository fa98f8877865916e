// A test helper: sends one request to keyseald and prints the outcome on one line, so that tests can act as a
// process of another user (`setpriv --reuid …`). Not installed; not a user interface.
//
//   keyseal-wire-probe SOCKET status|lock|unlock PASSCODE|add GROUP ACCOUNT|find GROUP? ACCOUNT
//                            |export PASSPHRASE|import PASSPHRASE|poll-status SECONDS|add-size GROUP ACCOUNT BYTES|find-all
//                            |doctor|doctor-delete ID|add-class CLASS|store GROUP ACCOUNT PAIR-VALUE
//                            |update-size GROUP ACCOUNT|* BYTES|move GROUP ACCOUNT TARGET|genkey GROUP [LABEL-BYTES]
//                            |delete GROUP ACCOUNT|churn SECONDS THREADS FRAMES|hwkey GROUP|delete-keys GROUP
//   keyseal-wire-probe SOCKET as PID COMMAND …   (the request sent on behalf of process PID, as the bridge does)
//   keyseal-wire-probe SOCKET after SECONDS COMMAND …   (waits first)
//   keyseal-wire-probe fd:N COMMAND …   (on the connection open at descriptor N, which it inherited)
//   keyseal-wire-probe SOCKET lend inherit|cloexec PROGRAM ARG …   (connects, starts `fd:N after 1.5 find - app` on
//     that connection, then execs PROGRAM with the connection open across the exec, or closed by it)
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import class Foundation.Thread
import KeysealClient
import Synchronization

var arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else {
    print("usage: keyseal-wire-probe SOCKET COMMAND …")
    exit(64)
}
var onBehalfOf: Int32?
if arguments.count >= 4, arguments[1] == "as", let pid = Int32(arguments[2]) {
    onBehalfOf = pid
    arguments.removeSubrange(1...2)
}
if arguments.count >= 3 && arguments[1] == "after", let seconds = Double(arguments[2]) {
    usleep(UInt32(seconds * 1_000_000))
    arguments.removeSubrange(1...2)
}
/// An argument vector for spawn and exec, freed by nobody: the process execs or exits soon after.
func cArguments(_ strings: [String]) -> [UnsafeMutablePointer<CChar>?] { strings.map { strdup($0) } + [nil] }
// A process that connects and then execs another program, lending its connection to a child: the review's attack on
// `exe` rules. The child gets the connection as an inherited descriptor.
if arguments.count >= 4 && arguments[1] == "lend" {
    let fd: Int32
    do { fd = try KeysealConnection.open(arguments[0]) } catch {
        print("error \(error.status) \(error.message)")
        exit(1)
    }
    _ = fcntl(fd, F_SETFD, 0)
    var child: pid_t = 0
    let childArguments = cArguments([CommandLine.arguments[0], "fd:\(fd)", "after", "1.5", "find", "-", "app"])
    guard posix_spawn(&child, "/proc/self/exe", nil, nil, childArguments, environ) == 0 else {
        print("error spawning the child")
        exit(1)
    }
    if arguments[2] == "cloexec" { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    execv(arguments[3], cArguments(Array(arguments[3...])))
    print("error exec \(arguments[3])")
    exit(1)
}
let inherited = arguments[0].hasPrefix("fd:") ? Int32(arguments[0].dropFirst(3)) : nil
let socketName = arguments[0]
let connection = KeysealConnection(socketPath: arguments[0])
/// Sends `request` on the inherited connection, or on a connection of its own.
func send(_ request: WireRequest) throws(KeychainError) -> WireResponse {
    guard let inherited else { return try connection.send(request) }
    try KeysealConnection.writeAll(inherited, try request.encodedFrame())
    let response = try KeysealConnection.readResponse(inherited, path: socketName)
    if case .failure(let error) = response { throw error }
    return response
}
// Export and import stream several frames: a backup written to nowhere, or an import of an empty file.
if arguments.count == 3 && (arguments[1] == "export" || arguments[1] == "import") {
    do {
        if arguments[1] == "export" {
            let report = try connection.exportBackup(
                passphrase: SecretBytes(utf8: arguments[2]), availableOnly: false, sink: { _ in })
            print("ok \(report.exportedCount)")
        } else {
            let report = try connection.importBackup(
                passphrase: SecretBytes(utf8: arguments[2]), replace: false, source: { _ in nil })
            print("ok \(report.restoredCount)")
        }
    } catch {
        print("error \(error.status) \(error.message)")
        exit(1)
    }
    exit(0)
}
// Status every 0.5 s for SECONDS on one connection: a client that polls (it must not hold off auto-lock).
if arguments.count == 3 && arguments[1] == "poll-status", let seconds = Double(arguments[2]) {
    let end = Date().addingTimeInterval(seconds)
    var answered = 0
    while Date() < end {
        if (try? connection.send(.status)) != nil { answered += 1 }
        usleep(500_000)
    }
    print("ok \(answered)")
    exit(0)
}
/// `churn SECONDS THREADS FRAMES`: each thread opens a connection, writes what the socket takes of FRAMES lookups
/// pipelined, closes it 2 ms later and opens the next, until SECONDS have passed.
enum Churn {
    /// The connections opened.
    static func run(path: String, seconds: Double, threads: Int, frames: Int) throws -> Int {
        let query = ItemQuery(
            itemClass: .genericPassword, attributes: [AttributeKey.account: .string("churn")], limit: .one,
            returns: .data)
        let burst = Array(repeating: try WireRequest.copyMatching(query).encodedFrame(), count: frames).flatMap { $0 }
        let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        let opened = Mutex(0)
        let done = DispatchGroup()
        for _ in 0..<threads {
            done.enter()
            Thread {
                while ContinuousClock.now < end {
                    guard let fd = try? KeysealConnection.open(path) else {
                        usleep(1_000)
                        continue
                    }
                    opened.withLock { $0 += 1 }
                    _ = burst.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
                    usleep(2_000)
                    close(fd)
                }
                done.leave()
            }.start()
        }
        done.wait()
        return opened.withLock { $0 }
    }
}
if arguments.count == 5 && arguments[1] == "churn", let seconds = Double(arguments[2]), let threads = Int(arguments[3]),
    let frames = Int(arguments[4])
{
    print("ok \(try Churn.run(path: arguments[0], seconds: seconds, threads: threads, frames: frames))")
    exit(0)
}
func group(_ text: String) -> String? { text == "-" ? nil : text }
/// One string attribute pair in the engine's encoding (StringAttributes: tag 1 name, tag 2 value, 32-bit lengths).
func onePair(_ name: String, _ value: String) -> Data {
    var bytes: [UInt8] = []
    for (tag, field) in [(UInt8(1), Array(name.utf8)), (2, Array(value.utf8))] {
        bytes.append(tag)
        bytes += withUnsafeBytes(of: UInt32(field.count).bigEndian, Array.init)
        bytes += field
    }
    return Data(bytes)
}
let request: WireRequest
switch (arguments[1], arguments.count) {
case ("status", 2): request = .status
case ("lock", 2): request = .lock
case ("settings", 2): request = .getSettings
case ("unlock", 3): request = .unlock(passcode: SecretBytes(utf8: arguments[2]))
case ("add", 4):
    request = .add(
        NewItem(
            itemClass: .genericPassword, attributes: ["acct": .string(arguments[3]), "svce": .string("probe")],
            accessGroup: group(arguments[2]), data: Array("secret".utf8).withUnsafeBytes { Data($0) }))
case ("add-size", 5):
    request = .add(
        NewItem(
            itemClass: .genericPassword, attributes: ["acct": .string(arguments[3]), "svce": .string("probe")],
            accessGroup: group(arguments[2]), data: Data(repeating: 7, count: Int(arguments[4]) ?? 0)))
case ("update-size", 5):
    // The value of the probe item ACCOUNT in GROUP (every probe item for "*") set to BYTES bytes.
    var attributes: [String: AttributeValue] = ["svce": .string("probe")]
    if arguments[3] != "*" { attributes["acct"] = .string(arguments[3]) }
    request = .update(
        ItemQuery(
            itemClass: .genericPassword, attributes: attributes, accessGroup: group(arguments[2]),
            limit: arguments[3] == "*" ? .all : .one),
        ItemChanges(data: Data(repeating: 7, count: Int(arguments[4]) ?? 0)))
case ("move", 5):
    // The probe item ACCOUNT in GROUP moved to the access group TARGET.
    var changes = ItemChanges()
    changes.accessGroup = arguments[4]
    request = .update(
        ItemQuery(
            itemClass: .genericPassword, attributes: ["acct": .string(arguments[3]), "svce": .string("probe")],
            accessGroup: group(arguments[2])),
        changes)
case ("genkey", 3), ("genkey", 4):
    // A software P-256 key stored in GROUP, with a label of BYTES bytes when given.
    var generation = KeyGenerationRequest(keyType: .ec(bits: 256), accessGroup: group(arguments[2]))
    if arguments.count == 4 { generation.attributes[AttributeKey.label] = .string(String(repeating: "k", count: Int(arguments[3]) ?? 0)) }
    request = .generateKey(generation)
case ("hwkey", 3):
    // A P-256 key in the device key's hardware (kSecAttrTokenIDSecureEnclave), stored in GROUP.
    request = .generateKey(KeyGenerationRequest(keyType: .ec(bits: 256), inHardware: true, accessGroup: group(arguments[2])))
case ("delete-keys", 3):
    request = .delete(ItemQuery(itemClass: .key, accessGroup: group(arguments[2])))
case ("delete", 4):
    request = .delete(
        ItemQuery(
            itemClass: .genericPassword, attributes: ["acct": .string(arguments[3]), "svce": .string("probe")],
            accessGroup: group(arguments[2])))
case ("store", 5), ("store-size", 6):
    // The Secret Service's CreateItem with replace: the attribute probe=PAIR-VALUE; "ok 0" added, "ok 1" replaced.
    // store-size GROUP ACCOUNT PAIR-VALUE SIZE stores a value of SIZE bytes instead of "secret".
    let value = arguments.count == 6 ? Data(repeating: 7, count: Int(arguments[5]) ?? 0) : Data("secret".utf8)
    request = .addReplacingAttributes(
        NewItem(
            itemClass: .genericPassword,
            attributes: [
                "acct": .string(arguments[3]), "svce": .string("probe"),
                "ksat": .data(onePair("probe", arguments[4])),
            ],
            accessGroup: group(arguments[2]), data: value))
case ("find-all", 2):
    request = .copyMatching(
        ItemQuery(itemClass: .genericPassword, attributes: ["svce": .string("probe")], accessGroup: nil, limit: .all, returns: [.data, .attributes]))
case ("find", 4):
    request = .copyMatching(
        ItemQuery(
            itemClass: .genericPassword, attributes: ["acct": .string(arguments[3])], accessGroup: group(arguments[2]),
            limit: .all, returns: [.data, .attributes]))
case ("doctor", 2): request = .undecryptableItems
case ("doctor-delete", 3): request = .deleteUndecryptable(ids: [arguments[2]])
case ("add-class", 3):
    guard let itemClass = ItemClass(rawValue: arguments[2]) else {
        print("error -25306 unknown item class")
        exit(1)
    }
    request = .add(
        NewItem(
            itemClass: itemClass, attributes: ["labl": .string("probe")],
            data: Array("secret".utf8).withUnsafeBytes { Data($0) }))
case ("sign", 3):
    // A key named by its persistent reference in hex.
    var reference = Data()
    var index = arguments[2].startIndex
    while index < arguments[2].endIndex, let next = arguments[2].index(index, offsetBy: 2, limitedBy: arguments[2].endIndex),
        let byte = UInt8(arguments[2][index..<next], radix: 16)
    {
        reference.append(byte)
        index = next
    }
    request = .keyOperation(
        WireKeyOperation(
            reference: reference, kind: .sign, algorithm: "algid:sign:ECDSA:message-X962:SHA256", data: Data([1])))
default:
    print(
        "usage: keyseal-wire-probe SOCKET status|lock|settings|unlock P|add GROUP ACCT|find GROUP ACCT|doctor"
            + "|doctor-delete ID|add-class CLASS|sign REFERENCE-HEX")
    exit(64)
}
do {
    switch try send(onBehalfOf.map { .onBehalf(pid: $0, request) } ?? request) {
    case .records(let records):
        let groups = records.compactMap { record -> String? in
            if case .string(let group)? = record.attributes["agrp"] { return group }
            return nil
        }
        print("ok \(records.count) \(groups.joined(separator: ","))")
    case .status(let status): print("ok status \(status.lockState) counts=\(status.itemCounts.count)")
    case .undecryptable(let items): print("ok \(items.count)")
    default: print("ok")
    }
} catch {
    print("error \(error.status) \(error.message)")
    exit(1)
}
