import Foundation
import Keyseal
import KeysealCore
import Synchronization

// Apple's SecKey API over Keyseal: software keys with swift-crypto (P-256/384/521, RSA 2048–4096), and keys in
// this device's hardware (`kSecAttrTokenIDSecureEnclave`: the store's TPM or PKCS#11 token). Errors are `CFError`s
// in `NSOSStatusErrorDomain` whose code is the OSStatus.

/// A key: a public key, a software private key held by this process, or a private key held by the store (its
/// item, or a hardware key generated without being stored). A stored key's private material never comes here.
public final class SecKey: Sendable {
    enum Backing: Sendable {
        case publicKey(PublicKeyMaterial)
        case software(SoftwareKey)
        case stored(KeychainStore, KeyDescription)
    }

    /// Changes once at most: a transient hardware key that `SecItemAdd` stores becomes that item's key.
    private let state: Mutex<Backing>

    var backing: Backing { state.withLock { $0 } }

    init(_ backing: Backing) { state = Mutex(backing) }

    func replace(_ backing: Backing) { state.withLock { $0 = backing } }

    deinit {
        ItemAuthenticationRunner.forget(self)
        // A hardware key that was never stored lives as long as its last reference.
        if case .stored(let store, let description) = backing, case .transient = description.reference {
            store.releaseKey(description.reference)
        }
    }

    var keyType: KeyType {
        switch backing {
        case .publicKey(let key): key.keyType
        case .software(let key): key.keyType
        case .stored(_, let description): description.publicKey.keyType
        }
    }

    var isPrivate: Bool {
        switch backing {
        case .publicKey: false
        case .software: true
        case .stored(_, let description): description.isPrivate
        }
    }

    var inHardware: Bool {
        if case .stored(_, let description) = backing { return description.inHardware }
        return false
    }

    func publicMaterial() throws(KeychainError) -> PublicKeyMaterial {
        switch backing {
        case .publicKey(let key): key
        case .software(let key): try key.publicKey()
        case .stored(_, let description): description.publicKey
        }
    }
}

/// Equal as Core Foundation compares Apple's keys (`CFEqual`, Security's `SecKeyEqual`): the same object; else two
/// public keys with the same key (a public key read back from the keychain equals the one that was stored, as
/// twilio-verify-ios's tests compare them); two private keys of this process with the same key; two keys of the store
/// that are the same stored or generated key. A public and a private key, or a process's and the store's private key,
/// are never equal (on Apple their key classes differ). The hash is the public key's, so it touches no private
/// material.
extension SecKey: Hashable {
    public static func == (lhs: SecKey, rhs: SecKey) -> Bool {
        if lhs === rhs { return true }
        guard lhs.isPrivate == rhs.isPrivate else { return false }
        switch (lhs.backing, rhs.backing) {
        case (.stored(let left, let leftKey), .stored(let right, let rightKey)) where lhs.isPrivate:
            return left === right && leftKey.reference == rightKey.reference
        case (.software, .software) where lhs.isPrivate:
            break
        default:
            guard !lhs.isPrivate else { return false }
        }
        guard let left = try? lhs.publicMaterial(), let right = try? rhs.publicMaterial() else { return false }
        return left == right
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(isPrivate)
        hasher.combine(try? publicMaterial())
    }
}

public func SecKeyGetTypeID() -> CFTypeID { 0x5ec1 }

public enum SecKeyOperationType: Int, Sendable {
    case sign = 0
    case verify = 1
    case encrypt = 2
    case decrypt = 3
    case keyExchange = 4
}

/// `SecKeyCopyKeyExchangeResult` parameters.
public struct SecKeyKeyExchangeParameter: RawRepresentable, Hashable, Sendable {
    let name: String
    public var rawValue: CFString { NSString(string: name) }
    public init(rawValue: CFString) { name = rawValue as String }
    public static let requestedSize = SecKeyKeyExchangeParameter(rawValue: "requestedSize")
    public static let sharedInfo = SecKeyKeyExchangeParameter(rawValue: "sharedInfo")
}

