// Fuzz target `wire-request`: keyseald's request decoder, `WireRequest.decode(payload:)`, the first code that reads
// the bytes of any client in the socket's group. Built and run by Scripts/fuzz.sh (CONTRIBUTING.md, "Fuzzing").
//
// Asserts: no input traps; an input that decodes re-encodes (the encoder accepts whatever the decoder accepted) and
// decodes again to an equal request (compared case by case through the payload types' Hashable conformances),
// whose encoding is the same number of bytes.

import FoundationEssentials
import Glibc
import KeysealClient
import KeysealModel

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWireRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let payload = UnsafeRawBufferPointer(start: data, count: size)
    guard let request = try? WireRequest.decode(payload: payload) else { return 0 }
    let frame: [UInt8]
    do {
        frame = try request.encodedFrame()
    } catch {
        fatalError("a decoded \(request.name) request does not encode: \(error)")
    }
    let again: WireRequest
    do {
        again = try WireRequest.decode(payload: Array(frame.dropFirst(4)))
    } catch {
        fatalError("a re-encoded \(request.name) request does not decode: \(error)")
    }
    // A value not equal to itself (a NaN) cannot be compared: the input decoded a second time, into storage of its
    // own (an array compares equal to itself by identity, before its elements), must equal the first decoding.
    let first = requestParts(request)
    let comparable = (try? WireRequest.decode(payload: payload)).map { requestParts($0) == first } ?? false
    if comparable, first != requestParts(again) {
        fatalError("a \(request.name) request does not round-trip")
    }
    guard let frameAgain = try? again.encodedFrame(), frameAgain.count == frame.count else {
        fatalError("a \(request.name) request's second encoding differs in length")
    }
    return 0
}

/// The request as a comparable list: the case's name, then each associated value (a nested request flattened the
/// same way). `WireRequest` is not Equatable (it carries secrets); its payload types are Hashable.
func requestParts(_ request: WireRequest) -> [AnyHashable] {
    let mirror = Mirror(reflecting: request)
    guard let child = mirror.children.first else { return [request.name, "\(request)"] }
    var parts: [AnyHashable] = [child.label ?? "?"]
    appendParts(child.value, to: &parts)
    return parts
}

private func appendParts(_ value: Any, to parts: inout [AnyHashable]) {
    if let request = value as? WireRequest {
        parts.append(contentsOf: requestParts(request))
    } else if Mirror(reflecting: value).displayStyle == .tuple {
        for element in Mirror(reflecting: value).children { appendParts(element.value, to: &parts) }
    } else if let hashable = value as? AnyHashable {
        parts.append(hashable)
    } else {
        fatalError("a request carries a value that is not Hashable: \(type(of: value))")
    }
}

// MARK: - Seeds

/// Writes one valid payload per request kind into `KEYSEAL_FUZZ_SEEDS` (a directory) when it is set.
@_cdecl("LLVMFuzzerInitialize")
public func initializeWireRequest(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    guard let directory = getenv("KEYSEAL_FUZZ_SEEDS").map({ String(cString: $0) }) else { return 0 }
    for (index, request) in seedRequests().enumerated() {
        guard let frame = try? request.encodedFrame() else { fatalError("seed \(request.name) does not encode") }
        writeSeed(Array(frame.dropFirst(4)), to: "\(directory)/seed-\(index)-\(request.name.filter(\.isLetter))")
    }
    return 0
}

func writeSeed(_ bytes: [UInt8], to path: String) {
    guard let file = fopen(path, "wb") else { fatalError("cannot write \(path)") }
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
}

