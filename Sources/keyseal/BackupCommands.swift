import ArgumentParser
import FoundationEssentials
import Glibc
import KeysealClient

/// Items done / total on standard error while it is a terminal; silent otherwise.
struct ProgressLine {
    let verb: String
    let enabled = Console.stderrIsTerminal
    private var shown = false
    private var lastDone = -1

    init(_ verb: String) { self.verb = verb }

    mutating func update(_ done: Int, _ total: Int) {
        guard enabled, done != lastDone, total > 0 else { return }
        lastDone = done
        shown = true
        Console.write("\r\(verb): \(done) / \(total) items", to: STDERR_FILENO)
    }

    func finish() {
        if shown { Console.write("\n", to: STDERR_FILENO) }
    }
}

private func countsByClass(_ counts: [Accessibility: Int]) -> [(String, Int)] {
    AccessibleName.all.compactMap { entry in
        Accessibility(rawValue: entry.code).flatMap { counts[$0] }.map { (entry.name, $0) }
    }
}

private func describe(_ counts: [Accessibility: Int]) -> String {
    countsByClass(counts).map { "\($0.0) \($0.1)" }.joined(separator: ", ")
}

private func json(_ counts: [Accessibility: Int]) -> JSON {
    .object(countsByClass(counts).map { ($0.0, .int(Int64($0.1))) })
}

