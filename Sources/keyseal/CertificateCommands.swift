import ArgumentParser
import FoundationEssentials
import Glibc
import KeysealClient

// Certificates and identities (docs/COMMAND-LINE.md, "Keys, certificates, identities"), as macOS `security` prints
// them. keyseald parses the DER and derives what is printed (names, hashes, validity); the CLI only reads files and
// formats.

enum CertificateOutput {
    /// The certificates in a file: every PEM `CERTIFICATE` block, else the file as one DER certificate.
    static func certificates(in contents: Data) -> [Data]? {
        let text = String(decoding: contents, as: UTF8.self)
        let begin = "-----BEGIN CERTIFICATE-----"
        let end = "-----END CERTIFICATE-----"
        guard text.contains(begin) else { return [contents] }
        var found: [Data] = []
        var rest = Substring(text)
        while let start = rest.firstRange(of: begin) {
            guard let stop = rest[start.upperBound...].firstRange(of: end) else { return nil }
            let body = rest[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
            guard let der = Data(base64Encoded: String(body)) else { return nil }
            found.append(der)
            rest = rest[stop.upperBound...]
        }
        return found
    }

    static func upperHex(_ data: Data) -> String { Hex.encode(data).uppercased() }

    /// Whether now is within the certificate's validity period; nil when it is, else why not (macOS's names).
    static func invalidity(_ certificate: WireCertificate) -> String? {
        let now = Double(time(nil))
        if now < certificate.notBefore { return "CSSMERR_TP_CERT_NOT_VALID_YET" }
        if now > certificate.notAfter { return "CSSMERR_TP_CERT_EXPIRED" }
        return nil
    }

    /// `security`'s attribute lines: `"name"<type>=value`.
    static func attributeLines(_ certificate: WireCertificate) -> [String] {
        var lines: [String] = []
        if let email = certificate.emailAddresses.first { lines.append("    \"alis\"<blob>=\"\(email)\"") }
        for name in certificate.attributes.keys.sorted() {
            guard let value = certificate.attributes[name] else { continue }
            switch value {
            case .int(let number):
                let hex = String(UInt32(truncatingIfNeeded: number), radix: 16, uppercase: true)
                lines.append("    \"\(name)\"<uint32>=0x\(String(repeating: "0", count: max(0, 8 - hex.count)))\(hex) ")
            case .string(let text):
                lines.append("    \"\(name)\"<blob>=\"\(text)\"")
            case .data(let data):
                lines.append("    \"\(name)\"<blob>=0x\(upperHex(data))")
            case .bool(let flag):
                lines.append("    \"\(name)\"<uint32>=\(flag ? 1 : 0)")
            case .date(let date):
                lines.append(
                    "    \"\(name)\"<timedate>=\"\(Formatting.iso8601(referenceSeconds: date.timeIntervalSinceReferenceDate))\""
                )
            }
        }
        return lines
    }

    static func json(_ certificate: WireCertificate, pem includePEM: Bool) -> JSON {
        var members: [(String, JSON)] = []
        if case .string(let label)? = certificate.attributes["labl"] { members.append(("label", .string(label))) }
        if let summary = certificate.subjectSummary { members.append(("subjectSummary", .string(summary))) }
        members += [
            ("commonNames", .array(certificate.commonNames.map { .string($0) })),
            ("emailAddresses", .array(certificate.emailAddresses.map { .string($0) })),
            ("sha256", .string(upperHex(certificate.sha256))), ("sha1", .string(upperHex(certificate.sha1))),
            ("notBefore", .string(Formatting.iso8601(unixSeconds: certificate.notBefore))),
            ("notAfter", .string(Formatting.iso8601(unixSeconds: certificate.notAfter))),
        ]
        if case .data(let serial)? = certificate.attributes["slnr"] {
            members.append(("serialNumber", .string(Hex.encode(serial))))
        }
        if case .data(let hash)? = certificate.attributes["pkhh"] {
            members.append(("publicKeyHash", .string(Hex.encode(hash))))
        }
        if case .string(let group)? = certificate.attributes["agrp"] { members.append(("accessGroup", .string(group))) }
        if includePEM { members.append(("pem", .string(PEM.encode(certificate.der, label: "CERTIFICATE")))) }
        return .object(members)
    }

    /// The stored certificates (`.certificate`) or identities (`.identity`), described by keyseald.
    static func find(_ client: DaemonClient, itemClass: ItemClass) throws -> [WireCertificate] {
        let query = ItemQuery(itemClass: itemClass, synchronizable: .any, limit: .all, limitGiven: true)
        guard case .certificates(let found) = try client.send(.certificates(query)) else { throw unexpected }
        return found
    }

    /// Whether a certificate's common name (or, without one, its subject summary) contains `name`.
    static func matches(_ certificate: WireCertificate, name: String) -> Bool {
        let names =
            certificate.commonNames.isEmpty ? certificate.subjectSummary.map { [$0] } ?? [] : certificate.commonNames
        return names.contains { $0.contains(name) }
    }

    static let notFound = CommandFailure(
        status: -25300,
        message: "The specified item could not be found in the keychain."
    )
}

struct AddCertificates: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-certificates",
        abstract: "Add certificates from files (PEM, several per file, or DER)."
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("Certificate files.", valueName: "file"))
    var files: [String]

    func validate() throws {
        if files.isEmpty { throw ValidationError("give at least one certificate file") }
    }

    func execute(_ client: DaemonClient) throws {
        var added = 0
        var failures: [CommandFailure] = []
        for file in files {
            let contents: Data
            do {
                contents = try Data(contentsOf: URL(fileURLWithPath: file))
            } catch {
                failures.append(CommandFailure(status: -36, message: "cannot read \(file)"))
                continue
            }
            guard let certificates = CertificateOutput.certificates(in: contents), !certificates.isEmpty else {
                failures.append(CommandFailure(status: -50, message: "\(file): no PEM or DER certificate"))
                continue
            }
            for (index, der) in certificates.enumerated() {
                do {
                    _ = try client.send(.add(NewItem(itemClass: .certificate, data: der)))
                    added += 1
                } catch {
                    let where_ = certificates.count > 1 ? "\(file), certificate \(index + 1)" : file
                    failures.append(CommandFailure(status: error.status, message: "\(where_): \(error.message)"))
                }
            }
        }
        guard let first = failures.first else {
            if global.json { Console.out(JSON.object([("added", .int(Int64(added)))]).rendered) }
            return
        }
        // Each failure on its own line, in order (with --json, the first as the error document); the certificates
        // that could be added stay added, and the exit status is the first failure's.
        for (index, failure) in failures.enumerated() {
            failure.report(command: Self.displayName, json: global.json && index == 0)
        }
        throw ExitCode(first.exitCode)
    }
}

