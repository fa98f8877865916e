import Crypto
import Foundation
import Keyseal
import KeysealCore

/// What a ``SoftwareHardwareKeyDevice`` saw: the authorizations it was given and the blobs it was told to delete.
public final class SoftwareHardwareKeyLog: @unchecked Sendable {
    private let lock = NSLock()
    private var _authorizations: [Data] = []
    private var _deleted: [Data] = []
    private var _keys: [Data: (key: P256.Signing.PrivateKey, authorization: Data)] = [:]

    public init() {}

    /// Every authorization a key was generated or used with (test double only: real hardware never reports them).
    public var authorizations: [Data] { lock.withLock { _authorizations } }
    public var deletedBlobs: [Data] { lock.withLock { _deleted } }
    public var liveKeys: Int { lock.withLock { _keys.count } }

    func generate(authorization: Data) -> (blob: Data, key: P256.Signing.PrivateKey) {
        let key = P256.Signing.PrivateKey()
        let blob = Data(randomBytes(24))
        lock.withLock {
            _keys[blob] = (key, authorization)
            _authorizations.append(authorization)
        }
        return (blob, key)
    }

    func key(_ blob: Data, authorization: Data) throws -> P256.Signing.PrivateKey {
        try lock.withLock {
            _authorizations.append(authorization)
            guard let entry = _keys[blob] else { throw KeychainError(KeychainStatus.decode, "unknown key blob") }
            guard entry.authorization == authorization else {
                throw KeychainError(KeychainStatus.authFailed, "wrong authorization for the key")
            }
            return entry.key
        }
    }

    func delete(_ blob: Data) {
        lock.withLock {
            _deleted.append(blob)
            _keys[blob] = nil
        }
    }
}

/// A host-key device that also offers ``HardwareKeyProvider`` with P-256 keys in this process: the engine's unit
/// tests of hardware keys, on a machine where the backend under test has no key hardware. Never a real backend.
public final class SoftwareHardwareKeyDevice: DeviceKeyProvider, HardwareKeyProvider {
    let inner: any DeviceKeyProvider
    let log: SoftwareHardwareKeyLog

    public init(hostKeyFile: URL, log: SoftwareHardwareKeyLog) throws {
        inner = try KeychainStoreTestHooks.hostKeyProvider(file: hostKeyFile)
        self.log = log
    }

    /// A device key over this double.
    public static func deviceKey(hostKeyFile: URL, log: SoftwareHardwareKeyLog) -> DeviceKey {
        DeviceKey(description: "host key with software key hardware") {
            try SoftwareHardwareKeyDevice(hostKeyFile: hostKeyFile, log: log)
        }
    }

    public var backendName: String { inner.backendName }
    public func open(provisioning: Bool) throws { try inner.open(provisioning: provisioning) }
    public func deviceIdentity() throws -> Data { try inner.deviceIdentity() }
    public func seal(_ secret: SecretBytes) throws -> Data { try inner.seal(secret) }
    public func unseal(_ blob: Data) throws -> SecretBytes { try inner.unseal(blob) }
    public func sealWithPasscode(_ secret: SecretBytes, authorization: SecretBytes) throws -> Data {
        try inner.sealWithPasscode(secret, authorization: authorization)
    }
    public func unsealWithPasscode(_ blob: Data, authorization: SecretBytes) throws -> SecretBytes {
        try inner.unsealWithPasscode(blob, authorization: authorization)
    }
    public func status() throws -> DeviceKeyStatus { try inner.status() }
    public func close() { inner.close() }

    public func generateP256Key(authorization: SecretBytes) throws -> HardwareKeyBlob {
        let (blob, key) = log.generate(authorization: authorization.withUnsafeBytes { Data($0) })
        return HardwareKeyBlob(blob: blob, publicKey: key.publicKey.x963Representation)
    }

    public func sign(digest: [UInt8], keyBlob: Data, authorization: SecretBytes) throws -> Data {
        let key = try log.key(keyBlob, authorization: authorization.withUnsafeBytes { Data($0) })
        return try key.signature(for: RawDigest(bytes: digest)).derRepresentation
    }

    public func keyExchange(peerPublicKey: Data, keyBlob: Data, authorization: SecretBytes) throws -> SecretBytes {
        let key = try log.key(keyBlob, authorization: authorization.withUnsafeBytes { Data($0) })
        let agreement = try P256.KeyAgreement.PrivateKey(rawRepresentation: key.rawRepresentation)
        let shared = try agreement.sharedSecretFromKeyAgreement(
            with: P256.KeyAgreement.PublicKey(x963Representation: peerPublicKey)
        )
        return shared.withUnsafeBytes { SecretBytes(copying: $0) }
    }

    public func deleteKey(keyBlob: Data) throws { log.delete(keyBlob) }
}

/// A digest given as bytes, for swift-crypto's ECDSA over a digest.
struct RawDigest: Digest {
    static var byteCount: Int { 32 }
    let bytes: [UInt8]
    func makeIterator() -> IndexingIterator<[UInt8]> { bytes.makeIterator() }
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }
    var description: String { "raw digest" }
}

/// A store whose device key offers hardware keys: on the host-key backend the software double above; on the TPM
/// and PKCS#11 backends the real hardware (swtpm, SoftHSM2) through ``StoreFixture``.
public final class HardwareKeyStoreFixture: @unchecked Sendable {
    public let store: KeychainStore
    /// The double's log on the host-key backend; nil on real hardware.
    public let log: SoftwareHardwareKeyLog?
    private let fixture: StoreFixture?
    private let root: TemporaryDirectory?
    public let storeDirectory: URL

    public init() throws {
        if TestBackend.current == .hostKey && !TestBackend.throughDaemon {
            let root = try TemporaryDirectory(prefix: "keyseal-hwkeys")
            let log = SoftwareHardwareKeyLog()
            storeDirectory = root.appending("store")
            store = try KeychainStore.embedded(
                directory: storeDirectory,
                device: SoftwareHardwareKeyDevice.deviceKey(hostKeyFile: root.appending("host.key"), log: log),
                configuration: KeychainStore.Configuration(argon2: testArgon2)
            )
            self.root = root
            self.log = log
            fixture = nil
        } else {
            let fixture = try StoreFixture()
            self.fixture = fixture
            store = fixture.store
            storeDirectory = fixture.storeDirectory
            log = nil
            root = nil
        }
    }

    public var databasePath: String { storeDirectory.appendingPathComponent("keyseal.db").path }

    public func remove() {
        if let fixture {
            fixture.remove()
        } else {
            store.close()
            root?.remove()
        }
    }
}