func seedRequests() -> [WireRequest] {
    let attributes: [String: AttributeValue] = [
        "acct": .string("alice"), "svce": .data(Data([0, 0xff])), "invi": .bool(true), "port": .int(-443),
        "cdat": .date(Date(timeIntervalSince1970: 1_800_000_000.25)),
    ]
    let item = NewItem(
        itemClass: .genericPassword,
        attributes: attributes,
        accessGroup: "g",
        accessibility: .whenUnlockedThisDeviceOnly,
        accessControlFlags: 1 << 30,
        synchronizable: true,
        data: Data([0xc3, 0x28, 0, 1]),
        returns: ReturnOptions(rawValue: 3)
    )
    let query = ItemQuery(
        itemClass: .internetPassword,
        attributes: attributes,
        accessGroup: "g",
        accessibility: .whenUnlocked,
        synchronizable: .any,
        persistentRef: Data([1, 2, 3]),
        limit: .count(7),
        limitGiven: true,
        returns: ReturnOptions(rawValue: 7)
    )
    let changes = ItemChanges(
        attributes: ["labl": .string("new")],
        accessGroup: "g",
        accessibility: .always,
        accessControlFlags: 3,
        synchronizable: false,
        data: Data([5])
    )
    let generation = KeyGenerationRequest(
        keyType: .p256,
        inHardware: true,
        attributes: ["atag": .data(Data([1, 2])), "labl": .string("k")],
        accessGroup: "g",
        accessibility: .whenUnlockedThisDeviceOnly,
        accessControlFlags: 1 << 30,
        synchronizable: false,
        isExtractable: false
    )
    // A key held by keyseald for its connection (a PKCS#11 session key), not stored.
    var sessionGeneration = generation
    sessionGeneration.isPermanent = false
    sessionGeneration.inHardware = false
    let operation = WireKeyOperation(
        reference: Data("ksr1-reference".utf8),
        kind: .keyExchange,
        algorithm: "algid:keyexchange:ECDH:KDFX963:SHA256",
        data: Data(repeating: 4, count: 65),
        requestedSize: 32,
        sharedInfo: Data([9])
    )
    let secret = SecretBytes(utf8: "pässcode")
    let token = SecretBytes(copying: [UInt8](repeating: 7, count: ItemAuthentication.tokenSize))
    return [
        .ping, .status, .lockState, .lock, .unlock(passcode: secret), .setPasscode(secret),
        .changePasscode(old: secret, new: SecretBytes(utf8: "new")), .removePasscode(secret), .getSettings,
        .setSettings(WireSettings(autoLockSeconds: 60)), .setSettings(WireSettings(autoLockSeconds: nil)),
        .subscribeLockState, .add(item), .addReplacingAttributes(item), .copyMatching(query),
        .update(query, changes), .delete(ItemQuery(itemClass: .key, limit: .all)),
        .exportBackup(passphrase: secret, availableOnly: true), .importBegin(passphrase: secret, replace: false),
        .importChunk([0, 1, 0xff]), .importEnd, .undecryptableItems, .deleteUndecryptable(ids: ["1", "22"]),
        .deleteUndecryptable(ids: nil), .generateKey(generation), .generateKey(sessionGeneration),
        .keyOperation(operation),
        .keyOperation(WireKeyOperation(reference: Data([1]), kind: .sign, algorithm: "a", data: Data([2]))),
        .certificates(ItemQuery(itemClass: .identity, synchronizable: .any, limit: .all, limitGiven: true)),
        .createCSR(reference: Data([1, 2]), subject: "CN=device-7,O=Example"), .createRecoveryKey(passcode: secret),
        .createRecoveryKey(passcode: nil), .recover(key: secret, passcode: nil),
        .tpmReseal(passcode: secret, pcrs: [0, 7]),
        .tpmReseal(passcode: nil, pcrs: nil), .acceptRollback, .attestation(.enrollmentRequest),
        .attestation(.activate(credentialBlob: Data([1, 2]), secret: Data([3]))),
        .attestation(.install(certificates: [Data([0x30, 0]), Data([0x30, 1, 0])])),
        .onBehalf(pid: 4242, .copyMatching(query)), .onBehalf(pid: 7, .add(item)), .authenticate(passcode: secret),
        .revokeAuthentication(token: token),
        .authenticated(ItemAuthentication(token: token, reuseSeconds: 10, ui: .allow), .copyMatching(query)),
        .authenticated(ItemAuthentication(token: nil, reuseSeconds: 0, ui: .skip), .keyOperation(operation)),
    ]
}
