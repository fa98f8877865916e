internal import CTSS2
import KeysealCore

import struct FoundationEssentials.Data

/// What ``TPMDeviceKey`` returns from a seal and takes back to unseal — the sealed data object as the TPM gave it,
/// and the Name of the primary it was created under — and, of kind 3, the blob of a hardware key pair.
///
/// Layout (version 1), all integers big-endian as the TPM marshals them:
///
///     "KSTP"  magic (4 bytes)
///     0x01    format version
///     kind    0x01 device object (empty auth, noDA) | 0x02 passcode object (auth, dictionary-attack protected)
///             | 0x03 hardware key (ECC P-256, sign and decrypt, auth, noDA)
///     (versions 2, 3) PCR mask, 4 bytes: the SHA-256 PCRs the object's policy is bound to (bit n = PCR n)
///     (version 3 only) TPM2B_PUBLIC of the key that signs PCR policies for the object (RSA 2048 or P-256)
///     TPM2B_NAME    the storage primary's Name when sealed
///     TPM2B_PUBLIC  the sealed object's public area
///     TPM2B_PRIVATE the sealed object's private area (encrypted and integrity-protected by the TPM)
///
/// Nothing in it is secret: the private area is opaque to anything but the TPM that created it.
///
/// Version 2 is a PCR-bound object: its authPolicy is `PolicyPCR` over the masked PCRs (then `PolicyAuthValue` for
/// a passcode object) and it has no userWithAuth, so nothing but that policy releases it. Version 1 (no mask) is
/// an unbound object, authorized by its authValue alone. Version 3 is bound to signed PCR policies (docs/TPM.md "Signed
/// PCR policies"): its authPolicy is `PolicyAuthorize` of the recorded key's Name (then `PolicyAuthValue` for a
/// passcode object), so any `PolicyPCR` digest that key signed releases it; it has no userWithAuth either.
struct SealedBlob {
    enum Kind: UInt8 {
        case device = 1
        case passcode = 2
        case key = 3
    }

    static let magic: [UInt8] = Array("KSTP".utf8)
    static let version: UInt8 = 1
    static let boundVersion: UInt8 = 2
    static let signedVersion: UInt8 = 3

    var kind: Kind
    /// The SHA-256 PCRs the object is bound to; 0 for an unbound object.
    var pcrMask: UInt32 = 0
    /// The key whose signed PCR policies release the object (version 3); nil for versions 1 and 2.
    var policyKey: PCRPolicyKey?
    var primaryName: [UInt8]
    var publicArea: TPM2B_PUBLIC
    var privateArea: TPM2B_PRIVATE

    /// Builds the blob from the marshalled public and private areas that Esys_Create returned.
    static func encode(
        kind: Kind,
        primaryName: [UInt8],
        marshalledPublic: [UInt8],
        marshalledPrivate: [UInt8],
        pcrMask: UInt32 = 0,
        policyKey: PCRPolicyKey? = nil
    ) -> Data {
        let format = pcrMask == 0 ? version : policyKey == nil ? boundVersion : signedVersion
        var bytes = magic + [format, kind.rawValue]
        if pcrMask != 0 { bytes += (0..<4).map { UInt8(truncatingIfNeeded: pcrMask >> (24 - 8 * $0)) } }
        if pcrMask != 0, let policyKey { bytes += policyKey.marshalledPublicArea }
        bytes += [UInt8(truncatingIfNeeded: primaryName.count >> 8), UInt8(truncatingIfNeeded: primaryName.count)]
        bytes += primaryName
        bytes += marshalledPublic
        bytes += marshalledPrivate
        return Data(bytes)
    }

