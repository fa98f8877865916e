import Foundation
import Keyseal
import KeysealCore

// Apple's SecImportExport.h for PKCS#12: the identity (private key and certificate) and chain in a `.p12` file,
// returned in memory as on iOS. Nothing is stored: the caller adds what it wants to keep with SecItemAdd.

/// The passphrase that opens the file (`String`); without it the file is opened with an empty passphrase.
nonisolated(unsafe) public let kSecImportExportPassphrase: CFString = "passphrase"
/// The certificate's friendly name (`String`), when the file gives one.
nonisolated(unsafe) public let kSecImportItemLabel: CFString = "label"
/// The certificate's local key identifier (`Data`), when the file gives one.
nonisolated(unsafe) public let kSecImportItemKeyID: CFString = "keyid"
/// Apple returns a `SecTrust` under this key; KeysealSecurity has no `SecTrust` and never sets it.
nonisolated(unsafe) public let kSecImportItemTrust: CFString = "trust"
/// The certificates (`[SecCertificate]`): the identity's own first, then the file's others.
nonisolated(unsafe) public let kSecImportItemCertChain: CFString = "chain"
/// The `SecIdentity`: the private key (a software key of this process, as from `SecKeyCreateWithData`) and its
/// certificate.
nonisolated(unsafe) public let kSecImportItemIdentity: CFString = "identity"

/// Opens a PKCS#12 file: one dictionary per identity in `items`. A wrong passphrase is errSecAuthFailed, data that is
/// not a PKCS#12 file with a key and its certificate errSecDecode, a passphrase that is not a string errSecParam, a
/// key other than RSA or NIST P-256/384/521 errSecUnimplemented.
public func SecPKCS12Import(
    _ pkcs12_data: CFData,
    _ options: CFDictionary,
    _ items: UnsafeMutablePointer<CFArray?>
) -> OSStatus {
    do {
        let options = try swiftDictionary(options)
        let passphrase: String?
        switch options[kSecImportExportPassphrase as String] {
        case nil: passphrase = nil
        case let text as String: passphrase = text
        case let text as NSString: passphrase = text as String
        default: throw KeychainError(KeychainStatus.param, "kSecImportExportPassphrase is not a string")
        }
        let file = try PKCS12File.open(pkcs12_data, passphrase: passphrase)
        guard let certificate = SecCertificateCreateWithData(nil, file.certificate) else {
            throw KeychainError(KeychainStatus.decode, "the PKCS#12 file's certificate cannot be read")
        }
        let key = SecKey(.software(try SoftwareKey(keyType: file.keyType, externalRepresentation: file.privateKey)))
        var chain = [certificate]
        for der in file.chain {
            guard let other = SecCertificateCreateWithData(nil, der) else {
                throw KeychainError(KeychainStatus.decode, "a certificate of the PKCS#12 file cannot be read")
            }
            chain.append(other)
        }
        var item: [String: Any] = [
            kSecImportItemIdentity as String: SecIdentity(certificate: certificate, privateKey: key),
            kSecImportItemCertChain as String: chain,
        ]
        if let label = file.label { item[kSecImportItemLabel as String] = label }
        if let keyID = file.keyID { item[kSecImportItemKeyID as String] = keyID }
        items.pointee = NSArray(array: [item])
        return errSecSuccess
    } catch let failure as KeychainError {
        return failure.status
    } catch {
        return errSecInternalComponent
    }
}
