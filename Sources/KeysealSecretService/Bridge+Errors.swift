import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

extension SecretServiceBridge {
    // MARK: Errors

    static func busError(_ error: KeychainError, path: String? = nil) -> BusError {
        switch error.status {
        case -25308: BusError(BusError.isLocked, "the Keyseal keychain is locked: \(error.message)")
        case -25300: path.map(BusError.unknownObject) ?? BusError(BusError.noSuchObject, error.message)
        case -34018, -25293: BusError(BusError.accessDenied, error.message)
        case -50, -25302, -25303: BusError(BusError.invalidArgs, error.message)
        default: BusError(BusError.failed, "\(error.message) (OSStatus \(error.status))")
        }
    }
}
