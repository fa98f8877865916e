import ArgumentParser
import FoundationEssentials
import KeysealClient

private let genericPassword = ItemClass.genericPassword
private let internetPassword = ItemClass.internetPassword

/// The attribute flags of an item command, as `security` spells them.
protocol ItemFlags: ParsableArguments {
    static var itemClass: ItemClass { get }
    /// The short names of the attribute options (`a`, `s`, …), for the find commands' own parser (FindParser).
    static var attributeOptions: Set<Character> { get }
    var accessGroup: String? { get }
    /// The attributes given, under Apple's keys; bad values are usage errors.
    func attributes() throws -> [String: AttributeValue]
    /// The attributes of the attribute options given as text, by short name; bad values are usage errors.
    static func attributes(_ given: [Character: String]) throws -> [String: AttributeValue]
}

extension ItemFlags {
    static var isInternet: Bool { itemClass == internetPassword }
}

struct GenericPasswordFlags: ItemFlags {
    static var itemClass: ItemClass { genericPassword }

    @Option(name: .customShort("a"), help: ArgumentHelp("Account name.", valueName: "account"))
    var account: String?
    @Option(name: .customShort("s"), help: ArgumentHelp("Service name.", valueName: "service"))
    var service: String?
    @Option(name: .customShort("l"), help: ArgumentHelp("Label.", valueName: "label"))
    var label: String?
    @Option(name: .customShort("j"), help: ArgumentHelp("Comment.", valueName: "comment"))
    var comment: String?
    @Option(name: .customShort("D"), help: ArgumentHelp("Kind (description).", valueName: "kind"))
    var kind: String?
    @Option(name: .customShort("G"), help: ArgumentHelp("Generic attribute value.", valueName: "value"))
    var generic: String?
    @Option(name: .customShort("c"), help: ArgumentHelp("Creator (a 4-character code).", valueName: "creator"))
    var creator: String?
    @Option(name: .customShort("C"), help: ArgumentHelp("Type (a 4-character code).", valueName: "type"))
    var type: String?
    @Option(name: .long, help: ArgumentHelp("Access group (default: your first group).", valueName: "group"))
    var accessGroup: String?

    static let attributeOptions: Set<Character> = ["a", "s", "l", "j", "D", "G", "c", "C"]

    func attributes() throws -> [String: AttributeValue] {
        try Self.attributes(
            ["a": account, "s": service, "l": label, "j": comment, "D": kind, "G": generic, "c": creator, "C": type]
                .compactMapValues { $0 }
        )
    }

    static func attributes(_ given: [Character: String]) throws -> [String: AttributeValue] {
        var map: [String: AttributeValue] = [:]
        map[AttributeName.account] = given["a"].map(AttributeValue.string)
        map[AttributeName.service] = given["s"].map(AttributeValue.string)
        map[AttributeName.label] = given["l"].map(AttributeValue.string)
        map[AttributeName.comment] = given["j"].map(AttributeValue.string)
        map[AttributeName.description] = given["D"].map(AttributeValue.string)
        map[AttributeName.generic] = given["G"].map { .data(Data($0.utf8)) }
        map[AttributeName.creator] = given["c"].map(AttributeValue.string)
        map[AttributeName.type] = given["C"].map(AttributeValue.string)
        return map
    }
}

struct InternetPasswordFlags: ItemFlags {
    static var itemClass: ItemClass { internetPassword }

