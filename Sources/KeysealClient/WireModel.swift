import FoundationEssentials
import Glibc

/// Constants of the keyseald wire protocol (version 2: a record carries an identity's private-key reference).
///
/// A frame is a 4-byte big-endian payload length followed by the payload; every payload starts with the
/// protocol version byte, then a request opcode or a response kind. The frame limit is above the value limit so
/// that a value of the largest allowed size always fits with its attributes.
public enum Wire {
    public static let version: UInt8 = 2
    /// The largest secret the daemon accepts (DESIGN §5); the client refuses larger values before sending.
    public static let valueLimit = 1 << 20
    /// The largest payload either side accepts: 2 MiB plus headroom for attributes.
    public static let maxFrame = (2 << 20) + (64 << 10)
    /// The largest response the client joins from parts (a copy-matching over many or large items); beyond it the
    /// request fails with errSecDataTooLarge instead of exhausting memory.
    public static let maxResponse = 1 << 30
    /// The largest piece of a backup file one frame carries.
    public static let backupChunk = 1 << 20
    /// The default socket path: `$KEYSEAL_SOCKET`, else `$XDG_RUNTIME_DIR/keyseal/keyseal.sock`, else
    /// `/run/keyseal/keyseal.sock`.
    public static func defaultSocketPath(environment: [String: String]) -> String {
        if let socket = environment["KEYSEAL_SOCKET"], !socket.isEmpty { return socket }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/keyseal/keyseal.sock" }
        return "/run/keyseal/keyseal.sock"
    }

    /// The answer to ``WireRequest/addReplacingAttributes(_:)`` when it replaced: `.records` with this one record,
    /// which carries the replaced item's account only (an add answers `.records([])`).
    public static func replacedRecord(account: String) -> ItemRecord {
        ItemRecord(itemClass: .genericPassword, attributes: [AttributeKey.account: .string(account)])
    }

    /// The account of a ``replacedRecord(account:)``; any other record is errSecDecode.
    public static func replacedAccount(_ record: ItemRecord) throws(KeychainError) -> String {
        guard record.itemClass == .genericPassword, record.attributes.count == 1,
            case .string(let account)? = record.attributes[AttributeKey.account]
        else { throw KeychainError(status: KeychainStatus.decode, message: "unexpected response from keyseald") }
        return account
    }
}

/// An operation with a stored key, named by its item's persistent reference: done by keyseald, which answers
/// with the result only (private material never crosses the socket).
public struct WireKeyOperation: Sendable, Hashable {
    public enum Kind: UInt8, Sendable {
        /// The key's public key and attributes (answered with `.key`).
        case describe = 0
        case sign = 1
        case decrypt = 2
        case keyExchange = 3
        /// TPM2_Certify of a hardware key by the attestation key: `data` is the challenge, `algorithm` the format
        /// (`webauthn-tpm` or `json`); answered with `.keyResult` holding the statement (docs/TPM.md).
        case attest = 4
    }

    public var reference: Data
    public var kind: Kind
    /// Apple's `SecKeyAlgorithm` name.
    public var algorithm: String
    public var data: Data
    public var requestedSize: Int?
    public var sharedInfo: Data?

    public init(
        reference: Data,
        kind: Kind,
        algorithm: String = "",
        data: Data = Data(),
        requestedSize: Int? = nil,
        sharedInfo: Data? = nil
    ) {
        self.reference = reference
        self.kind = kind
        self.algorithm = algorithm
        self.data = data
        self.requestedSize = requestedSize
        self.sharedInfo = sharedInfo
    }
}

/// A device-side step of the attestation key's enrollment.
public enum WireAttestationStep: Sendable, Hashable {
    /// The EK certificate and the AK's public area, as JSON (answered with `.keyResult`).
    case enrollmentRequest
    /// TPM2_ActivateCredential of a CA's challenge (answered with `.keyResult`: the credential).
    case activate(credentialBlob: Data, secret: Data)
    /// Stores the AK certificate and its chain (DER, leaf first; answered with `.ok`).
    case install(certificates: [Data])
}

