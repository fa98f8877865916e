internal import CTSS2
internal import Crypto
import FoundationEssentials
import KeysealCore
internal import _CryptoExtras

#if canImport(Glibc)
import Glibc
#endif

/// The public key whose signatures say which PCR values may open a store bound with `PolicyAuthorize` (docs/TPM.md
/// "Signed PCR policies"): RSA 2048 (systemd's default) or NIST P-256. Its private half stays with whoever builds
/// the system; the device only ever has this public half.
public struct PCRPolicyKey: Sendable, Equatable {
    enum Material: Sendable, Equatable {
        /// The big-endian modulus (256 bytes) and the public exponent.
        case rsa(modulus: [UInt8], exponent: UInt32)
        /// X ‖ Y (32 bytes each).
        case p256(xy: [UInt8])
    }

    let material: Material
    /// systemd's `pkfp`, which names the key in a signature file: SHA-256 of the key as OpenSSL's `i2d_PublicKey`
    /// encodes it — the PKCS#1 RSAPublicKey DER of an RSA key, the uncompressed point 0x04 ‖ X ‖ Y of a P-256 key
    /// (not the SubjectPublicKeyInfo). `SignedPCRPolicyTests.systemdMeasureSignatureOpens` compares it with
    /// systemd-measure's.
    public let fingerprint: [UInt8]
    /// SHA-256 of the key's SubjectPublicKeyInfo DER: the `pkfp` Keyseal's `tpm sign-policy` wrote before it matched
    /// systemd's. It only names the key (the TPM verifies every signature with the bound key), so files signed then
    /// still name this key (`SignedPCRPolicyTests.earlierFingerprintStillNamesTheKey`).
    public let earlierFingerprint: [UInt8]

    /// Whether `pkfp` (a signature file's, as bytes) names this key.
    public func isNamed(by pkfp: [UInt8]?) -> Bool {
        pkfp == fingerprint || pkfp == earlierFingerprint
    }

