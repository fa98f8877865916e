import Crypto
import FoundationEssentials
import KeysealCore
import _CryptoExtras

/// A private key for one operation: material the engine holds, or a key inside the device key's hardware with the
/// authorization the engine derived for this use.
enum PrivateKeyHandle {
    case software(SoftwarePrivateKey)
    case hardware(HardwareKeyHandle)

    var keyType: KeyType {
        switch self {
        case .software(let key): key.keyType
        case .hardware: .p256
        }
    }

    func publicKey() throws(KeychainError) -> PublicKeyMaterial {
        switch self {
        case .software(let key): try key.publicKey()
        case .hardware(let key): key.publicKey
        }
    }

    func ecdsaSign(digest: [UInt8]) throws(KeychainError) -> Data {
        switch self {
        case .software(let key): return try key.ecdsaSign(digest: digest)
        case .hardware(let key):
            return try KeyAlgorithms.hardware {
                try key.provider.sign(digest: digest, keyBlob: key.blob, authorization: key.authorization)
            }
        }
    }

    func ecdh(peer: Data) throws(KeychainError) -> SecretBytes {
        switch self {
        case .software(let key): return try key.ecdh(peer: peer)
        case .hardware(let key):
            // The peer's key is checked here, so that the hardware is never asked with a point off the curve.
            guard (try? P256.KeyAgreement.PublicKey(x963Representation: peer)) != nil else {
                throw KeychainError(KeychainStatus.param, "the other party's key is not a P-256 public key")
            }
            return try KeyAlgorithms.hardware {
                try key.provider.keyExchange(peerPublicKey: peer, keyBlob: key.blob, authorization: key.authorization)
            }
        }
    }
}

/// A key in the device key's hardware, resolved for one use.
struct HardwareKeyHandle {
    let provider: any HardwareKeyProvider
    let blob: Data
    let authorization: SecretBytes
    let publicKey: PublicKeyMaterial
}

/// Apple's `SecKeyAlgorithm` names (SecKeyAdaptors), implemented over swift-crypto for software keys and over
/// ``HardwareKeyProvider`` for hardware keys. The one implementation: KeysealSecurity's `SecKey…` functions and the
/// native API call these.
public enum KeyAlgorithms {
    /// Apple's wording for an algorithm the key does not support.
    static let unsupported = KeychainError(KeychainStatus.param, "algorithm not supported by the key")

    /// The hashes, named and sized by KeysealCore (``RSAOperations/Hash``).
    typealias Hash = RSAOperations.Hash

    /// A parsed algorithm name.
    enum Algorithm {
        /// ECDSA; `hash` nil for a digest of any size; `raw` for RFC 4754's r ‖ s instead of X9.62 DER.
        case ecdsa(message: Bool, hash: Hash?, raw: Bool)
        /// An RSA signature; `message`: the data is hashed with the padding's hash first.
        case rsaSignature(RSAOperations.SignaturePadding, message: Bool)
        case rsaEncryption(RSAOperations.EncryptionPadding)
        /// Apple's RSA hybrid: a random AES session key wrapped with OAEP of `hash`, the data under AES-GCM with it.
        case rsaAESGCM(hash: Hash)
        /// ECIES with an X9.63 KDF and AES-GCM; `variableIV`: the KDF also gives the IV.
        case ecies(hash: Hash, variableIV: Bool)
        /// ECDH, raw or through an X9.63 KDF.
        case ecdh(kdf: Hash?)

