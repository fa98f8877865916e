// A test helper: sends one request to keyseald and prints the outcome on one line, so that tests can act as a
// process of another user (`setpriv --reuid …`). Not installed; not a user interface.
//
//   keyseal-wire-probe SOCKET status|lock|unlock PASSCODE|add GROUP ACCOUNT|find GROUP? ACCOUNT|delete ACCOUNT
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import KeysealClient

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else {
    print("usage: keyseal-wire-probe SOCKET COMMAND …")
    exit(64)
}
let connection = KeysealConnection(socketPath: arguments[0])
func group(_ text: String) -> String? { text == "-" ? nil : text }
let request: WireRequest
switch (arguments[1], arguments.count) {
case ("status", 2): request = .status
case ("lock", 2): request = .lock
case ("settings", 2): request = .getSettings
case ("unlock", 3): request = .unlock(passcode: WireSecret(utf8: arguments[2]))
case ("add", 4):
    request = .add(
        WireNewItem(
            itemClass: "genp", attributes: ["acct": .string(arguments[3]), "svce": .string("probe")],
            accessGroup: group(arguments[2]), data: Array("secret".utf8).withUnsafeBytes { Data($0) }))
case ("find", 4):
    request = .copyMatching(
        WireQuery(
            itemClass: "genp", attributes: ["acct": .string(arguments[3])], accessGroup: group(arguments[2]),
            limit: .all, returns: 3))
default:
    print("usage: keyseal-wire-probe SOCKET status|lock|settings|unlock P|add GROUP ACCT|find GROUP ACCT")
    exit(64)
}
do {
    switch try connection.send(request) {
    case .records(let records):
        let groups = records.compactMap { record -> String? in
            if case .string(let group)? = record.attributes["agrp"] { return group }
            return nil
        }
        print("ok \(records.count) \(groups.joined(separator: ","))")
    case .status(let status): print("ok status \(status.lockState) counts=\(status.itemCounts.count)")
    default: print("ok")
    }
} catch {
    print("error \(error.status) \(error.message)")
    exit(1)
}
