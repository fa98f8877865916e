import Crypto

/// Big-endian reads over marshalled TPM 2.0 structures (TPM 2.0 Part 2), bounds-checked.
struct TPMReader {
    let bytes: [UInt8]
    var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { offset == bytes.count }

    mutating func take(_ count: Int) throws(TPMStructureError) -> [UInt8] {
        guard count >= 0, bytes.count - offset >= count else { throw TPMStructureError("truncated") }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func u8() throws(TPMStructureError) -> UInt8 { try take(1)[0] }
    mutating func u16() throws(TPMStructureError) -> UInt16 { try take(2).reduce(0) { $0 << 8 | UInt16($1) } }
    mutating func u32() throws(TPMStructureError) -> UInt32 { try take(4).reduce(0) { $0 << 8 | UInt32($1) } }
    mutating func u64() throws(TPMStructureError) -> UInt64 { try take(8).reduce(0) { $0 << 8 | UInt64($1) } }
    /// A TPM2B: a u16 size and that many bytes.
    mutating func sized() throws(TPMStructureError) -> [UInt8] { try take(Int(try u16())) }
}

/// A marshalled TPM structure that does not parse.
public struct TPMStructureError: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// TPM 2.0 constants used by attestation.
public enum TPMConstant {
    public static let algRSA: UInt16 = 0x0001
    public static let algSHA256: UInt16 = 0x000B
    public static let algNull: UInt16 = 0x0010
    public static let algRSASSA: UInt16 = 0x0014
    public static let algECDSA: UInt16 = 0x0018
    public static let algECC: UInt16 = 0x0023
    public static let curveNISTP256: UInt16 = 0x0003
    /// TPM_GENERATED_VALUE: the magic of every TPMS_ATTEST the TPM signs.
    public static let generatedValue: UInt32 = 0xFF54_4347
    /// TPM_ST_ATTEST_CERTIFY.
    public static let attestCertify: UInt16 = 0x8017

    // TPMA_OBJECT bits.
    public static let fixedTPM: UInt32 = 1 << 1
    public static let fixedParent: UInt32 = 1 << 4
    public static let sensitiveDataOrigin: UInt32 = 1 << 5
    public static let userWithAuth: UInt32 = 1 << 6
    public static let adminWithPolicy: UInt32 = 1 << 7
    public static let noDA: UInt32 = 1 << 10
    public static let restricted: UInt32 = 1 << 16
    public static let decrypt: UInt32 = 1 << 17
    public static let sign: UInt32 = 1 << 18

    static func bigEndian16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
    static func bigEndian32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(value >> (24 - 8 * $0) & 0xFF) } }
    /// A TPM2B of `bytes`: u16 size ‖ bytes.
    static func sized(_ bytes: [UInt8]) -> [UInt8] { bigEndian16(UInt16(bytes.count)) + bytes }
}

/// A TPMT_PUBLIC, the public area of a TPM object, as marshalled (RSA and ECC objects).
public struct TPMPublicArea: Sendable, Equatable {
    /// The marshalled TPMT_PUBLIC (without a TPM2B size).
    public let bytes: [UInt8]
    public let type: UInt16
    public let nameAlg: UInt16
    public let objectAttributes: UInt32
    public let authPolicy: [UInt8]
    /// The signing scheme (TPM_ALG_NULL when the key has none) and its hash.
    public let scheme: UInt16
    public let schemeHash: UInt16
    public let key: Key

    public enum Key: Sendable, Equatable {
        case rsa(bits: UInt16, exponent: UInt32, modulus: [UInt8])
        case ecc(curve: UInt16, x: [UInt8], y: [UInt8])
    }