nonisolated(unsafe) public let kSecKeyKeyExchangeParameterRequestedSize: CFString = "requestedSize"
nonisolated(unsafe) public let kSecKeyKeyExchangeParameterSharedInfo: CFString = "sharedInfo"

// MARK: - Errors

/// A `CFError` in `NSOSStatusErrorDomain` whose code is the status, as Security's `SecError` makes one: the message
/// under Core Foundation's `kCFErrorDescriptionKey` ("NSDescription"), and the localized description Core Foundation
/// composes from it on Apple, "The operation couldn’t be completed. (OSStatus error -50 - message)" (U+2019, and the
/// domain shown as "OSStatus"), which swift-corelibs-foundation does not compose, so it is given. `detail`, when
/// Apple's message says less than Keyseal knows, goes under "NSDebugDescription".
func secError(_ error: KeychainError, message: String? = nil) -> CFError {
    let description = message ?? error.message
    var userInfo: [String: Any] = [
        cfErrorDescriptionKey: description,
        NSLocalizedDescriptionKey:
            "The operation couldn\u{2019}t be completed. (OSStatus error \(error.status) - \(description))",
    ]
    if message != nil { userInfo[NSDebugDescriptionErrorKey] = error.message }
    return NSError(domain: NSOSStatusErrorDomain, code: Int(error.status), userInfo: userInfo)
}

/// Core Foundation's `kCFErrorDescriptionKey`: the error's description, not localized.
let cfErrorDescriptionKey = "NSDescription"

// MARK: - Creating keys

/// Parameters of `SecKeyCreateRandomKey` and `SecKeyGeneratePair`. As on Apple, every optional attribute of the
/// top level applies to both halves, and `kSecPrivateKeyAttrs` / `kSecPublicKeyAttrs` override it for one half.
struct KeyParameters {
    var request: KeyGenerationRequest
    /// The public half's item when that half is permanent: its attributes, without the key's data yet.
    var publicItem: NewItem?

    init(_ parameters: [String: Any]) throws(KeychainError) {
        // Apple's SecKeyGeneratePair answers errSecUnsupportedAlgorithm, which is errSecUnimplemented (−4) in its
        // SecBasePriv.h, to a missing key type and to one that is neither EC nor RSA without a token; what the EC and
        // RSA generators refuse (a size, an attribute) is errSecParam.
        guard let type = parameters[kSecAttrKeyType] as? String else {
            throw KeychainError(KeychainStatus.unimplemented, "kSecAttrKeyType is required")
        }
        guard parameters[kSecAttrTokenID] != nil || type == kSecAttrKeyTypeEC || type == kSecAttrKeyTypeRSA else {
            throw KeychainError(
                KeychainStatus.unimplemented,
                "key type \(type) is not supported (EC \"73\" or RSA \"42\")"
            )
        }
        let bitsValue = parameters[kSecAttrKeySizeInBits]
        guard let bits = bitsValue.flatMap({ DictionaryRequests.integer($0) ?? ($0 as? String).flatMap { Int($0) } })
        else { throw KeychainError(KeychainStatus.param, "kSecAttrKeySizeInBits is required") }
        var request = KeyGenerationRequest(keyType: try KeyType(typeCode: type, bits: bits), isPermanent: false)
        if let token = parameters[kSecAttrTokenID] {
            guard token as? String == kSecAttrTokenIDSecureEnclave else {
                throw KeychainError(KeychainStatus.param, "unknown token \(token)")
            }
            request.inHardware = true
        }
        let privateHalf = try Self.half(parameters, kSecPrivateKeyAttrs)
        request.isPermanent = privateHalf.isPermanent
        request.isExtractable = privateHalf.isExtractable
        request.attributes = privateHalf.settable.attributes
        request.accessGroup = privateHalf.settable.accessGroup
        request.synchronizable = privateHalf.settable.synchronizable ?? false
        let (accessibility, flags) = try privateHalf.settable.accessibility()
        if let accessibility { request.accessibility = accessibility }
        request.accessControlFlags = flags
        if request.inHardware && request.keyType != .p256 {
            throw KeychainError(KeychainStatus.param, "the Secure Enclave token takes only 256-bit EC keys")
        }
        self.request = request

        let publicHalf = try Self.half(parameters, kSecPublicKeyAttrs)
        if publicHalf.isPermanent {
            var item = NewItem(itemClass: .key)
            item.attributes = publicHalf.settable.attributes
            item.attributes[kSecAttrKeyClass] = .string(kSecAttrKeyClassPublic as String)
            item.attributes[kSecAttrKeyType] = .string(request.keyType.typeCode)
            item.accessGroup = publicHalf.settable.accessGroup
            item.synchronizable = publicHalf.settable.synchronizable ?? false
            let (accessibility, flags) = try publicHalf.settable.accessibility()
            if let accessibility { item.accessibility = accessibility }
            item.accessControlFlags = flags
            publicItem = item
        }
    }