struct ExportCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write a backup of the store to a file (administrators only).",
        discussion: """
            The file holds every exportable item re-encrypted under keys derived from the backup passphrase \
            (Argon2id); nothing is in clear. when-unlocked, after-first-unlock and always items restore on any \
            device with the passphrase; the this-device-only classes only on this device (and only with the \
            passphrase); when-passcode-set-this-device-only items are never exported. The classes included must be \
            available (locked: exit 36) unless --available-only. Items no keychain call can reach (see \
            `keyseal doctor`) are left out and named in the report. keyseal writes the file itself (0600) and never replaces an \
            existing one; a failed export leaves no file behind. The passphrase is prompted for twice on the terminal, or read as \
            one line of standard input with --passphrase-stdin. The passphrase needs at least 10 characters and \
            must not be one character repeated, a straight run or one of the most common choices; \
            --allow-weak-passphrase takes it anyway.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Option(name: .long, help: ArgumentHelp("The backup file to write.", valueName: "file"))
    var output: String
    @Flag(name: .long, help: "Read the backup passphrase from standard input (one line).")
    var passphraseStdin = false
    @Flag(name: .long, help: "Leave out the items of locked classes instead of failing.")
    var availableOnly = false
    @Flag(
        name: .long,
        help: "Take a passphrase that fails the strength floor (short, repeated, a straight run, common)."
    )
    var allowWeakPassphrase = false

    func execute(_ client: DaemonClient) throws {
        let passphrase = try SecretInput.passcode(
            "backup passphrase",
            fromStandardInput: passphraseStdin,
            confirm: true
        )
        try SecretStrength.check(
            passphrase,
            what: "backup passphrase",
            minimum: SecretStrength.passphraseMinimum,
            overrideFlag: "--allow-weak-passphrase",
            allowWeak: allowWeakPassphrase
        )
        let writer: BackupFileWriter
        do { writer = try BackupFileWriter(path: output) } catch { throw CommandFailure(error) }
        defer { writer.discard() }
        var progress = ProgressLine("exporting")
        let report: ExportReport
        do {
            report = try client.connection.exportBackup(
                passphrase: passphrase,
                availableOnly: availableOnly,
                sink: { bytes throws(KeychainError) in try writer.write(bytes) },
                progress: { progress.update($0, $1) }
            )
            progress.finish()
            try writer.commit()
        } catch {
            progress.finish()
            throw CommandFailure(error)
        }
        if global.json {
            var members: [(String, JSON)] = [
                ("file", .string(output)), ("exported", .int(Int64(report.exportedCount))),
                ("byClass", json(report.exported)),
                ("skippedPasscodeOnly", .int(Int64(report.skippedPasscodeOnly))),
                ("skippedUnavailable", json(report.skippedUnavailable)),
            ]
            members.append(("keyDerivationSeconds", .double(report.keyDerivationSeconds)))
            members.append(("undecryptable", .int(Int64(report.undecryptable.count))))
            members.append(
                (
                    "undecryptableItems",
                    .array(
                        report.undecryptable.map { item in
                            .object([
                                ("id", .string(item.id)), ("class", .string(item.itemClass)),
                                ("accessible", .string(AccessibleName.name(item.accessibility))),
                                ("accessGroup", .string(item.accessGroup)), ("reason", .string(item.reason.rawValue)),
                            ])
                        }
                    )
                )
            )
            members.append(
                (
                    "skippedKeys",
                    .array(
                        report.skippedKeys.map { key in
                            var fields: [(String, JSON)] = [
                                ("accessGroup", .string(key.accessGroup)), ("reason", .string(key.reason.rawValue)),
                            ]
                            if let label = key.label { fields.append(("label", .string(label))) }
                            if let tag = key.tag { fields.append(("tag", .string(Self.tagText(tag)))) }
                            return .object(fields)
                        }
                    )
                )
            )
            Console.out(JSON.object(members).rendered)
            return
        }
        var line = "exported \(report.exportedCount) item\(report.exportedCount == 1 ? "" : "s") to \(output)"
        if report.exportedCount > 0 { line += " (\(describe(report.exported)))" }
        Console.out(line)
        if report.skippedPasscodeOnly > 0 {
            Console.out(
                "not exported: \(report.skippedPasscodeOnly) when-passcode-set-this-device-only item\(report.skippedPasscodeOnly == 1 ? "" : "s") (never exported)"
            )
        }
        if !report.skippedUnavailable.isEmpty {
            Console.out("not exported, locked: \(describe(report.skippedUnavailable)) (--available-only)")
        }
        if !report.undecryptable.isEmpty {
            let count = report.undecryptable.count
            Console.out(
                "not exported, undecryptable: \(count) item\(count == 1 ? "" : "s") (`keyseal doctor` lists and deletes them)"
            )
            for item in report.undecryptable {
                Console.out("  \(item.id)  \(item.itemClass)  group \(item.accessGroup)  \(item.reason.rawValue)")
            }
        }
        if !report.skippedKeys.isEmpty {
            let count = report.skippedKeys.count
            Console.out(
                "not exported: \(count) key\(count == 1 ? "" : "s") that cannot leave this device (in hardware, or not extractable)"
            )
            for key in report.skippedKeys {
                var name = "  group \(key.accessGroup)"
                if let label = key.label { name += "  label \"\(label)\"" }
                if let tag = key.tag { name += "  tag \"\(Self.tagText(tag))\"" }
                Console.out(name + "  \(key.reason.rawValue)")
            }
        }
    }

    /// An application tag as text: its UTF-8, or hex digits when it is not text.
    static func tagText(_ tag: Data) -> String {
        String(validating: tag, as: UTF8.self) ?? Hex.encode(tag)
    }
}

struct ImportCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Restore a backup file into the store (administrators only).",
        discussion: """
            Every item is authenticated before anything is written; then all of them are restored in one \
            transaction, re-encrypted under this store's keys. An item whose primary key exists is skipped and \
            reported, or replaced with --replace; this-device-only items from another device are skipped and \
            named. A wrong passphrase exits 51; a truncated, edited or unknown-version file exits 93; in both \
            cases the store is unchanged.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The backup file.", valueName: "file"))
    var file: String
    @Flag(name: .long, help: "Read the backup passphrase from standard input (one line).")
    var passphraseStdin = false
    @Flag(name: .long, help: "Replace items that already exist instead of skipping them.")
    var replace = false

    func execute(_ client: DaemonClient) throws {
        let reader: BackupFileReader
        do { reader = try BackupFileReader(path: file) } catch { throw CommandFailure(error) }
        defer { reader.close() }
        let passphrase = try SecretInput.passcode("backup passphrase", fromStandardInput: passphraseStdin)
        var progress = ProgressLine("importing")
        let report: ImportReport
        do {
            report = try client.connection.importBackup(
                passphrase: passphrase,
                replace: replace,
                source: { maxCount throws(KeychainError) in try reader.read(maxCount: maxCount) },
                progress: { progress.update($0, $1) }
            )
        } catch {
            progress.finish()
            throw CommandFailure(error)
        }
        progress.finish()
        if global.json {
            let skipped = report.skipped.map { item -> JSON in
                var members: [(String, JSON)] = [
                    ("class", .string(ItemClassName.name(item.itemClass))),
                    ("accessible", .string(AccessibleName.name(item.accessibility.rawValue))),
                    ("accessGroup", .string(item.accessGroup)),
                ]
                if let service = item.service {
                    members.append((item.itemClass == "inet" ? "server" : "service", .string(service)))
                }
                if let account = item.account { members.append(("account", .string(account))) }
                members += [("reason", .string(item.reason.rawValue)), ("detail", .string(item.detail))]
                return .object(members)
            }
            Console.out(
                JSON.object([
                    ("file", .string(file)), ("total", .int(Int64(report.total))),
                    ("restored", .int(Int64(report.restoredCount))), ("byClass", json(report.restored)),
                    ("replaced", .int(Int64(report.replaced))), ("skipped", .array(skipped)),
                    ("keyDerivationSeconds", .double(report.keyDerivationSeconds)),
                ]).rendered
            )
            return
        }
        var line = "restored \(report.restoredCount) of \(report.total) item\(report.total == 1 ? "" : "s")"
        if report.restoredCount > 0 { line += " (\(describe(report.restored)))" }
        if report.replaced > 0 { line += "; \(report.replaced) replaced" }
        Console.out(line)
        if !report.skipped.isEmpty {
            Console.out("skipped \(report.skipped.count):")
            for item in report.skipped {
                let name = [item.service, item.account].compactMap { $0 }.joined(separator: " / ")
                Console.out(
                    "  \(name.isEmpty ? "(no name)" : name) [\(AccessibleName.name(item.accessibility.rawValue))]: \(item.detail.isEmpty ? item.reason.rawValue : item.detail)"
                )
            }
        }
    }
}
