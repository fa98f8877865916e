import FoundationEssentials

/// The one check of a typed request before the engine acts on it, shared by the embedded engine and keyseald's
/// server (which runs it on every wire request before the engine), so that both answer a bad request with the
/// same status as `KeysealSecurity`'s dictionary parser gives for the same input:
///
/// - an add of an identity (it is added as its certificate and its private key) or of a key that claims a token
///   (`tkid`: hardware keys are generated, never imported): errSecParam (−50);
/// - an attribute key that is not an attribute of the class: errSecNoSuchAttr (−25303); `cdat`/`mdat` set by a
///   caller, or an update that sets a key's `tkid`, or its `extr` to true (a non-extractable key stays so):
///   errSecReadOnlyAttr (−25309); `agrp`, `pdmn`, `sync` or `accc` inside the attribute map (they have
///   fields of their own) or a value of the wrong type: errSecParam (−50);
/// - access-control flags that ask for a constraint Keyseal cannot enforce (companion, application password):
///   errSecUnimplemented (−4);
/// - a string or data attribute over ``attributeLimit`` bytes, string attributes over ``stringAttributesLimit``
///   bytes encoded, an access group over ``groupLimit`` bytes, or a
///   secret over the value limit: errSecDataTooLarge (−25302).
public enum RequestValidation {
    /// The largest string or data attribute value, in bytes.
    public static let attributeLimit = 64 << 10
    /// The largest encoded string attribute map (the Secret Service's attributes, ``StringAttributes``), in bytes:
    /// room for values as large as clients send (gnome-keyring takes a 64 KiB value), beside a secret at the value
    /// limit in one request.
    public static let stringAttributesLimit = 512 << 10
    /// The longest access group name, in bytes.
    public static let groupLimit = 1024

    /// Keys that have fields of their own in the typed requests, never entries of the attribute map.
    static let fieldKeys: Set<String> = [
        AttributeKey.accessGroup, AttributeKey.accessible, AttributeKey.synchronizable, AttributeKey.accessControl,
    ]

    /// Checks an add.
    public static func validate(_ item: NewItem, valueLimit: Int) throws(KeychainError) {
        try requireImplemented(item.itemClass)
        guard item.itemClass.isStored else {
            throw KeychainError(KeychainStatus.param, "an identity is added as its certificate and its private key")
        }
        if item.itemClass == .key, item.attributes[AttributeKey.tokenID] != nil {
            throw KeychainError(
                KeychainStatus.param,
                "a key in a token is generated there (SecKeyCreateRandomKey), never imported"
            )
        }
        try checkAttributes(item.attributes, itemClass: item.itemClass, settable: true)
        try checkGroup(item.accessGroup)
        try checkFlags(item.accessControlFlags)
        try checkValue(item.data, valueLimit: valueLimit)
        try checkReturns(item.returns)
    }

    /// Checks a query (CopyMatching, Update, Delete).
    public static func validate(_ query: ItemQuery) throws(KeychainError) {
        try requireImplemented(query.itemClass)
        try checkAttributes(query.attributes, itemClass: query.itemClass, settable: false)
        try checkGroup(query.accessGroup)
        try checkReturns(query.returns)
        if case .count(let count) = query.limit, count < 1 {
            throw KeychainError(KeychainStatus.param, "the match limit must be positive")
        }
    }

    /// Checks the changes of an update to items of `itemClass`.
    public static func validate(_ changes: ItemChanges, itemClass: ItemClass, valueLimit: Int) throws(KeychainError) {
        try requireImplemented(itemClass)
        switch itemClass {
        case .identity:
            throw KeychainError(KeychainStatus.param, "an identity is updated as its certificate and its private key")
        case .key, .certificate:
            // A key's material and a certificate's DER are what their attributes are read from.
            if changes.data != nil {
                throw KeychainError(KeychainStatus.param, "the data of a key or a certificate cannot be changed")
            }
            if changes.attributes[AttributeKey.tokenID] != nil {
                throw KeychainError(KeychainStatus.readOnlyAttr, "tkid is set when a key is generated")
            }
            // A key made non-extractable stays so: `extr` may be cleared, never set (setting it on a key that is
            // extractable already would change nothing).
            if itemClass == .key, case .bool(true)? = changes.attributes[AttributeKey.isExtractable] {
                throw KeychainError(
                    KeychainStatus.readOnlyAttr,
                    "extr is set when a key is generated or added, and only ever cleared"
                )
            }
            if let derived = changes.attributes.keys.first(where: AttributeKey.certificateDerived.contains),
                itemClass == .certificate
            {
                throw KeychainError(KeychainStatus.readOnlyAttr, "\(derived) is read from the certificate")
            }
        default: break
        }
        try checkAttributes(changes.attributes, itemClass: itemClass, settable: true)
        try checkGroup(changes.accessGroup)
        try checkFlags(changes.accessControlFlags)
        if let data = changes.data { try checkValue(data, valueLimit: valueLimit) }
    }

    public static func requireImplemented(_ itemClass: ItemClass) throws(KeychainError) {
        guard itemClass.isImplemented else {
            throw KeychainError(KeychainStatus.unimplemented, "item class \(itemClass.rawValue) is not supported yet")
        }
    }

    /// What one attribute key of a class allows, found with one hash: every lookup runs this check.
    struct Rule {
        let kind: AttributeKind
        /// `agrp`, `pdmn`, `sync`, `accc`: given in fields of their own, never in the attribute map.
        let isField: Bool
        let isReadOnly: Bool
    }