    @Option(name: .customShort("a"), help: ArgumentHelp("Account name.", valueName: "account"))
    var account: String?
    @Option(name: .customShort("s"), help: ArgumentHelp("Server name.", valueName: "server"))
    var server: String?
    @Option(
        name: .customShort("r"),
        help: ArgumentHelp(
            "Protocol: a scheme name (https, http, ftp, ssh, imap, smtp, ldap, …) or a 4-character code (htps).",
            valueName: "protocol"
        )
    )
    var `protocol`: String?
    @Option(name: .customShort("P"), help: ArgumentHelp("Port number.", valueName: "port"))
    var port: Int?
    @Option(name: .customShort("p"), help: ArgumentHelp("Path.", valueName: "path"))
    var path: String?
    @Option(name: .customShort("d"), help: ArgumentHelp("Security domain.", valueName: "domain"))
    var domain: String?
    @Option(
        name: .customShort("t"),
        help: ArgumentHelp(
            "Authentication type: default, form, http, http-digest, ntlm, msn, dpa, rpa, or a 4-character code (dflt).",
            valueName: "type"
        )
    )
    var authenticationType: String?
    @Option(name: .customShort("l"), help: ArgumentHelp("Label.", valueName: "label"))
    var label: String?
    @Option(name: .customShort("j"), help: ArgumentHelp("Comment.", valueName: "comment"))
    var comment: String?
    @Option(name: .customShort("D"), help: ArgumentHelp("Kind (description).", valueName: "kind"))
    var kind: String?
    @Option(name: .customShort("c"), help: ArgumentHelp("Creator (a 4-character code).", valueName: "creator"))
    var creator: String?
    @Option(name: .customShort("C"), help: ArgumentHelp("Type (a 4-character code).", valueName: "type"))
    var type: String?
    @Option(name: .long, help: ArgumentHelp("Access group (default: your first group).", valueName: "group"))
    var accessGroup: String?

    static let attributeOptions: Set<Character> = ["a", "s", "r", "P", "p", "d", "t", "l", "j", "D", "c", "C"]

    func validate() throws { _ = try attributes() }

    func attributes() throws -> [String: AttributeValue] {
        try Self.attributes(
            [
                "a": account, "s": server, "r": self.protocol, "P": port.map { String($0) }, "p": path, "d": domain,
                "t": authenticationType, "l": label, "j": comment, "D": kind, "c": creator, "C": type,
            ].compactMapValues { $0 }
        )
    }

    static func attributes(_ given: [Character: String]) throws -> [String: AttributeValue] {
        var map: [String: AttributeValue] = [:]
        map[AttributeName.account] = given["a"].map(AttributeValue.string)
        map[AttributeName.server] = given["s"].map(AttributeValue.string)
        if let text = given["r"] {
            guard let code = FourCharNames.protocols.code(text) else {
                throw ValidationError("-r: unknown protocol \(text) (a scheme name like https, or a 4-character code)")
            }
            map[AttributeName.protocol] = .string(code)
        }
        if let text = given["P"] {
            guard let port = Int(text), (0...65535).contains(port) else {
                throw ValidationError("-P: a port is 0–65535")
            }
            map[AttributeName.port] = .int(Int64(port))
        }
        map[AttributeName.path] = given["p"].map(AttributeValue.string)
        map[AttributeName.securityDomain] = given["d"].map(AttributeValue.string)
        if let text = given["t"] {
            guard let code = FourCharNames.authenticationTypes.code(text) else {
                throw ValidationError(
                    "-t: unknown authentication type \(text) (default, form, http, ntlm, … or a 4-character code)"
                )
            }
            map[AttributeName.authenticationType] = .string(code)
        }
        map[AttributeName.label] = given["l"].map(AttributeValue.string)
        map[AttributeName.comment] = given["j"].map(AttributeValue.string)
        map[AttributeName.description] = given["D"].map(AttributeValue.string)
        map[AttributeName.creator] = given["c"].map(AttributeValue.string)
        map[AttributeName.type] = given["C"].map(AttributeValue.string)
        return map
    }
}

/// Where an add's secret comes from.
struct SecretFlags: ParsableArguments {
    @Option(
        name: .customShort("w"),
        help: ArgumentHelp(
            "The password. Other local users can read command lines: prefer --password-stdin, or put -w last to be prompted.",
            valueName: "password"
        )
    )
    var password: String?
    @Flag(name: .long, help: "Read the password from standard input (all of it, less one trailing newline).")
    var passwordStdin = false
    @Flag(name: .long, help: .hidden)
    var passwordPrompt = false
    @Option(
        name: .customShort("X"),
        help: ArgumentHelp(
            "The password in hexadecimal. Other local users can read command lines: prefer --hex-stdin.",
            valueName: "hex"
        )
    )
    var hexPassword: String?
    @Flag(
        name: .long,
        help: "Read the password in hexadecimal from standard input (whitespace between digits is ignored)."
    )
    var hexStdin = false

