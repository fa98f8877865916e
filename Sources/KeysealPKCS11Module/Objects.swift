import CKeysealPKCS11Entry
import FoundationEssentials
import KeysealClient

/// Keyseal's own attribute on `C_GenerateKeyPair`'s private-key template: CK_TRUE generates the P-256 key inside the
/// store's TPM or token, CK_FALSE in software (default: in the hardware when the backend has one).
let ckaKeysealHardware = (CK_ATTRIBUTE_TYPE(1) << 31) | 0x4B53_0001

/// One PKCS#11 object: a view of a key or certificate item of keyseald (never its private material).
struct P11Object {
    enum Source: Hashable {
        case privateKey(Data)
        case publicKey(Data)
        case certificate(Data)
        /// A session secret derived by `C_DeriveKey` (ECDH): lives in this process until its session closes.
        case derived(UInt64)
        /// A session object made by `C_CreateObject` (a certificate, a public key, data): its attributes as the
        /// caller gave them, in this process until its session closes.
        case created(UInt64)
    }

    var source: Source
    /// The attributes readable through `C_GetAttributeValue`, in their PKCS#11 encoding.
    var attributes: [CK_ATTRIBUTE_TYPE: [UInt8]]
    /// Attributes that exist but are never readable (`CKA_VALUE` of a private key).
    var sensitive: Set<CK_ATTRIBUTE_TYPE> = []
    /// The key's type and size, for keys.
    var keyType: KeyType?
    /// The session that owns a session object.
    var session: CK_SESSION_HANDLE?
    /// A derived secret's bytes.
    var secret: SecretBytes?
    /// A key's DER `SubjectPublicKeyInfo` (what `C_Verify` checks signatures with).
    var publicKeyInfo: [UInt8] = []

    /// The item's persistent reference.
    var reference: Data? {
        switch source {
        case .privateKey(let reference), .publicKey(let reference), .certificate(let reference): reference
        case .derived, .created: nil
        }
    }

    /// Whether this is a session object (`CKA_TOKEN` false): a key keyseald holds for this process's connection, or
    /// attributes in this process; gone when its session closes.
    var isSessionObject: Bool { session != nil }

    func matches(_ template: [(CK_ATTRIBUTE_TYPE, [UInt8])]) -> Bool {
        template.allSatisfy { type, value in attributes[type] == value }
    }
}

enum Encode {
    static func ulong(_ value: CK_ULONG) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
    static func ulong(_ value: Int32) -> [UInt8] { ulong(CK_ULONG(value)) }
    static func bool(_ value: Bool) -> [UInt8] { [value ? 1 : 0] }