    /// A PEM SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`) of an RSA 2048 or P-256 key.
    public init(pemRepresentation pem: String) throws {
        if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) {
            self.init(p256: key)
        } else if let key = try? _RSA.Signing.PublicKey(pemRepresentation: pem) {
            try self.init(rsa: key)
        } else {
            throw KeychainError(
                KeychainStatus.param,
                "the PCR policy key is not a PEM public key of RSA 2048 or NIST P-256 (-----BEGIN PUBLIC KEY-----)"
            )
        }
    }

    init(p256 key: P256.Signing.PublicKey) {
        material = .p256(xy: Array(key.x963Representation.dropFirst()))
        fingerprint = Array(SHA256.hash(data: key.x963Representation))
        earlierFingerprint = Array(SHA256.hash(data: key.derRepresentation))
    }

    init(rsa key: _RSA.Signing.PublicKey) throws {
        guard key.keySizeInBits == 2048, let primitives = try? key.getKeyPrimitives() else {
            throw KeychainError(KeychainStatus.param, "an RSA PCR policy key has 2048 bits, not \(key.keySizeInBits)")
        }
        let exponent = Array(primitives.publicExponent.drop { $0 == 0 })
        guard (1...4).contains(exponent.count) else {
            throw KeychainError(KeychainStatus.param, "the RSA PCR policy key's exponent does not fit 32 bits")
        }
        let modulus = Array(primitives.modulus.drop { $0 == 0 })
        guard modulus.count == 256 else {
            throw KeychainError(KeychainStatus.param, "an RSA PCR policy key has a 2048-bit modulus")
        }
        material = .rsa(modulus: modulus, exponent: exponent.reduce(0) { $0 << 8 | UInt32($1) })
        fingerprint = Array(SHA256.hash(data: key.pkcs1DERRepresentation))
        earlierFingerprint = Array(SHA256.hash(data: key.derRepresentation))
    }

    /// The key from the public area a sealed blob records (``SealedBlob``); nil if it is not one this type makes.
    init?(publicArea: TPM2B_PUBLIC) {
        var area = publicArea
        guard keyseal_is_policy_key(&area) != 0 else { return nil }
        if area.publicArea.type == keyseal_TPM2_ALG_RSA {
            let modulus = withUnsafeBytes(of: &area.publicArea.unique.rsa.buffer) { Array($0.prefix(256)) }
            let exponent = area.publicArea.parameters.rsaDetail.exponent
            let e = exponent == 0 ? 65537 : exponent
            let bytes = (0..<4).map { UInt8(truncatingIfNeeded: e >> (24 - 8 * $0)) }
            guard let key = try? _RSA.Signing.PublicKey(n: modulus, e: bytes), let made = try? Self(rsa: key) else {
                return nil
            }
            self = made
        } else {
            let x = withUnsafeBytes(of: &area.publicArea.unique.ecc.x.buffer) { Array($0.prefix(32)) }
            let y = withUnsafeBytes(of: &area.publicArea.unique.ecc.y.buffer) { Array($0.prefix(32)) }
            guard let key = try? P256.Signing.PublicKey(x963Representation: [0x04] + x + y) else { return nil }
            self.init(p256: key)
        }
    }

    /// The public area loaded with TPM2_LoadExternal to verify signatures (``keyseal_rsa_policy_key``,
    /// ``keyseal_ecc_policy_key``).
    var publicArea: TPM2B_PUBLIC {
        switch material {
        case .rsa(let modulus, let exponent):
            var area = TPM2B_PUBLIC()
            let made = modulus.withUnsafeBufferPointer {
                keyseal_rsa_policy_key(&area, $0.baseAddress, $0.count, exponent)
            }
            precondition(made == 0, "a 2048-bit modulus fits a TPM2B_PUBLIC")
            return area
        case .p256(let xy):
            return xy.withUnsafeBufferPointer { keyseal_ecc_policy_key($0.baseAddress) }
        }
    }

    /// The key's Name, which `PolicyAuthorize` commits the object's policy to: 0x000B ‖ SHA-256(TPMT_PUBLIC).
    public var name: [UInt8] {
        var area = publicArea
        var buffer = [UInt8](repeating: 0, count: MemoryLayout<TPMT_PUBLIC>.size)
        let size = buffer.withUnsafeMutableBufferPointer {
            keyseal_marshal_public_area(&area, $0.baseAddress, $0.count)
        }
        precondition(size > 0, "a public area marshals into its own size")
        return [0x00, 0x0B] + SHA256.hash(data: buffer[0..<size])
    }

    /// The key's TPM2B_PUBLIC, marshalled (what a sealed blob of version 3 records).
    var marshalledPublicArea: [UInt8] {
        var area = publicArea
        var buffer = [UInt8](repeating: 0, count: MemoryLayout<TPM2B_PUBLIC>.size + 2)
        var offset = 0
        let rc = buffer.withUnsafeMutableBufferPointer {
            Tss2_MU_TPM2B_PUBLIC_Marshal(&area, $0.baseAddress, $0.count, &offset)
        }
        precondition(rc == 0, "a public area marshals into its own size")
        return Array(buffer[0..<offset])
    }

    /// A check in software (swift-crypto) of this key's signatures over a policy digest (`sig` as a signature file
    /// holds it, base64), run before the TPM is asked: a directory of bad entries then costs no TPM command
    /// (docs/TPM.md "Signed PCR policies"). The TPM's `TPM2_VerifySignature` still decides for the entries that pass.
    func softwareVerifier() -> @Sendable (_ sig: String, _ policy: [UInt8]) -> Bool {
        switch material {
        case .rsa(let modulus, let exponent):
            let e = Array((0..<4).map { UInt8(truncatingIfNeeded: exponent >> (24 - 8 * $0)) }.drop { $0 == 0 })
            guard let publicKey = try? _RSA.Signing.PublicKey(n: modulus, e: e) else { return { _, _ in false } }
            return { sig, policy in
                guard let raw = Data(base64Encoded: sig), raw.count == 256 else { return false }
                return publicKey.isValidSignature(
                    _RSA.Signing.RSASignature(rawRepresentation: raw),
                    for: policy,
                    padding: .insecurePKCS1v1_5
                )
            }
        case .p256(let xy):
            guard let publicKey = try? P256.Signing.PublicKey(x963Representation: [0x04] + xy) else {
                return { _, _ in false }
            }
            return { sig, policy in
                guard let raw = Data(base64Encoded: sig),
                    let signature = try? P256.Signing.ECDSASignature(derRepresentation: raw)
                else { return false }
                return publicKey.isValidSignature(signature, for: policy)
            }
        }
    }

    /// The fingerprint in lowercase hex (as `pkfp` writes it).
    public var fingerprintHex: String { SignedPCRPolicy.hex(fingerprint) }
}