    /// One half's attributes: the top level's, then its own dictionary (`nested`) over them.
    private static func half(
        _ parameters: [String: Any],
        _ nested: CFString
    ) throws(KeychainError) -> (
        isPermanent: Bool, isExtractable: Bool, settable: DictionaryRequests.SettableAttributes
    ) {
        var attributes = parameters
        for key in [kSecAttrKeyType, kSecAttrKeySizeInBits, kSecAttrTokenID, kSecPrivateKeyAttrs, kSecPublicKeyAttrs] {
            attributes[key] = nil
        }
        if let own = parameters[nested] {
            guard let own = own as? [String: Any] else {
                throw KeychainError(KeychainStatus.param, "the \(nested) key attributes must be a dictionary")
            }
            attributes.merge(own) { _, new in new }
        }
        var isPermanent = false
        var isExtractable = true
        var settable = DictionaryRequests.SettableAttributes(itemClass: .key)
        for (key, value) in attributes {
            switch key {
            case kSecAttrIsPermanent: isPermanent = try DictionaryRequests.bool(value, key)
            case kSecAttrIsExtractable: isExtractable = try DictionaryRequests.bool(value, key)
            case kSecAttrKeyClass, kSecAttrApplicationLabel, kSecAttrTokenID:
                throw KeychainError(KeychainStatus.param, "\(key) is set by the keychain when it generates a key")
            case kSecReturnRef, kSecReturnData, kSecReturnAttributes, kSecReturnPersistentRef:
                // Apple accepts and ignores them: the key is the result.
                _ = try DictionaryRequests.returnKey(key, value)
            default:
                guard try settable.take(key, value) || key.first == "u" else {
                    throw KeychainError(KeychainStatus.param, "\(key) is not a key generation parameter")
                }
            }
        }
        return (isPermanent, isExtractable, settable)
    }
}

/// Generates a key pair: in this device's hardware with `kSecAttrTokenID: kSecAttrTokenIDSecureEnclave` (P-256;
/// errSecUnimplemented where the store has no key hardware), else in software. A half whose attributes say
/// `kSecAttrIsPermanent` is stored as its own item (the public half with `kSecAttrKeyClassPublic`, found by its own
/// tag and label). Returns the private key.
public func SecKeyCreateRandomKey(
    _ parameters: CFDictionary,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
)
    -> SecKey?
{
    _ = bundleIdentifierInstalled
    // Apple's message for every refusal of SecKeyCreateRandomKey (SecKey.m); Keyseal's reason is the debug description.
    return secKeyCall(error, message: { "Key generation failed, error \($0)" }) { try makeRandomKey(parameters) }
}

