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
///     TPM2B_NAME    the storage primary's Name when sealed
///     TPM2B_PUBLIC  the sealed object's public area
///     TPM2B_PRIVATE the sealed object's private area (encrypted and integrity-protected by the TPM)
///
/// Nothing in it is secret: the private area is opaque to anything but the TPM that created it.
struct SealedBlob {
    enum Kind: UInt8 {
        case device = 1
        case passcode = 2
        case key = 3
    }

    static let magic: [UInt8] = Array("KSTP".utf8)
    static let version: UInt8 = 1

    var kind: Kind
    var primaryName: [UInt8]
    var publicArea: TPM2B_PUBLIC
    var privateArea: TPM2B_PRIVATE

    /// Builds the blob from the marshalled public and private areas that Esys_Create returned.
    static func encode(kind: Kind, primaryName: [UInt8], marshalledPublic: [UInt8], marshalledPrivate: [UInt8])
        -> Data
    {
        var bytes = magic + [version, kind.rawValue]
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
        guard bytes[4] == Self.version else { throw corrupt("unknown format version \(bytes[4])") }
        guard let kind = Kind(rawValue: bytes[5]) else { throw corrupt("unknown object kind \(bytes[5])") }
        guard kind == expected else {
            let why =
                switch expected {
                case .key: "this TPM blob is not a hardware key"
                case .passcode: "this TPM blob is not a passcode object"
                case .device: kind == .passcode ? "this TPM blob needs a passcode authorization" : "this TPM blob is not a sealed object"
                }
            throw KeychainError(KeychainStatus.decode, why)
        }
        var name = TPM2B_NAME()
        var publicArea = TPM2B_PUBLIC()
        var privateArea = TPM2B_PRIVATE()
        var offset = 6
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
                attributes == keyseal_hardware_key_attributes
            else { throw corrupt("the object is not a Keyseal hardware key") }
        } else {
            let expectedAttributes =
                keyseal_TPMA_OBJECT_FIXEDTPM | keyseal_TPMA_OBJECT_FIXEDPARENT | keyseal_TPMA_OBJECT_USERWITHAUTH
                | (kind == .device ? keyseal_TPMA_OBJECT_NODA : 0)
            guard keyseal_public_type(&publicArea) == keyseal_TPM2_ALG_KEYEDHASH,
                keyseal_public_name_alg(&publicArea) == keyseal_TPM2_ALG_SHA256,
                attributes == expectedAttributes
            else { throw corrupt("the object is not a Keyseal sealed object") }
        }

        self.kind = kind
        self.primaryName = withUnsafePointer(to: &name) {
            Array(UnsafeBufferPointer(start: keyseal_name_bytes($0), count: Int($0.pointee.size)))
        }
        self.publicArea = publicArea
        self.privateArea = privateArea
    }
}
