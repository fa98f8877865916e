// Fuzz target `attestation-cbor`: the CBOR decoder that reads a key attestation statement (the WebAuthn "tpm"
// format) before it is verified, `CBOR(decoding:)` in Sources/KeysealAttestation/CBOR.swift, compiled with this file
// (Scripts/fuzz.sh; CONTRIBUTING.md, "Fuzzing"). The statement's TPM structures (TPMS_ATTEST, TPMT_PUBLIC) are read
// by code that needs swift-crypto, which this build leaves out.
//
// Asserts: no input traps; an item that decodes re-encodes (in the shortest heads) to bytes that decode to an equal
// item, and encoding that item again gives the same bytes.

import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAttestationCBOR(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let item = try? CBOR(decoding: Array(UnsafeBufferPointer(start: data, count: size))) else { return 0 }
    let encoded = item.encoded()
    guard let again = try? CBOR(decoding: encoded) else { fatalError("a re-encoded CBOR item does not decode") }
    precondition(again == item, "a CBOR item does not round-trip")
    precondition(again.encoded() == encoded, "a CBOR item's encoding is not stable")
    _ = item.int
    _ = item[text: "fmt"]
    return 0
}

// MARK: - Seeds

/// Writes valid items (a statement's shape among them) into `KEYSEAL_FUZZ_SEEDS` (a directory) when it is set.
@_cdecl("LLVMFuzzerInitialize")
public func initializeAttestationCBOR(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    guard let directory = getenv("KEYSEAL_FUZZ_SEEDS").map({ String(cString: $0) }) else { return 0 }
    let statement = CBOR.map([
        CBOR.Entry(.text("fmt"), .text("tpm")),
        CBOR.Entry(
            .text("attStmt"),
            .map([
                CBOR.Entry(.text("alg"), .int(-7)), CBOR.Entry(.text("sig"), .bytes([0x30, 0x06, 2, 1, 1, 2, 1, 1])),
                CBOR.Entry(.text("ver"), .text("2.0")), CBOR.Entry(.text("x5c"), .array([.bytes([0x30, 0x00])])),
                CBOR.Entry(.text("pubArea"), .bytes([0, 0x23, 0, 0x0b])),
                CBOR.Entry(.text("certInfo"), .bytes([0xff, 0x54, 0x43, 0x47, 0x80, 0x17])),
            ])
        ),
        CBOR.Entry(.text("authData"), .bytes([UInt8](repeating: 7, count: 37))),
    ])
    let items: [CBOR] = [
        statement, .int(0), .int(23), .int(24), .int(-1), .int(-1_000_000), .unsigned(.max), .negative(.max),
        .bytes([]), .text("é✓"), .array([.bool(true), .bool(false), .null]), .map([]),
    ]
    for (index, item) in items.enumerated() {
        guard let file = fopen("\(directory)/seed-\(index)", "wb") else { fatalError("cannot write seeds") }
        let bytes = item.encoded()
        _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        fclose(file)
    }
    return 0
}
