import struct FoundationEssentials.Data

/// The device key: hardware (or a host key file) that seals the store's device secret DS, the passcode secret
/// PS, and the device-bound secret of backups.
///
/// The engine calls a provider only while holding its own lock, from one thread at a time; a provider need not
/// be thread-safe. Sealed blobs are opaque to the engine and stored in the keybag, which the engine
/// authenticates before any passcode-protected call.
///
/// Errors are ``KeychainError``s:
/// - wrong passcode authorization: `errSecAuthFailed`, with ``KeychainError/triesLeft`` where the hardware
///   counts failures;
/// - hardware lockout: `errSecAuthFailed` with ``KeychainError/retryAfterSeconds``;
/// - a blob sealed by other hardware, or edited: `errSecDecode`;
/// - hardware missing or unreachable (no TPM at the TCTI, token removed, module missing, wrong PIN):
///   `errSecNotAvailable` with a message that says which.
public protocol DeviceKeyProvider: AnyObject {
    /// The backend name recorded at provisioning; a store refuses to open with another backend.
    var backendName: String { get }

    /// Connects to the hardware. Called once, before any other call. With `provisioning` true (a new store)
    /// the provider creates what it needs (a token key, a host key file); with false everything must already
    /// exist, and a missing key is an error (`errSecNotAvailable`), never a new key.
    func open(provisioning: Bool) throws

    /// Stable identity of the hardware key (the TPM primary's Name, the token key's id, a digest of the host
    /// key). Recorded at provisioning and compared before any unseal, so a store from another device is
    /// refused at once. Must not reveal the key.
    func deviceIdentity() throws -> Data

    /// Seals `secret` with no authorization value. On a TPM the object is `noDA`: unsealing never counts
    /// against the dictionary-attack limit.
    func seal(_ secret: SecretBytes) throws -> Data

    /// Recovers a secret sealed by ``seal(_:)`` on this device.
    func unseal(_ blob: Data) throws -> SecretBytes

    /// Seals `secret` so that it is released only with `authorization` (Argon2id of the passcode). Hardware that
    /// can (a TPM) checks the authorization and counts failures; others return the secret and leave the check
    /// to the engine's key unwrapping.
    func sealWithPasscode(_ secret: SecretBytes, authorization: SecretBytes) throws -> Data

    /// Recovers a secret sealed by ``sealWithPasscode(_:authorization:)``. A hardware-counted backend reads its
    /// lockout counter first and never spends its last try.
    func unsealWithPasscode(_ blob: Data, authorization: SecretBytes) throws -> SecretBytes

    /// What the backend reports for `status`.
    func status() throws -> DeviceKeyStatus

    /// Releases every handle (hardware sessions, modules). Idempotent; later calls fail.
    func close()

    /// Whether `recorded` (the identity a store recorded at provisioning) names this hardware key. The default
    /// compares it with ``deviceIdentity()``; a backend whose keys were replaced by a newer format accepts both.
    func acceptsIdentity(_ recorded: Data) throws -> Bool

    /// Whether `blob` uses an older, weaker format that the engine should seal again (with the same secret) the next
    /// time it holds the secret. The default is false.
    func needsReseal(_ blob: Data) -> Bool
}

extension DeviceKeyProvider {
    public func acceptsIdentity(_ recorded: Data) throws -> Bool { try deviceIdentity() == recorded }
    public func needsReseal(_ blob: Data) -> Bool { false }
}