func makeRandomKey(_ parameters: CFDictionary) throws -> SecKey {
    let dictionary = try swiftDictionary(parameters)
    let parsed = try KeyParameters(dictionary)
    let request = parsed.request
    // Flags Keyseal cannot enforce (a companion, an application password) are refused for every key, stored or not.
    try RequestValidation.validateAccessControl(request.accessControlFlags)
    let key: SecKey
    let store = KeychainStore.default
    // A software key that is not stored stays in this process unless its access control asks for an authentication:
    // the store then holds it, and checks that at each use as for a stored key.
    let authenticated = (request.accessControlFlags ?? 0) & AccessControlFlag.authenticationConstraints != 0
    if !request.inHardware && !request.isPermanent && !authenticated {
        key = SecKey(.software(try SoftwareKey.generate(request.keyType)))
    } else {
        key = SecKey(.stored(store, try store.generateKey(request)))
    }
    // As on Apple, the generation's `kSecUseAuthenticationContext` and `kSecUseOperationPrompt` (top level, or the
    // private half's) go with the key: its first use presents that context instead of asking again.
    ItemAuthenticationRunner.attach(key, ItemAuthenticationRunner.generationOptions(dictionary))
    if var publicItem = parsed.publicItem {
        publicItem.data = try key.publicMaterial().bytes
        do {
            _ = try store.add(publicItem)
        } catch {
            // Nothing of a failed generation stays behind: the private half stored a moment ago goes too.
            if case .stored(_, let description) = key.backing, case .item(let reference) = description.reference {
                try? store.delete(ItemQuery(itemClass: .key, synchronizable: .any, persistentRef: reference))
            }
            throw error
        }
    }
    return key
}

/// The deprecated pair form of ``SecKeyCreateRandomKey(_:_:)``.
public func SecKeyGeneratePair(
    _ parameters: CFDictionary,
    _ publicKey: UnsafeMutablePointer<SecKey?>?,
    _ privateKey: UnsafeMutablePointer<SecKey?>?
) -> OSStatus {
    do {
        let key = try makeRandomKey(parameters)
        publicKey?.pointee = SecKey(.publicKey(try key.publicMaterial()))
        privateKey?.pointee = key
        return errSecSuccess
    } catch let failure as KeychainError {
        return failure.status
    } catch {
        return errSecInternalComponent
    }
}

/// A key from its external representation: `kSecAttrKeyType` and `kSecAttrKeyClass` say what it is; its size comes
/// from the data, as on Apple, whatever `kSecAttrKeySizeInBits` says. The key is this process's; nothing is stored.
public func SecKeyCreateWithData(
    _ keyData: CFData,
    _ attributes: CFDictionary,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecKey? {
    secKeyCall(error) {
        let attributes = try swiftDictionary(attributes)
        guard let type = attributes[kSecAttrKeyType] as? String, let keyClass = attributes[kSecAttrKeyClass] as? String
        else { throw KeychainError(KeychainStatus.param, "kSecAttrKeyType and kSecAttrKeyClass are required") }
        let publicKey = try PublicKeyMaterial.of(keyClass: keyClass, typeCode: type, data: keyData)
        switch keyClass {
        case kSecAttrKeyClassPublic: return SecKey(.publicKey(publicKey))
        case kSecAttrKeyClassPrivate:
            return SecKey(.software(try SoftwareKey(keyType: publicKey.keyType, externalRepresentation: keyData)))
        default: throw KeychainError(KeychainStatus.param, "key class \(keyClass) is not public or private")
        }
    }
}

// MARK: - Using keys

public func SecKeyCopyPublicKey(_ key: SecKey) -> SecKey? {
    guard let material = try? key.publicMaterial() else { return nil }
    return SecKey(.publicKey(material))
}

public func SecKeyIsAlgorithmSupported(
    _ key: SecKey,
    _ operation: SecKeyOperationType,
    _ algorithm: SecKeyAlgorithm
)
    -> Bool
{
    guard let operation = KeyAlgorithms.Operation(rawValue: operation.rawValue) else { return false }
    // A private key also answers for its public half (Apple's verify and encrypt on a private key).
    let asPrivate = key.isPrivate && operation != .verify && operation != .encrypt
    return KeyAlgorithms.isSupported(
        algorithm.name,
        operation: operation,
        keyType: key.keyType,
        isPrivate: asPrivate,
        inHardware: key.inHardware
    )
}

public func SecKeyCreateSignature(
    _ key: SecKey,
    _ algorithm: SecKeyAlgorithm,
    _ dataToSign: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) {
        guard SecKeyIsAlgorithmSupported(key, .sign, algorithm) else {
            throw KeychainError(KeychainStatus.param, "algorithm not supported by the key")
        }
        switch key.backing {
        case .software(let software): return try software.sign(algorithm: algorithm.name, data: dataToSign)
        case .stored(let store, let description):
            return try ItemAuthenticationRunner.run(key: key) {
                try store.sign(description.reference, algorithm: algorithm.name, data: dataToSign)
            }
        case .publicKey: throw KeychainError(KeychainStatus.param, "algorithm not supported by the key")
        }
    }
}

