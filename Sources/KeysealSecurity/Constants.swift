// Apple's Security constants for keychain items, with Apple's values (`CFString` is `String`).

// MARK: Classes
public let kSecClass: CFString = "class"
public let kSecClassGenericPassword: CFString = "genp"
public let kSecClassInternetPassword: CFString = "inet"
public let kSecClassCertificate: CFString = "cert"
public let kSecClassKey: CFString = "keys"
public let kSecClassIdentity: CFString = "idnt"

// MARK: Attributes
public let kSecAttrAccessible: CFString = "pdmn"
public let kSecAttrAccessControl: CFString = "accc"
public let kSecAttrAccessGroup: CFString = "agrp"
public let kSecAttrCreationDate: CFString = "cdat"
public let kSecAttrModificationDate: CFString = "mdat"
public let kSecAttrDescription: CFString = "desc"
public let kSecAttrComment: CFString = "icmt"
public let kSecAttrCreator: CFString = "crtr"
public let kSecAttrType: CFString = "type"
public let kSecAttrLabel: CFString = "labl"
public let kSecAttrIsInvisible: CFString = "invi"
public let kSecAttrIsNegative: CFString = "nega"
public let kSecAttrAccount: CFString = "acct"
public let kSecAttrService: CFString = "svce"
public let kSecAttrGeneric: CFString = "gena"
public let kSecAttrSecurityDomain: CFString = "sdmn"
public let kSecAttrServer: CFString = "srvr"
public let kSecAttrProtocol: CFString = "ptcl"
public let kSecAttrAuthenticationType: CFString = "atyp"
public let kSecAttrPort: CFString = "port"
public let kSecAttrPath: CFString = "path"
public let kSecAttrSynchronizable: CFString = "sync"
public let kSecAttrSynchronizableAny: CFString = "syna"

// MARK: Accessibility
public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
public let kSecAttrAccessibleAlways: CFString = "dk"
public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"
public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"

// MARK: Match, return, value
public let kSecMatchLimit: CFString = "m_Limit"
public let kSecMatchLimitOne: CFString = "m_LimitOne"
public let kSecMatchLimitAll: CFString = "m_LimitAll"
public let kSecMatchCaseInsensitive: CFString = "m_CaseInsensitive"
public let kSecReturnData: CFString = "r_Data"
public let kSecReturnAttributes: CFString = "r_Attributes"
public let kSecReturnRef: CFString = "r_Ref"
public let kSecReturnPersistentRef: CFString = "r_PersistentRef"
public let kSecValueData: CFString = "v_Data"
public let kSecValueRef: CFString = "v_Ref"
public let kSecValuePersistentRef: CFString = "v_PersistentRef"

// MARK: Use
public let kSecUseOperationPrompt: CFString = "u_OpPrompt"
public let kSecUseAuthenticationUI: CFString = "u_AuthUI"
public let kSecUseAuthenticationUIAllow: CFString = "u_AuthUIA"
public let kSecUseAuthenticationUIFail: CFString = "u_AuthUIF"
public let kSecUseAuthenticationUISkip: CFString = "u_AuthUIS"
public let kSecUseAuthenticationContext: CFString = "u_AuthCtx"
public let kSecUseNoAuthenticationUI: CFString = "u_NoAuthUI"
public let kSecUseDataProtectionKeychain: CFString = "nleg"

// MARK: Protocols (note the trailing spaces)
public let kSecAttrProtocolFTP: CFString = "ftp "
public let kSecAttrProtocolFTPAccount: CFString = "ftpa"
public let kSecAttrProtocolHTTP: CFString = "http"
public let kSecAttrProtocolIRC: CFString = "irc "
public let kSecAttrProtocolNNTP: CFString = "nntp"
public let kSecAttrProtocolPOP3: CFString = "pop3"
public let kSecAttrProtocolSMTP: CFString = "smtp"
public let kSecAttrProtocolSOCKS: CFString = "sox "
public let kSecAttrProtocolIMAP: CFString = "imap"
public let kSecAttrProtocolLDAP: CFString = "ldap"
public let kSecAttrProtocolAppleTalk: CFString = "atlk"
public let kSecAttrProtocolAFP: CFString = "afp "
public let kSecAttrProtocolTelnet: CFString = "teln"
public let kSecAttrProtocolSSH: CFString = "ssh "
public let kSecAttrProtocolFTPS: CFString = "ftps"
public let kSecAttrProtocolHTTPS: CFString = "htps"
public let kSecAttrProtocolHTTPProxy: CFString = "htpx"
public let kSecAttrProtocolHTTPSProxy: CFString = "htsx"
public let kSecAttrProtocolFTPProxy: CFString = "ftpx"
public let kSecAttrProtocolSMB: CFString = "smb "
public let kSecAttrProtocolRTSP: CFString = "rtsp"
public let kSecAttrProtocolRTSPProxy: CFString = "rtsx"
public let kSecAttrProtocolDAAP: CFString = "daap"
public let kSecAttrProtocolEPPC: CFString = "eppc"
public let kSecAttrProtocolIPP: CFString = "ipp "
public let kSecAttrProtocolNNTPS: CFString = "ntps"
public let kSecAttrProtocolLDAPS: CFString = "ldps"
public let kSecAttrProtocolTelnetS: CFString = "tels"
public let kSecAttrProtocolIMAPS: CFString = "imps"
public let kSecAttrProtocolIRCS: CFString = "ircs"
public let kSecAttrProtocolPOP3S: CFString = "pops"

