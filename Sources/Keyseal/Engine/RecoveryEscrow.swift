import Crypto
import FoundationEssentials
import KeysealCore

/// The recovery key's escrow (docs/TPM.md "Recovery key").
///
/// A box is `ephemeral P-256 public key (X9.63, 65 bytes) ‖ AES-256-GCM(K, secret)` with
/// `K = HKDF-SHA256(ECDH(ephemeral, escrow key), "keyseal/recovery/" ‖ label ‖ store id)` and the label and store
/// id also as associated data. Anyone may seal to the escrow public key (so a new passcode secret is escrowed at
/// every passcode change without the recovery key); only the escrow private key, sealed in the TPM under the
/// recovery key, opens a box.
enum RecoveryEscrow {
    static let deviceLabel = "device"
    static let passcodeLabel = "passcode"

    /// A new escrow key pair: the private half (32 bytes) in secret storage, the public half in X9.63.
    static func makeKey() -> (privateKey: SecretBytes, publicKey: Data) {
        let key = P256.KeyAgreement.PrivateKey()
        var raw = key.rawRepresentation
        defer { raw.resetBytes(in: 0..<raw.count) }
        return (SecretBytes(copying: raw), key.publicKey.x963Representation)
    }

    static func seal(_ secret: SecretBytes, to publicKey: Data, label: String, storeID: [UInt8]) throws -> Data {
        let recipient: P256.KeyAgreement.PublicKey
        do {
            recipient = try P256.KeyAgreement.PublicKey(x963Representation: publicKey)
        } catch {
            throw KeychainError(KeychainStatus.decode, "the recovery record's escrow key is damaged")
        }
        let ephemeral = P256.KeyAgreement.PrivateKey()
        let key = try boxKey(ephemeral.sharedSecretFromKeyAgreement(with: recipient), label: label, storeID: storeID)
        let box = try AEAD.sealSecret(secret, key: key, aad: aad(label, storeID))
        return ephemeral.publicKey.x963Representation + box
    }

    static func open(_ box: Data, privateKey: SecretBytes, label: String, storeID: [UInt8]) throws -> SecretBytes {
        let bytes = [UInt8](box)
        guard bytes.count > 65 else { throw KeychainError(KeychainStatus.decode, "a recovery box is truncated") }
        do {
            let key = try P256.KeyAgreement.PrivateKey(rawRepresentation: privateKey)
            let sender = try P256.KeyAgreement.PublicKey(x963Representation: bytes[0..<65])
            let boxKey = try boxKey(key.sharedSecretFromKeyAgreement(with: sender), label: label, storeID: storeID)
            return try AEAD.openSecret(Data(bytes[65...]), key: boxKey, aad: aad(label, storeID))
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(KeychainStatus.decode, "a recovery box does not open (damaged or not this store's)")
        }
    }

    private static func boxKey(_ shared: SharedSecret, label: String, storeID: [UInt8]) throws -> SymmetricKey {
        shared.hkdfDerivedSymmetricKey(
            using: SHA256.self,
            salt: [UInt8](),
            sharedInfo: aad(label, storeID),
            outputByteCount: 32
        )
    }

    private static func aad(_ label: String, _ storeID: [UInt8]) -> [UInt8] {
        Array("keyseal/recovery/\(label)".utf8) + storeID
    }
}

/// The recovery key as people see it: 256 random bits as 64 lowercase hex digits in 16 groups of 4, joined by
/// dashes. Typed back with or without the dashes, spaces or upper case.
enum RecoveryKey {
    static let byteCount = 32

    /// The text of `key` (32 bytes), built in secret storage.
    static func text(_ key: SecretBytes) -> SecretBytes {
        let digits = Array("0123456789abcdef".utf8)
        return SecretBytes(count: byteCount * 2 + byteCount / 2 - 1) { out in
            key.withUnsafeBytes { bytes in
                var position = 0
                for (index, byte) in bytes.enumerated() {
                    if index > 0 && index % 2 == 0 {
                        out[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    out[position] = digits[Int(byte >> 4)]
                    out[position + 1] = digits[Int(byte & 0x0F)]
                    position += 2
                }
            }
        }
    }

    /// The 32 key bytes of a typed recovery key; anything that is not 64 hex digits (dashes and spaces aside) is
    /// `errSecParam`, said without echoing the input.
    static func parse(_ text: SecretBytes) throws -> SecretBytes {
        var nibbles: [UInt8] = []
        nibbles.reserveCapacity(byteCount * 2)
        defer { nibbles.withUnsafeMutableBytes { zeroize($0.baseAddress!, $0.count) } }
        var valid = true
        text.withUnsafeBytes { bytes in
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): nibbles.append(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): nibbles.append(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): nibbles.append(byte - UInt8(ascii: "A") + 10)
                case UInt8(ascii: "-"), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                    continue
                default: valid = false
                }
            }
        }
        guard valid, nibbles.count == byteCount * 2 else {
            throw KeychainError(
                KeychainStatus.param,
                "a recovery key is 64 hexadecimal digits (in groups of 4, dashes optional)"
            )
        }
        return SecretBytes(count: byteCount) { out in
            for index in 0..<byteCount { out[index] = nibbles[2 * index] << 4 | nibbles[2 * index + 1] }
        }
    }
}
