import Crypto
import FoundationEssentials
import KeysealCore
import KeysealStore
import _CryptoExtras

/// Where a private key the engine uses lives.
public enum KeyReference: Sendable, Hashable {
    /// A stored key: its item's persistent reference.
    case item(Data)
    /// A hardware key that is not stored (`kSecAttrIsPermanent` false), held by the engine until released.
    case transient(Data)
}

/// A key as the engine describes it: never its private material.
public struct KeyDescription: Sendable {
    public var reference: KeyReference
    public var publicKey: PublicKeyMaterial
    /// `kcls`: "1" for a private key, "0" for a public key stored on its own.
    public var isPrivate: Bool
    public var inHardware: Bool
    public var isExtractable: Bool
    /// The item's attributes (`SecKeyCopyAttributes`).
    public var attributes: [String: AttributeValue]
}

/// A key generated with `kSecAttrIsPermanent` false, held by the engine until released: a hardware key (its blob and
/// the seed its authorization is derived from) or a software key (its material), the class that gates it, and the
/// access-control flags it was made with, checked at each use as a stored key's (``KeychainEngine/withPrivateKey``).
struct TransientKey {
    enum Material {
        case hardware(blob: Data, seed: SecretBytes)
        case software(SoftwarePrivateKey)
    }

    var material: Material
    var publicKey: PublicKeyMaterial
    var accessibility: Accessibility
    var accessControlFlags: UInt?
    var isExtractable: Bool
    /// What `SecKeyCopyAttributes` reports for it.
    var attributes: [String: AttributeValue]

    var inHardware: Bool {
        if case .hardware = material { return true }
        return false
    }
}

/// The value of a hardware key's item: what the engine needs to use the key, sealed under the item's class key
/// like any item value. `version ‖ seed (32) ‖ public key (65) ‖ hardware blob`.
struct HardwareKeyValue {
    static let version: UInt8 = 1
    var seed: SecretBytes
    var publicKey: Data
    var blob: Data

    func encoded() -> Data {
        var data = Data([Self.version])
        seed.withUnsafeBytes { data.append(contentsOf: $0) }
        data.append(publicKey)
        data.append(blob)
        return data
    }

    init(seed: SecretBytes, publicKey: Data, blob: Data) {
        self.seed = seed
        self.publicKey = publicKey
        self.blob = blob
    }

    init(decoding data: Data) throws(KeychainError) {
        let bytes = [UInt8](data)
        guard bytes.count > 1 + 32 + 65, bytes[0] == Self.version else {
            throw KeychainError(KeychainStatus.decode, "a hardware key's item is not in a known format")
        }
        seed = SecretBytes(copying: bytes[1..<33])
        publicKey = Data(bytes[33..<98])
        blob = Data(bytes[98...])
    }
}

extension KeychainEngine {
    /// Apple's `kSecAttrTokenIDSecureEnclave`, Keyseal's name for the device key's hardware.
    static let hardwareTokenID = "com.apple.setoken"

    static let keyClassPrivate = "1"
    static let keyClassPublic = "0"
    static let keyClassSymmetric = "2"