    private static func rules(of itemClass: ItemClass) -> [String: Rule] {
        Dictionary(
            uniqueKeysWithValues: AttributeKey.kinds(for: itemClass).map { key, kind in
                (
                    key,
                    Rule(kind: kind, isField: fieldKeys.contains(key), isReadOnly: AttributeKey.readOnly.contains(key))
                )
            }
        )
    }

    private static let genericPasswordRules = rules(of: .genericPassword)
    private static let internetPasswordRules = rules(of: .internetPassword)
    private static let keyRules = rules(of: .key)
    private static let certificateRules = rules(of: .certificate)
    private static let identityRules = rules(of: .identity)

    static func checkAttributes(
        _ attributes: [String: AttributeValue],
        itemClass: ItemClass,
        settable: Bool
    )
        throws(KeychainError)
    {
        guard !attributes.isEmpty else { return }
        let rules: [String: Rule]
        switch itemClass {
        case .genericPassword: rules = genericPasswordRules
        case .internetPassword: rules = internetPasswordRules
        case .key: rules = keyRules
        case .certificate: rules = certificateRules
        case .identity: rules = identityRules
        }
        for (key, value) in attributes {
            guard let rule = rules[key] else {
                throw KeychainError(
                    KeychainStatus.noSuchAttr,
                    "\(printable(key)) is not an attribute of class \(itemClass.rawValue)"
                )
            }
            if rule.isField {
                throw KeychainError(KeychainStatus.param, "\(key) is given in its own field, not as an attribute")
            }
            if settable && rule.isReadOnly {
                throw KeychainError(KeychainStatus.readOnlyAttr, "\(key) is set by the keychain")
            }
            let size: Int
            switch (rule.kind, value) {
            case (.string, .string(let text)), (.blob, .string(let text)), (.dataPreferred, .string(let text)),
                (.fourCharCode, .string(let text)):
                size = text.utf8.count
            case (.fourCharCode, .int(let code)):
                guard UInt32(exactly: code) != nil else {
                    throw KeychainError(KeychainStatus.param, "\(key) must be a four-character code (0...0xFFFFFFFF)")
                }
                continue
            case (.blob, .data(let data)), (.dataPreferred, .data(let data)): size = data.count
            case (.bool, .bool), (.int, .int): continue
            case (.stringMap, .data(let data)):
                _ = try StringAttributes.decode(data)
                guard data.count <= stringAttributesLimit else {
                    throw KeychainError(
                        KeychainStatus.dataTooLarge,
                        "the string attributes are \(data.count) bytes encoded; the limit is \(stringAttributesLimit)"
                    )
                }
                continue
            case (.date, .date(let date)):
                guard date.timeIntervalSinceReferenceDate.isFinite else {
                    throw KeychainError(KeychainStatus.param, "\(key) must be a finite date")
                }
                continue
            default:
                throw KeychainError(KeychainStatus.param, "\(key) must be \(expected(rule.kind)), not \(value)")
            }
            guard size <= attributeLimit else {
                throw KeychainError(
                    KeychainStatus.dataTooLarge,
                    "\(key) is \(size) bytes; the limit is \(attributeLimit)"
                )
            }
        }
    }

    static func expected(_ kind: AttributeKind) -> String {
        switch kind {
        case .string: "a string"
        case .blob, .dataPreferred: "a string or data"
        case .bool: "a boolean"
        case .int: "a number"
        case .date: "a date"
        case .accessControl: "a SecAccessControl"
        case .stringMap: "an encoded string attribute map"
        case .fourCharCode: "a four-character code (a number) or a string"
        }
    }

    static func checkGroup(_ group: String?) throws(KeychainError) {
        guard let group else { return }
        let size = group.utf8.count
        guard size <= groupLimit else {
            throw KeychainError(
                KeychainStatus.dataTooLarge,
                "the access group name is \(size) bytes; the limit is \(groupLimit)"
            )
        }
    }

    /// Checks the access-control flags of a key that is not stored (an add's are checked with the add).
    public static func validateAccessControl(_ flags: UInt?) throws(KeychainError) { try checkFlags(flags) }

    static func checkFlags(_ flags: UInt?) throws(KeychainError) {
        guard let flags else { return }
        // User presence, device passcode and biometry are enforced at each use (an authentication token); a
        // companion device and an application password are not.
        let constraints = flags & ~(AccessControlFlag.combinators | AccessControlFlag.authenticationConstraints)
        guard constraints == 0 else {
            throw KeychainError(
                KeychainStatus.unimplemented,
                "access-control flags 0x\(String(constraints, radix: 16)) (companion or application password) "
                    + "cannot be enforced by Keyseal yet"
            )
        }
    }

    static func checkValue(_ data: Data, valueLimit: Int) throws(KeychainError) {
        guard data.count <= valueLimit else {
            throw KeychainError(
                KeychainStatus.dataTooLarge,
                "the secret is \(data.count) bytes; the limit is \(valueLimit)"
            )
        }
    }

    static func checkReturns(_ returns: ReturnOptions) throws(KeychainError) {
        guard returns.isSubset(of: [.data, .attributes, .persistentRef, .ref]) else {
            throw KeychainError(KeychainStatus.param, "unknown return options 0x\(String(returns.rawValue, radix: 16))")
        }
    }

    /// A key for a message: at most 64 characters, control characters replaced.
    static func printable(_ key: String) -> String {
        let cut = String(
            key.unicodeScalars.prefix(64).map { $0.properties.generalCategory == .control ? "?" : Character($0) }
        )
        return cut.count < key.unicodeScalars.count ? cut + "…" : cut
    }
}