/// Verifies `signature`; a bad signature is false with errSecVerifyFailed.
public func SecKeyVerifySignature(
    _ key: SecKey,
    _ algorithm: SecKeyAlgorithm,
    _ signedData: CFData,
    _ signature: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> Bool {
    secKeyCall(error) { () throws -> Bool? in
        try KeyAlgorithms.verify(
            key.publicMaterial(),
            algorithm: algorithm.name,
            data: signedData,
            signature: signature
        )
        return true
    } ?? false
}

/// Encrypts with the key's public half (ECIES, RSA OAEP).
public func SecKeyCreateEncryptedData(
    _ key: SecKey,
    _ algorithm: SecKeyAlgorithm,
    _ plaintext: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) {
        try KeyAlgorithms.encrypt(key.publicMaterial(), algorithm: algorithm.name, data: plaintext)
    }
}

public func SecKeyCreateDecryptedData(
    _ key: SecKey,
    _ algorithm: SecKeyAlgorithm,
    _ ciphertext: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) {
        switch key.backing {
        case .software(let software): return try software.decrypt(algorithm: algorithm.name, data: ciphertext)
        case .stored(let store, let description):
            return try ItemAuthenticationRunner.run(key: key) {
                try store.decrypt(description.reference, algorithm: algorithm.name, data: ciphertext)
            }
        case .publicKey: throw KeychainError(KeychainStatus.param, "algorithm not supported by the key")
        }
    }
}

/// ECDH with `publicKey`; `parameters` may give `requestedSize` and `sharedInfo` (the KDF variants need the size).
public func SecKeyCopyKeyExchangeResult(
    _ privateKey: SecKey,
    _ algorithm: SecKeyAlgorithm,
    _ publicKey: SecKey,
    _ parameters: CFDictionary,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) {
        let peer = try publicKey.publicMaterial()
        guard peer.keyType == privateKey.keyType else {
            throw KeychainError(KeychainStatus.param, "the public key is not on the private key's curve")
        }
        let parameters = try swiftDictionary(parameters)
        let size = parameters[kSecKeyKeyExchangeParameterRequestedSize].flatMap(DictionaryRequests.integer)
        let info = parameters[kSecKeyKeyExchangeParameterSharedInfo] as? Data
        switch privateKey.backing {
        case .software(let software):
            return try software.keyExchange(
                algorithm: algorithm.name,
                peer: peer.bytes,
                requestedSize: size,
                sharedInfo: info
            )
        case .stored(let store, let description):
            return try ItemAuthenticationRunner.run(key: privateKey) {
                try store.keyExchange(
                    description.reference,
                    algorithm: algorithm.name,
                    peer: peer.bytes,
                    requestedSize: size,
                    sharedInfo: info
                ).withUnsafeBytes { Data($0) }
            }
        case .publicKey: throw KeychainError(KeychainStatus.param, "algorithm not supported by the key")
        }
    }
}