    /// A hardware key's authorization: HKDF of its per-key seed, bound to this store, derived at each use and never
    /// stored (the seed is sealed under the item's class key, so a locked class cannot produce it).
    func hardwareAuthorization(_ seed: SecretBytes) -> SecretBytes {
        let key = seed.withUnsafeBytes { SymmetricKey(data: $0) }
        let derived = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: key,
            info: Array("keyseal/hardware-key/authorization".utf8) + storeID,
            outputByteCount: 32
        )
        return derived.withUnsafeBytes { SecretBytes(copying: $0) }
    }

    func hardwareProvider() throws(KeychainError) -> any HardwareKeyProvider {
        guard let provider = device.hardwareKeys else {
            throw KeychainError(
                KeychainStatus.unimplemented,
                "the \(device.backendName) backend has no hardware to hold keys (kSecAttrTokenIDSecureEnclave needs "
                    + "a TPM or a PKCS#11 token); no software key was made in its place"
            )
        }
        return provider
    }

    // MARK: Generation

    /// `admit`: keyseald's quotas, asked with the key item's exact size before it is written (a hardware key
    /// refused there is deleted from the token). `software`: a software key of the request's type generated before
    /// the store's lock was taken (keyseald: an RSA key takes up to seconds), else generated here.
    func generateKey(
        _ request: KeyGenerationRequest,
        caller: Caller,
        admit: GroupAdmission? = nil,
        software: SoftwareKey? = nil
    ) throws -> KeyDescription {
        var attributes = request.attributes
        for key in [
            AttributeKey.keyClass, AttributeKey.applicationLabel, AttributeKey.tokenID, AttributeKey.isExtractable,
        ]
        where attributes[key] != nil {
            throw KeychainError(KeychainStatus.param, "\(key) is set by the keychain when it generates a key")
        }
        // A stored key's flags are checked with its item's add; one that is not stored is checked before it is made.
        if !request.isPermanent { try RequestValidation.validateAccessControl(request.accessControlFlags) }
        let value: Data
        let publicKey: PublicKeyMaterial
        var hardwareBlob: Data?
        if request.inHardware {
            guard request.keyType == .p256 else {
                throw KeychainError(KeychainStatus.param, "a key in the hardware token is a 256-bit EC key")
            }
            let provider = try hardwareProvider()
            _ = try requireClassKey(request.accessibility)
            if let group = request.accessGroup, !caller.holds(group) { throw KeychainError.missingEntitlement(group) }
            let seed = SecretBytes.random(count: 32)
            let generated = try KeyAlgorithms.hardware {
                try provider.generateP256Key(authorization: hardwareAuthorization(seed))
            }
            publicKey = try PublicKeyMaterial(keyType: .p256, bytes: generated.publicKey)
            if !request.isPermanent {
                return holdTransientKey(.hardware(blob: generated.blob, seed: seed), publicKey, request, attributes)
            }
            hardwareBlob = generated.blob
            value = HardwareKeyValue(seed: seed, publicKey: publicKey.bytes, blob: generated.blob).encoded()
        } else {
            if let software, software.keyType != request.keyType {
                throw KeychainError(KeychainStatus.internalComponent, "the key generated is not of the type asked for")
            }
            let key = try software?.key ?? SoftwarePrivateKey.generate(request.keyType)
            publicKey = try key.publicKey()
            if !request.isPermanent {
                // KeysealSecurity keeps a software key without access control in its own process; one with access
                // control is held here, so that each use is checked as a stored key's.
                _ = try requireClassKey(request.accessibility)
                return holdTransientKey(.software(key), publicKey, request, attributes)
            }
            value = key.material.withUnsafeBytes { Data($0) }
        }
        attributes = Self.keyAttributes(request, publicKey: publicKey, inHardware: request.inHardware, base: attributes)
        var trusted: [String: AttributeValue] = [:]
        if request.inHardware { trusted[AttributeKey.tokenID] = attributes.removeValue(forKey: AttributeKey.tokenID) }
        let item = NewItem(
            itemClass: .key,
            attributes: attributes,
            accessGroup: request.accessGroup,
            accessibility: request.accessibility,
            accessControlFlags: request.accessControlFlags,
            synchronizable: request.synchronizable,
            data: value,
            returns: [.attributes, .persistentRef]
        )
        let record: ItemRecord?
        do {
            record = try add(item, caller: caller, trusted: trusted, admit: admit)
        } catch {
            if let hardwareBlob, let provider = device.hardwareKeys { try? provider.deleteKey(keyBlob: hardwareBlob) }
            throw error
        }
        guard let record, let reference = record.persistentRef else {
            throw KeychainError(KeychainStatus.internalComponent, "the new key item has no reference")
        }
        return KeyDescription(
            reference: .item(reference),
            publicKey: publicKey,
            isPrivate: true,
            inHardware: request.inHardware,
            isExtractable: !request.inHardware && request.isExtractable,
            attributes: Self.describedAttributes(record.attributes, record.accessibility)
        )
    }

    /// Keeps a key generated with `kSecAttrIsPermanent` false, with its request's access-control flags, and
    /// describes it.
    private func holdTransientKey(
        _ material: TransientKey.Material,
        _ publicKey: PublicKeyMaterial,
        _ request: KeyGenerationRequest,
        _ given: [String: AttributeValue]
    ) -> KeyDescription {
        var key = TransientKey(
            material: material,
            publicKey: publicKey,
            accessibility: request.accessibility,
            accessControlFlags: request.accessControlFlags,
            isExtractable: false,
            attributes: [:]
        )
        key.isExtractable = !key.inHardware && request.isExtractable
        key.attributes = Self.keyAttributes(request, publicKey: publicKey, inHardware: key.inHardware, base: given)
        if let flags = request.accessControlFlags { key.attributes[AttributeKey.accessControl] = .int(Int64(flags)) }
        key.attributes = Self.describedAttributes(key.attributes, request.accessibility)
        let id = Data(randomBytes(16))
        transientKeys[id] = key
        return KeyDescription(
            reference: .transient(id),
            publicKey: publicKey,
            isPrivate: true,
            inHardware: key.inHardware,
            isExtractable: key.isExtractable,
            attributes: key.attributes
        )
    }

    /// A key's attributes as `SecKeyCopyAttributes` reports them: with its accessibility (`pdmn`), which Apple's
    /// lists and a `kSecAttrAccessControl` is made with.
    static func describedAttributes(
        _ attributes: [String: AttributeValue],
        _ accessibility: Accessibility?
    ) -> [String: AttributeValue] {
        var described = attributes
        if let accessibility { described[AttributeKey.accessible] = .string(accessibility.rawValue) }
        return described
    }

    static func keyAttributes(
        _ request: KeyGenerationRequest,
        publicKey: PublicKeyMaterial,
        inHardware: Bool,
        base: [String: AttributeValue]
    ) -> [String: AttributeValue] {
        var attributes = base
        attributes[AttributeKey.keyClass] = .string(keyClassPrivate)
        attributes[AttributeKey.applicationLabel] = .data(publicKey.applicationLabel)
        attributes[AttributeKey.type] = .string(request.keyType.typeCode)
        attributes[AttributeKey.keySizeInBits] = .int(Int64(request.keyType.bits))
        attributes[AttributeKey.effectiveKeySize] = .int(Int64(request.keyType.bits))
        attributes[AttributeKey.isPermanent] = .bool(request.isPermanent)
        attributes[AttributeKey.isExtractable] = .bool(!inHardware && request.isExtractable)
        attributes[AttributeKey.isSensitive] = .bool(inHardware || !request.isExtractable)
        attributes[AttributeKey.canSign] = .bool(true)
        attributes[AttributeKey.canDecrypt] = .bool(true)
        attributes[AttributeKey.canDerive] = .bool(true)
        if inHardware { attributes[AttributeKey.tokenID] = .string(hardwareTokenID) }
        return attributes
    }

    // MARK: Attributes read from the data

    /// Fills the attributes a key's material or a certificate's DER determines (an add).
    static func completeAttributes(
        _ attributes: inout [String: AttributeValue],
        itemClass: ItemClass,
        data: Data
    )
        throws(KeychainError)
    {
        switch itemClass {
        case .certificate:
            let fields = try CertificateFields(der: data)
            attributes[AttributeKey.certificateType] = .int(Int64(fields.certificateType))
            attributes[AttributeKey.certificateEncoding] = .int(3)
            attributes[AttributeKey.subject] = .data(fields.subject)
            attributes[AttributeKey.issuer] = .data(fields.issuer)
            attributes[AttributeKey.serialNumber] = .data(fields.serialNumber)
            attributes[AttributeKey.publicKeyHash] = .data(fields.publicKeyHash)
            attributes[AttributeKey.subjectKeyID] = fields.subjectKeyID.map { .data($0) }
            if attributes[AttributeKey.label] == nil, let summary = fields.subjectSummary {
                attributes[AttributeKey.label] = .string(summary)
            }
        case .key:
            guard attributes[AttributeKey.tokenID] == nil else { return }  // generated: complete already
            // A key item without key data (twilio-verify-ios adds one as an alias: a class, a label, an accessibility)
            // is kept with its attributes alone, as Apple's keychain keeps it: nothing to derive, its primary-key
            // attributes at their defaults. No SecKey comes of it (kSecReturnRef finds no key in it).
            guard !data.isEmpty else { return }
            guard case .string(let keyClass)? = attributes[AttributeKey.keyClass] else {
                throw KeychainError(KeychainStatus.param, "a key item needs its key class (kSecAttrKeyClass)")
            }
            guard case .string(let typeCode)? = attributes[AttributeKey.type] else {
                throw KeychainError(KeychainStatus.param, "a key item needs its key type (kSecAttrKeyType)")
            }
            let bits: Int
            switch keyClass {
            case keyClassSymmetric:
                bits = data.count * 8
            case keyClassPrivate, keyClassPublic:
                let publicKey = try publicKeyOf(keyClass: keyClass, typeCode: typeCode, data: data)
                bits = publicKey.keyType.bits
                if attributes[AttributeKey.applicationLabel] == nil {
                    attributes[AttributeKey.applicationLabel] = .data(publicKey.applicationLabel)
                }
            default:
                throw KeychainError(KeychainStatus.param, "key class \(keyClass) is not 0, 1 or 2")
            }
            if case .int(let given)? = attributes[AttributeKey.keySizeInBits], given != Int64(bits) {
                throw KeychainError(KeychainStatus.param, "the key has \(bits) bits, not \(given)")
            }
            attributes[AttributeKey.keySizeInBits] = .int(Int64(bits))
            if attributes[AttributeKey.effectiveKeySize] == nil {
                attributes[AttributeKey.effectiveKeySize] = .int(Int64(bits))
            }
            if attributes[AttributeKey.isExtractable] == nil { attributes[AttributeKey.isExtractable] = .bool(true) }
            if attributes[AttributeKey.isPermanent] == nil { attributes[AttributeKey.isPermanent] = .bool(true) }
        default:
            break
        }
    }

    /// The public key of a key item's data: a public key as it is, a private key's derived.
    static func publicKeyOf(keyClass: String, typeCode: String, data: Data) throws(KeychainError) -> PublicKeyMaterial {
        let keyType: KeyType
        var data = data
        switch typeCode {
        case KeyType.ecTypeCode:
            let curveBits: [Int: Int] =
                keyClass == keyClassPublic ? [65: 256, 97: 384, 133: 521] : [97: 256, 145: 384, 199: 521]
            guard let bits = curveBits[data.count] else {
                throw KeychainError(
                    KeychainStatus.param,
                    "\(data.count) bytes is not an EC key's external representation"
                )
            }
            keyType = .ec(bits: bits)
        case KeyType.rsaTypeCode:
            // A public key may come as an X.509 SubjectPublicKeyInfo too, as Apple accepts; it is kept as PKCS#1.
            if keyClass == keyClassPublic, let pkcs1 = RSAOperations.pkcs1PublicKey(data) { data = pkcs1 }
            guard let bits = rsaBits(keyClass: keyClass, data) else {
                throw KeychainError(KeychainStatus.param, "the data is not a PKCS#1 RSA key")
            }
            keyType = try KeyType(typeCode: typeCode, bits: bits)
        default:
            throw KeychainError(KeychainStatus.param, "key type \(typeCode) is not supported (EC \"73\" or RSA \"42\")")
        }
        if keyClass == keyClassPublic { return try PublicKeyMaterial(keyType: keyType, bytes: data) }
        return try SoftwarePrivateKey(keyType: keyType, material: SecretBytes(copying: data)).publicKey()
    }

    private static func rsaBits(keyClass: String, _ data: Data) -> Int? {
        if keyClass == keyClassPublic { return try? RSAOperations.bits(ofPublicKey: data) }
        return try? RSAOperations.bits(ofPrivateKey: SecretBytes(copying: data))
    }

    // MARK: Using keys

    /// Resolves a private key for one operation: the item is found as a lookup finds it (the caller's groups, the
    /// lock state: a locked class is errSecInteractionNotAllowed), and a hardware key's authorization derived — once,
    /// then kept prepared while its class stays available and the store unchanged (``preparedKey(_:caller:)``). A key
    /// that is not stored is gated by its class as well. Either way its access-control flags are checked here, at
    /// each use, by the one ``requireAuthentication(_:caller:)``.
    func withPrivateKey<T>(
        _ reference: KeyReference,
        caller: Caller,
        _ body: (PrivateKeyHandle) throws -> T
    ) throws
        -> T
    {
        switch reference {
        case .transient(let id):
            let key = try transientKey(id)
            _ = try requireClassKey(key.accessibility)
            try requireAuthentication(key.accessControlFlags, caller: caller)
            switch key.material {
            case .software(let software):
                return try body(.software(software))
            case .hardware(let blob, let seed):
                let handle = HardwareKeyHandle(
                    provider: try hardwareProvider(),
                    blob: blob,
                    authorization: hardwareAuthorization(seed),
                    publicKey: key.publicKey
                )
                return try body(.hardware(handle))
            }
        case .item(let persistentRef):
            let key = try preparedKey(persistentRef, caller: caller)
            try requireAuthentication(key.accessControlFlags, caller: caller)
            return try body(key.handle)
        }
    }

    /// Refuses a use of a key whose access-control `flags` ask for an authentication the request does not carry
    /// (errSecInteractionNotAllowed; errSecAuthFailed for a constraint the store cannot meet).
    func requireAuthentication(_ flags: UInt?, caller: Caller) throws(KeychainError) {
        var authentication = AuthenticationCheck(caller: caller)
        guard try authentication.check(flags: flags, engine: self) == .allowed else {
            throw KeychainError(KeychainStatus.interactionNotAllowed, ItemAuthentication.requiredMessage)
        }
    }

    private func transientKey(_ id: Data) throws(KeychainError) -> TransientKey {
        guard let key = transientKeys[id] else { throw KeychainError(KeychainStatus.param, "the key was released") }
        return key
    }

    func keyRecord(_ persistentRef: Data, caller: Caller) throws -> ItemRecord {
        let query = ItemQuery(
            itemClass: .key,
            synchronizable: .any,
            persistentRef: persistentRef,
            returns: [.data, .attributes]
        )
        guard let record = try findItems(query, caller: caller).first else { throw KeychainError.itemNotFound }
        return record
    }

    func describeKey(_ reference: KeyReference, caller: Caller) throws -> KeyDescription {
        switch reference {
        case .transient(let id):
            let key = try transientKey(id)
            return KeyDescription(
                reference: reference,
                publicKey: key.publicKey,
                isPrivate: true,
                inHardware: key.inHardware,
                isExtractable: key.isExtractable,
                attributes: key.attributes
            )
        case .item(let persistentRef):
            var record = try keyRecord(persistentRef, caller: caller)
            let data = record.data ?? Data()
            record.data = nil
            let keyClass = record.string(AttributeKey.keyClass) ?? ""
            let inHardware = record.string(AttributeKey.tokenID) == Self.hardwareTokenID
            let publicKey: PublicKeyMaterial
            if inHardware {
                publicKey = try PublicKeyMaterial(keyType: .p256, bytes: HardwareKeyValue(decoding: data).publicKey)
            } else {
                publicKey = try Self.publicKeyOf(
                    keyClass: keyClass,
                    typeCode: record.string(AttributeKey.type) ?? "",
                    data: data
                )
            }
            var extractable = true
            if case .bool(let flag)? = record.attributes[AttributeKey.isExtractable] { extractable = flag }
            return KeyDescription(
                reference: reference,
                publicKey: publicKey,
                isPrivate: keyClass == Self.keyClassPrivate,
                inHardware: inHardware,
                isExtractable: extractable && !inHardware,
                attributes: Self.describedAttributes(record.attributes, record.accessibility)
            )
        }
    }

    /// A software private key's material, where `kSecAttrIsExtractable` allows; a hardware key's never
    /// (errSecUnimplemented, as Apple answers for a Secure Enclave key).
    func exportPrivateKey(_ reference: KeyReference, caller: Caller) throws -> Data {
        let persistentRef: Data
        switch reference {
        case .item(let item):
            persistentRef = item
        case .transient(let id):
            let key = try transientKey(id)
            guard case .software(let software) = key.material else {
                throw KeychainError(KeychainStatus.unimplemented, "a hardware private key cannot be exported")
            }
            guard key.isExtractable else {
                throw KeychainError(KeychainStatus.dataNotAvailable, "the key is not extractable")
            }
            _ = try requireClassKey(key.accessibility)
            try requireAuthentication(key.accessControlFlags, caller: caller)
            return software.material.withUnsafeBytes { Data($0) }
        }
        let record = try keyRecord(persistentRef, caller: caller)
        if record.string(AttributeKey.tokenID) == Self.hardwareTokenID {
            throw KeychainError(KeychainStatus.unimplemented, "a hardware private key cannot be exported")
        }
        if case .bool(false)? = record.attributes[AttributeKey.isExtractable] {
            throw KeychainError(KeychainStatus.dataNotAvailable, "the key is not extractable")
        }
        // A key whose access control asks for user presence gives its material only after an authentication.
        try requireAuthentication(Self.accessControlFlags(record.attributes), caller: caller)
        return record.data ?? Data()
    }

    /// Stores a key that was not stored as a private key item (`SecItemAdd` with the key as `kSecValueRef`); the
    /// transient reference is then spent. A hardware key's seed moves into the item, sealed under the item's class; a
    /// software key's material likewise. The key's access control goes with it: an add cannot drop the
    /// authentication it asks for (`accessControlFlags`, the add's, apply only to a key made without such flags).
    func persistTransientKey(
        _ id: Data,
        attributes given: [String: AttributeValue],
        accessGroup: String?,
        accessibility: Accessibility?,
        accessControlFlags: UInt?,
        synchronizable: Bool,
        caller: Caller
    ) throws -> KeyDescription {
        let key = try transientKey(id)
        var flags = key.accessControlFlags
        if (flags ?? 0) & AccessControlFlag.authenticationConstraints == 0, let accessControlFlags {
            flags = accessControlFlags
        }
        let request = KeyGenerationRequest(
            keyType: key.publicKey.keyType,
            inHardware: key.inHardware,
            isPermanent: true,
            attributes: given,
            accessGroup: accessGroup,
            accessibility: accessibility ?? key.accessibility,
            accessControlFlags: flags,
            synchronizable: synchronizable,
            isExtractable: key.isExtractable
        )
        var attributes = Self.keyAttributes(request, publicKey: key.publicKey, inHardware: key.inHardware, base: given)
        var trusted: [String: AttributeValue] = [:]
        let value: Data
        switch key.material {
        case .hardware(let blob, let seed):
            trusted[AttributeKey.tokenID] = attributes.removeValue(forKey: AttributeKey.tokenID)
            value = HardwareKeyValue(seed: seed, publicKey: key.publicKey.bytes, blob: blob).encoded()
        case .software(let software):
            value = software.material.withUnsafeBytes { Data($0) }
        }
        let item = NewItem(
            itemClass: .key,
            attributes: attributes,
            accessGroup: accessGroup,
            accessibility: request.accessibility,
            accessControlFlags: flags,
            synchronizable: synchronizable,
            data: value,
            returns: [.attributes, .persistentRef]
        )
        guard let record = try add(item, caller: caller, trusted: trusted), let reference = record.persistentRef else {
            throw KeychainError(KeychainStatus.internalComponent, "the new key item has no reference")
        }
        transientKeys[id] = nil
        return KeyDescription(
            reference: .item(reference),
            publicKey: key.publicKey,
            isPrivate: true,
            inHardware: key.inHardware,
            isExtractable: key.isExtractable,
            attributes: Self.describedAttributes(record.attributes, record.accessibility)
        )
    }

    /// Forgets a key that was not stored and removes what the hardware holds for it.
    func releaseTransientKey(_ id: Data) {
        guard let key = transientKeys.removeValue(forKey: id) else { return }
        if case .hardware(let blob, _) = key.material { try? device.hardwareKeys?.deleteKey(keyBlob: blob) }
    }

    /// The hardware keys `caller` can be charged with (keyseald's per-uid quota of hardware objects): the key items of
    /// its access groups (every group for nil) whose `tkid` is the device key's hardware. A row whose class key is
    /// unavailable, or whose attributes do not open, cannot be told apart and counts as one: the count never falls
    /// short. Reads and opens only key rows' attributes.
    func hardwareKeyCount(caller: Caller) throws(KeychainError) -> Int {
        let groups = caller.accessGroups.map { $0.map { RowFilter.GroupTerm(group: $0) } }
        if let groups, groups.isEmpty { return 0 }
        var count = 0
        for row in try store.rows(RowFilter(itemClass: ItemClass.key.rawValue, groups: groups)) {
            guard let accessibility = Accessibility(rawValue: row.accessibility),
                let classKey = classKeys[accessibility],
                let plain = try? ItemEnvelope.openAttributes(
                    row.sealed,
                    aad: row.header(storeID: storeID).encoded(),
                    itemID: row.itemID,
                    classKey: classKey
                ),
                let attributes = try? AttributeCodec.decode(plain)
            else {
                count += 1
                continue
            }
            if case .string(Self.hardwareTokenID)? = attributes[AttributeKey.tokenID] { count += 1 }
        }
        return count
    }

    // MARK: Keys in lookups and deletes

    /// A lookup that asks for the data of keys: a key whose material may not leave (a hardware key, or a key that is
    /// not extractable) fails the call with errSecDataNotAvailable, never returning its material.
    func checkKeyData(_ records: [ItemRecord]) throws(KeychainError) {
        for record in records where record.data != nil {
            if record.string(AttributeKey.tokenID) != nil {
                throw KeychainError(
                    KeychainStatus.dataNotAvailable,
                    "a hardware key's material never leaves the hardware"
                )
            }
            if case .bool(false)? = record.attributes[AttributeKey.isExtractable] {
                throw KeychainError(KeychainStatus.dataNotAvailable, "the key is not extractable")
            }
        }
    }

    /// The blobs of the hardware keys among `matches`, for ``HardwareKeyProvider/deleteKey(keyBlob:)`` once their
    /// rows are gone.
    func hardwareBlobs(_ matches: [Match]) throws -> [Data] {
        var blobs: [Data] = []
        for match in matches where match.row.itemClass == ItemClass.key.rawValue {
            guard case .string(Self.hardwareTokenID)? = match.attributes[AttributeKey.tokenID] else { continue }
            let value = try ItemEnvelope.openValue(
                match.row.sealed,
                aad: match.aad,
                classKey: try requireClassKey(Self.accessibility(of: match.row))
            )
            blobs.append(try HardwareKeyValue(decoding: value).blob)
        }
        return blobs
    }

    // MARK: Identities

    /// Identities: certificates whose `pkhh` equals a private key's `klbl` in the same access group, in the
    /// certificates' order. Key attributes in the query are matched against the key, the others against the
    /// certificate.
    func identities(_ query: ItemQuery, caller: Caller) throws -> [ItemRecord] {
        var certificateQuery = query
        certificateQuery.itemClass = .certificate
        certificateQuery.attributes = query.attributes.filter { !AttributeKey.isKeyOnly($0.key) }
        certificateQuery.limit = .all
        certificateQuery.returns = [.attributes, .persistentRef, .data]
        let keyAttributes = query.attributes.filter { AttributeKey.isKeyOnly($0.key) }
        var result: [ItemRecord] = []
        for certificate in try findAll(certificateQuery, caller: caller) {
            guard case .string(let group)? = certificate.attributes[AttributeKey.accessGroup],
                case .data(let hash)? = certificate.attributes[AttributeKey.publicKeyHash]
            else { continue }
            var attributes = keyAttributes
            attributes[AttributeKey.keyClass] = .string(Self.keyClassPrivate)
            attributes[AttributeKey.applicationLabel] = .data(hash)
            let keyQuery = ItemQuery(
                itemClass: .key,
                attributes: attributes,
                accessGroup: group,
                synchronizable: .any,
                limit: .one,
                returns: [.persistentRef]
            )
            guard let key = try findAll(keyQuery, caller: caller).first else { continue }
            result.append(
                ItemRecord(
                    itemClass: .identity,
                    attributes: query.returns.contains(.attributes) ? certificate.attributes : [:],
                    data: query.returns.contains(.data) ? certificate.data : nil,
                    persistentRef: certificate.persistentRef,
                    keyPersistentRef: key.persistentRef
                )
            )
            if let bound = query.limit.bound, result.count >= bound { break }
        }
        guard !result.isEmpty else { throw KeychainError.itemNotFound }
        return result
    }

    /// Deletes identities: each certificate, and its private key unless another certificate in the group still
    /// uses that key.
    func deleteIdentities(_ query: ItemQuery, caller: Caller) throws {
        var all = query
        all.limit = .all
        all.returns = [.attributes, .persistentRef]
        let found = try identities(all, caller: caller)
        for identity in found {
            guard let certificateRef = identity.persistentRef, let keyRef = identity.keyPersistentRef,
                case .string(let group)? = identity.attributes[AttributeKey.accessGroup],
                case .data(let hash)? = identity.attributes[AttributeKey.publicKeyHash]
            else { continue }
            try delete(
                ItemQuery(itemClass: .certificate, synchronizable: .any, persistentRef: certificateRef),
                caller: caller
            )
            let others = ItemQuery(
                itemClass: .certificate,
                attributes: [AttributeKey.publicKeyHash: .data(hash)],
                accessGroup: group,
                synchronizable: .any,
                limit: .one
            )
            guard try findAll(others, caller: caller).isEmpty else { continue }
            try delete(ItemQuery(itemClass: .key, synchronizable: .any, persistentRef: keyRef), caller: caller)
        }
    }

    /// ``findItems(_:caller:resultLimit:)``, with nothing found as an empty array.
    func findAll(_ query: ItemQuery, caller: Caller) throws -> [ItemRecord] {
        do {
            return try findItems(query, caller: caller)
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
            return []
        }
    }
}
