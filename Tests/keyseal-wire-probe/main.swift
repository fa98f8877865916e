import Dispatch
import KeysealClient
import Synchronization

import class Foundation.Thread

// A test helper: sends one request to keyseald and prints the outcome on one line, so that tests can act as a
// process of another user (`setpriv --reuid …`). Not installed; not a user interface.
//
//   keyseal-wire-probe SOCKET status|lock|unlock PASSCODE|add GROUP ACCOUNT|find GROUP? ACCOUNT
//                            |export PASSPHRASE|import PASSPHRASE|poll-status SECONDS|add-size GROUP ACCOUNT BYTES|find-all
//                            |doctor|doctor-delete ID|add-class CLASS|store GROUP ACCOUNT PAIR-VALUE
//                            |update-size GROUP ACCOUNT|* BYTES|move GROUP ACCOUNT TARGET|genkey GROUP [LABEL-BYTES]
//                            |delete GROUP ACCOUNT|churn SECONDS THREADS FRAMES|hwkey GROUP|delete-keys GROUP
//                            |ecdh FAST-RUNS SHARED-INFO-BYTES REQUESTED-SIZE|genkeys CONNECTIONS SECONDS BITS
//                            |find-flood CONNECTIONS read|slow|none SECONDS|latency SECONDS ACCOUNT
//                            |sign-bench LABEL COUNT
//   keyseal-wire-probe SOCKET as PID COMMAND …   (the request sent on behalf of process PID, as the bridge does)
//   keyseal-wire-probe SOCKET after SECONDS COMMAND …   (waits first)
//   keyseal-wire-probe SOCKET authenticate PASSCODE | add-protected GROUP ACCOUNT   (prints `ok token HEX` / adds an
//     item whose access control asks for user presence)
//   keyseal-wire-probe SOCKET token HEX COMMAND …   (the request carries that authentication token)
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
// `token HEX COMMAND …`: the request carries that authentication token (reuse 0, UI fail), as an LAContext's does.
var authenticationToken: SecretBytes?
if arguments.count >= 4 && arguments[1] == "token" {
    var bytes: [UInt8] = []
    var index = arguments[2].startIndex
    while let next = arguments[2].index(index, offsetBy: 2, limitedBy: arguments[2].endIndex), index != next,
        let byte = UInt8(arguments[2][index..<next], radix: 16)
    {
        bytes.append(byte)
        index = next
    }
    authenticationToken = bytes.withUnsafeBytes { SecretBytes(copying: $0) }
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
                passphrase: SecretBytes(utf8: arguments[2]),
                availableOnly: false,
                sink: { _ in }
            )
            print("ok \(report.exportedCount)")
        } else {
            let report = try connection.importBackup(
                passphrase: SecretBytes(utf8: arguments[2]),
                replace: false,
                source: { _ in nil }
            )
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
            itemClass: .genericPassword,
            attributes: [AttributeKey.account: .string("churn")],
            limit: .one,
            returns: .data
        )
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
/// A thrown error's status and message, as the other commands print them.
enum Failure {
    static func text(_ error: any Error) -> String {
        guard let error = error as? KeychainError else { return "\(error)" }
        return "\(error.status) \(error.message)"
    }
}
/// `ecdh FAST-RUNS SHARED-INFO-BYTES REQUESTED-SIZE`: generates a software P-256 key in the caller's group, runs
/// FAST-RUNS small X9.63-SHA256 key exchanges with it (so that keyseald measures the key fast), then one with
/// SHARED-INFO-BYTES of shared info and REQUESTED-SIZE bytes asked for; prints that one's outcome and its seconds.
enum KeyExchangeProbe {
    static func run(path: String, fastRuns: Int, sharedInfo: Int, requestedSize: Int) throws -> String {
        let connection = KeysealConnection(socketPath: path)
        guard case .key(let key) = try connection.send(.generateKey(KeyGenerationRequest(keyType: .ec(bits: 256))))
        else { return "error no key" }
        func exchange(info: Int, size: Int) throws -> WireResponse {
            try connection.send(
                .keyOperation(
                    WireKeyOperation(
                        reference: key.reference,
                        kind: .keyExchange,
                        algorithm: "algid:keyexchange:ECDH:KDFX963:SHA256",
                        data: key.publicKey,
                        requestedSize: size,
                        sharedInfo: Data(repeating: 7, count: info)
                    )
                )
            )
        }
        for _ in 0..<fastRuns { _ = try exchange(info: 16, size: 32) }
        let start = ContinuousClock.now
        let response = try exchange(info: sharedInfo, size: requestedSize)
        let seconds = ContinuousClock.now - start
        switch response {
        case .keyResult(let result): return "ok \(result.count) \(seconds)"
        case .failure(let error): return "error \(error.status) \(seconds) \(error.message)"
        default: return "error unexpected"
        }
    }
}
if arguments.count == 5 && arguments[1] == "ecdh", let runs = Int(arguments[2]), let info = Int(arguments[3]),
    let size = Int(arguments[4])
{
    do {
        print(try KeyExchangeProbe.run(path: arguments[0], fastRuns: runs, sharedInfo: info, requestedSize: size))
    } catch {
        print("error \(Failure.text(error))")
    }
    exit(0)
}
/// `genkeys CONNECTIONS SECONDS BITS`: on each of CONNECTIONS connections, RSA keys of BITS generated one after
/// another in the caller's group until SECONDS have passed; prints the keys generated.
enum KeyGenerations {
    static func run(path: String, connections: Int, seconds: Double, bits: Int) -> String {
        let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        let generated = Mutex(0)
        let failures = Mutex<[String]>([])
        let done = DispatchGroup()
        for _ in 0..<connections {
            done.enter()
            Thread {
                let connection = KeysealConnection(socketPath: path)
                while ContinuousClock.now < end {
                    do {
                        let request = KeyGenerationRequest(keyType: .rsa(bits: bits))
                        guard case .key = try connection.send(.generateKey(request)) else { continue }
                        generated.withLock { $0 += 1 }
                    } catch {
                        failures.withLock { $0.append(Failure.text(error)) }
                        break
                    }
                }
                done.leave()
            }.start()
        }
        done.wait()
        let failed = failures.withLock { $0 }
        return failed.isEmpty ? "ok \(generated.withLock { $0 })" : "error \(failed.joined(separator: ","))"
    }
}
if arguments.count == 5 && arguments[1] == "genkeys", let connections = Int(arguments[2]),
    let seconds = Double(arguments[3]), let bits = Int(arguments[4])
{
    print(KeyGenerations.run(path: arguments[0], connections: connections, seconds: seconds, bits: bits))
    exit(0)
}
/// `find-flood CONNECTIONS read|slow|none SECONDS`: on each of CONNECTIONS connections at once, a lookup of every
/// probe item with its data (`find-all`); "read" reads each whole result, "slow" reads 64 KiB every 20 ms, "none"
/// reads nothing; each connection closes after SECONDS (or, reading, once its result is in). Prints the results
/// read whole and the failures' statuses.
enum FindFlood {
    static func run(path: String, connections: Int, mode: String, seconds: Double) -> String {
        let request = WireRequest.copyMatching(
            ItemQuery(
                itemClass: .genericPassword,
                attributes: ["svce": .string("probe")],
                accessGroup: nil,
                limit: .all,
                returns: [.data, .attributes]
            )
        )
        let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        let outcomes = Mutex<[String]>([])
        let done = DispatchGroup()
        for _ in 0..<connections {
            done.enter()
            Thread {
                defer { done.leave() }
                if mode == "read" {
                    let connection = KeysealConnection(socketPath: path)
                    let outcome: String
                    switch Result(catching: { try connection.send(request) }) {
                    case .success(.records(let records)): outcome = "\(records.count)"
                    case .success(.failure(let error)): outcome = "error \(error.status)"
                    case .success: outcome = "unexpected"
                    case .failure(let error): outcome = "error \(Failure.text(error))"
                    }
                    connection.disconnect()
                    outcomes.withLock { $0.append(outcome) }
                    return
                }
                guard let fd = try? KeysealConnection.open(path), let frame = try? request.encodedFrame() else {
                    outcomes.withLock { $0.append("no connection") }
                    return
                }
                defer { close(fd) }
                _ = frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                var buffer = [UInt8](repeating: 0, count: 64 << 10)
                var received = 0
                while ContinuousClock.now < end {
                    guard mode == "slow" else {
                        usleep(50_000)
                        continue
                    }
                    let count = buffer.withUnsafeMutableBytes {
                        recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
                    }
                    if count == 0 { break }
                    if count > 0 { received += count }
                    usleep(20_000)
                }
                outcomes.withLock { $0.append("read \(received)") }
            }.start()
        }
        done.wait()
        return "ok " + outcomes.withLock { $0.sorted().joined(separator: ",") }
    }
}
if arguments.count == 5 && arguments[1] == "find-flood", let connections = Int(arguments[2]),
    let seconds = Double(arguments[4])
{
    print(FindFlood.run(path: arguments[0], connections: connections, mode: arguments[3], seconds: seconds))
    exit(0)
}
/// `latency SECONDS ACCOUNT`: every 50 ms for SECONDS, a ping on one connection and a lookup of ACCOUNT's
/// password with its data on a new connection (as a program looking up its password does); prints how many of each
/// and their median and longest milliseconds.
enum Latency {
    static func run(path: String, seconds: Double, account: String) throws -> String {
        let lookup = WireRequest.copyMatching(
            ItemQuery(
                itemClass: .genericPassword,
                attributes: ["acct": .string(account)],
                accessGroup: nil,
                limit: .all,
                returns: [.data, .attributes]
            )
        )
        let pinger = KeysealConnection(socketPath: path)
        defer { pinger.disconnect() }
        var pings: [Duration] = []
        var lookups: [Duration] = []
        func timed(_ body: () throws -> WireResponse) throws -> Duration {
            let start = ContinuousClock.now
            if case .failure(let error) = try body() { throw error }
            return ContinuousClock.now - start
        }
        let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < end {
            pings.append(try timed { try pinger.send(.ping) })
            lookups.append(
                try timed {
                    let connection = KeysealConnection(socketPath: path)
                    defer { connection.disconnect() }
                    return try connection.send(lookup)
                }
            )
            usleep(50_000)
        }
        func summary(_ name: String, _ times: [Duration]) -> String {
            let sorted = times.sorted()
            func ms(_ time: Duration) -> String { "\((time / .milliseconds(1) * 10).rounded() / 10)" }
            return "\(name) \(sorted.count) p50 \(ms(sorted[sorted.count / 2])) max \(ms(sorted[sorted.count - 1])) ms"
        }
        return summary("ping", pings) + ", " + summary("lookup", lookups)
    }
}
if arguments.count == 4 && arguments[1] == "latency", let seconds = Double(arguments[2]) {
    do {
        print("ok " + (try Latency.run(path: arguments[0], seconds: seconds, account: arguments[3])))
    } catch {
        print("error \(Failure.text(error))")
    }
    exit(0)
}
// The PKCS#11 module's benchmark: N signatures of a 32-byte digest by the key labelled LABEL over the wire (what the
// module's C_Sign with CKM_ECDSA sends), on one connection; prints the median in microseconds.
if arguments.count == 4 && arguments[1] == "sign-bench", let count = Int(arguments[3]), count > 0 {
    do {
        let connection = KeysealConnection(socketPath: arguments[0])
        let query = ItemQuery(
            itemClass: .key,
            attributes: ["labl": .string(arguments[2]), "kcls": .string("1")],
            synchronizable: .any,
            returns: [.persistentRef]
        )
        guard case .records(let records) = try connection.send(.copyMatching(query)),
            let reference = records.first?.persistentRef
        else { throw KeychainError(KeychainStatus.itemNotFound, "no key labelled \(arguments[2])") }
        let operation = WireKeyOperation(
            reference: reference,
            kind: .sign,
            algorithm: "algid:sign:ECDSA:digest-RFC4754",
            data: Data((0..<32).map { UInt8($0) })
        )
        var times: [Double] = []
        for _ in 0..<count {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try connection.send(.keyOperation(operation))
            times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
        }
        times.sort()
        print("median_us=\(Double(Int(times[count / 2] * 10)) / 10)")
    } catch {
        print("error \(Failure.text(error))")
    }
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
case ("authenticate", 3): request = .authenticate(passcode: SecretBytes(utf8: arguments[2]))
// `token HEX revoke`: asks keyseald to forget that token (sent as it is, not as an authenticated request).
case ("revoke", 2) where authenticationToken != nil: request = .revokeAuthentication(token: authenticationToken!)
case ("add-protected", 4):
    // A generic password whose access control asks for user presence.
    request = .add(
        NewItem(
            itemClass: .genericPassword,
            attributes: ["acct": .string(arguments[3]), "svce": .string("probe")],
            accessGroup: group(arguments[2]),
            accessControlFlags: 1,
            data: Array("secret".utf8).withUnsafeBytes { Data($0) }
        )
    )
case ("add", 4):
    request = .add(
        NewItem(
            itemClass: .genericPassword,
            attributes: ["acct": .string(arguments[3]), "svce": .string("probe")],
            accessGroup: group(arguments[2]),
            data: Array("secret".utf8).withUnsafeBytes { Data($0) }
        )
    )
case ("add-size", 5):
    request = .add(
        NewItem(
            itemClass: .genericPassword,
            attributes: ["acct": .string(arguments[3]), "svce": .string("probe")],
            accessGroup: group(arguments[2]),
            data: Data(repeating: 7, count: Int(arguments[4]) ?? 0)
        )
    )
case ("update-size", 5):
    // The value of the probe item ACCOUNT in GROUP (every probe item for "*") set to BYTES bytes.
    var attributes: [String: AttributeValue] = ["svce": .string("probe")]
    if arguments[3] != "*" { attributes["acct"] = .string(arguments[3]) }
    request = .update(
        ItemQuery(
            itemClass: .genericPassword,
            attributes: attributes,
            accessGroup: group(arguments[2]),
            limit: arguments[3] == "*" ? .all : .one
        ),
        ItemChanges(data: Data(repeating: 7, count: Int(arguments[4]) ?? 0))
    )
case ("move", 5):
    // The probe item ACCOUNT in GROUP moved to the access group TARGET.
    var changes = ItemChanges()
    changes.accessGroup = arguments[4]
    request = .update(
        ItemQuery(
            itemClass: .genericPassword,
            attributes: ["acct": .string(arguments[3]), "svce": .string("probe")],
            accessGroup: group(arguments[2])
        ),
        changes
    )
case ("genkey", 3), ("genkey", 4):
    // A software P-256 key stored in GROUP, with a label of BYTES bytes when given.
    var generation = KeyGenerationRequest(keyType: .ec(bits: 256), accessGroup: group(arguments[2]))
    if arguments.count == 4 {
        generation.attributes[AttributeKey.label] = .string(String(repeating: "k", count: Int(arguments[3]) ?? 0))
    }
    request = .generateKey(generation)
case ("hwkey", 3):
    // A P-256 key in the device key's hardware (kSecAttrTokenIDSecureEnclave), stored in GROUP.
    request = .generateKey(
        KeyGenerationRequest(keyType: .ec(bits: 256), inHardware: true, accessGroup: group(arguments[2]))
    )
case ("delete-keys", 3):
    request = .delete(ItemQuery(itemClass: .key, accessGroup: group(arguments[2])))
case ("delete", 4):
    request = .delete(
        ItemQuery(
            itemClass: .genericPassword,
            attributes: ["acct": .string(arguments[3]), "svce": .string("probe")],
            accessGroup: group(arguments[2])
        )
    )
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
            accessGroup: group(arguments[2]),
            data: value
        )
    )
