// Fuzz target `wire-response`: the response decoder the command line, the Secret Service bridge and the PKCS#11
// module run on keyseald's answers, `WireResponse.decode(payload:)`, and the joining of a response sent in parts,
// `WireResponse.readResponse(limit:_:)`. Built and run by Scripts/fuzz.sh (CONTRIBUTING.md, "Fuzzing").
//
// The input is read twice: as one payload (the bytes after a frame's length), and as the byte stream of a socket,
// frames of a four-byte length and a payload, read as the client reads them. Asserts: no input traps; a payload
// that decodes re-encodes and decodes again to an equal response (`WireResponse` is Hashable), and its frames
// (cut in parts when large) join back to it.

import FoundationEssentials
import Glibc
import KeysealClient
import KeysealModel

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWireResponse(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    if let response = try? WireResponse.decode(payload: input) {
        let frame = response.encodedFrame()
        let again: WireResponse
        do {
            again = try WireResponse.decode(payload: Array(frame.dropFirst(4)))
        } catch {
            fatalError("a re-encoded response does not decode: \(error)")
        }
        // A value not equal to itself (a NaN) cannot be compared: the input decoded a second time, into storage of
        // its own (an array compares equal to itself by identity, before its elements), must equal the first decoding.
        let comparable = (try? WireResponse.decode(payload: input)) == response
        if comparable, again != response { fatalError("a response does not round-trip") }
        var frames = response.encodedFrames()[...]
        let joined = try? WireResponse.readResponse { () throws(KeychainError) -> [UInt8] in
            guard let next = frames.popFirst() else { throw KeychainError(status: KeychainStatus.io, message: "end") }
            return Array(next.dropFirst(4))
        }
        if comparable, joined != response { fatalError("a response's frames do not join back to it") }
    }
    // The same bytes as a stream of frames; a small limit, so that the parts path is reached with small inputs.
    var offset = 0
    _ = try? WireResponse.readResponse(limit: 1 << 16) { () throws(KeychainError) -> [UInt8] in
        let length = try wireFrameLength(input[offset..<min(offset + 4, size)])
        guard size - offset - 4 >= length else { throw KeychainError(status: KeychainStatus.io, message: "short") }
        defer { offset += 4 + length }
        return Array(input[(offset + 4)..<(offset + 4 + length)])
    }
    return 0
}

// MARK: - Seeds

/// Writes valid payloads, and the same as framed streams (one in parts), into `KEYSEAL_FUZZ_SEEDS` when it is set.
@_cdecl("LLVMFuzzerInitialize")
public func initializeWireResponse(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    guard let directory = getenv("KEYSEAL_FUZZ_SEEDS").map({ String(cString: $0) }) else { return 0 }
    for (index, response) in seedResponses().enumerated() {
        let frame = response.encodedFrame()
        writeSeed(Array(frame.dropFirst(4)), to: "\(directory)/seed-\(index)-payload")
        writeSeed(frame, to: "\(directory)/seed-\(index)-stream")
    }
    // A response in parts, as a stream: a payload over the frame limit is cut at the frame limit, so these frames are
    // hand-made pieces of a small one.
    let whole = Array(WireResponse.keyResult(Data(repeating: 0x5a, count: 40)).encodedFrame().dropFirst(5))
    var stream: [UInt8] = []
    for (kind, piece) in [(UInt8(13), whole[..<20]), (UInt8(14), whole[20...])] {
        let length = UInt32(piece.count + 2)
        stream += [UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
        stream += [Wire.version, kind] + piece
    }
    writeSeed(stream, to: "\(directory)/seed-parts-stream")
    return 0
}

func writeSeed(_ bytes: [UInt8], to path: String) {
    guard let file = fopen(path, "wb") else { fatalError("cannot write \(path)") }
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
}

func seedResponses() -> [WireResponse] {
    let attributes: [String: AttributeValue] = [
        "acct": .string("alice"), "svce": .data(Data([0, 0xff])), "invi": .bool(true), "port": .int(-443),
        "cdat": .date(Date(timeIntervalSince1970: 1_800_000_000.25)),
    ]
    let records = [
        ItemRecord(itemClass: .genericPassword, attributes: attributes, data: Data(repeating: 7, count: 20)),
        ItemRecord(itemClass: .internetPassword, attributes: [:], persistentRef: Data([9])),
    ]
    let status = StoreStatus(
        lockState: .locked,
        passcodeSet: true,
        device: DeviceKeyStatus(
            backend: "tpm",
            hardwareBacked: true,
            guessingHardwareLimited: true,
            detail: "swtpm",
            hardwareTriesLeft: 3,
            lockoutRetrySeconds: 10
        ),
        failedAttempts: 2,
        triesLeft: 3,
        nextTryAt: Date(timeIntervalSince1970: 1_800_000_000.5),
        autoLockSeconds: 300,
        itemCounts: [.whenUnlocked: 3, .alwaysThisDeviceOnly: 1],
        ledger: LedgerStatus(refusedBuckets: [1, 127], missingEntries: 1, unexpectedEntries: 0, recordProblem: "x")
    )
    let skipped = ImportReport.SkippedItem(
        itemClass: "genp",
        accessibility: .whenUnlockedThisDeviceOnly,
        accessGroup: "g",
        service: "s",
        account: nil,
        reason: .otherDevice,
        detail: "made on another device"
    )
    let certificate = WireCertificate(
        reference: Data("cert-ref".utf8),
        keyReference: Data("key-ref".utf8),
        der: Data(repeating: 0x30, count: 8),
        sha1: Data(repeating: 1, count: 20),
        sha256: Data(repeating: 2, count: 32),
        subjectSummary: "device-7",
        commonNames: ["device-7"],
        emailAddresses: ["ops@example.com"],
        notBefore: 1_800_000_000,
        notAfter: 1_900_000_000,
        attributes: ["labl": .string("device-7")]
    )
    return [
        .ok, .failure(KeychainError(status: -25293, message: "wrong passcode", retryAfterSeconds: 60, triesLeft: 2)),
        .records(records), .records([]), .status(status), .lockState(.beforeFirstUnlock), .message("no passcode"),
        .message(nil), .settings(WireSettings(autoLockSeconds: 60)), .lockStateChanged(.unlocked),
        .backupChunk(bytes: [1, 2, 3], done: 5, total: 9),
        .exportReport(
            ExportReport(
                exported: [.whenUnlocked: 3],
                skippedPasscodeOnly: 2,
                skippedUnavailable: [.whenUnlockedThisDeviceOnly: 4],
                keyDerivationSeconds: 0.25
            )
        ),
        .importProgress(done: 7, total: 9), .importSkipped([skipped]),
        .importReport(
            ImportReport(
                total: 9,
                restored: [.afterFirstUnlock: 6],
                replaced: 1,
                skipped: [skipped],
                keyDerivationSeconds: 0.5
            )
        ),
        .undecryptable([
            UndecryptableItem(
                id: "12",
                itemClass: "genp",
                accessibility: "ak",
                accessGroup: "g",
                reason: .noClassKey,
                detail: "d"
            )
        ]),
        .key(
            WireKey(
                reference: Data([1]),
                keyType: "73",
                bits: 256,
                publicKey: Data(repeating: 4, count: 65),
                isPrivate: true,
                inHardware: true,
                extractable: false,
                attributes: ["labl": .string("k")]
            )
        ),
        .keyResult(Data([1, 2, 3])), .secret(SecretBytes(utf8: "recovery")), .certificates([certificate]),
    ]
}