    /// A DER length.
    static func derLength(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var rest = count
        while rest > 0 {
            bytes.insert(UInt8(rest & 0xff), at: 0)
            rest >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    /// A DER OCTET STRING of `bytes` (`CKA_EC_POINT`).
    static func octetString(_ bytes: [UInt8]) -> [UInt8] { [0x04] + derLength(bytes.count) + bytes }

    /// The named curve's DER OID (`CKA_EC_PARAMS`).
    static func curveOID(bits: Int) -> [UInt8]? {
        switch bits {
        case 256: [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07]
        case 384: [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22]
        case 521: [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x23]
        default: nil
        }
    }

    static func curveBits(oid: [UInt8]) -> Int? {
        [256, 384, 521].first { curveOID(bits: $0) == oid }
    }
}

/// A minimal DER reader: enough to take a certificate's serial number, issuer and subject, and an RSA public key's
/// modulus and exponent.
struct DERReader {
    let bytes: [UInt8]
    var offset: Int

    init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    /// The next element: its tag, the whole encoding and the contents' range.
    mutating func next() -> (tag: UInt8, whole: Range<Int>, contents: Range<Int>)? {
        let start = offset
        guard offset + 2 <= bytes.count else { return nil }
        let tag = bytes[offset]
        var length = Int(bytes[offset + 1])
        offset += 2
        if length & 0x80 != 0 {
            let count = length & 0x7f
            guard count >= 1, count <= 4, offset + count <= bytes.count else { return nil }
            length = 0
            for byte in bytes[offset..<offset + count] { length = length << 8 | Int(byte) }
            offset += count
        }
        guard length >= 0, offset + length <= bytes.count else { return nil }
        let contents = offset..<offset + length
        offset += length
        return (tag, start..<offset, contents)
    }

    /// Serial number (the INTEGER's DER), issuer and subject (Name DER) of an X.509 certificate.
    static func certificateFields(_ der: [UInt8]) -> (serial: [UInt8], issuer: [UInt8], subject: [UInt8])? {
        var outer = DERReader(der)
        guard let certificate = outer.next(), certificate.tag == 0x30 else { return nil }
        var inner = DERReader(der, offset: certificate.contents.lowerBound)
        guard let tbs = inner.next(), tbs.tag == 0x30 else { return nil }
        var fields = DERReader(der, offset: tbs.contents.lowerBound)
        guard var element = fields.next() else { return nil }
        if element.tag == 0xa0 {
            guard let serial = fields.next() else { return nil }
            element = serial
        }
        let serial = element
        guard serial.tag == 0x02, fields.next() != nil, let issuer = fields.next(), fields.next() != nil,
            let subject = fields.next(), issuer.tag == 0x30, subject.tag == 0x30
        else { return nil }
        return (Array(der[serial.whole]), Array(der[issuer.whole]), Array(der[subject.whole]))
    }

    /// Modulus and public exponent (big-endian, no leading zero) of a PKCS#1 `RSAPublicKey`.
    static func rsaPublicKey(_ der: [UInt8]) -> (modulus: [UInt8], exponent: [UInt8])? {
        var outer = DERReader(der)
        guard let sequence = outer.next(), sequence.tag == 0x30 else { return nil }
        var inner = DERReader(der, offset: sequence.contents.lowerBound)
        guard let modulus = inner.next(), let exponent = inner.next(), modulus.tag == 0x02, exponent.tag == 0x02
        else { return nil }
        func unsigned(_ range: Range<Int>) -> [UInt8] { Array(der[range].drop { $0 == 0 }) }
        return (unsigned(modulus.contents), unsigned(exponent.contents))
    }
}

extension P11Object {
    static func label(_ attributes: [String: AttributeValue], fallback: [UInt8]) -> [UInt8] {
        switch attributes[AttributeKey.label] ?? attributes["atag"] {
        case .string(let text)?: Array(text.utf8)
        case .data(let data)?: Array(data)
        default: Array(fallback.map { String($0, radix: 16) }.joined().utf8)
        }
    }

    /// The private- and public-key objects of a key item (the public one only for a public-key item).
    static func keyObjects(_ key: WireKey) -> [P11Object] {
        let applicationLabel: [UInt8] =
            if case .data(let data)? = key.attributes["klbl"] { Array(data) } else { [] }
        let label = label(key.attributes, fallback: applicationLabel)
        let isEC = key.keyType == KeyType.ecTypeCode
        guard let keyType = try? KeyType(typeCode: key.keyType, bits: key.bits) else { return [] }
        var common: [CK_ATTRIBUTE_TYPE: [UInt8]] = [
            CK_ATTRIBUTE_TYPE(CKA_TOKEN): Encode.bool(true),
            CK_ATTRIBUTE_TYPE(CKA_PRIVATE): Encode.bool(false),
            CK_ATTRIBUTE_TYPE(CKA_MODIFIABLE): Encode.bool(false),
            CK_ATTRIBUTE_TYPE(CKA_LABEL): label,
            CK_ATTRIBUTE_TYPE(CKA_ID): applicationLabel,
            CK_ATTRIBUTE_TYPE(CKA_KEY_TYPE): Encode.ulong(isEC ? CK_ULONG(CKK_EC) : CK_ULONG(CKK_RSA)),
            CK_ATTRIBUTE_TYPE(CKA_LOCAL): Encode.bool(true),
            CK_ATTRIBUTE_TYPE(CKA_DERIVE): Encode.bool(isEC),
            CK_ATTRIBUTE_TYPE(CKA_START_DATE): [],
            CK_ATTRIBUTE_TYPE(CKA_END_DATE): [],
            CK_ATTRIBUTE_TYPE(CKA_KEY_GEN_MECHANISM): Encode.ulong(
                isEC ? CK_ULONG(CKM_EC_KEY_PAIR_GEN) : CK_ULONG(CKM_RSA_PKCS_KEY_PAIR_GEN)
            ),
        ]
        if isEC {
            guard let oid = Encode.curveOID(bits: key.bits) else { return [] }
            common[CK_ATTRIBUTE_TYPE(CKA_EC_PARAMS)] = oid
            common[CK_ATTRIBUTE_TYPE(CKA_EC_POINT)] = Encode.octetString(Array(key.publicKey))
        } else {
            guard let rsa = DERReader.rsaPublicKey(Array(key.publicKey)) else { return [] }
            common[CK_ATTRIBUTE_TYPE(CKA_MODULUS)] = rsa.modulus
            common[CK_ATTRIBUTE_TYPE(CKA_PUBLIC_EXPONENT)] = rsa.exponent
            // The modulus's length in bits, as PKCS#11 defines it (Keyseal names a key by its block: 1024 for 1023).
            let modulus = rsa.modulus.drop { $0 == 0 }
            let modulusBits = modulus.first.map { modulus.count * 8 - $0.leadingZeroBitCount } ?? 0
            common[CK_ATTRIBUTE_TYPE(CKA_MODULUS_BITS)] = Encode.ulong(CK_ULONG(modulusBits))
        }
        var publicKey = common
        publicKey[CK_ATTRIBUTE_TYPE(CKA_CLASS)] = Encode.ulong(CK_ULONG(CKO_PUBLIC_KEY))
        publicKey[CK_ATTRIBUTE_TYPE(CKA_VERIFY)] = Encode.bool(true)
        publicKey[CK_ATTRIBUTE_TYPE(CKA_ENCRYPT)] = Encode.bool(!isEC)
        publicKey[CK_ATTRIBUTE_TYPE(CKA_WRAP)] = Encode.bool(false)
        publicKey[CK_ATTRIBUTE_TYPE(CKA_TRUSTED)] = Encode.bool(false)
        publicKey[CK_ATTRIBUTE_TYPE(CKA_SUBJECT)] = []
        let publicKeyInfo = Array(key.subjectPublicKeyInfo)
        if !publicKeyInfo.isEmpty { publicKey[CK_ATTRIBUTE_TYPE(CKA_PUBLIC_KEY_INFO)] = publicKeyInfo }
        var objects = [
            P11Object(
                source: .publicKey(key.reference),
                attributes: publicKey,
                keyType: keyType,
                publicKeyInfo: publicKeyInfo
            )
        ]
        guard key.isPrivate else { return objects }
        var privateKey = common
        privateKey[CK_ATTRIBUTE_TYPE(CKA_CLASS)] = Encode.ulong(CK_ULONG(CKO_PRIVATE_KEY))
        privateKey[CK_ATTRIBUTE_TYPE(CKA_SIGN)] = Encode.bool(true)
        privateKey[CK_ATTRIBUTE_TYPE(CKA_SIGN_RECOVER)] = Encode.bool(false)
        privateKey[CK_ATTRIBUTE_TYPE(CKA_DECRYPT)] = Encode.bool(!isEC)
        privateKey[CK_ATTRIBUTE_TYPE(CKA_UNWRAP)] = Encode.bool(false)
        privateKey[CK_ATTRIBUTE_TYPE(CKA_SENSITIVE)] = Encode.bool(true)
        privateKey[CK_ATTRIBUTE_TYPE(CKA_ALWAYS_SENSITIVE)] = Encode.bool(true)
        privateKey[CK_ATTRIBUTE_TYPE(CKA_EXTRACTABLE)] = Encode.bool(key.extractable && !key.inHardware)
        privateKey[CK_ATTRIBUTE_TYPE(CKA_NEVER_EXTRACTABLE)] = Encode.bool(!key.extractable || key.inHardware)
        privateKey[CK_ATTRIBUTE_TYPE(CKA_ALWAYS_AUTHENTICATE)] = Encode.bool(false)
        privateKey[CK_ATTRIBUTE_TYPE(CKA_WRAP_WITH_TRUSTED)] = Encode.bool(false)
        privateKey[CK_ATTRIBUTE_TYPE(CKA_SUBJECT)] = []
        privateKey[ckaKeysealHardware] = Encode.bool(key.inHardware)
        var sensitive: Set<CK_ATTRIBUTE_TYPE> = [CK_ATTRIBUTE_TYPE(CKA_VALUE)]
        if !isEC {
            sensitive.formUnion(
                [CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT].map {
                    CK_ATTRIBUTE_TYPE($0)
                }
            )
        }
        objects.append(
            P11Object(
                source: .privateKey(key.reference),
                attributes: privateKey,
                sensitive: sensitive,
                keyType: keyType
            )
        )
        return objects
    }

    /// The object of a certificate item; `CKA_ID` is its key's application label (the certificate's `pkhh`).
    static func certificateObject(_ certificate: WireCertificate) -> P11Object? {
        let der = Array(certificate.der)
        guard let fields = DERReader.certificateFields(der) else { return nil }
        let keyHash: [UInt8] =
            if case .data(let data)? = certificate.attributes["pkhh"] { Array(data) } else { [] }
        let label: [UInt8] =
            if case .string(let text)? = certificate.attributes[AttributeKey.label] {
                Array(text.utf8)
            } else {
                Array((certificate.subjectSummary ?? "certificate").utf8)
            }
        var attributes = tokenCertificateAttributes(der: der, fields: fields)
        attributes[CK_ATTRIBUTE_TYPE(CKA_LABEL)] = label
        attributes[CK_ATTRIBUTE_TYPE(CKA_ID)] = keyHash
        return P11Object(source: .certificate(certificate.reference), attributes: attributes)
    }

    /// What a certificate item shows as a token object, besides its label and `CKA_ID`: all of it follows from the
    /// DER (C_CreateObject accepts a template that repeats these values, and refuses one that changes them).
    static func tokenCertificateAttributes(
        der: [UInt8],
        fields: (serial: [UInt8], issuer: [UInt8], subject: [UInt8])
    ) -> [CK_ATTRIBUTE_TYPE: [UInt8]] {
        [
            CK_ATTRIBUTE_TYPE(CKA_CLASS): Encode.ulong(CK_ULONG(CKO_CERTIFICATE)),
            CK_ATTRIBUTE_TYPE(CKA_CERTIFICATE_TYPE): Encode.ulong(CK_ULONG(CKC_X_509)),
            CK_ATTRIBUTE_TYPE(CKA_TOKEN): Encode.bool(true),
            CK_ATTRIBUTE_TYPE(CKA_PRIVATE): Encode.bool(false),
            CK_ATTRIBUTE_TYPE(CKA_MODIFIABLE): Encode.bool(false),
            CK_ATTRIBUTE_TYPE(CKA_TRUSTED): Encode.bool(false),
            CK_ATTRIBUTE_TYPE(CKA_CERTIFICATE_CATEGORY): Encode.ulong(CK_ULONG(0)),
            CK_ATTRIBUTE_TYPE(CKA_VALUE): der,
            CK_ATTRIBUTE_TYPE(CKA_SUBJECT): fields.subject,
            CK_ATTRIBUTE_TYPE(CKA_ISSUER): fields.issuer,
            CK_ATTRIBUTE_TYPE(CKA_SERIAL_NUMBER): fields.serial,
        ]
    }
}
