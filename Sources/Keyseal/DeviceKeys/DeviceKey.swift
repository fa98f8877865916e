import FoundationEssentials
import Glibc
import KeysealCore
import KeysealPKCS11
import KeysealTPM

/// Where a store's device key lives.
public struct DeviceKey: Sendable, CustomStringConvertible {
    let makeProvider: @Sendable () throws -> any DeviceKeyProvider
    public let description: String
    /// The key file of a host-key device (checked to be outside the store directory).
    let hostKeyFile: URL?

    /// Creates a device key from a provider factory. Production code uses the named backends; tests of the
    /// engine may pass a software provider.
    public init(description: String, provider: @escaping @Sendable () throws -> any DeviceKeyProvider) {
        self.description = description
        self.makeProvider = provider
        self.hostKeyFile = nil
    }

    init(description: String, hostKeyFile: URL, provider: @escaping @Sendable () throws -> any DeviceKeyProvider) {
        self.description = description
        self.makeProvider = provider
        self.hostKeyFile = hostKeyFile
    }

    /// A 32-byte random key in a 0600 file, created if missing for a new store and an error for a provisioned
    /// one. The file must not be inside the store directory. Reported as not hardware-backed.
    public static func hostKey(file: URL) -> DeviceKey {
        DeviceKey(description: "host-key \(file.path)", hostKeyFile: file) { HostKeyDevice(file: file) }
    }

    /// A TPM 2.0 reached through an explicit TCTI: `device:/dev/tpmrm0` in production, `swtpm:path=…` in tests.
    /// The device secret and the passcode secret are sealed objects under the TCG storage primary; passcode
    /// tries count against the TPM's dictionary-attack protection.
    /// With `pcrs`, a new store's device and passcode objects are bound to those PCRs' current values (SHA-256
    /// bank); an existing store keeps the binding it has (docs/TPM.md "Boot binding").
    /// With `pcrPolicyKey` too, they are bound with `PolicyAuthorize` to PCR policies that key signs, read at each
    /// unseal from `signatureDirectories` (docs/TPM.md "Signed PCR policies").
    public static func tpm(
        tcti: String,
        logging: Bool = false,
        pcrs: [Int] = [],
        pcrPolicyKey: PCRPolicyKey? = nil,
        signatureDirectories: [String] = []
    ) -> DeviceKey {
        DeviceKey(description: "tpm \(tcti)") {
            TPMDeviceKey(
                tcti: tcti,
                logging: logging,
                pcrs: pcrs,
                pcrPolicyKey: pcrPolicyKey,
                signatureDirectories: signatureDirectories
            )
        }
    }

    /// A PKCS#11 token, its module loaded alone through p11-kit (a path or a p11-kit module name), the slot
    /// found by token label, the PIN read from `pinFile` (readable only by this user). A non-extractable AES-256
    /// key on the token (created when the store is provisioned) encrypts the device and passcode secrets.
    public static func pkcs11(module: String, token: String, pinFile: URL?) -> DeviceKey {
        DeviceKey(description: "pkcs11 \(module) token \(token)") {
            PKCS11DeviceKey(module: module, tokenLabel: token, pinFile: pinFile)
        }
    }

    /// The default host key location: `$XDG_CONFIG_HOME/keyseal/host.key` (or `~/.config/keyseal/host.key`);
    /// `/etc/keyseal/host.key` for root.
    public static var defaultHostKeyFile: URL {
        let environment = ProcessInfo.processInfo.environment
        if getuid() == 0 { return URL(fileURLWithPath: "/etc/keyseal/host.key") }
        if let config = environment["XDG_CONFIG_HOME"], !config.isEmpty {
            return URL(fileURLWithPath: config).appendingPathComponent("keyseal/host.key")
        }
        let home = environment["HOME"] ?? getpwuid(getuid()).map { String(cString: $0.pointee.pw_dir) } ?? "/"
        return URL(fileURLWithPath: home).appendingPathComponent(".config/keyseal/host.key")
    }
}