/// One signed PCR policy: an entry of systemd's `tpm2-pcr-signature.json`
/// (`{"sha256": [{"pcrs": [7], "pkfp": HEX, "pol": HEX, "sig": BASE64}]}`).
public struct SignedPCRPolicy: Sendable, Equatable, Codable {
    /// The PCRs (SHA-256 bank) the policy covers, ascending.
    public var pcrs: [Int]
    /// The signing key's fingerprint (``PCRPolicyKey/fingerprint``: SHA-256 of its PKCS#1 DER or EC point), hex.
    public var pkfp: String
    /// The `PolicyPCR` digest the signature approves, hex.
    public var pol: String
    /// The signature over SHA-256(pol): RSASSA-PKCS1-v1_5, or ECDSA as DER, base64.
    public var sig: String
    /// The policy epoch the signature was made for (`keyseal tpm sign-policy --epoch`), or nil for a signature without
    /// one (systemd's, and every one Keyseal wrote before epochs). With an epoch, `pol` is the `PolicyPCR` digest
    /// followed by `PolicyCounterTimer` (``epochPolicyDigest(pcrPolicy:epoch:)``): the TPM then accepts the signature
    /// only while its policy epoch is at most this one (docs/TPM.md "Withdrawing signed states").
    public var epoch: Int?

    public init(pcrs: [Int], pkfp: String, pol: String, sig: String, epoch: Int? = nil) {
        self.pcrs = pcrs
        self.pkfp = pkfp
        self.pol = pol
        self.sig = sig
        self.epoch = epoch
    }

    /// The largest policy epoch: the top 16 bits of the TPM's Clock (``TPMDeviceKey/advancePolicyEpoch(tcti:to:)``),
    /// short of 0xFFFF, which `TPM2_ClockSet` cannot reach.
    public static let maximumEpoch = 0xFFFE

    /// Where the TPM's Clock lies in the TPMS_TIME_INFO that `PolicyCounterTimer` compares: `clockInfo.clock`, after
    /// the 8 bytes of `time`. The policy epoch is the Clock's top 16 bits.
    static let epochOffset: UInt16 = 8

    /// `policy` extended by `PolicyCounterTimer(operandB = ``epochOperand(_:)``, offset 8, TPM_EO_UNSIGNED_LE)`, as the
    /// TPM computes it: SHA-256(policy ‖ TPM_CC_PolicyCounterTimer ‖ SHA-256(operandB ‖ offset ‖ operation)). The
    /// session satisfies it only while the TPM Clock's top 16 bits, the policy epoch, are at most `epoch`.
    public static func epochPolicyDigest(pcrPolicy policy: [UInt8], epoch: Int) -> [UInt8] {
        precondition((0...maximumEpoch).contains(epoch), "the caller checks the epoch")
        let arguments = SHA256.hash(
            data: epochOperand(epoch) + [UInt8(epochOffset >> 8), UInt8(epochOffset & 0xFF)]
                + [UInt8(keyseal_TPM2_EO_UNSIGNED_LE >> 8), UInt8(keyseal_TPM2_EO_UNSIGNED_LE & 0xFF)]
        )
        return Array(SHA256.hash(data: policy + bigEndian(keyseal_TPM2_CC_PolicyCounterTimer) + Array(arguments)))
    }