        init(_ name: String) throws(KeychainError) {
            let parts = name.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard parts.count >= 3, parts[0] == "algid" else {
                throw KeychainError(KeychainStatus.param, "\(name) is not a SecKeyAlgorithm")
            }
            let hash = parts.count > 4 ? Hash(rawValue: parts[4]) : nil
            switch (parts[1], parts[2]) {
            case ("sign", "ECDSA"):
                if parts.count == 4, parts[3] == "RFC4754" {
                    self = .ecdsa(message: false, hash: nil, raw: true)
                    return
                }
                if parts.count == 4, parts[3] == "digest-X962" || parts[3] == "digest-RFC4754" {
                    self = .ecdsa(message: false, hash: nil, raw: parts[3] == "digest-RFC4754")
                    return
                }
                guard parts.count == 5, let hash else { break }
                switch parts[3] {
                case "digest-X962": self = .ecdsa(message: false, hash: hash, raw: false)
                case "message-X962": self = .ecdsa(message: true, hash: hash, raw: false)
                case "digest-RFC4754": self = .ecdsa(message: false, hash: hash, raw: true)
                case "message-RFC4754": self = .ecdsa(message: true, hash: hash, raw: true)
                default: throw Self.unknown(name)
                }
                return
            case ("sign", "RSA"):
                if parts.count == 4, parts[3] == "raw" {
                    self = .rsaSignature(.raw, message: false)
                    return
                }
                if parts.count == 4, parts[3] == "digest-PKCS1v15" {
                    self = .rsaSignature(.pkcs1(nil), message: false)
                    return
                }
                // Apple names PSS with its MGF1 hash and salt size too: message-PSS:SHA256:SHA256:32 (SHA-224's name
                // says 24; its salt is the digest's 28 bytes). Keyseal's first names (message-PSS:SHA256) stay
                // accepted, for clients that send them.
                let pssSuffix =
                    parts.count == 7 && parts[3].hasSuffix("-PSS") && parts[5] == parts[4]
                    && (Int(parts[6]) == hash?.size || (hash == .sha224 && parts[6] == "24"))
                guard parts.count == 5 || pssSuffix, let hash else { break }
                switch parts[3] {
                case "digest-PKCS1v15": self = .rsaSignature(.pkcs1(hash), message: false)
                case "message-PKCS1v15": self = .rsaSignature(.pkcs1(hash), message: true)
                case "digest-PSS": self = .rsaSignature(.pss(hash), message: false)
                case "message-PSS": self = .rsaSignature(.pss(hash), message: true)
                default: throw Self.unknown(name)
                }
                return
            case ("encrypt", "RSA"):
                if parts.count == 4, parts[3] == "raw" {
                    self = .rsaEncryption(.raw)
                    return
                }
                if parts.count == 4, parts[3] == "PKCS1" {
                    self = .rsaEncryption(.pkcs1)
                    return
                }
                // algid:encrypt:RSA:OAEP:SHAnnn, and with :AESGCM the hybrid of the session key and AES-GCM.
                guard parts.count == 5 || (parts.count == 6 && parts[5] == "AESGCM"), parts[3] == "OAEP",
                    let oaep = Hash(rawValue: parts[4])
                else { break }
                self = parts.count == 6 ? .rsaAESGCM(hash: oaep) : .rsaEncryption(.oaep(oaep, label: []))
                return
            case ("encrypt", "ECIES"):
                // algid:encrypt:ECIES:ECDH|ECDHC:KDFX963:SHAnnn:AESGCM|AESGCM-KDFIV (the variable IV from SHA-224 on:
                // Apple declares no SHA-1 form of it).
                guard parts.count == 7, parts[3] == "ECDH" || parts[3] == "ECDHC", parts[4] == "KDFX963",
                    let kdf = Hash(rawValue: parts[5]),
                    parts[6] == "AESGCM" || (parts[6] == "AESGCM-KDFIV" && kdf != .sha1)
                else { break }
                self = .ecies(hash: kdf, variableIV: parts[6] == "AESGCM-KDFIV")
                return
            case ("keyexchange", "ECDH"), ("keyexchange", "ECDHC"):
                // For prime curves the cofactor is 1: the cofactor variants give the same secret.
                if parts.count == 3 {
                    self = .ecdh(kdf: nil)
                    return
                }
                guard parts.count == 5, parts[3] == "KDFX963", let kdf = Hash(rawValue: parts[4]) else { break }
                self = .ecdh(kdf: kdf)
                return
            default: break
            }
            throw Self.unknown(name)
        }

        static func unknown(_ name: String) -> KeychainError {
            KeychainError(KeychainStatus.param, "algorithm \(name) is not supported")
        }
    }

    /// The operations of Apple's `SecKeyOperationType`.
    public enum Operation: Int, Sendable {
        case sign = 0
        case verify = 1
        case encrypt = 2
        case decrypt = 3
        case keyExchange = 4
    }