// MARK: Authentication types
public let kSecAttrAuthenticationTypeNTLM: CFString = "ntlm"
public let kSecAttrAuthenticationTypeMSN: CFString = "msna"
public let kSecAttrAuthenticationTypeDPA: CFString = "dpaa"
public let kSecAttrAuthenticationTypeRPA: CFString = "rpaa"
public let kSecAttrAuthenticationTypeHTTPBasic: CFString = "http"
public let kSecAttrAuthenticationTypeHTTPDigest: CFString = "httd"
public let kSecAttrAuthenticationTypeHTMLForm: CFString = "form"
public let kSecAttrAuthenticationTypeDefault: CFString = "dflt"

// MARK: Status codes
public let errSecSuccess: OSStatus = 0
public let errSecUnimplemented: OSStatus = -4
public let errSecIO: OSStatus = -36
public let errSecParam: OSStatus = -50
public let errSecAllocate: OSStatus = -108
public let errSecUserCanceled: OSStatus = -128
public let errSecBadReq: OSStatus = -909
public let errSecInternalComponent: OSStatus = -2070
public let errSecNotAvailable: OSStatus = -25291
public let errSecReadOnly: OSStatus = -25292
public let errSecAuthFailed: OSStatus = -25293
public let errSecNoSuchKeychain: OSStatus = -25294
public let errSecDuplicateItem: OSStatus = -25299
public let errSecItemNotFound: OSStatus = -25300
public let errSecDataTooLarge: OSStatus = -25302
public let errSecNoSuchAttr: OSStatus = -25303
public let errSecNoSuchClass: OSStatus = -25306
public let errSecInteractionNotAllowed: OSStatus = -25308
public let errSecReadOnlyAttr: OSStatus = -25309
public let errSecDataNotAvailable: OSStatus = -25316
public let errSecVerifyFailed: OSStatus = -67808
public let errSecDecode: OSStatus = -26275
public let errSecMissingEntitlement: OSStatus = -34018

// MARK: Keys (FACTS.md §Keys)
public let kSecAttrKeyClass: CFString = "kcls"
public let kSecAttrKeyClassPublic: CFString = "0"
public let kSecAttrKeyClassPrivate: CFString = "1"
public let kSecAttrKeyClassSymmetric: CFString = "2"
public let kSecAttrApplicationLabel: CFString = "klbl"
public let kSecAttrApplicationTag: CFString = "atag"
public let kSecAttrKeyType: CFString = "type"
public let kSecAttrKeyTypeRSA: CFString = "42"
public let kSecAttrKeyTypeEC: CFString = "73"
public let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"
public let kSecAttrKeySizeInBits: CFString = "bsiz"
public let kSecAttrEffectiveKeySize: CFString = "esiz"
public let kSecAttrIsPermanent: CFString = "perm"
public let kSecAttrIsSensitive: CFString = "sens"
public let kSecAttrIsExtractable: CFString = "extr"
public let kSecAttrCanEncrypt: CFString = "encr"
public let kSecAttrCanDecrypt: CFString = "decr"
public let kSecAttrCanDerive: CFString = "drve"
public let kSecAttrCanSign: CFString = "sign"
public let kSecAttrCanVerify: CFString = "vrfy"
public let kSecAttrCanWrap: CFString = "wrap"
public let kSecAttrCanUnwrap: CFString = "unwp"
public let kSecAttrTokenID: CFString = "tkid"
/// This device's hardware: the store's TPM or PKCS#11 token.
public let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"
public let kSecPrivateKeyAttrs: CFString = "private"
public let kSecPublicKeyAttrs: CFString = "public"

// MARK: Certificates
public let kSecAttrCertificateType: CFString = "ctyp"
public let kSecAttrCertificateEncoding: CFString = "cenc"
public let kSecAttrSubject: CFString = "subj"
public let kSecAttrIssuer: CFString = "issr"
public let kSecAttrSerialNumber: CFString = "slnr"
public let kSecAttrSubjectKeyID: CFString = "skid"
public let kSecAttrPublicKeyHash: CFString = "pkhh"