    /// Parses and checks a blob. Anything malformed, of another version or kind, or whose object does not have
    /// the attributes Keyseal gives it, is `errSecDecode`.
    init(decoding data: Data, expecting expected: Kind) throws(KeychainError) {
        let bytes = [UInt8](data)
        func corrupt(_ why: String) -> KeychainError {
            KeychainError(KeychainStatus.decode, "the sealed TPM blob is damaged or not a Keyseal TPM blob (\(why))")
        }
        guard bytes.count > 6, Array(bytes[0..<4]) == Self.magic else { throw corrupt("no Keyseal TPM header") }
        guard [Self.version, Self.boundVersion, Self.signedVersion].contains(bytes[4]) else {
            throw corrupt("unknown format version \(bytes[4])")
        }
        guard let kind = Kind(rawValue: bytes[5]) else { throw corrupt("unknown object kind \(bytes[5])") }
        guard kind == expected else {
            let why =
                switch expected {
                case .key: "this TPM blob is not a hardware key"
                case .passcode: "this TPM blob is not a passcode object"
                case .device:
                    kind == .passcode
                        ? "this TPM blob needs a passcode authorization" : "this TPM blob is not a sealed object"
                }
            throw KeychainError(KeychainStatus.decode, why)
        }
        var name = TPM2B_NAME()
        var publicArea = TPM2B_PUBLIC()
        var privateArea = TPM2B_PRIVATE()
        var offset = 6
        var mask: UInt32 = 0
        if bytes[4] != Self.version {
            guard bytes.count > 10 else { throw corrupt("truncated PCR mask") }
            mask = bytes[6..<10].reduce(0) { $0 << 8 | UInt32($1) }
            guard mask != 0, mask & 0xFF00_0000 == 0 else { throw corrupt("invalid PCR mask") }
            offset = 10
        }
        var policyKey: PCRPolicyKey?
        if bytes[4] == Self.signedVersion {
            var keyArea = TPM2B_PUBLIC()
            let read = bytes.withUnsafeBufferPointer {
                Tss2_MU_TPM2B_PUBLIC_Unmarshal($0.baseAddress, $0.count, &offset, &keyArea) == 0
            }
            guard read, let key = PCRPolicyKey(publicArea: keyArea) else {
                throw corrupt("the PCR policy key is not an RSA 2048 or P-256 public key")
            }
            policyKey = key
        }
        let ok = bytes.withUnsafeBufferPointer { buffer -> Bool in
            Tss2_MU_TPM2B_NAME_Unmarshal(buffer.baseAddress, buffer.count, &offset, &name) == 0
                && Tss2_MU_TPM2B_PUBLIC_Unmarshal(buffer.baseAddress, buffer.count, &offset, &publicArea) == 0
                && Tss2_MU_TPM2B_PRIVATE_Unmarshal(buffer.baseAddress, buffer.count, &offset, &privateArea) == 0
        }
        guard ok else { throw corrupt("truncated or malformed TPM structures") }
        guard offset == bytes.count else { throw corrupt("\(bytes.count - offset) bytes after the object") }

        let attributes = keyseal_public_attributes(&publicArea)
        if kind == .key {
            guard keyseal_public_type(&publicArea) == keyseal_TPM2_ALG_ECC,
                keyseal_public_name_alg(&publicArea) == keyseal_TPM2_ALG_SHA256,
                keyseal_public_curve(&publicArea) == keyseal_TPM2_ECC_NIST_P256,
                attributes == keyseal_hardware_key_attributes, mask == 0
            else { throw corrupt("the object is not a Keyseal hardware key") }
        } else {
            let expectedAttributes =
                keyseal_TPMA_OBJECT_FIXEDTPM | keyseal_TPMA_OBJECT_FIXEDPARENT
                | (mask == 0 ? keyseal_TPMA_OBJECT_USERWITHAUTH : 0) | (kind == .device ? keyseal_TPMA_OBJECT_NODA : 0)
            guard keyseal_public_type(&publicArea) == keyseal_TPM2_ALG_KEYEDHASH,
                keyseal_public_name_alg(&publicArea) == keyseal_TPM2_ALG_SHA256,
                attributes == expectedAttributes
            else { throw corrupt("the object is not a Keyseal sealed object") }
        }

        guard mask == 0 || keyseal_public_policy_size(&publicArea) == 32 else {
            throw corrupt("a bound object without a SHA-256 policy")
        }
        self.kind = kind
        self.pcrMask = mask
        self.policyKey = policyKey
        self.primaryName = withUnsafePointer(to: &name) {
            Array(UnsafeBufferPointer(start: keyseal_name_bytes($0), count: Int($0.pointee.size)))
        }
        self.publicArea = publicArea
        self.privateArea = privateArea
        if let policyKey {
            guard kind != .key, policy == SignedPCRPolicy.authorizedPolicy(key: policyKey, authValue: kind == .passcode)
            else { throw corrupt("the object's policy is not PolicyAuthorize of its PCR policy key") }
        }
    }

    /// The object's authPolicy (empty for an unbound object).
    var policy: [UInt8] {
        var publicArea = publicArea
        return withUnsafePointer(to: &publicArea) {
            Array(
                UnsafeBufferPointer(start: keyseal_public_policy_bytes($0), count: Int(keyseal_public_policy_size($0)))
            )
        }
    }

    /// The PCR numbers of a mask, ascending.
    static func pcrs(_ mask: UInt32) -> [Int] { (0..<24).filter { mask & (1 << UInt32($0)) != 0 } }

    /// The mask of PCR numbers (each 0–23).
    static func mask(_ pcrs: [Int]) -> UInt32 { pcrs.reduce(0) { $0 | (1 << UInt32($1)) } }
}