    func validate() throws {
        let sources = [password != nil, passwordStdin, passwordPrompt, hexPassword != nil, hexStdin].filter { $0 }.count
        if sources > 1 { throw ValidationError("give the password one way: -w, --password-stdin, -X or --hex-stdin") }
        if let hexPassword, Hex.decode(hexPassword) == nil {
            throw ValidationError("-X takes an even number of hexadecimal digits")
        }
    }

    /// The secret, or nil when none was given.
    func secret() throws -> Data? {
        if let password { return Data(password.utf8) }
        if let hexPassword { return Hex.decode(hexPassword).map { Data($0) } }
        if hexStdin {
            var bytes = try SecretInput.readStandardInput(limit: 2 * Wire.valueLimit + 64 << 10)
            defer { SecretInput.wipe(&bytes) }
            guard let decoded = SecretInput.decodeHex(bytes) else {
                throw CommandFailure(status: -50, message: "--hex-stdin takes an even number of hexadecimal digits")
            }
            return decoded
        }
        if passwordStdin {
            var bytes = try SecretInput.readStandardInput(limit: Wire.valueLimit + 1)
            defer { SecretInput.wipe(&bytes) }
            var end = bytes.count
            if end > 0 && bytes[end - 1] == UInt8(ascii: "\n") {
                end -= 1
                if end > 0 && bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            }
            return Data(bytes[0..<end])
        }
        if passwordPrompt {
            let typed = try SecretInput.prompt("password")
            return typed.withUnsafeBytes { Data($0) }
        }
        return nil
    }
}

/// The accessibility flag.
struct AccessibleFlag: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Accessibility class: \(AccessibleName.help); Apple's constant names and stored codes work too.",
            valueName: "class"
        )
    )
    var accessible: String?

    func validate() throws {
        if let accessible, AccessibleName.code(accessible) == nil {
            throw ValidationError("--accessible: unknown class \(accessible); one of \(AccessibleName.help)")
        }
    }

    var code: String? { accessible.flatMap(AccessibleName.code) }
    var accessibility: Accessibility? { code.flatMap(Accessibility.init(rawValue:)) }
}

// MARK: - add

/// `add-generic-password` and `add-internet-password`.
/// What both add commands take besides the item's attributes: the secret, the class and -U.
struct AddFlags: ParsableArguments {
    @OptionGroup var secret: SecretFlags
    @OptionGroup var accessible: AccessibleFlag
    @Flag(name: .customShort("U"), help: "Update the item if it exists.")
    var upsert = false
}

protocol AddCommand: ClientCommand {
    associatedtype Flags: ItemFlags
    var item: Flags { get }
    var options: AddFlags { get }
}

extension AddCommand {
    func execute(_ client: DaemonClient) throws {
        let attributes = try item.attributes()
        let data = try options.secret.secret()
        if let count = data?.count, count > Wire.valueLimit {
            throw CommandFailure(
                status: -25302,
                message: "the password is \(count) bytes; the limit is \(Wire.valueLimit)"
            )
        }
        let newItem = NewItem(
            itemClass: Flags.itemClass,
            attributes: attributes,
            accessGroup: item.accessGroup,
            accessibility: options.accessible.accessibility ?? .whenUnlocked,
            data: data ?? Data()
        )
        let outcome = try add(client, newItem, attributes: attributes, data: data)
        if global.json { Console.out(JSON.object([("result", .string(outcome))]).rendered) }
    }

    /// Adds; with -U a duplicate is updated instead: only the attributes given change, and the accessibility
    /// stays unless --accessible is given.
    private func add(
        _ client: DaemonClient,
        _ newItem: NewItem,
        attributes: [String: AttributeValue],
        data: Data?
    ) throws(CommandFailure) -> String {
        do {
            _ = try client.send(.add(newItem))
            return "added"
        } catch {
            guard error.status == -25299 && options.upsert else { throw error }
        }
        var key: [String: AttributeValue] = [:]
        for name in AttributeName.primaryKey(internet: Flags.isInternet) {
            key[name] = attributes[name] ?? (name == AttributeName.port ? .int(0) : .string(""))
        }
        let query = ItemQuery(itemClass: Flags.itemClass, attributes: key, accessGroup: item.accessGroup, limit: .one)
        var changes = ItemChanges(accessibility: options.accessible.accessibility, data: data)
        changes.attributes = attributes.filter { key[$0.key] == nil }
        _ = try client.send(.update(query, changes))
        return "updated"
    }
}

