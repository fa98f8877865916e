internal import CP11Kit

/// One attribute of a template; the bytes are copied into C memory by ``withTemplate(_:_:)``.
struct Attribute {
    var type: CK_ATTRIBUTE_TYPE
    var value: [UInt8]

    static func bool(_ type: UInt, _ value: Bool) -> Attribute {
        Attribute(type: CK_ATTRIBUTE_TYPE(type), value: [value ? CK_BBOOL(CK_TRUE) : CK_BBOOL(CK_FALSE)])
    }
    static func ulong(_ type: UInt, _ value: UInt) -> Attribute {
        Attribute(type: CK_ATTRIBUTE_TYPE(type), value: withUnsafeBytes(of: CK_ULONG(value)) { Array($0) })
    }
    static func bytes(_ type: UInt, _ value: [UInt8]) -> Attribute {
        Attribute(type: CK_ATTRIBUTE_TYPE(type), value: value)
    }
}

/// Calls `body` with a C template of `attributes`; every pointer in it is valid only inside `body`.
func withTemplate<Result, Failure: Error>(
    _ attributes: [Attribute],
    _ body: (UnsafeMutablePointer<CK_ATTRIBUTE>, CK_ULONG) throws(Failure) -> Result
) throws(Failure) -> Result {
    let total = attributes.reduce(0) { $0 + $1.value.count }
    let storage = UnsafeMutableRawPointer.allocate(byteCount: max(total, 1), alignment: 16)
    defer { storage.deallocate() }
    var template: [CK_ATTRIBUTE] = []
    var offset = 0
    for attribute in attributes {
        let start = storage + offset
        attribute.value.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress { start.copyMemory(from: base, byteCount: bytes.count) }
        }
        template.append(CK_ATTRIBUTE(type: attribute.type, pValue: start, ulValueLen: CK_ULONG(attribute.value.count)))
        offset += attribute.value.count
    }
    return try template.withUnsafeMutableBufferPointer { (buffer) throws(Failure) -> Result in
        try body(buffer.baseAddress!, CK_ULONG(buffer.count))
    }
}

/// The templates of every object Keyseal creates on a token or looks for there: what each key may do is read here, in
/// one place.
enum Templates {
    /// A secret key labelled `label` (the device keys are found by label).
    static func secretKey(label: String) -> [Attribute] {
        [.ulong(CKA_CLASS, CKO_SECRET_KEY), .bytes(CKA_LABEL, Array(label.utf8))]
    }

    /// A format-2 device key: a generic secret of 256 bits, private, sensitive, never extractable, whose only use is
    /// CKM_SHA256_HMAC signing.
    static func hmacKey(label: String, id: [UInt8]) -> [Attribute] {
        let allowed = withUnsafeBytes(of: CK_MECHANISM_TYPE(CKM_SHA256_HMAC)) { Array($0) }
        return [
            .ulong(CKA_CLASS, CKO_SECRET_KEY),
            .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET),
            .ulong(CKA_VALUE_LEN, 32),
            .bool(CKA_TOKEN, true),
            .bool(CKA_PRIVATE, true),
            .bool(CKA_SENSITIVE, true),
            .bool(CKA_EXTRACTABLE, false),
            .bool(CKA_SIGN, true),
            .bool(CKA_VERIFY, false),
            .bool(CKA_ENCRYPT, false),
            .bool(CKA_DECRYPT, false),
            .bool(CKA_WRAP, false),
            .bool(CKA_UNWRAP, false),
            .bool(CKA_DERIVE, false),
            .bool(CKA_MODIFIABLE, false),
            .bool(CKA_COPYABLE, false),
            .bytes(CKA_ALLOWED_MECHANISMS, allowed),
            .bytes(CKA_LABEL, Array(label.utf8)),
            .bytes(CKA_ID, id),
        ]
    }

    /// The format-1 device key: AES-256, private, sensitive, never extractable (created only for tests).
    static func legacyKey(label: String, id: [UInt8]) -> [Attribute] {
        [
            .ulong(CKA_CLASS, CKO_SECRET_KEY),
            .ulong(CKA_KEY_TYPE, CKK_AES),
            .ulong(CKA_VALUE_LEN, 32),
            .bool(CKA_TOKEN, true),
            .bool(CKA_PRIVATE, true),
            .bool(CKA_SENSITIVE, true),
            .bool(CKA_EXTRACTABLE, false),
            .bool(CKA_ENCRYPT, true),
            .bool(CKA_DECRYPT, true),
            .bytes(CKA_LABEL, Array(label.utf8)),
            .bytes(CKA_ID, id),
        ]
    }

    /// The public half of a hardware key pair: a P-256 token object.
    static func p256PublicKey(label: String, id: [UInt8]) -> [Attribute] {
        [
            .ulong(CKA_CLASS, CKO_PUBLIC_KEY),
            .ulong(CKA_KEY_TYPE, CKK_EC),
            .bool(CKA_TOKEN, true),
            // CKA_VERIFY left to the token: tpm2-pkcs11 derives it and refuses a template that names it.
            .bytes(CKA_EC_PARAMS, PKCS11DeviceKey.p256Parameters),
            .bytes(CKA_LABEL, Array(label.utf8)),
            .bytes(CKA_ID, id),
        ]
    }

    /// The private half of a hardware key pair: a P-256 token object, private, sensitive and non-extractable, for
    /// signing and deriving only.
    static func p256PrivateKey(label: String, id: [UInt8]) -> [Attribute] {
        [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY),
            .ulong(CKA_KEY_TYPE, CKK_EC),
            .bool(CKA_TOKEN, true),
            .bool(CKA_PRIVATE, true),
            .bool(CKA_SENSITIVE, true),
            .bool(CKA_EXTRACTABLE, false),
            .bool(CKA_SIGN, true),
            .bool(CKA_DERIVE, true),
            .bool(CKA_DECRYPT, false),
            .bool(CKA_UNWRAP, false),
            .bytes(CKA_LABEL, Array(label.utf8)),
            .bytes(CKA_ID, id),
        ]
    }

    /// The EC key objects of class `objectClass` whose `CKA_ID` is `id`.
    static func ecKey(_ objectClass: UInt, id: [UInt8]) -> [Attribute] {
        [.ulong(CKA_CLASS, objectClass), .ulong(CKA_KEY_TYPE, CKK_EC), .bytes(CKA_ID, id)]
    }

    /// An ECDH shared secret: a 32-byte session object, non-sensitive and extractable, read once and destroyed at once.
    static let ecdhSecret: [Attribute] = [
        .ulong(CKA_CLASS, CKO_SECRET_KEY),
        .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET),
        .ulong(CKA_VALUE_LEN, 32),
        .bool(CKA_TOKEN, false),
        .bool(CKA_SENSITIVE, false),
        .bool(CKA_EXTRACTABLE, true),
    ]
}