    /// The epoch as `PolicyCounterTimer`'s operandB: the last Clock value of the epoch, (epoch + 1) × 2⁴⁸ − 1, as the
    /// eight bytes of `clockInfo.clock` (big-endian). `tpm2_policycountertimer --ule clock=<that value>` builds the
    /// same policy.
    static func epochOperand(_ epoch: Int) -> [UInt8] {
        let last = (UInt64(epoch) + 1) << 48 - 1
        return (0..<8).map { UInt8(truncatingIfNeeded: last >> (56 - 8 * $0)) }
    }

    /// The `pol` this entry must have for the TPM's current `PolicyPCR` digest `pcrPolicy`: that digest, extended by
    /// the entry's epoch if it names one (nil for an epoch out of range).
    func expectedPolicy(pcrPolicy: [UInt8]) -> [UInt8]? {
        guard let epoch else { return pcrPolicy }
        guard (0...Self.maximumEpoch).contains(epoch) else { return nil }
        return Self.epochPolicyDigest(pcrPolicy: pcrPolicy, epoch: epoch)
    }

    /// The policy digest of `PolicyPCR` over `values` (PCR number → its SHA-256 bank value, 32 bytes), from an empty
    /// policy, as the TPM computes it: SHA-256(0³² ‖ TPM_CC_PolicyPCR ‖ TPML_PCR_SELECTION ‖ SHA-256(values in PCR
    /// order)), the selection being one SHA-256 bank with a 3-byte bitmap.
    public static func pcrPolicyDigest(values: [Int: [UInt8]]) throws -> [UInt8] {
        guard !values.isEmpty, values.keys.allSatisfy({ (0..<24).contains($0) }) else {
            throw KeychainError(KeychainStatus.param, "a PCR policy covers one or more PCRs numbered 0 to 23")
        }
        guard values.values.allSatisfy({ $0.count == 32 }) else {
            throw KeychainError(KeychainStatus.param, "a SHA-256 PCR value is 32 bytes")
        }
        let mask = SealedBlob.mask(Array(values.keys))
        let selection: [UInt8] =
            [0, 0, 0, 1, 0x00, 0x0B, 3]
            + [UInt8(mask & 0xFF), UInt8((mask >> 8) & 0xFF), UInt8((mask >> 16) & 0xFF)]
        let pcrDigest = SHA256.hash(data: values.keys.sorted().flatMap { values[$0]! })
        return Array(
            SHA256.hash(
                data: [UInt8](repeating: 0, count: 32) + bigEndian(keyseal_TPM2_CC_PolicyPCR) + selection + pcrDigest
            )
        )
    }

    /// The authPolicy of an object bound to `key` with `PolicyAuthorize` (empty policyRef), followed by
    /// `PolicyAuthValue` for a passcode object: SHA-256(SHA-256(0³² ‖ TPM_CC_PolicyAuthorize ‖ Name(key)) ‖ ε).
    static func authorizedPolicy(key: PCRPolicyKey, authValue: Bool) -> [UInt8] {
        let authorize = SHA256.hash(
            data: [UInt8](repeating: 0, count: 32) + bigEndian(keyseal_TPM2_CC_PolicyAuthorize) + key.name
        )
        let digest = Array(SHA256.hash(data: Array(authorize)))
        guard authValue else { return digest }
        return Array(SHA256.hash(data: digest + bigEndian(keyseal_TPM2_CC_PolicyAuthValue)))
    }