    /// Whether a key of `keyType` (private or public, in hardware or not) can do `operation` with `algorithm`.
    public static func isSupported(
        _ algorithm: String,
        operation: Operation,
        keyType: KeyType,
        isPrivate: Bool,
        inHardware: Bool
    ) -> Bool {
        guard let parsed = try? Algorithm(algorithm) else { return false }
        switch (parsed, operation) {
        case (.ecdsa, .sign): return isPrivate && keyType.isEC
        case (.ecdsa, .verify): return !isPrivate && keyType.isEC
        case (.rsaSignature, .sign): return isPrivate && !keyType.isEC
        case (.rsaSignature, .verify): return !isPrivate && !keyType.isEC
        case (.rsaEncryption, .encrypt): return !isPrivate && !keyType.isEC
        case (.rsaEncryption, .decrypt): return isPrivate && !keyType.isEC
        case (.rsaAESGCM, .encrypt): return !isPrivate && !keyType.isEC
        case (.rsaAESGCM, .decrypt): return isPrivate && !keyType.isEC
        case (.ecies, .encrypt): return !isPrivate && keyType.isEC
        case (.ecies, .decrypt): return isPrivate && keyType.isEC
        case (.ecdh, .keyExchange): return isPrivate && keyType.isEC
        default: return false
        }
    }

    // MARK: Private-key operations

    static func sign(_ key: PrivateKeyHandle, algorithm name: String, data: Data) throws(KeychainError) -> Data {
        switch try Algorithm(name) {
        case .ecdsa(let message, let hash, let raw):
            guard key.keyType.isEC else { throw unsupported }
            let digest = try digest(data, message: message, hash: hash)
            let der = try key.ecdsaSign(digest: digest)
            return raw ? try rawSignature(der: der, keyType: key.keyType) : der
        case .rsaSignature(let padding, let message):
            guard case .software(let software) = key, !key.keyType.isEC else { throw unsupported }
            return try RSAOperations.sign(
                privateKey: software.material,
                input: rsaInput(data, padding: padding, message: message),
                padding: padding
            )
        default:
            throw unsupported
        }
    }

    static func decrypt(_ key: PrivateKeyHandle, algorithm name: String, data: Data) throws(KeychainError) -> Data {
        switch try Algorithm(name) {
        case .rsaEncryption(let padding):
            guard case .software(let software) = key, !key.keyType.isEC else { throw unsupported }
            return try RSAOperations.decrypt(privateKey: software.material, data: data, padding: padding)
        case .rsaAESGCM(let hash):
            guard case .software(let software) = key, !key.keyType.isEC else { throw unsupported }
            // The wrapped session key is one RSA block; the tag is AES-GCM's 16 bytes.
            let blockSize = (key.keyType.bits + 7) / 8
            guard data.count >= blockSize + 16 else {
                throw KeychainError(KeychainStatus.param, "RSA-OAEP AES-GCM ciphertext is too short")
            }
            let publicKey = try key.publicKey().bytes
            // One answer for every failure: the wrapped key, its size, the body or the tag.
            let failed = KeychainError(
                KeychainStatus.param,
                "RSA-OAEP AES-GCM decryption failed (wrong key or altered data)"
            )
            guard
                var sessionKey = try? RSAOperations.decrypt(
                    privateKey: software.material,
                    data: data.prefix(blockSize),
                    padding: .oaep(hash, label: [])
                )
            else { throw failed }
            defer { sessionKey.resetBytes(in: 0..<sessionKey.count) }
            guard sessionKey.count == rsaSessionKeySize(key.keyType) else { throw failed }
            guard
                let plaintext = openGCM(
                    data.dropFirst(blockSize),
                    key: SymmetricKey(data: sessionKey),
                    iv: zeroIV,
                    authenticating: publicKey
                )
            else { throw failed }
            return plaintext
        case .ecies(let hash, let variableIV):
            guard key.keyType.isEC else { throw unsupported }
            let pointSize = 1 + 2 * key.keyType.coordinateSize
            guard data.count >= pointSize + 16 else {
                throw KeychainError(KeychainStatus.param, "ECIES ciphertext is too short")
            }
            let ephemeral = Data(data.prefix(pointSize))
            let shared = try key.ecdh(peer: ephemeral)
            let (aesKey, iv) = eciesKeys(
                shared: shared,
                ephemeral: ephemeral,
                keyType: key.keyType,
                hash: hash,
                variableIV: variableIV
            )
            guard let plaintext = openGCM(data.dropFirst(pointSize), key: aesKey, iv: iv) else {
                throw KeychainError(KeychainStatus.param, "ECIES decryption failed (wrong key or altered data)")
            }
            return plaintext
        default:
            throw unsupported
        }
    }