struct AddGenericPassword: AddCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-generic-password",
        abstract: "Add a generic password (with -U, update it if it exists).",
        discussion: """
            With -U an existing item (same account, service and access group) is updated: only the attributes \
            given change, and the accessibility stays unless --accessible is given. Without -w, --password-stdin \
            or -X the password is empty (as with security); put -w last to be prompted.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var item: GenericPasswordFlags
    @OptionGroup var options: AddFlags

    func validate() throws {
        if item.account == nil || item.service == nil {
            throw ValidationError("add-generic-password needs -a ACCOUNT and -s SERVICE")
        }
    }
}

struct AddInternetPassword: AddCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-internet-password",
        abstract: "Add an internet password (with -U, update it if it exists).",
        discussion: """
            The item's identity is account, server, protocol, port, path, security domain and authentication \
            type (each empty or 0 when not given) and the access group. With -U only the attributes given change.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var item: InternetPasswordFlags
    @OptionGroup var options: AddFlags

    func validate() throws {
        if item.account == nil || item.server == nil {
            throw ValidationError("add-internet-password needs -a ACCOUNT and -s SERVER")
        }
    }
}

// MARK: - find

/// `-w` and `-g` of the find commands.
struct FindOutputFlags: ParsableArguments {
    @Flag(name: .customShort("w"), help: "Print only the password.")
    var printSecretOnly = false
    @Flag(name: .customShort("g"), help: "Print the password (on stderr) after the attributes.")
    var printSecret = false

    func validate() throws {
        if printSecretOnly && printSecret { throw ValidationError("give -w or -g, not both") }
    }
}

protocol FindCommand: ClientCommand {
    associatedtype Flags: ItemFlags
    var item: Flags { get }
    var accessible: AccessibleFlag { get }
    var output: FindOutputFlags { get }
}

extension FindCommand {
    /// The command as a plain value, the one FindParser produces for the same command line.
    func invocation() throws -> FindInvocation {
        FindInvocation(
            itemClass: Flags.itemClass,
            attributes: try item.attributes(),
            accessGroup: item.accessGroup,
            accessibility: accessible.accessibility,
            output: output.printSecretOnly ? .secretOnly : output.printSecret ? .attributesAndSecret : .attributes,
            socket: global.socket,
            json: global.json
        )
    }

    func run() throws {
        let status = try invocation().run()
        if status != 0 { throw ExitCode(status) }
    }

    func execute(_ client: DaemonClient) throws { try invocation().execute(client) }
}

/// A find command, however its command line was parsed (by ArgumentParser or by FindParser): all its execution
/// reads.
struct FindInvocation: Equatable {
    enum Output: Equatable {
        /// Neither -w nor -g.
        case attributes
        /// -w.
        case secretOnly
        /// -g.
        case attributesAndSecret
    }

    var itemClass: ItemClass
    var attributes: [String: AttributeValue]
    var accessGroup: String?
    var accessibility: Accessibility?
    var output: Output
    /// --socket and --json.
    var socket: String?
    var json: Bool

    var displayName: String { itemClass == internetPassword ? "find-internet-password" : "find-generic-password" }

    /// Finds the item and prints it; a failure is reported as every client command reports it. Returns the exit
    /// status.
    func run() -> Int32 {
        do {
            try execute(DaemonClient(socketPath: GlobalOptions.socketPath(socket)))
            return 0
        } catch {
            error.report(command: displayName, json: json)
            return error.exitCode
        }
    }

    func execute(_ client: DaemonClient) throws(CommandFailure) {
        let wantsSecret = output != .attributes
        let query = ItemQuery(
            itemClass: itemClass,
            attributes: attributes,
            accessGroup: accessGroup,
            accessibility: accessibility,
            synchronizable: .any,
            limit: .one,
            returns: wantsSecret ? [.data, .attributes] : .attributes
        )
        guard case .records(let records) = try client.send(.copyMatching(query)), var record = records.first else {
            throw CommandFailure(status: -25300, message: "The specified item could not be found in the keychain.")
        }
        defer { record.wipeData() }
        if json {
            Console.out(ItemPrinter.json(record, secret: wantsSecret).rendered)
        } else if output == .secretOnly {
            Console.outBytes(record.data ?? Data())
        } else {
            Console.write(ItemPrinter.text(record))
            if output == .attributesAndSecret { Console.err(ItemPrinter.passwordLine(record.data ?? Data())) }
        }
    }
}