/// A stored key as keyseald describes it (`KeyDescription` in the library): never its private material.
public struct WireKey: Sendable, Hashable {
    public var reference: Data
    public var keyType: String
    public var bits: Int
    public var publicKey: Data
    public var isPrivate: Bool
    public var inHardware: Bool
    public var extractable: Bool
    public var attributes: [String: AttributeValue]
    /// The public key as a DER `SubjectPublicKeyInfo` (for PEM output).
    public var subjectPublicKeyInfo: Data

    public init(
        reference: Data,
        keyType: String,
        bits: Int,
        publicKey: Data,
        isPrivate: Bool,
        inHardware: Bool,
        extractable: Bool,
        attributes: [String: AttributeValue],
        subjectPublicKeyInfo: Data = Data()
    ) {
        self.subjectPublicKeyInfo = subjectPublicKeyInfo
        self.reference = reference
        self.keyType = keyType
        self.bits = bits
        self.publicKey = publicKey
        self.isPrivate = isPrivate
        self.inHardware = inHardware
        self.extractable = extractable
        self.attributes = attributes
    }
}

/// A stored certificate as keyseald describes it: its DER and what the command line prints, derived by the engine.
/// For an identity (a lookup of class `idnt`), `keyReference` names the private key whose `klbl` is the
/// certificate's `pkhh` (`attributes["pkhh"]`).
public struct WireCertificate: Sendable, Hashable {
    public var reference: Data
    public var keyReference: Data?
    public var der: Data
    public var sha1: Data
    public var sha256: Data
    /// Apple's subject summary (the common name, else the e-mail address, else the organization).
    public var subjectSummary: String?
    public var commonNames: [String]
    public var emailAddresses: [String]
    /// Seconds since 1970 of the validity period's ends.
    public var notBefore: Double
    public var notAfter: Double
    public var attributes: [String: AttributeValue]

    public init(
        reference: Data,
        keyReference: Data? = nil,
        der: Data,
        sha1: Data,
        sha256: Data,
        subjectSummary: String?,
        commonNames: [String],
        emailAddresses: [String],
        notBefore: Double,
        notAfter: Double,
        attributes: [String: AttributeValue]
    ) {
        self.reference = reference
        self.keyReference = keyReference
        self.der = der
        self.sha1 = sha1
        self.sha256 = sha256
        self.subjectSummary = subjectSummary
        self.commonNames = commonNames
        self.emailAddresses = emailAddresses
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.attributes = attributes
    }
}

/// The daemon's settings.
public struct WireSettings: Sendable, Hashable {
    /// Idle seconds before auto-lock; nil: never.
    public var autoLockSeconds: Int?
    public init(autoLockSeconds: Int?) { self.autoLockSeconds = autoLockSeconds }
}