struct FindCertificate: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-certificate",
        abstract: "Find certificates by common name or e-mail address; print attributes, PEM or hashes."
    )

    @OptionGroup var global: GlobalOptions
    @Flag(name: .customShort("a"), help: "Every match, not only the first.")
    var all = false
    @Option(name: .customShort("c"), help: ArgumentHelp("The common name contains this.", valueName: "name"))
    var name: String?
    @Option(name: .customShort("e"), help: ArgumentHelp("The e-mail address.", valueName: "email"))
    var email: String?
    @Flag(name: .customShort("p"), help: "Print the certificates as PEM.")
    var pem = false
    @Flag(name: .customShort("Z"), help: "Print each certificate's SHA-256 and SHA-1 hashes.")
    var hashes = false

    func execute(_ client: DaemonClient) throws {
        var found = try CertificateOutput.find(client, itemClass: .certificate).filter { certificate in
            (name.map { CertificateOutput.matches(certificate, name: $0) } ?? true)
                && (email.map { wanted in
                    certificate.emailAddresses.contains { $0.lowercased() == wanted.lowercased() }
                } ?? true)
        }
        guard !found.isEmpty else { throw CertificateOutput.notFound }
        if !all { found = [found[0]] }
        if global.json {
            Console.out(JSON.array(found.map { CertificateOutput.json($0, pem: pem) }).rendered)
            return
        }
        for certificate in found {
            if hashes {
                Console.out("SHA-256 hash: \(CertificateOutput.upperHex(certificate.sha256))")
                Console.out("SHA-1 hash: \(CertificateOutput.upperHex(certificate.sha1))")
            }
            if pem {
                Console.out(PEM.encode(certificate.der, label: "CERTIFICATE"))
                continue
            }
            Console.out("keychain: \"\(global.socketPath)\"")
            Console.out("version: 512")
            Console.out("class: 0x80001000 ")
            Console.out("attributes:")
            for line in CertificateOutput.attributeLines(certificate) { Console.out(line) }
        }
    }
}

