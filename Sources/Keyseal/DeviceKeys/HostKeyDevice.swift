import Crypto
import FoundationEssentials
import KeysealCore

#if canImport(Glibc)
import Glibc
#endif

/// The device key of machines without a TPM: 32 random bytes in a 0600 file outside the store directory.
/// Not hardware-backed: whoever reads the file and the store has DS.
final class HostKeyDevice: DeviceKeyProvider {
    let file: URL
    private var key: SecretBytes?

    init(file: URL) { self.file = file }

    var backendName: String { "host-key" }

    func open(provisioning: Bool) throws {
        let path = file.path
        if FileManager.default.fileExists(atPath: path) {
            key = try Self.read(path)
            return
        }
        guard provisioning else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "the host key file \(path) is missing; this store was sealed with it and cannot be opened without it"
            )
        }
        let directory = file.deletingLastPathComponent()
        try? FileManager.default.createDirectory(
            at: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let fresh = SecretBytes.random(count: 32)
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw KeychainError(
                KeychainStatus.io,
                "cannot create the host key file \(path): \(String(cString: strerror(errno)))"
            )
        }
        defer { Glibc.close(fd) }
        let written = fresh.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == 32, fsync(fd) == 0 else {
            unlink(path)
            throw KeychainError(KeychainStatus.io, "cannot write the host key file \(path)")
        }
        key = fresh
    }

    static func read(_ path: String) throws -> SecretBytes {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "cannot read the host key file \(path): \(String(cString: strerror(errno)))"
            )
        }
        defer { Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw KeychainError(KeychainStatus.io, "cannot stat \(path)") }
        guard info.st_mode & 0o077 == 0 else {
            throw KeychainError(
                KeychainStatus.param,
                "the host key file \(path) is readable by others (mode \(String(info.st_mode & 0o777, radix: 8))); it must be 0600 or 0400"
            )
        }
        var count = 0
        let secret = SecretBytes(count: 32) { buffer in
            count = Glibc.read(fd, buffer.baseAddress, 33 > buffer.count ? buffer.count : 33)
        }
        guard count == 32, info.st_size == 32 else {
            throw KeychainError(KeychainStatus.decode, "the host key file \(path) does not hold a 32-byte key")
        }
        return secret
    }

    private func requireKey() throws -> SecretBytes {
        guard let key else { throw KeychainError(KeychainStatus.notAvailable, "the host key is not open") }
        return key
    }

    func deviceIdentity() throws -> Data {
        let key = try requireKey()
        return Data(
            HMAC<SHA256>.authenticationCode(
                for: Array("keyseal/host-key/identity".utf8),
                using: SymmetricKey(data: key)
            )
        )
    }

    private func wrappingKey(_ label: String) throws -> SymmetricKey {
        SymmetricKey(data: KeyDerivation.hkdf(try requireKey(), info: Array("keyseal/host-key/\(label)".utf8)))
    }

    func seal(_ secret: SecretBytes) throws -> Data {
        try AEAD.sealSecret(secret, key: wrappingKey("seal"), aad: Array("keyseal/host-key/seal/v1".utf8))
    }

    func unseal(_ blob: Data) throws -> SecretBytes {
        do {
            return try AEAD.openSecret(blob, key: wrappingKey("seal"), aad: Array("keyseal/host-key/seal/v1".utf8))
        } catch {
            throw KeychainError(KeychainStatus.decode, "this store was sealed by another device (host key mismatch)")
        }
    }

    /// The host key cannot check a passcode; the engine does when it unwraps the class keys.
    func sealWithPasscode(_ secret: SecretBytes, authorization: SecretBytes) throws -> Data {
        try AEAD.sealSecret(secret, key: wrappingKey("passcode"), aad: Array("keyseal/host-key/passcode/v1".utf8))
    }

    func unsealWithPasscode(_ blob: Data, authorization: SecretBytes) throws -> SecretBytes {
        try AEAD.openSecret(blob, key: wrappingKey("passcode"), aad: Array("keyseal/host-key/passcode/v1".utf8))
    }

    func status() throws -> DeviceKeyStatus {
        DeviceKeyStatus(
            backend: backendName,
            hardwareBacked: false,
            guessingHardwareLimited: false,
            detail: "not hardware-backed: the device key is the file \(file.path); passcode guessing is limited by "
                + "Argon2id and the store's escalating delays only"
        )
    }

    func close() { key = nil }
}
