import ArgumentParser
import FoundationEssentials
import KeysealClient

// Keys (docs/COMMAND-LINE.md, "Keys, certificates, identities"): generated and used inside keyseald, which answers with
// public keys and signatures only.

/// `--tag`, `-l` and `--hash`: which keys a command means.
struct KeySelection: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The key's application tag (kSecAttrApplicationTag).", valueName: "tag"))
    var tag: String?

    @Option(name: .customShort("l"), help: ArgumentHelp("The key's label.", valueName: "label"))
    var label: String?

    @Option(
        name: .long,
        help: ArgumentHelp("The key's application label: SHA-1 of its public key, in hex.", valueName: "klbl-hex")
    )
    var hash: String?

    func validate() throws {
        if let hash, Hex.decode(hash) == nil { throw ValidationError("--hash: not hex") }
    }

    var attributes: [String: AttributeValue] {
        var attributes: [String: AttributeValue] = [:]
        if let tag { attributes["atag"] = .data(Data(tag.utf8)) }
        if let label { attributes["labl"] = .string(label) }
        if let hash, let bytes = Hex.decode(hash) { attributes["klbl"] = .data(Data(bytes)) }
        return attributes
    }

    /// The matching keys' persistent references and attributes.
    func find(_ client: DaemonClient, privateOnly: Bool = false) throws -> [ItemRecord] {
        var attributes = self.attributes
        if privateOnly { attributes["kcls"] = .string("1") }
        let query = ItemQuery(
            itemClass: .key,
            attributes: attributes,
            synchronizable: .any,
            limit: .all,
            limitGiven: true,
            returns: [.attributes, .persistentRef]
        )
        guard case .records(let records) = try client.send(.copyMatching(query)) else { throw unexpected }
        return records
    }

    /// The persistent reference of the one private key selected: errSecItemNotFound when none matches, errSecParam
    /// when several do.
    func onePrivateKey(_ client: DaemonClient) throws -> Data {
        let keys = try find(client, privateOnly: true)
        guard let reference = keys.first?.persistentRef else {
            throw CommandFailure(status: -25300, message: "no private key matches")
        }
        guard keys.count == 1 else {
            throw CommandFailure(status: -50, message: "\(keys.count) keys match: name one with --hash")
        }
        return reference
    }
}

enum KeyOutput {
    static func typeName(_ key: WireKey) -> String { (key.keyType == "42" ? "rsa" : "ec") + "\(key.bits)" }

    static func string(_ value: AttributeValue?) -> String? {
        switch value {
        case .string(let text)?: text
        case .data(let data)?: String(data: data, encoding: .utf8)
        default: nil
        }
    }

    static func json(_ key: WireKey) -> JSON {
        var members: [(String, JSON)] = [
            ("publicKey", .string(PEM.encode(key.subjectPublicKeyInfo, label: "PUBLIC KEY"))),
            ("applicationLabel", .string(Hex.encode(Array(key.reference.isEmpty ? Data() : label(key))))),
            ("type", .string(typeName(key))), ("hardware", .bool(key.inHardware)),
            ("extractable", .bool(key.extractable)),
        ]
        if let tag = string(key.attributes["atag"]) { members.append(("tag", .string(tag))) }
        if let label = string(key.attributes["labl"]) { members.append(("label", .string(label))) }
        if case .string(let group)? = key.attributes["agrp"] { members.append(("accessGroup", .string(group))) }
        return .object(members)
    }

    static func label(_ key: WireKey) -> Data {
        if case .data(let data)? = key.attributes["klbl"] { return data }
        return Data()
    }

    static func describe(_ client: DaemonClient, _ reference: Data) throws -> WireKey {
        let response = try client.send(.keyOperation(WireKeyOperation(reference: reference, kind: .describe)))
        guard case .key(let key) = response else { throw unexpected }
        return key
    }
}

struct CreateKey: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "create-key",
        abstract: "Generate a key pair in keyseald (--hardware: inside the store's TPM or token); print its public key."
    )

    @OptionGroup var global: GlobalOptions
    @Option(name: .long, help: ArgumentHelp("The key's application tag.", valueName: "tag"))
    var tag: String
    @Option(name: .customShort("l"), help: ArgumentHelp("A label.", valueName: "label"))
    var label: String?
    @Option(name: .long, help: "ec256, ec384, ec521, rsa2048, rsa3072 or rsa4096.")
    var type = "ec256"
    @Flag(name: .long, help: "Generate the key inside the store's TPM or PKCS#11 token (ec256 only).")
    var hardware = false
    @OptionGroup var accessible: AccessibleFlag
    @Option(name: .long, help: ArgumentHelp("The access group.", valueName: "group"))
    var accessGroup: String?

    static let types: [String: (code: String, bits: Int)] = [
        "ec256": ("73", 256), "ec384": ("73", 384), "ec521": ("73", 521), "rsa2048": ("42", 2048),
        "rsa3072": ("42", 3072), "rsa4096": ("42", 4096),
    ]

    func validate() throws {
        guard Self.types[type] != nil else {
            throw ValidationError("--type: one of ec256, ec384, ec521, rsa2048, rsa3072, rsa4096")
        }
    }

    func execute(_ client: DaemonClient) throws {
        let (code, bits) = Self.types[type]!
        var attributes: [String: AttributeValue] = ["atag": .data(Data(tag.utf8))]
        if let label { attributes["labl"] = .string(label) }
        let generation = KeyGenerationRequest(
            keyType: try KeyType(typeCode: code, bits: bits),
            inHardware: hardware,
            attributes: attributes,
            accessGroup: accessGroup,
            accessibility: accessible.accessibility ?? .whenUnlocked
        )
        guard case .key(let key) = try client.send(.generateKey(generation)) else { throw unexpected }
        if global.json {
            Console.out(KeyOutput.json(key).rendered)
        } else {
            Console.out(PEM.encode(key.subjectPublicKeyInfo, label: "PUBLIC KEY"))
        }
    }
}

