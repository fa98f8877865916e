internal import CArgon2
import FoundationEssentials
import Glibc
import KeysealCore

/// Argon2id through libargon2: P = Argon2id(passcode, salt).
enum Argon2id {
    static func derive(
        _ passcode: SecretBytes,
        salt: Data,
        parameters: Argon2Parameters
    ) throws(KeychainError)
        -> SecretBytes
    {
        guard parameters.isWithinLimits else {
            throw KeychainError(KeychainStatus.decode, "Argon2id parameters out of range")
        }
        var rc: Int32 = 0
        let output = SecretBytes(count: 32) { out in
            rc = passcode.withUnsafeBytes { password in
                salt.withUnsafeBytes { saltBytes in
                    argon2id_hash_raw(
                        parameters.iterations,
                        parameters.memoryKiB,
                        parameters.parallelism,
                        password.baseAddress,
                        password.count,
                        saltBytes.baseAddress,
                        saltBytes.count,
                        out.baseAddress,
                        out.count
                    )
                }
            }
        }
        guard rc == ARGON2_OK.rawValue else {
            let message = String(cString: argon2_error_message(rc))
            throw KeychainError(
                rc == ARGON2_MEMORY_ALLOCATION_ERROR.rawValue
                    ? KeychainStatus.allocate : KeychainStatus.internalComponent,
                "Argon2id failed: \(message)"
            )
        }
        return output
    }
}