struct FindGenericPassword: FindCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-generic-password",
        abstract: "Find a generic password.",
        discussion:
            "-w prints only the password and a newline; -g prints the attributes on stdout and the password on stderr; neither prints the attributes."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var item: GenericPasswordFlags
    @OptionGroup var accessible: AccessibleFlag
    @OptionGroup var output: FindOutputFlags
}

struct FindInternetPassword: FindCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-internet-password",
        abstract: "Find an internet password.",
        discussion:
            "-w prints only the password and a newline; -g prints the attributes on stdout and the password on stderr; neither prints the attributes."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var item: InternetPasswordFlags
    @OptionGroup var accessible: AccessibleFlag
    @OptionGroup var output: FindOutputFlags
}

// MARK: - delete

protocol DeleteCommand: ClientCommand {
    associatedtype Flags: ItemFlags
    var item: Flags { get }
    var accessible: AccessibleFlag { get }
}

extension DeleteCommand {
    func execute(_ client: DaemonClient) throws {
        var query = ItemQuery(
            itemClass: Flags.itemClass,
            attributes: try item.attributes(),
            accessGroup: item.accessGroup,
            accessibility: accessible.accessibility,
            synchronizable: .any,
            limit: .all,
            limitGiven: true,
            returns: .persistentRef
        )
        guard case .records(let records) = try client.send(.copyMatching(query)) else { throw unexpected }
        query.limit = .all
        query.limitGiven = false
        query.returns = []
        _ = try client.send(.delete(query))
        if global.json {
            Console.out(JSON.object([("deleted", .int(Int64(records.count)))]).rendered)
        } else {
            Console.out("deleted \(records.count) item\(records.count == 1 ? "" : "s")")
        }
    }
}

struct DeleteGenericPassword: DeleteCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-generic-password",
        abstract: "Delete every generic password that matches the flags given."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var item: GenericPasswordFlags
    @OptionGroup var accessible: AccessibleFlag
}

struct DeleteInternetPassword: DeleteCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-internet-password",
        abstract: "Delete every internet password that matches the flags given."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var item: InternetPasswordFlags
    @OptionGroup var accessible: AccessibleFlag
}

// MARK: - dump-keychain

struct DumpKeychain: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump-keychain",
        abstract:
            "List every visible item's attributes (-d: and secrets); items of locked classes are listed as locked."
    )

    @OptionGroup var global: GlobalOptions
    @Flag(name: .customShort("d"), help: "Include the secrets.")
    var secrets = false

    func execute(_ client: DaemonClient) throws {
        var items: [ItemRecord] = []
        var lockedClasses: [String] = []
        for itemClass in [genericPassword, internetPassword] {
            if let found = try find(client, itemClass: itemClass, accessibility: nil) {
                items += found
                continue
            }
            // Some class is locked: list class by class.
            for entry in AccessibleName.all {
                if let found = try find(client, itemClass: itemClass, accessibility: entry.code) {
                    items += found
                } else if !lockedClasses.contains(entry.code) {
                    lockedClasses.append(entry.code)
                }
            }
        }
        defer {
            for index in items.indices { items[index].wipeData() }
        }
        var counts: [String: Int] = [:]
        if !lockedClasses.isEmpty, case .status(let status)? = try? client.send(.status) {
            for (accessibility, count) in status.itemCounts { counts[accessibility.rawValue] = count }
        }
        if global.json {
            let locked = lockedClasses.map { code -> JSON in
                var members: [(String, JSON)] = [("accessible", .string(AccessibleName.name(code)))]
                if let count = counts[code] { members.append(("items", .int(Int64(count)))) }
                return .object(members)
            }
            Console.out(
                JSON.object([
                    ("items", .array(items.map { ItemPrinter.json($0, secret: secrets) })), ("locked", .array(locked)),
                ]).rendered
            )
            return
        }
        for record in items {
            Console.write(ItemPrinter.text(record))
            if secrets { Console.out(ItemPrinter.passwordLine(record.data ?? Data())) }
            Console.out("")
        }
        for code in lockedClasses {
            let count = counts[code].map { " (\($0) item\($0 == 1 ? "" : "s"))" } ?? ""
            Console.out("locked: \(AccessibleName.name(code))\(count); run keyseal unlock to list them")
        }
    }

    /// The matching records; nil when a class they are in is locked.
    private func find(
        _ client: DaemonClient,
        itemClass: ItemClass,
        accessibility: String?
    ) throws(CommandFailure) -> [ItemRecord]? {
        let query = ItemQuery(
            itemClass: itemClass,
            accessibility: accessibility.flatMap(Accessibility.init(rawValue:)),
            synchronizable: .any,
            limit: .all,
            limitGiven: true,
            returns: secrets ? [.data, .attributes] : .attributes
        )
        let response: WireResponse
        do {
            response = try client.send(.copyMatching(query))
        } catch {
            if error.status == -25300 { return [] }
            if error.status == -25308 { return nil }
            throw error
        }
        guard case .records(let records) = response else { throw unexpected }
        return records
    }
}