struct FindKey: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-key",
        abstract: "Find keys by tag, label or application label: attributes and public key."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: KeySelection

    func execute(_ client: DaemonClient) throws {
        var keys: [WireKey] = []
        for record in try selection.find(client) {
            guard let reference = record.persistentRef else { continue }
            keys.append(try KeyOutput.describe(client, reference))
        }
        if global.json {
            Console.out(JSON.array(keys.map(KeyOutput.json)).rendered)
            return
        }
        for key in keys {
            Console.out(
                "key: type \(KeyOutput.typeName(key)) \(key.isPrivate ? "private" : "public")"
                    + "\(key.inHardware ? " hardware" : "") applicationLabel \(Hex.encode(Array(KeyOutput.label(key))))"
                    + (KeyOutput.string(key.attributes["atag"]).map { " tag \"\($0)\"" } ?? "")
                    + (KeyOutput.string(key.attributes["labl"]).map { " label \"\($0)\"" } ?? "")
            )
            Console.out(PEM.encode(key.subjectPublicKeyInfo, label: "PUBLIC KEY"))
        }
    }
}

struct DeleteKey: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-key",
        abstract: "Delete keys by tag, label or application label (a hardware key's object too)."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: KeySelection

    func validate() throws {
        if selection.attributes.isEmpty { throw ValidationError("give --tag, -l or --hash") }
    }

    func execute(_ client: DaemonClient) throws {
        let found = try selection.find(client)
        let query = ItemQuery(itemClass: .key, attributes: selection.attributes, synchronizable: .any, limit: .all)
        _ = try client.send(.delete(query))
        if global.json {
            Console.out(JSON.object([("deleted", .int(Int64(found.count)))]).rendered)
        } else {
            Console.out("deleted \(found.count) key\(found.count == 1 ? "" : "s")")
        }
    }
}

struct SignCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Sign standard input (or --input FILE) with a key; the signature on stdout."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: KeySelection
    @Option(name: .long, help: "ecdsa-sha256, ecdsa-sha384, rsa-pkcs1-sha256 or rsa-pss-sha256.")
    var algorithm = "ecdsa-sha256"
    @Option(name: .long, help: ArgumentHelp("Read the input from a file.", valueName: "file"))
    var input: String?
    @Flag(name: .long, help: "The input is already a digest.")
    var digest = false

    static let algorithms: [String: (message: String, digest: String?)] = [
        "ecdsa-sha256": ("algid:sign:ECDSA:message-X962:SHA256", "algid:sign:ECDSA:digest-X962:SHA256"),
        "ecdsa-sha384": ("algid:sign:ECDSA:message-X962:SHA384", "algid:sign:ECDSA:digest-X962:SHA384"),
        "rsa-pkcs1-sha256": ("algid:sign:RSA:message-PKCS1v15:SHA256", nil),
        "rsa-pss-sha256": ("algid:sign:RSA:message-PSS:SHA256", nil),
    ]

    func validate() throws {
        guard let entry = Self.algorithms[algorithm] else {
            throw ValidationError("--algorithm: one of ecdsa-sha256, ecdsa-sha384, rsa-pkcs1-sha256, rsa-pss-sha256")
        }
        if digest && entry.digest == nil { throw ValidationError("--digest works with the ECDSA algorithms only") }
        if selection.tag == nil && selection.hash == nil { throw ValidationError("give --tag or --hash") }
    }

    func execute(_ client: DaemonClient) throws {
        let reference = try selection.onePrivateKey(client)
        // The wire's value limit bounds what one request may carry.
        let limit = 1 << 20
        let data: Data
        if let input {
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: input))
            } catch {
                throw CommandFailure(status: -36, message: "cannot read \(input)")
            }
        } else {
            data = Data(try SecretInput.readStandardInput(limit: limit))
        }
        guard data.count <= limit else {
            throw CommandFailure(
                status: -25302,
                message: "the input is over \(limit) bytes; sign a digest with --digest"
            )
        }
        let entry = Self.algorithms[algorithm]!
        let operation = WireKeyOperation(
            reference: reference,
            kind: .sign,
            algorithm: digest ? entry.digest! : entry.message,
            data: data
        )
        guard case .keyResult(let signature) = try client.send(.keyOperation(operation)) else { throw unexpected }
        if global.json {
            Console.out(JSON.object([("signature", .string(signature.base64EncodedString()))]).rendered)
        } else {
            Console.rawBytes(signature)
        }
    }
}
