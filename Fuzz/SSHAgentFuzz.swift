// Fuzz target `ssh-agent`: the ssh-agent's parsing of its clients' messages (any process that reaches the agent's
// socket, the far end of `ssh -A` among them) and of the DER keyseald answers with, in
// Sources/keyseal/SSHAgentWire.swift, compiled with this file (Scripts/fuzz.sh; CONTRIBUTING.md, "Fuzzing").
//
// The input is one agent message, the bytes after its uint32 length (`SSHAgent.handle`), read as the agent reads
// it: a sign request by `SSHReader.signRequest()`, an ECDSA add-identity by the `SSHReader` reads of `SSHAgent.add`
// (key type, curve, point, mpint scalar, comment). The same bytes go to `SSHDER.integerPair` and `SSHKeyForm` (an
// RSA public key or an ECDSA signature from keyseald) and to the ECDSA signature blob built from them.
//
// Asserts: no input traps; a sign request that parses re-encodes to the same bytes; an mpint written from a scalar
// reads back as that scalar; an ECDSA signature blob holds the DER's two integers as mpints that read back.

import FoundationEssentials
import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSSHAgent(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let message = Array(UnsafeBufferPointer(start: data, count: size))
    var reader = SSHReader(message)
    switch reader.byte() {
    case SSHAgentMessage.signRequest:
        guard let (blob, signed, flags) = reader.signRequest() else { break }
        var writer = SSHWriter()
        writer.byte(SSHAgentMessage.signRequest)
        writer.string(blob)
        writer.string(signed)
        writer.uint32(flags)
        precondition(writer.bytes == message, "a sign request does not re-encode to its bytes")
    case SSHAgentMessage.addIdentity:
        guard let type = reader.string(), let curve = reader.string(), let point = reader.string(),
            let scalar = reader.positiveMPInt(), let comment = reader.string(), reader.isAtEnd
        else { break }
        var writer = SSHWriter()
        writer.mpint(scalar)
        var back = SSHReader(writer.bytes)
        precondition(back.positiveMPInt() == scalar && back.isAtEnd, "an mpint does not read back")
        _ = (type, curve, point, String(decoding: comment, as: UTF8.self))
    default:
        break
    }
    derShapes(message)
    return 0
}

/// The DER keyseald's answers carry: an RSA public key (`SSHKeyForm`) and an ECDSA signature (`signatureBlob`).
private func derShapes(_ der: [UInt8]) {
    _ = SSHKeyForm(typeCode: "42", bits: 2048, publicKey: der)
    guard let (r, s) = SSHDER.integerPair(der) else { return }
    precondition(r.first != 0 && s.first != 0, "an integer keeps a leading zero")
    let point = [4] + [UInt8](repeating: 1, count: 64)
    guard let form = SSHKeyForm(typeCode: "73", bits: 256, publicKey: point),
        let blob = form.signatureBlob(format: form.typeName, signature: der)
    else { preconditionFailure("a DER integer pair makes no ECDSA signature blob") }
    var reader = SSHReader(blob)
    guard reader.string() == Array(form.typeName.utf8), let pair = reader.string(), reader.isAtEnd else {
        preconditionFailure("an ECDSA signature blob does not read back")
    }
    var integers = SSHReader(pair)
    precondition(
        integers.positiveMPInt() == r && integers.positiveMPInt() == s && integers.isAtEnd,
        "an ECDSA signature's integers do not read back"
    )
}

// MARK: - Seeds

/// Writes valid messages and DER values into `KEYSEAL_FUZZ_SEEDS` (a directory) when it is set.
@_cdecl("LLVMFuzzerInitialize")
public func initializeSSHAgent(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    guard let directory = getenv("KEYSEAL_FUZZ_SEEDS").map({ String(cString: $0) }) else { return 0 }
    let point = [4] + [UInt8](repeating: 1, count: 64)
    guard let form = SSHKeyForm(typeCode: "73", bits: 256, publicKey: point) else { fatalError("no seed key") }
    var sign = SSHWriter()
    sign.byte(SSHAgentMessage.signRequest)
    sign.string(form.blob)
    sign.string(Array("session data".utf8))
    sign.uint32(SSHAgentMessage.rsaSHA256)
    var add = SSHWriter()
    add.byte(SSHAgentMessage.addIdentity)
    add.string("ecdsa-sha2-nistp256")
    add.string("nistp256")
    add.string(point)
    add.mpint([0x80] + [UInt8](repeating: 2, count: 31))
    add.string("comment")
    let seeds: [(String, [UInt8])] = [
        ("sign", sign.bytes), ("add", add.bytes), ("list", [SSHAgentMessage.requestIdentities]),
        // SEQUENCE { INTEGER 0x00 0x81.., INTEGER 0x01 00 01 }: an RSA public key's shape, an ECDSA signature's too.
        ("der", [0x30, 0x0a, 0x02, 0x03, 0x00, 0x81, 0x02, 0x02, 0x03, 0x01, 0x00, 0x01]),
        ("der-long", [0x30, 0x81, 0x08, 0x02, 0x81, 0x02, 0x7f, 0x01, 0x02, 0x01, 0x05]),
    ]
    for (name, bytes) in seeds {
        guard let file = fopen("\(directory)/seed-\(name)", "wb") else { fatalError("cannot write seeds") }
        _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        fclose(file)
    }
    return 0
}