/// Apple's external representation: RSA PKCS#1, EC public `04 ‖ X ‖ Y`, EC private `04 ‖ X ‖ Y ‖ K`. A hardware
/// private key has none (nil, errSecUnimplemented); a stored software key only if it is extractable.
public func SecKeyCopyExternalRepresentation(
    _ key: SecKey,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
)
    -> CFData?
{
    secKeyCall(error) {
        switch key.backing {
        case .publicKey(let material): return material.bytes
        case .software(let software): return software.externalRepresentation.withUnsafeBytes { Data($0) }
        case .stored(let store, let description):
            guard description.isPrivate else { return description.publicKey.bytes }
            if description.inHardware {
                throw KeychainError(KeychainStatus.unimplemented, "a hardware private key cannot be exported")
            }
            return try ItemAuthenticationRunner.run(key: key) {
                try store.exportPrivateKey(description.reference).withUnsafeBytes { Data($0) }
            }
        }
    }
}

/// The key's attributes: `kcls`, `type`, `bsiz`, `esiz`, `klbl` and, for a stored key, its item's attributes; a
/// hardware key reports `tkid` and `extr` false.
public func SecKeyCopyAttributes(_ key: SecKey) -> CFDictionary? {
    guard let material = try? key.publicMaterial() else { return nil }
    var attributes: [String: Any] = [:]
    if case .stored(_, let description) = key.backing {
        for (name, value) in description.attributes { attributes[name] = DictionaryRequests.plain(value) }
        // An access control is a SecAccessControl, as SecItemCopyMatching gives it (Apple code casts it with as!).
        if case .int(let flags)? = description.attributes[AttributeKey.accessControl],
            case .string(let protection)? = description.attributes[AttributeKey.accessible]
        {
            attributes[kSecAttrAccessControl] = SecAccessControl(
                protection: protection,
                flags: SecAccessControlCreateFlags(rawValue: UInt(truncatingIfNeeded: flags))
            )
        }
    }
    attributes[kSecClass] = kSecClassKey
    attributes[kSecAttrKeyClass] = key.isPrivate ? kSecAttrKeyClassPrivate : kSecAttrKeyClassPublic
    attributes[kSecAttrKeyType] = material.keyType.typeCode
    attributes[kSecAttrKeySizeInBits] = material.keyType.bits
    attributes[kSecAttrEffectiveKeySize] = material.keyType.bits
    attributes[kSecAttrApplicationLabel] = material.applicationLabel
    if key.inHardware {
        attributes[kSecAttrTokenID] = kSecAttrTokenIDSecureEnclave
        attributes[kSecAttrIsExtractable] = false
    } else if attributes[kSecAttrIsExtractable] == nil {
        attributes[kSecAttrIsExtractable] = true
    }
    if case .publicKey = key.backing { attributes[kSecValueData] = material.bytes }
    return attributes
}

/// The key's block size in bytes: RSA the modulus's, EC a coordinate's.
public func SecKeyGetBlockSize(_ key: SecKey) -> Int {
    switch key.keyType {
    case .rsa(let bits): bits / 8
    case .ec(let bits): (bits + 7) / 8
    }
}

/// Runs a SecKey call: a failure fills `error` with a `CFError` in `NSOSStatusErrorDomain` and gives nil. `message`
/// makes the error's description from the status where Apple's says only that (key generation's).
func secKeyCall<T>(
    _ out: UnsafeMutablePointer<Unmanaged<CFError>?>?,
    message: ((OSStatus) -> String)? = nil,
    _ body: () throws -> T?
) -> T? {
    do {
        return try body()
    } catch {
        let failure = error as? KeychainError ?? KeychainError(KeychainStatus.internalComponent, "\(error)")
        out?.pointee = Unmanaged.passRetained(secError(failure, message: message?(failure.status)))
        return nil
    }
}
