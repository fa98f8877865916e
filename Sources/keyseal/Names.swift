import KeysealModel

// The names the command line accepts and prints for stored codes: accessibility classes, internet protocols and
// authentication types, item classes and attribute keys.

/// Accessibility classes: the long names of docs/COMMAND-LINE.md ("Accessibility names"), Apple's constant names and
/// the stored codes, as the model (`Accessibility`) defines them.
enum AccessibleName {
    /// (stored code, long name, Apple's constant), in DESIGN §3's order.
    static let all: [(code: String, name: String, constant: String)] = Accessibility.allCases.map {
        ($0.rawValue, $0.name, $0.appleConstantName)
    }

    /// The stored code for any accepted spelling, or nil.
    static func code(_ text: String) -> String? { Accessibility(parsing: text)?.rawValue }

    /// The long name of a stored code (the code itself when unknown).
    static func name(_ code: String) -> String { Accessibility(rawValue: code)?.name ?? code }

    static let help = all.map(\.name).joined(separator: ", ")
}

/// Four-character codes with readable names (`kSecAttrProtocol…`, `kSecAttrAuthenticationType…`).
struct FourCharNames: Sendable {
    let entries: [(name: String, code: String)]

    /// The stored code for a name or a 4-character code (shorter codes are padded with spaces, as Apple's are).
    func code(_ text: String) -> String? {
        let lowered = text.lowercased()
        if let entry = entries.first(where: { $0.name == lowered }) { return entry.code }
        if let entry = entries.first(where: { $0.code == text || trimmed($0.code) == text }) { return entry.code }
        guard text.utf8.count == 4 || (!text.isEmpty && text.utf8.count < 4 && text.allSatisfy(\.isASCII)) else {
            return nil
        }
        return text.utf8.count == 4 ? text : text + String(repeating: " ", count: 4 - text.utf8.count)
    }

    /// The readable name of a stored code (the code, trimmed, when it has none).
    func name(_ code: String) -> String { entries.first { $0.code == code }?.name ?? trimmed(code) }

    private func trimmed(_ code: String) -> String {
        var text = Substring(code)
        while text.last == " " { text.removeLast() }
        return String(text)
    }

    /// Internet protocols: scheme names and Apple's codes.
    static let protocols = FourCharNames(entries: [
        ("https", "htps"), ("http", "http"), ("ftp", "ftp "), ("ftps", "ftps"), ("ftp-account", "ftpa"),
        ("ssh", "ssh "), ("sftp", "ssh "), ("imap", "imap"), ("imaps", "imps"), ("smtp", "smtp"), ("pop3", "pop3"),
        ("pop3s", "pops"), ("ldap", "ldap"), ("ldaps", "ldps"), ("irc", "irc "), ("ircs", "ircs"),
        ("nntp", "nntp"), ("nntps", "ntps"), ("socks", "sox "), ("telnet", "teln"), ("telnets", "tels"),
        ("smb", "smb "), ("afp", "afp "), ("appletalk", "atlk"), ("rtsp", "rtsp"), ("rtsp-proxy", "rtsx"),
        ("http-proxy", "htpx"), ("https-proxy", "htsx"), ("ftp-proxy", "ftpx"), ("daap", "daap"), ("eppc", "eppc"),
        ("ipp", "ipp "), ("cvs", "cvsp"), ("svn", "svn "),
    ])

    /// Authentication types: names and Apple's codes.
    static let authenticationTypes = FourCharNames(entries: [
        ("default", "dflt"), ("form", "form"), ("http", "http"), ("http-basic", "http"), ("http-digest", "httd"),
        ("ntlm", "ntlm"), ("msn", "msna"), ("dpa", "dpaa"), ("rpa", "rpaa"),
    ])
}

/// Item classes as printed.
enum ItemClassName {
    static func name(_ code: String) -> String {
        switch code {
        case "genp": "generic-password"
        case "inet": "internet-password"
        default: code
        }
    }
}

/// Attribute keys (Apple's four-character names) and their long names in `--json` output.
enum AttributeName {
    static let account = "acct"
    static let service = "svce"
    static let server = "srvr"
    static let `protocol` = "ptcl"
    static let port = "port"
    static let path = "path"
    static let securityDomain = "sdmn"
    static let authenticationType = "atyp"
    static let label = "labl"
    static let comment = "icmt"
    static let description = "desc"
    static let generic = "gena"
    static let creator = "crtr"
    static let type = "type"
    static let accessible = "pdmn"
    static let accessGroup = "agrp"
    static let created = "cdat"
    static let modified = "mdat"
    static let synchronizable = "sync"
    static let invisible = "invi"
    static let negative = "nega"

    /// Output order and long names.
    static let ordered: [(key: String, name: String)] = [
        (account, "account"), (service, "service"), (server, "server"), (`protocol`, "protocol"), (port, "port"),
        (path, "path"), (securityDomain, "securityDomain"), (authenticationType, "authenticationType"),
        (label, "label"), (comment, "comment"), (description, "description"), (generic, "generic"),
        (creator, "creator"), (type, "type"), (accessible, "accessible"), (accessGroup, "accessGroup"),
        (created, "created"), (modified, "modified"), (synchronizable, "synchronizable"),
        (invisible, "invisible"), (negative, "negative"),
    ]

    /// Primary-key attributes besides the access group, with their defaults (DESIGN §5, FACTS "primary keys").
    static func primaryKey(internet: Bool) -> [String] {
        internet ? [account, securityDomain, server, `protocol`, authenticationType, port, path] : [account, service]
    }
}
