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
        case -50, -25302, -25303: BusError(BusError.invalidArgs, clientWords(error.message))
        default: BusError(BusError.failed, "\(clientWords(error.message)) (OSStatus \(error.status))")
        }
    }

    /// What a Secret Service client calls each keyseald attribute the bridge stores its items in.
    static let clientNames: [String: String] = [
        AttributeKey.stringAttributes: "the attributes", AttributeKey.label: "the label",
        AttributeKey.description: "the content type", AttributeKey.service: "the collection",
        AttributeKey.account: "the item", AttributeKey.accessGroup: "the access group",
    ]

    /// `message` with each keyseald attribute name (a whole word: `ksat`, `labl`…) in the client's words.
    static func clientWords(_ message: String) -> String {
        var result = ""
        var word = ""
        for character in message + " " {
            if character.isLetter || character.isNumber {
                word.append(character)
                continue
            }
            result += clientNames[word] ?? word
            word = ""
            result.append(character)
        }
        return String(result.dropLast())
    }
}