struct DeleteCertificate: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-certificate",
        abstract: "Delete one certificate, by common name or by SHA-1 (or SHA-256) hash."
    )

    @OptionGroup var global: GlobalOptions
    @Option(name: .customShort("c"), help: ArgumentHelp("The common name contains this.", valueName: "name"))
    var name: String?
    @Option(
        name: .customShort("Z"),
        help: ArgumentHelp("The certificate's SHA-1 or SHA-256 hash, hex.", valueName: "hash")
    )
    var hash: String?

    func validate() throws {
        guard (name == nil) != (hash == nil) else { throw ValidationError("give either -c NAME or -Z HASH") }
        if let hash, Hex.decode(hash).map({ [20, 32].contains($0.count) }) != true {
            throw ValidationError("-Z: a SHA-1 or SHA-256 hash in hex")
        }
    }

    func execute(_ client: DaemonClient) throws {
        let wanted = hash.flatMap { Hex.decode($0) }.map { Data($0) }
        let found = try CertificateOutput.find(client, itemClass: .certificate).filter { certificate in
            if let wanted { return certificate.sha1 == wanted || certificate.sha256 == wanted }
            return CertificateOutput.matches(certificate, name: name ?? "")
        }
        guard let certificate = found.first else { throw CertificateOutput.notFound }
        guard found.count == 1 else {
            throw CommandFailure(
                status: -25299,
                message: "\(found.count) certificates match \"\(name ?? "")\": name one with -Z HASH"
            )
        }
        _ = try client.send(
            .delete(
                ItemQuery(
                    itemClass: .certificate,
                    synchronizable: .any,
                    persistentRef: certificate.reference,
                    limit: .all
                )
            )
        )
        if global.json {
            Console.out(
                JSON.object([
                    ("deleted", .int(1)), ("sha1", .string(CertificateOutput.upperHex(certificate.sha1))),
                ]).rendered
            )
        }
    }
}

struct FindIdentity: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-identity",
        abstract: "List identities: certificates whose private key is in the keychain (-v: valid ones only)."
    )

    @OptionGroup var global: GlobalOptions
    @Flag(name: .customShort("v"), help: "Only identities whose certificate is within its validity period.")
    var validOnly = false

    func execute(_ client: DaemonClient) throws {
        var identities = try CertificateOutput.find(client, itemClass: .identity)
        if validOnly { identities = identities.filter { CertificateOutput.invalidity($0) == nil } }
        if global.json {
            Console.out(
                JSON.array(
                    identities.map { identity in
                        var members: [(String, JSON)] = [
                            ("sha1", .string(CertificateOutput.upperHex(identity.sha1))),
                            ("name", .string(identity.commonNames.first ?? identity.subjectSummary ?? "")),
                            ("valid", .bool(CertificateOutput.invalidity(identity) == nil)),
                        ]
                        if case .data(let hash)? = identity.attributes["pkhh"] {
                            members.append(("applicationLabel", .string(Hex.encode(hash))))
                        }
                        return .object(members)
                    }
                ).rendered
            )
            return
        }
        for (index, identity) in identities.enumerated() {
            let name = identity.commonNames.first ?? identity.subjectSummary ?? ""
            let problem = CertificateOutput.invalidity(identity).map { " (\($0))" } ?? ""
            Console.out("  \(index + 1)) \(CertificateOutput.upperHex(identity.sha1)) \"\(name)\"\(problem)")
        }
        Console.out("     \(identities.count) \(validOnly ? "valid " : "")identities found")
    }
}

struct CreateCSR: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "create-csr",
        abstract: "A PKCS#10 certificate request signed by a stored key, as PEM."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: KeySelection
    @Option(
        name: .long,
        help: ArgumentHelp("The subject, as \"CN=…,O=…\" (CN, O, OU, C, L, ST, STREET, DC, E).", valueName: "subject")
    )
    var subject: String

    func validate() throws {
        if selection.tag == nil && selection.hash == nil { throw ValidationError("give --tag or --hash") }
    }

    func execute(_ client: DaemonClient) throws {
        let reference = try selection.onePrivateKey(client)
        guard case .keyResult(let der) = try client.send(.createCSR(reference: reference, subject: subject)) else {
            throw unexpected
        }
        let pem = PEM.encode(der, label: "CERTIFICATE REQUEST")
        if global.json {
            Console.out(JSON.object([("csr", .string(pem))]).rendered)
        } else {
            Console.out(pem)
        }
    }
}