    static func keyExchange(
        _ key: PrivateKeyHandle,
        algorithm name: String,
        peer: Data,
        requestedSize: Int?,
        sharedInfo: Data?
    ) throws(KeychainError) -> Data {
        guard case .ecdh(let kdf) = try Algorithm(name), key.keyType.isEC else { throw unsupported }
        guard peer.count == 1 + 2 * key.keyType.coordinateSize else {
            throw KeychainError(KeychainStatus.param, "the other party's key is not on the key's curve")
        }
        if kdf != nil { try checkKDFSizes(requestedSize: requestedSize, sharedInfo: sharedInfo) }
        let shared = try key.ecdh(peer: peer)
        guard let kdf, let requestedSize else { return shared.withUnsafeBytes { Data($0) } }
        return x963KDF(shared: shared, sharedInfo: sharedInfo ?? Data(), size: requestedSize, hash: kdf).withUnsafeBytes
        { Data($0) }
    }

    /// The most an X9.63 KDF key exchange derives (`kSecKeyKeyExchangeParameterRequestedSize`).
    public static let maxKDFOutput = 64 << 10
    /// The most shared info an X9.63 KDF key exchange takes (`kSecKeyKeyExchangeParameterSharedInfo`). The KDF hashes
    /// the shared info once for each block of output, so its cost is their product: at these limits at most
    /// 3,277 blocks (SHA-1) of 4 KiB, 14 MB hashed. Apple sets no limit of its own (corecrypto's only bound is the
    /// standard's 2³² − 1 blocks), and uses shared info of tens of bytes (ECIES: the ephemeral public key).
    public static let maxKDFSharedInfo = 4 << 10

    /// Refuses, before the key is used, a KDF request without a size, or over ``maxKDFOutput`` or
    /// ``maxKDFSharedInfo``: errSecParam, as Apple answers a KDF input it cannot use.
    static func checkKDFSizes(requestedSize: Int?, sharedInfo: Data?) throws(KeychainError) {
        guard let requestedSize, requestedSize > 0 else {
            throw KeychainError(
                KeychainStatus.param,
                "a KDF key exchange needs kSecKeyKeyExchangeParameterRequestedSize"
            )
        }
        guard requestedSize <= maxKDFOutput else {
            throw KeychainError(
                KeychainStatus.param,
                "a KDF key exchange derives at most \(maxKDFOutput) bytes, not \(requestedSize) (kSecKeyKeyExchangeParameterRequestedSize)"
            )
        }
        let infoSize = sharedInfo?.count ?? 0
        guard infoSize <= maxKDFSharedInfo else {
            throw KeychainError(
                KeychainStatus.param,
                "a KDF key exchange takes at most \(maxKDFSharedInfo) bytes of shared info, not \(infoSize) (kSecKeyKeyExchangeParameterSharedInfo)"
            )
        }
    }

    // MARK: Public-key operations

    /// Verifies `signature`; a signature that does not verify is errSecVerifyFailed, as Apple reports it.
    public static func verify(
        _ key: PublicKeyMaterial,
        algorithm name: String,
        data: Data,
        signature: Data
    ) throws(KeychainError) {
        let valid: Bool
        switch try Algorithm(name) {
        case .ecdsa(let message, let hash, let raw):
            guard key.keyType.isEC else { throw unsupported }
            let digest = PrehashedDigest(bytes: try digest(data, message: message, hash: hash))
            valid = ecdsaVerify(key, digest: digest, signature: signature, raw: raw)
        case .rsaSignature(let padding, let message):
            guard !key.keyType.isEC else { throw unsupported }
            valid = try RSAOperations.verify(
                publicKey: key.bytes,
                input: rsaInput(data, padding: padding, message: message),
                signature: signature,
                padding: padding
            )
        default:
            throw unsupported
        }
        guard valid else { throw KeychainError(KeychainStatus.verifyFailed, "the signature does not verify") }
    }

