// keyseal-tour: a walk through the library on an embedded store, for Scripts/demo.sh.
//
//   keyseal-tour --store DIR (--tcti TCTI | --host-key FILE)
//
// Sets a passcode, adds items, locks, shows a refused find, unlocks, finds, and prints the status. The demo
// passcode and secrets are demonstration values, printed on purpose.

import Foundation
import Keyseal

func value(_ flag: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func step(_ text: String) { print("\n$ \(text)") }

func describe(_ error: Error) -> String {
    if let error = error as? KeychainError { return "\(error.name): \(error.message) (\(error.status))" }
    return "\(error)"
}

guard let storePath = value("--store") else {
    FileHandle.standardError.write(Data("usage: keyseal-tour --store DIR (--tcti TCTI | --host-key FILE)\n".utf8))
    exit(64)
}
let device: DeviceKey
if let tcti = value("--tcti") {
    device = .tpm(tcti: tcti)
} else if let file = value("--host-key") {
    device = .hostKey(file: URL(fileURLWithPath: file))
} else {
    FileHandle.standardError.write(Data("keyseal-tour: give --tcti or --host-key\n".utf8))
    exit(64)
}

do {
    step("open the store in \(storePath) sealed by \(device)")
    var store = try KeychainStore.embedded(directory: URL(fileURLWithPath: storePath), device: device)
    print("lock state: \(store.lockState.rawValue)")

    step("set the passcode")
    try store.setPasscode("demo-passcode")
    print("lock state: \(store.lockState.rawValue)")

    step("add a when-unlocked password and an after-first-unlock token")
    let mail = Keychain(service: "mail.example.com", store: store)
    try mail.set("correct horse battery staple", key: "alice")
    try Keychain(service: "sync.example.com", store: store).accessibility(.afterFirstUnlock).set("tok-42", key: "alice")
    print("added 2 items")

    step("lock")
    try store.lock()
    print("lock state: \(store.lockState.rawValue)")

    step("find the when-unlocked password while locked")
    do {
        _ = try mail.get("alice")
        print("unexpected: found")
    } catch {
        print("refused: \(describe(error))")
    }
    step("find the after-first-unlock token while locked")
    print("token: \(try Keychain(service: "sync.example.com", store: store).get("alice") ?? "(none)")")

    step("unlock with a wrong passcode")
    do {
        try store.unlock(passcode: "not-the-passcode")
    } catch {
        print("refused: \(describe(error))")
    }

    step("unlock")
    try store.unlock(passcode: "demo-passcode")
    print("lock state: \(store.lockState.rawValue)")

    step("find the when-unlocked password")
    print("password: \(try mail.get("alice") ?? "(none)")")

    step("reboot (close and reopen the store)")
    store.close()
    store = try KeychainStore.embedded(directory: URL(fileURLWithPath: storePath), device: device)
    print("lock state: \(store.lockState.rawValue)")

    step("status")
    let status = try store.status()
    print("lock state:       \(status.lockState.rawValue)")
    print("passcode:         \(status.passcodeSet ? "set" : "not set")")
    print("backend:          \(status.device.backend) (\(status.device.hardwareBacked ? "hardware-backed" : "not hardware-backed"))")
    print("guessing:         \(status.device.detail)")
    print("failed attempts:  \(status.failedAttempts)")
    for (accessibility, count) in status.itemCounts.sorted(by: { $0.key.name < $1.key.name }) {
        print("items \(accessibility.name): \(count)")
    }
    store.close()
} catch {
    FileHandle.standardError.write(Data("keyseal-tour: \(describe(error))\n".utf8))
    exit(1)
}