case ("find-all", 2):
    request = .copyMatching(
        ItemQuery(
            itemClass: .genericPassword,
            attributes: ["svce": .string("probe")],
            accessGroup: nil,
            limit: .all,
            returns: [.data, .attributes]
        )
    )
case ("find", 4):
    request = .copyMatching(
        ItemQuery(
            itemClass: .genericPassword,
            attributes: ["acct": .string(arguments[3])],
            accessGroup: group(arguments[2]),
            limit: .all,
            returns: [.data, .attributes]
        )
    )
case ("doctor", 2): request = .undecryptableItems
case ("enroll-request", 2): request = .attestation(.enrollmentRequest)
case ("doctor-delete", 3): request = .deleteUndecryptable(ids: [arguments[2]])
case ("add-class", 3):
    guard let itemClass = ItemClass(rawValue: arguments[2]) else {
        print("error -25306 unknown item class")
        exit(1)
    }
    request = .add(
        NewItem(
            itemClass: itemClass,
            attributes: ["labl": .string("probe")],
            data: Array("secret".utf8).withUnsafeBytes { Data($0) }
        )
    )
case ("sign", 3), ("attest", 3):
    // A key named by its persistent reference in hex.
    var reference = Data()
    var index = arguments[2].startIndex
    while index < arguments[2].endIndex,
        let next = arguments[2].index(index, offsetBy: 2, limitedBy: arguments[2].endIndex),
        let byte = UInt8(arguments[2][index..<next], radix: 16)
    {
        reference.append(byte)
        index = next
    }
    request = .keyOperation(
        arguments[1] == "attest"
            ? WireKeyOperation(reference: reference, kind: .attest, algorithm: "webauthn-tpm", data: Data([1]))
            : WireKeyOperation(
                reference: reference,
                kind: .sign,
                algorithm: "algid:sign:ECDSA:message-X962:SHA256",
                data: Data([1])
            )
    )
default:
    print(
        "usage: keyseal-wire-probe SOCKET status|lock|settings|unlock P|add GROUP ACCT|find GROUP ACCT|doctor"
            + "|doctor-delete ID|add-class CLASS|sign REFERENCE-HEX|attest REFERENCE-HEX|enroll-request"
            + "|authenticate P|add-protected GROUP ACCT|token HEX revoke"
    )
    exit(64)
}
do {
    var wrapped = request
    if let authenticationToken, !(arguments[1] == "revoke") {
        wrapped = .authenticated(ItemAuthentication(token: authenticationToken, reuseSeconds: 0, ui: .fail), request)
    }
    switch try send(onBehalfOf.map { .onBehalf(pid: $0, wrapped) } ?? wrapped) {
    case .secret(let token):
        print("ok token " + token.withUnsafeBytes { $0.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() })
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
