#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The ssh-agent protocol's encoding (draft-miller-ssh-agent, RFC 4251 §5): uint32, string, mpint; and the few DER
// shapes keyseald's answers take (an ECDSA signature, an RSA public key). Pure functions over bytes: no socket here.

/// Message numbers of draft-miller-ssh-agent.
enum SSHAgentMessage {
    static let failure: UInt8 = 5
    static let success: UInt8 = 6
    static let requestIdentities: UInt8 = 11
    static let identitiesAnswer: UInt8 = 12
    static let signRequest: UInt8 = 13
    static let signResponse: UInt8 = 14
    static let addIdentity: UInt8 = 17
    static let removeIdentity: UInt8 = 18
    static let removeAllIdentities: UInt8 = 19
    static let addIDConstrained: UInt8 = 25

    /// Sign request flags.
    static let rsaSHA256: UInt32 = 2
    static let rsaSHA512: UInt32 = 4

    /// The largest message the agent reads (OpenSSH's agent takes 256 KiB); a longer one closes the connection.
    static let maxLength = 256 * 1024
}

/// Reads RFC 4251 values from a message; every read is bounds-checked and fails with nil.
struct SSHReader {
    private let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint32() -> UInt32? {
        guard bytes.count - offset >= 4 else { return nil }
        defer { offset += 4 }
        return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func string() -> [UInt8]? {
        guard let length = uint32(), Int(length) <= bytes.count - offset else { return nil }
        defer { offset += Int(length) }
        return Array(bytes[offset..<offset + Int(length)])
    }

    /// The fields of `SSH_AGENTC_SIGN_REQUEST` after its message number (`string key blob, string data, uint32
    /// flags`, nothing after), or nil.
    mutating func signRequest() -> (blob: [UInt8], data: [UInt8], flags: UInt32)? {
        guard let blob = string(), let data = string(), let flags = uint32(), isAtEnd else { return nil }
        return (blob, data, flags)
    }

    /// An mpint's magnitude (non-negative only), without leading zeros.
    mutating func positiveMPInt() -> [UInt8]? {
        guard let value = string() else { return nil }
        if let first = value.first, first & 0x80 != 0 { return nil }
        return Array(value.drop { $0 == 0 })
    }
}

/// Writes RFC 4251 values.
struct SSHWriter {
    private(set) var bytes: [UInt8] = []

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func uint32(_ value: UInt32) {
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    mutating func string<S: Collection>(_ value: S) where S.Element == UInt8 {
        uint32(UInt32(value.count))
        bytes += value
    }

    mutating func string(_ text: String) { string(Array(text.utf8)) }

    /// A non-negative integer from its big-endian magnitude: leading zeros dropped, a zero byte added when the top
    /// bit is set.
    mutating func mpint<S: Collection>(_ magnitude: S) where S.Element == UInt8 {
        var value = Array(magnitude.drop { $0 == 0 })
        if let first = value.first, first & 0x80 != 0 { value.insert(0, at: 0) }
        string(value)
    }

    /// The frame: uint32 length, then the bytes.
    var framed: [UInt8] {
        var frame = SSHWriter()
        frame.string(bytes)
        return frame.bytes
    }
}

/// The DER shapes the agent reads: `SEQUENCE { INTEGER, INTEGER }` (an X9.62 ECDSA signature, a PKCS#1 RSA public
/// key). Definite lengths only, as DER requires.
enum SSHDER {
    /// The two INTEGERs' magnitudes of a `SEQUENCE { INTEGER, INTEGER }` that fills `der`, or nil.
    static func integerPair(_ der: [UInt8]) -> ([UInt8], [UInt8])? {
        var offset = 0
        guard let sequence = element(der, &offset, tag: 0x30), offset == der.count else { return nil }
        var inner = 0
        guard let first = element(sequence, &inner, tag: 0x02), let second = element(sequence, &inner, tag: 0x02),
            inner == sequence.count, first.first.map({ $0 & 0x80 == 0 }) == true,
            second.first.map({ $0 & 0x80 == 0 }) == true
        else { return nil }
        return (Array(first.drop { $0 == 0 }), Array(second.drop { $0 == 0 }))
    }