    /// Signs the `PolicyPCR` digest of `values` with `privateKeyPEM` (PKCS#8, PKCS#1 RSA or SEC1 EC; RSA 2048 or
    /// P-256). What is signed is SHA-256(pol ‖ policyRef) with an empty policyRef, the aHash that `TPM2_VerifySignature`
    /// checks before `PolicyAuthorize` accepts `pol`.
    public static func sign(values: [Int: [UInt8]], privateKeyPEM: String, epoch: Int? = nil) throws -> SignedPCRPolicy
    {
        var policy = try pcrPolicyDigest(values: values)
        if let epoch {
            guard (0...maximumEpoch).contains(epoch) else {
                throw KeychainError(KeychainStatus.param, "a policy epoch is 0 to \(maximumEpoch)")
            }
            policy = epochPolicyDigest(pcrPolicy: policy, epoch: epoch)
        }
        let key: PCRPolicyKey
        let signature: [UInt8]
        if let signer = try? P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM) {
            key = PCRPolicyKey(p256: signer.publicKey)
            signature = Array(try signer.signature(for: policy).derRepresentation)
        } else if let signer = try? _RSA.Signing.PrivateKey(pemRepresentation: privateKeyPEM) {
            key = try PCRPolicyKey(rsa: signer.publicKey)
            signature = Array(try signer.signature(for: policy, padding: .insecurePKCS1v1_5).rawRepresentation)
        } else {
            throw KeychainError(
                KeychainStatus.param,
                "the private key is not a PEM private key of RSA 2048 or NIST P-256"
            )
        }
        return SignedPCRPolicy(
            pcrs: values.keys.sorted(),
            pkfp: key.fingerprintHex,
            pol: hex(policy),
            sig: Data(signature).base64EncodedString(),
            epoch: epoch
        )
    }

    /// The policy digest's bytes (nil if `pol` is not 64 hex digits).
    var policyDigest: [UInt8]? {
        guard let bytes = Self.bytes(hex: pol), bytes.count == 32 else { return nil }
        return bytes
    }

    /// The signature as the TPM takes it, for `key`'s algorithm; nil if it is not one.
    func tpmSignature(for key: PCRPolicyKey) -> TPMT_SIGNATURE? {
        guard let raw = Data(base64Encoded: sig).map(Array.init) else { return nil }
        switch key.material {
        case .rsa:
            guard raw.count == 256 else { return nil }
            var signature = TPMT_SIGNATURE()
            let made = raw.withUnsafeBufferPointer { keyseal_rsassa_signature(&signature, $0.baseAddress, $0.count) }
            return made == 0 ? signature : nil
        case .p256:
            guard let ecdsa = try? P256.Signing.ECDSASignature(derRepresentation: raw) else { return nil }
            let rs = Array(ecdsa.rawRepresentation)
            return rs.withUnsafeBufferPointer { keyseal_ecdsa_sha256_signature($0.baseAddress) }
        }
    }

    // MARK: Files

    /// The file layout: one entry list per bank (Keyseal writes and reads `sha256`).
    public struct File: Codable, Sendable {
        public var sha256: [SignedPCRPolicy]

        public init(sha256: [SignedPCRPolicy]) { self.sha256 = sha256 }
    }

    /// The JSON of a signature file holding `policies`.
    public static func encodeFile(_ policies: [SignedPCRPolicy]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(File(sha256: policies))
    }

    /// The largest signature file read (a file of thousands of entries is still far below it).
    static let maximumFileSize = 1 << 20

    /// Every signed policy in the `*.json` files of `directories`, in directory order then file-name order then entry
    /// order. Missing directories, unreadable or malformed files are skipped: signatures are public, and the TPM
    /// checks each one before it is used.
    public static func load(directories: [String]) -> [SignedPCRPolicy] {
        var found: [SignedPCRPolicy] = []
        for directory in directories {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { continue }
            for name in names.sorted() where name.hasSuffix(".json") {
                let path = directory + "/" + name
                guard let data = readSmallFile(path), let file = try? JSONDecoder().decode(File.self, from: data)
                else { continue }
                found += file.sha256
            }
        }
        return found
    }

    /// A regular file's contents, if it is at most ``maximumFileSize`` bytes.
    private static func readSmallFile(_ path: String) -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size <= maximumFileSize else {
            return nil
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            guard count > 0 else { return nil }
            done += count
        }
        return Data(bytes)
    }

    // MARK: Helpers

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }, as: UTF8.self)
    }

    /// Bytes from hex digits (either case); nil if it is not an even number of them.
    public static func bytes(hex text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
    }
}