    public init(marshalled bytes: [UInt8]) throws(TPMStructureError) {
        var reader = TPMReader(bytes)
        self.bytes = bytes
        type = try reader.u16()
        nameAlg = try reader.u16()
        objectAttributes = try reader.u32()
        authPolicy = try reader.sized()
        // TPMT_SYM_DEF_OBJECT: algorithm, then key bits and mode unless NULL.
        if try reader.u16() != TPMConstant.algNull { _ = try reader.take(4) }
        scheme = try reader.u16()
        schemeHash = scheme == TPMConstant.algNull ? 0 : try reader.u16()
        switch type {
        case TPMConstant.algRSA:
            let bits = try reader.u16()
            let exponent = try reader.u32()
            key = .rsa(bits: bits, exponent: exponent == 0 ? 65537 : exponent, modulus: try reader.sized())
        case TPMConstant.algECC:
            let curve = try reader.u16()
            if try reader.u16() != TPMConstant.algNull { _ = try reader.u16() }  // TPMT_KDF_SCHEME
            let x = try reader.sized()
            key = .ecc(curve: curve, x: x, y: try reader.sized())
        default:
            throw TPMStructureError("public area of type 0x\(String(type, radix: 16)) (RSA or ECC expected)")
        }
        guard reader.atEnd else { throw TPMStructureError("trailing bytes after the public area") }
    }

    /// The object's Name: nameAlg ‖ H_nameAlg(TPMT_PUBLIC) (TPM 2.0 Part 1, §16). SHA-256 only.
    public var name: [UInt8] {
        get throws(TPMStructureError) {
            guard nameAlg == TPMConstant.algSHA256 else {
                throw TPMStructureError("name algorithm 0x\(String(nameAlg, radix: 16)) (SHA-256 expected)")
            }
            return TPMConstant.bigEndian16(nameAlg) + Array(SHA256.hash(data: bytes))
        }
    }

    public func has(_ attribute: UInt32) -> Bool { objectAttributes & attribute == attribute }

    /// The P-256 public key of an ECC NIST P-256 object, as X9.63 `04 ‖ X ‖ Y`; nil otherwise.
    public var p256PublicKey: P256.Signing.PublicKey? {
        guard case .ecc(TPMConstant.curveNISTP256, let x, let y) = key, x.count == 32, y.count == 32 else { return nil }
        return try? P256.Signing.PublicKey(x963Representation: [0x04] + x + y)
    }
}

/// A TPMS_ATTEST of type TPM_ST_ATTEST_CERTIFY, as TPM2_Certify returns it (the `certInfo` of a statement).
public struct TPMCertifyInfo: Sendable, Equatable {
    public let magic: UInt32
    public let type: UInt16
    public let qualifiedSigner: [UInt8]
    public let extraData: [UInt8]
    public let clock: UInt64
    public let resetCount: UInt32
    public let restartCount: UInt32
    public let safe: Bool
    public let firmwareVersion: UInt64
    /// The certified object's Name and qualified Name (empty for another type).
    public let name: [UInt8]
    public let qualifiedName: [UInt8]

    public init(marshalled bytes: [UInt8]) throws(TPMStructureError) {
        var reader = TPMReader(bytes)
        magic = try reader.u32()
        type = try reader.u16()
        qualifiedSigner = try reader.sized()
        extraData = try reader.sized()
        clock = try reader.u64()
        resetCount = try reader.u32()
        restartCount = try reader.u32()
        safe = try reader.u8() != 0
        firmwareVersion = try reader.u64()
        if type == TPMConstant.attestCertify {
            name = try reader.sized()
            qualifiedName = try reader.sized()
            guard reader.atEnd else { throw TPMStructureError("trailing bytes after the attestation") }
        } else {
            name = []
            qualifiedName = []
        }
    }
}

/// A TPMT_SIGNATURE of ECDSA: r and s.
struct TPMSignature {
    var r: [UInt8]
    var s: [UInt8]

    init(marshalled bytes: [UInt8]) throws(TPMStructureError) {
        var reader = TPMReader(bytes)
        guard try reader.u16() == TPMConstant.algECDSA else { throw TPMStructureError("not an ECDSA signature") }
        _ = try reader.u16()
        r = try reader.sized()
        s = try reader.sized()
        guard reader.atEnd, r.count <= 32, s.count <= 32 else { throw TPMStructureError("malformed ECDSA signature") }
    }

    /// X9.62 DER `SEQUENCE { r, s }` (what WebAuthn's `sig` holds for an ECDSA attestation key).
    var der: [UInt8] {
        func integer(_ bytes: [UInt8]) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.isEmpty { value = [0] }
            if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(r) + integer(s)
        return [0x30, UInt8(body.count)] + body
    }
}