    private static func element(_ bytes: [UInt8], _ offset: inout Int, tag: UInt8) -> [UInt8]? {
        guard bytes.count - offset >= 2, bytes[offset] == tag else { return nil }
        var length = Int(bytes[offset + 1])
        var start = offset + 2
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard (1...3).contains(count), bytes.count - start >= count else { return nil }
            length = bytes[start..<start + count].reduce(0) { $0 << 8 | Int($1) }
            start += count
        }
        guard length <= bytes.count - start else { return nil }
        offset = start + length
        return Array(bytes[start..<start + length])
    }
}

/// What the agent offers for one Keyseal key: its key blob and how it signs.
struct SSHKeyForm: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        case ecdsa(bits: Int)
        case rsa
    }

    var kind: Kind
    /// The public key blob (`string key-type, …`) that identifies the key in requests.
    var blob: [UInt8]

    /// The ssh name of the key type (also the ECDSA signature's format name).
    var typeName: String {
        switch kind {
        case .ecdsa(let bits): "ecdsa-sha2-nistp\(bits)"
        case .rsa: "ssh-rsa"
        }
    }

    /// The form of a Keyseal key, from its type code (`73` EC, `42` RSA), size and public key (EC: `04‖X‖Y`; RSA:
    /// a PKCS#1 `RSAPublicKey`); nil for what ssh cannot use.
    init?(typeCode: String, bits: Int, publicKey: [UInt8]) {
        var writer = SSHWriter()
        switch typeCode {
        case "73":
            guard [256, 384, 521].contains(bits), publicKey.count == 1 + 2 * ((bits + 7) / 8), publicKey.first == 4
            else { return nil }
            kind = .ecdsa(bits: bits)
            writer.string("ecdsa-sha2-nistp\(bits)")
            writer.string("nistp\(bits)")
            writer.string(publicKey)
        case "42":
            guard bits >= 2048, let (modulus, exponent) = SSHDER.integerPair(publicKey) else { return nil }
            kind = .rsa
            writer.string("ssh-rsa")
            writer.mpint(exponent)
            writer.mpint(modulus)
        default:
            return nil
        }
        blob = writer.bytes
    }

    /// The keyseald algorithm and the ssh signature format name for a sign request's flags; nil when the key
    /// cannot sign that way (`ssh-rsa` with SHA-1 is refused, as OpenSSH refuses it by default).
    func algorithm(flags: UInt32) -> (keyseal: String, format: String)? {
        switch kind {
        case .ecdsa(let bits):
            let hash = bits == 256 ? "SHA256" : bits == 384 ? "SHA384" : "SHA512"
            return ("algid:sign:ECDSA:message-X962:\(hash)", typeName)
        case .rsa:
            if flags & SSHAgentMessage.rsaSHA512 != 0 {
                return ("algid:sign:RSA:message-PKCS1v15:SHA512", "rsa-sha2-512")
            }
            if flags & SSHAgentMessage.rsaSHA256 != 0 {
                return ("algid:sign:RSA:message-PKCS1v15:SHA256", "rsa-sha2-256")
            }
            return nil
        }
    }

    /// The ssh signature blob of keyseald's signature (ECDSA: X9.62 DER → `string(mpint r, mpint s)`; RSA: as it is).
    func signatureBlob(format: String, signature: [UInt8]) -> [UInt8]? {
        var writer = SSHWriter()
        writer.string(format)
        switch kind {
        case .ecdsa:
            guard let (r, s) = SSHDER.integerPair(signature) else { return nil }
            var pair = SSHWriter()
            pair.mpint(r)
            pair.mpint(s)
            writer.string(pair.bytes)
        case .rsa:
            writer.string(signature)
        }
        return writer.bytes
    }

    /// `TYPE BASE64 COMMENT`, as `ssh-add -L` prints a key.
    func authorizedKeysLine(comment: String) -> String {
        "\(typeName) \(Data(blob).base64EncodedString()) \(comment)"
    }
}