/// A request from a client.
public enum WireRequest: Sendable {
    case ping
    case status
    case lockState
    case lock
    case unlock(passcode: SecretBytes)
    case setPasscode(SecretBytes)
    case changePasscode(old: SecretBytes, new: SecretBytes)
    case removePasscode(SecretBytes)
    case getSettings
    case setSettings(WireSettings)
    /// Turns the connection into a stream of `.lockStateChanged` events, the current state first.
    case subscribeLockState
    case add(NewItem)
    /// Adds a generic password carrying string attributes, or, when an item of its access group and service carries
    /// exactly the same ones, gives that item the new label, description and value instead, in one step (the Secret
    /// Service's `CreateItem` with `replace`). Answered with `.records`: none when it added, one
    /// (``Wire/replacedRecord(account:)``) naming the replaced item's account.
    case addReplacingAttributes(NewItem)
    case copyMatching(ItemQuery)
    case update(ItemQuery, ItemChanges)
    case delete(ItemQuery)
    /// Export the whole store: answered by `.backupChunk` responses, then `.exportReport` (or `.failure`).
    case exportBackup(passphrase: SecretBytes, availableOnly: Bool)
    /// Starts an import on this connection: answered by `.importProgress`.
    case importBegin(passphrase: SecretBytes, replace: Bool)
    /// The next piece of the backup file (at most ``Wire/backupChunk`` bytes): answered by `.importProgress`.
    case importChunk([UInt8])
    /// The file is complete: answered by `.importSkipped` responses, then `.importReport` (or `.failure`).
    case importEnd
    /// Lists the rows no SecItem call can reach (undecryptable, or of a class Keyseal does not implement):
    /// answered by `.undecryptable`.
    case undecryptableItems
    /// Deletes such rows by their ids without decrypting them (nil: every one): answered by `.undecryptable` with
    /// the rows deleted.
    case deleteUndecryptable(ids: [String]?)
    /// Generates a key pair and stores it (answered with `.key`).
    case generateKey(KeyGenerationRequest)
    /// Uses or describes a stored key (answered with `.keyResult` or `.key`).
    case keyOperation(WireKeyOperation)
    /// Certificates (query class `cert`) or identities (class `idnt`) described for printing: answered with
    /// `.certificates`.
    case certificates(ItemQuery)
    /// A PKCS#10 request for the subject (RFC 4514 text, `CN=…,O=…`) signed by the stored key: answered with
    /// `.keyResult` (DER).
    case createCSR(reference: Data, subject: String)
    /// A new recovery key (administrators; the passcode when one is set). Answered with `.secret`.
    case createRecoveryKey(passcode: SecretBytes?)
    /// Opens a store that needs recovery with its recovery key (and the passcode when one is set).
    case recover(key: SecretBytes, passcode: SecretBytes?)
    /// Seals the device objects again to the current PCR values, or to `pcrs` (administrators).
    case tpmReseal(passcode: SecretBytes?, pcrs: [Int]?)
    /// Keeps a rolled-back store as it is (administrators).
    case acceptRollback
    /// An item request (or ping) made for the process `pid` of the sender's own uid, whose executable and unit
    /// keyseald then reads itself and applies. Only a client the policy names as `vouching` may send it: the
    /// Secret Service bridge, for its D-Bus callers.
    indirect case onBehalf(pid: Int32, WireRequest)
    /// Checks the store's passcode for the sender (counted as an unlock attempt, refused during the store's delays)
    /// and answers `.secret` with an authentication token bound to the sender's uid (docs/WIRE-PROTOCOL.md).
    case authenticate(passcode: SecretBytes)
    /// Forgets a token `authenticate` issued to the sender's uid (`LAContext.invalidate()`); a token of another uid,
    /// or one the store does not know, is left as it is and the answer is the same `.ok`.
    case revokeAuthentication(token: SecretBytes)
    /// A lookup, update or key operation carrying an authentication (a token from `authenticate`, its reuse
    /// duration, and what to do without a usable one) for items and keys whose access control asks for it.
    indirect case authenticated(ItemAuthentication, WireRequest)

    /// Whether `authenticated` may carry this request.
    public var mayBeAuthenticated: Bool {
        switch self {
        case .copyMatching, .update, .keyOperation: true
        default: false
        }
    }
    /// The attestation key's enrollment on the device (administrators): docs/TPM.md, "Key attestation".
    case attestation(WireAttestationStep)

    /// Whether `onBehalf` may carry this request.
    public var mayBeSentOnBehalf: Bool {
        switch self {
        case .ping, .add, .addReplacingAttributes, .copyMatching, .update, .delete: true
        default: false
        }
    }

