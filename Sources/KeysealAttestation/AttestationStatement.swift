import Crypto
import FoundationEssentials

/// The W3C WebAuthn "tpm" attestation statement (WebAuthn Level 2, §8.3): `ver` "2.0", `alg` (COSE), `x5c` (the
/// attestation key's certificate, then its CA chain), `sig` (the AK's signature over `certInfo`), `certInfo` (the
/// TPMS_ATTEST of TPM2_Certify) and `pubArea` (the certified key's TPMT_PUBLIC).
public struct TPMAttestationStatement: Sendable, Equatable {
    /// COSE ES256: the attestation key is ECDSA P-256 with SHA-256.
    public static let es256 = -7

    public var alg: Int
    public var x5c: [[UInt8]]
    public var sig: [UInt8]
    public var certInfo: [UInt8]
    public var pubArea: [UInt8]

    public init(alg: Int = Self.es256, x5c: [[UInt8]], sig: [UInt8], certInfo: [UInt8], pubArea: [UInt8]) {
        self.alg = alg
        self.x5c = x5c
        self.sig = sig
        self.certInfo = certInfo
        self.pubArea = pubArea
    }

    /// From TPM2_Certify's outputs: the marshalled TPMS_ATTEST (without its TPM2B size), the marshalled TPMT_SIGNATURE
    /// (ECDSA) and the certified key's TPMT_PUBLIC.
    public init(certifyInfo: [UInt8], signature: [UInt8], publicArea: [UInt8], chain: [[UInt8]]) throws {
        self.init(
            x5c: chain,
            sig: try TPMSignature(marshalled: signature).der,
            certInfo: certifyInfo,
            pubArea: publicArea
        )
    }

    /// The statement's CBOR map, keys in CTAP2 canonical order (shorter first, then bytewise).
    public func cbor() -> [UInt8] {
        CBOR.map([
            .init(.text("alg"), .int(alg)),
            .init(.text("sig"), .bytes(sig)),
            .init(.text("ver"), .text("2.0")),
            .init(.text("x5c"), .array(x5c.map { .bytes($0) })),
            .init(.text("pubArea"), .bytes(pubArea)),
            .init(.text("certInfo"), .bytes(certInfo)),
        ]).encoded()
    }

    public init(cbor bytes: [UInt8]) throws(AttestationFailure) {
        let item: CBOR
        do {
            item = try CBOR(decoding: bytes)
        } catch {
            throw AttestationFailure(.malformed, "the statement is not CBOR: \(error)")
        }
        guard case .text("2.0")? = item[text: "ver"] else {
            throw AttestationFailure(.malformed, "the statement's ver is not \"2.0\"")
        }
        guard let alg = item[text: "alg"]?.int else { throw AttestationFailure(.malformed, "the statement has no alg") }
        guard case .array(let certificates)? = item[text: "x5c"], !certificates.isEmpty else {
            throw AttestationFailure(.malformed, "the statement has no x5c")
        }
        var x5c: [[UInt8]] = []
        for certificate in certificates {
            guard case .bytes(let der) = certificate else {
                throw AttestationFailure(.malformed, "x5c holds a non-byte item")
            }
            x5c.append(der)
        }
        func field(_ key: String) throws(AttestationFailure) -> [UInt8] {
            guard case .bytes(let value)? = item[text: key] else {
                throw AttestationFailure(.malformed, "the statement has no \(key)")
            }
            return value
        }
        self.init(
            alg: alg,
            x5c: x5c,
            sig: try field("sig"),
            certInfo: try field("certInfo"),
            pubArea: try field("pubArea")
        )
    }
}

/// The Keyseal properties of an attested key, bound into the attestation by the `json` format (``qualifyingData``).
public struct AttestedKeyProperties: Sendable, Equatable, Codable {
    /// The item's accessibility class (`when-unlocked`, `after-first-unlock-this-device-only`, …).
    public var accessibility: String
    /// The class is a ThisDeviceOnly class (the item never leaves the device in a backup).
    public var thisDeviceOnly: Bool
    /// The private key cannot be exported (every hardware key).
    public var nonExportable: Bool

    public init(accessibility: String, thisDeviceOnly: Bool, nonExportable: Bool) {
        self.accessibility = accessibility
        self.thisDeviceOnly = thisDeviceOnly
        self.nonExportable = nonExportable
    }

    /// The domain tag that opens the `json` format's preimage.
    public static let domain = "keyseal-key-properties/v2"

    /// The properties as text: one line per property, in a fixed order.
    public var binding: [UInt8] {
        Array(
            ("accessibility=\(accessibility)\nthis-device-only=\(thisDeviceOnly ? 1 : 0)\n"
                + "non-exportable=\(nonExportable ? 1 : 0)\n").utf8
        )
    }

    /// What the `json` format hashes: the domain tag, a zero byte, the challenge's length (8 bytes, big-endian), the
    /// challenge, then ``binding``. The length ends the challenge where it ends, so no other challenge and properties
    /// give the same bytes.
    public func preimage(challenge: [UInt8]) -> [UInt8] {
        let length = UInt64(challenge.count)
        return Array(Self.domain.utf8) + [0] + (0..<8).map { UInt8(truncatingIfNeeded: length >> (56 - 8 * $0)) }
            + challenge + binding
    }
}

/// What TPM2_Certify signs as `extraData`. The `webauthn-tpm` format: SHA-256(challenge), the 32 bytes WebAuthn
/// verifiers require. The `json` format, which binds the key's Keyseal properties: 33 bytes, the document's version
/// (``AttestationDocument/extraDataVersion``) then SHA-256 of ``AttestedKeyProperties/preimage(challenge:)``. The
/// lengths differ, so no `webauthn-tpm` attestation, whatever its challenge, is ever a `json` one, nor the reverse.
public func attestationQualifyingData(challenge: [UInt8], properties: AttestedKeyProperties?) -> [UInt8] {
    guard let properties else { return Array(SHA256.hash(data: challenge)) }
    return [AttestationDocument.extraDataVersion] + Array(SHA256.hash(data: properties.preimage(challenge: challenge)))
}

/// The `json` format: the properties in clear next to the CBOR statement whose `extraData` binds them.
public struct AttestationDocument: Sendable, Codable, Equatable {
    public static let formatName = "keyseal-tpm-attestation-v2"
    /// The first byte of a v2 document's extraData.
    public static let extraDataVersion: UInt8 = 0x02
    /// v1 bound the properties as SHA-256(challenge ‖ text), which a `webauthn-tpm` attestation over a chosen
    /// challenge also is: its documents are refused.
    public static let refusedFormatNames = ["keyseal-tpm-attestation-v1"]

    public var format: String
    public var properties: AttestedKeyProperties
    /// The WebAuthn "tpm" statement's CBOR, base64.
    public var statement: String

    public init(properties: AttestedKeyProperties, statement: TPMAttestationStatement) {
        self.format = Self.formatName
        self.properties = properties
        self.statement = Data(statement.cbor()).base64EncodedString()
    }
}