    public static func encrypt(
        _ key: PublicKeyMaterial,
        algorithm name: String,
        data: Data
    ) throws(KeychainError)
        -> Data
    {
        switch try Algorithm(name) {
        case .rsaEncryption(let padding):
            guard !key.keyType.isEC else { throw unsupported }
            return try RSAOperations.encrypt(publicKey: key.bytes, data: data, padding: padding)
        case .rsaAESGCM(let hash):
            guard !key.keyType.isEC else { throw unsupported }
            let sessionKey = SymmetricKey(size: SymmetricKeySize(bitCount: 8 * rsaSessionKeySize(key.keyType)))
            var sessionBytes = sessionKey.withUnsafeBytes { Data($0) }
            defer { sessionBytes.resetBytes(in: 0..<sessionBytes.count) }
            let wrapped = try RSAOperations.encrypt(
                publicKey: key.bytes,
                data: sessionBytes,
                padding: .oaep(hash, label: [])
            )
            guard let sealed = sealGCM(data, key: sessionKey, iv: zeroIV, authenticating: key.bytes) else {
                throw KeychainError(KeychainStatus.param, "RSA-OAEP AES-GCM encryption failed")
            }
            return wrapped + sealed
        case .ecies(let hash, let variableIV):
            guard key.keyType.isEC else { throw unsupported }
            let ephemeral = try SoftwarePrivateKey.generate(key.keyType)
            let ephemeralPublic = try ephemeral.publicKey().bytes
            let shared = try ephemeral.ecdh(peer: key.bytes)
            let (aesKey, iv) = eciesKeys(
                shared: shared,
                ephemeral: ephemeralPublic,
                keyType: key.keyType,
                hash: hash,
                variableIV: variableIV
            )
            guard let sealed = sealGCM(data, key: aesKey, iv: iv) else {
                throw KeychainError(KeychainStatus.param, "ECIES encryption failed")
            }
            return ephemeralPublic + sealed
        default:
            throw unsupported
        }
    }

    // MARK: Helpers

    /// What an RSA signature signs: the message's digest, or the caller's digest or block as given.
    static func rsaInput(_ data: Data, padding: RSAOperations.SignaturePadding, message: Bool) -> [UInt8] {
        guard message else { return [UInt8](data) }
        switch padding {
        case .pkcs1(let hash?), .pss(let hash):
            return hash.hash(data)
        default:
            return [UInt8](data)
        }
    }