    /// Whether only administrators may make this request (DESIGN §6).
    public var isManagement: Bool {
        switch self {
        case .lock, .unlock, .setPasscode, .changePasscode, .removePasscode, .getSettings, .setSettings: true
        case .exportBackup, .importBegin, .importChunk, .importEnd: true
        case .undecryptableItems, .deleteUndecryptable: true
        case .createRecoveryKey, .recover, .tpmReseal, .acceptRollback: true
        case .attestation: true
        default: false
        }
    }

    /// Whether the frame carries a passcode or passphrase (zeroized after sending).
    public var carriesSecret: Bool {
        switch self {
        case .unlock, .setPasscode, .changePasscode, .removePasscode, .exportBackup, .importBegin: true
        case .createRecoveryKey, .recover, .tpmReseal, .authenticate, .revokeAuthentication: true
        // An authentication token is a bearer secret of its uid.
        case .authenticated(let authentication, _): authentication.token != nil
        default: false
        }
    }

    /// A name for logs and messages (never the payload).
    public var name: String {
        switch self {
        case .ping: "ping"
        case .status: "status"
        case .lockState: "lock-state"
        case .lock: "lock"
        case .unlock: "unlock"
        case .setPasscode: "passcode set"
        case .changePasscode: "passcode change"
        case .removePasscode: "passcode remove"
        case .getSettings: "settings"
        case .setSettings: "settings"
        case .subscribeLockState: "subscribe"
        case .add: "add"
        case .addReplacingAttributes: "add-replacing"
        case .copyMatching: "copy-matching"
        case .update: "update"
        case .delete: "delete"
        case .exportBackup: "export"
        case .importBegin, .importChunk, .importEnd: "import"
        case .undecryptableItems: "doctor"
        case .deleteUndecryptable: "doctor --delete-undecryptable"
        case .generateKey: "create-key"
        case .keyOperation(let operation):
            switch operation.kind {
            case .describe: "find-key"
            case .sign: "sign"
            case .decrypt: "decrypt"
            case .keyExchange: "key-exchange"
            case .attest: "attest"
            }
        case .certificates(let query): query.itemClass == .identity ? "find-identity" : "find-certificate"
        case .createCSR: "create-csr"
        case .createRecoveryKey: "recovery-key create"
        case .recover: "recover"
        case .tpmReseal: "tpm reseal"
        case .acceptRollback: "tpm accept-rollback"
        case .onBehalf(_, let request): request.name
        case .authenticate: "authenticate"
        case .revokeAuthentication: "revoke-authentication"
        case .authenticated(_, let request): request.name
        case .attestation(.enrollmentRequest): "attestation enroll-request"
        case .attestation(.activate): "attestation activate"
        case .attestation(.install): "attestation install"
        }
    }
}

/// A response from the daemon.
public enum WireResponse: Sendable, Hashable {
    case ok
    case failure(KeychainError)
    case records([ItemRecord])
    case status(StoreStatus)
    case lockState(LockState)
    /// A sentence for people, or nil (e.g. why `lock` changed nothing).
    case message(String?)
    case settings(WireSettings)
    /// A lock-state change on a subscribed connection.
    case lockStateChanged(LockState)
    /// The next piece of an export, and the items written so far of the total.
    case backupChunk(bytes: [UInt8], done: Int, total: Int)
    /// The export is complete.
    case exportReport(ExportReport)
    /// Items of the backup read and authenticated so far, of the total (0 until the header has been read).
    case importProgress(done: Int, total: Int)
    /// Items the import left out (sent in several responses when there are many).
    case importSkipped([ImportReport.SkippedItem])
    /// The import is complete (committed).
    case importReport(ImportReport)
    /// Rows no SecItem call can reach (listed, or deleted).
    case undecryptable([UndecryptableItem])
    /// A stored key: its reference, public key and attributes.
    case key(WireKey)
    /// What a key operation produced (a signature, a plaintext, a shared secret).
    case keyResult(Data)
    /// A secret shown once (a new recovery key).
    case secret(SecretBytes)
    /// Certificates or identities described (``WireRequest/certificates(_:)``).
    case certificates([WireCertificate])
}