// MARK: - printing items

enum ItemPrinter {
    /// `security`'s layout: the class, then one attribute per line.
    static func text(_ record: ItemRecord) -> String {
        var out = "class: \"\(record.itemClass.rawValue)\"\nattributes:\n"
        for (key, _) in AttributeName.ordered {
            guard let value = record.attributes[key] else { continue }
            out += "    \"\(key)\"" + typed(value) + "\n"
        }
        return out
    }

    private static func typed(_ value: AttributeValue) -> String {
        switch value {
        case .string(let text): "<blob>=\(quoted(Data(text.utf8)))"
        case .data(let data): "<blob>=\(quoted(data))"
        case .bool(let flag): "<sint32>=\(flag ? 1 : 0)"
        case .int(let number): "<uint32>=\(number)"
        case .date(let date):
            "<timedate>=\"\(Formatting.iso8601(referenceSeconds: date.timeIntervalSinceReferenceDate))\""
        }
    }

    /// A quoted string when the bytes are printable UTF-8, else hexadecimal.
    private static func quoted(_ data: Data) -> String {
        if let text = String(validating: data, as: UTF8.self), !text.unicodeScalars.contains(where: { $0.value < 0x20 })
        {
            return "\"" + text.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\""
        }
        return "0x" + Hex.encode(data)
    }

    static func passwordLine(_ data: Data) -> String { "password: " + quoted(data) }

    /// The `--json` shape of docs/COMMAND-LINE.md ("JSON output"): long attribute names; the secret only when asked
    /// for.
    static func json(_ record: ItemRecord, secret: Bool) -> JSON {
        var members: [(String, JSON)] = [("class", .string(ItemClassName.name(record.itemClass.rawValue)))]
        for (key, name) in AttributeName.ordered {
            guard let value = record.attributes[key] else { continue }
            let element: JSON
            switch (key, value) {
            case (AttributeName.accessible, .string(let code)): element = .string(AccessibleName.name(code))
            case (AttributeName.protocol, .string(let code)): element = .string(FourCharNames.protocols.name(code))
            case (AttributeName.authenticationType, .string(let code)):
                element = .string(FourCharNames.authenticationTypes.name(code))
            case (_, .string(let text)): element = .string(text)
            case (_, .data(let data)):
                if let text = String(validating: data, as: UTF8.self) {
                    element = .string(text)
                } else {
                    members.append((name + "Base64", .string(data.base64EncodedString())))
                    continue
                }
            case (_, .bool(let flag)): element = .bool(flag)
            case (_, .int(let number)): element = .int(number)
            case (_, .date(let date)):
                element = .string(Formatting.iso8601(referenceSeconds: date.timeIntervalSinceReferenceDate))
            }
            members.append((name, element))
        }
        if secret, let data = record.data {
            if let text = String(validating: data, as: UTF8.self) {
                members.append(("password", .string(text)))
            } else {
                members.append(("data", .string(data.base64EncodedString())))
            }
        }
        return .object(members)
    }
}

extension ItemRecord {
    /// Overwrites the secret in place before it is released.
    mutating func wipeData() {
        data?.withUnsafeMutableBytes { raw in
            for index in raw.indices { raw[index] = 0 }
        }
    }
}