    /// Runs a hardware operation; an error that is not a KeychainError becomes errSecInternalComponent.
    static func hardware<T>(_ body: () throws -> T) throws(KeychainError) -> T {
        do {
            return try body()
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "the hardware failed: \(error)")
        }
    }

    static func digest(_ data: Data, message: Bool, hash: Hash?) throws(KeychainError) -> [UInt8] {
        if message, let hash { return hash.hash(data) }
        if let hash, data.count != hash.size {
            throw KeychainError(
                KeychainStatus.param,
                "a \(hash.rawValue) digest is \(hash.size) bytes, not \(data.count)"
            )
        }
        guard (20...64).contains(data.count) else {
            throw KeychainError(KeychainStatus.param, "a digest is 20 to 64 bytes, not \(data.count)")
        }
        return Array(data)
    }

    /// An X9.62 DER signature as RFC 4754's r ‖ s.
    static func rawSignature(der: Data, keyType: KeyType) throws(KeychainError) -> Data {
        do {
            switch keyType {
            case .ec(256): return try P256.Signing.ECDSASignature(derRepresentation: der).rawRepresentation
            case .ec(384): return try P384.Signing.ECDSASignature(derRepresentation: der).rawRepresentation
            case .ec(521): return try P521.Signing.ECDSASignature(derRepresentation: der).rawRepresentation
            default: throw unsupported
            }
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "the signature is not X9.62 DER")
        }
    }

    static func ecdsaVerify(_ key: PublicKeyMaterial, digest: PrehashedDigest, signature: Data, raw: Bool) -> Bool {
        switch key.keyType {
        case .ec(256):
            guard let publicKey = try? P256.Signing.PublicKey(x963Representation: key.bytes),
                let sig = try?
                    (raw
                    ? P256.Signing.ECDSASignature(rawRepresentation: signature)
                    : P256.Signing.ECDSASignature(derRepresentation: signature))
            else { return false }
            return publicKey.isValidSignature(sig, for: digest)
        case .ec(384):
            guard let publicKey = try? P384.Signing.PublicKey(x963Representation: key.bytes),
                let sig = try?
                    (raw
                    ? P384.Signing.ECDSASignature(rawRepresentation: signature)
                    : P384.Signing.ECDSASignature(derRepresentation: signature))
            else { return false }
            return publicKey.isValidSignature(sig, for: digest)
        case .ec(521):
            guard let publicKey = try? P521.Signing.PublicKey(x963Representation: key.bytes),
                let sig = try?
                    (raw
                    ? P521.Signing.ECDSASignature(rawRepresentation: signature)
                    : P521.Signing.ECDSASignature(derRepresentation: signature))
            else { return false }
            return publicKey.isValidSignature(sig, for: digest)
        default:
            return false
        }
    }

    /// The IV of Apple's RSA-OAEP AES-GCM and of ECIES with a fixed IV: sixteen zero bytes (GCM takes an IV of any
    /// length; one of 16 bytes is hashed into the counter block). Safe because every AES key is used once.
    static let zeroIV = Data(repeating: 0, count: 16)

    /// AES-GCM as ECIES and RSA-OAEP AES-GCM lay it out: ciphertext ‖ 16-byte tag; nil when libcrypto refuses.
    static func sealGCM(_ data: Data, key: SymmetricKey, iv: Data, authenticating aad: Data = Data()) -> Data? {
        guard let box = try? AES.GCM.seal(data, using: key, nonce: AES.GCM.Nonce(data: iv), authenticating: aad)
        else { return nil }
        return box.ciphertext + box.tag
    }

    /// Opens ciphertext ‖ 16-byte tag sealed as ``sealGCM(_:key:iv:authenticating:)`` does; nil when it does not
    /// open (wrong key, altered data, too short).
    static func openGCM(_ body: Data, key: SymmetricKey, iv: Data, authenticating aad: Data = Data()) -> Data? {
        guard body.count >= 16,
            let box = try? AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: iv),
                ciphertext: body.dropLast(16),
                tag: body.suffix(16)
            )
        else { return nil }
        return try? AES.GCM.open(box, using: key, authenticating: aad)
    }

    /// The AES session key's size in bytes of Apple's RSA-OAEP AES-GCM: AES-128 for RSA keys under 4096 bits,
    /// AES-256 from 4096 bits on. The data is authenticated with the public key (PKCS#1 `RSAPublicKey` DER) as AAD;
    /// the ciphertext is RSA-OAEP(session key) ‖ AES-GCM ciphertext ‖ 16-byte tag.
    static func rsaSessionKeySize(_ keyType: KeyType) -> Int {
        keyType.bits >= 4096 ? 32 : 16
    }

    /// Apple's ECIES keys: an X9.63 KDF over the shared secret with the ephemeral public key as shared info; AES-128
    /// for curves up to 256 bits, AES-256 above; the IV sixteen zero bytes, or (variable IV) sixteen more KDF bytes.
    static func eciesKeys(
        shared: SecretBytes,
        ephemeral: Data,
        keyType: KeyType,
        hash: Hash,
        variableIV: Bool
    ) -> (SymmetricKey, Data) {
        let keySize = keyType.bits > 256 ? 32 : 16
        let derived = x963KDF(shared: shared, sharedInfo: ephemeral, size: keySize + (variableIV ? 16 : 0), hash: hash)
        return derived.withUnsafeBytes { bytes in
            let key = SymmetricKey(data: bytes.prefix(keySize))
            let iv = variableIV ? Data(bytes.suffix(16)) : zeroIV
            return (key, iv)
        }
    }

    /// ANSI X9.63 KDF: Hash(Z ‖ counter ‖ sharedInfo) for counter = 1, 2, …, concatenated and cut to `size`.
    static func x963KDF(shared: SecretBytes, sharedInfo: Data, size: Int, hash: Hash) -> SecretBytes {
        SecretBytes(count: size) { out in
            // Z ‖ counter ‖ sharedInfo, built once; only the counter changes from block to block.
            var input = Data()
            shared.withUnsafeBytes { input.append(contentsOf: $0) }
            let counterAt = input.count
            input.append(contentsOf: [0, 0, 0, 0])
            input.append(sharedInfo)
            defer { input.resetBytes(in: 0..<input.count) }
            var filled = 0
            var counter: UInt32 = 1
            while filled < size {
                withUnsafeBytes(of: counter.bigEndian) { input.replaceSubrange(counterAt..<counterAt + 4, with: $0) }
                let block = hash.hash(input)
                let take = min(block.count, size - filled)
                out.baseAddress!.advanced(by: filled).copyMemory(from: block, byteCount: take)
                filled += take
                counter += 1
            }
        }
    }
}

extension RSAOperations.Hash {
    /// The digest of `data` (swift-crypto; SHA-224 through KeysealCore).
    func hash(_ data: Data) -> [UInt8] {
        switch self {
        case .sha1: Array(Insecure.SHA1.hash(data: data))
        case .sha224: KeysealCore.sha224(data)
        case .sha256: Array(SHA256.hash(data: data))
        case .sha384: Array(SHA384.hash(data: data))
        case .sha512: Array(SHA512.hash(data: data))
        }
    }
}
