import ArgumentParser
import FoundationEssentials
import KeysealClient

extension LockState {
    var name: String {
        switch self {
        case .beforeFirstUnlock: "before-first-unlock"
        case .unlocked: "unlocked"
        case .locked: "locked"
        }
    }
}

struct StatusCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the lock state, passcode, backend, auto-lock, failed attempts and item counts.",
        discussion: "Exits 0 whenever keyseald answers, in every lock state."
    )

    @OptionGroup var global: GlobalOptions

    func execute(_ client: DaemonClient) throws {
        guard case .status(let status) = try client.send(.status) else { throw unexpected }
        let now = Date().timeIntervalSince1970
        let wait = status.nextTryAt.map { max(0, Int(($0.timeIntervalSince1970 - now).rounded(.up))) }
        let counts = AccessibleName.all.compactMap { entry in
            Accessibility(rawValue: entry.code).flatMap { status.itemCounts[$0] }.map { (entry.name, $0) }
        }
        let device = status.device
        if global.json {
            var members: [(String, JSON)] = [
                ("lockState", .string(status.lockState.name)), ("passcodeSet", .bool(status.passcodeSet)),
                ("backend", .string(device.backend)), ("hardwareBacked", .bool(device.hardwareBacked)),
                ("guessingHardwareLimited", .bool(device.guessingHardwareLimited)), ("detail", .string(device.detail)),
                ("autoLockSeconds", status.autoLockSeconds.map { .int(Int64($0)) } ?? .null),
                ("failedAttempts", .int(Int64(status.failedAttempts))),
                ("triesLeft", status.triesLeft.map { .int(Int64($0)) } ?? .null),
                ("hardwareTriesLeft", device.hardwareTriesLeft.map { .int(Int64($0)) } ?? .null),
                (
                    "nextTryAt",
                    status.nextTryAt.map { .string(Formatting.iso8601(unixSeconds: $0.timeIntervalSince1970)) } ?? .null
                ),
                (
                    "retryAfterSeconds",
                    (wait.flatMap { $0 > 0 ? $0 : nil } ?? device.lockoutRetrySeconds).map { .int(Int64($0)) } ?? .null
                ),
            ]
            members.append(("items", .object(counts.map { ($0.0, .int(Int64($0.1))) })))
            if !status.ledger.verified {
                let ledger = status.ledger
                members.append(
                    (
                        "ledger",
                        .object([
                            ("refusedBuckets", .array(ledger.refusedBuckets.map { .int(Int64($0)) })),
                            ("missingItems", .int(Int64(ledger.missingEntries))),
                            ("unexpectedItems", .int(Int64(ledger.unexpectedEntries))),
                            ("summary", .string(ledger.summary)),
                        ])
                    )
                )
            }
            if let boot = status.boot {
                members.append(
                    (
                        "pcrs",
                        .object([
                            ("bound", .array(boot.pcrs.map { .int(Int64($0)) })),
                            ("match", .bool(boot.pcrsMatch)),
                        ])
                    )
                )
                members.append(("recoveryRequired", .bool(boot.recoveryRequired)))
                members.append(("recoveryKey", .bool(boot.recoveryKeySet)))
                members.append(("rolledBack", .bool(boot.rolledBack)))
                members.append(
                    (
                        "antiRollbackCounter",
                        boot.counterIndex.map { index in
                            .object([
                                ("index", .string("0x" + String(index, radix: 16))),
                                ("value", boot.counterValue.map { .int(Int64(clamping: $0)) } ?? .null),
                            ])
                        } ?? .null
                    )
                )
                members.append(("boot", .string(boot.detail)))
            }
            Console.out(JSON.object(members).rendered)
            return
        }
        Console.out("state:            \(status.lockState.name)")
        Console.out("passcode:         \(status.passcodeSet ? "set" : "not set")")
        let backing = device.hardwareBacked ? "hardware-backed" : "not hardware-backed"
        let guessing =
            device.guessingHardwareLimited
            ? "passcode guessing hardware-limited" : "passcode guessing not hardware-limited"
        Console.out("backend:          \(device.backend) (\(backing); \(guessing))")
        if !device.detail.isEmpty { Console.out("                  \(device.detail)") }
        Console.out("auto-lock:        \(status.autoLockSeconds.map { "after \($0) s idle" } ?? "never")")
        Console.out("failed attempts:  \(status.failedAttempts)")
        if let triesLeft = status.triesLeft { Console.out("tries left:       \(triesLeft)") }
        if status.passcodeSet, let hardware = device.hardwareTriesLeft {
            Console.out("hardware tries:   \(hardware) before the TPM's last try, which Keyseal keeps in reserve")
        }
        if let wait, wait > 0 {
            Console.out("next try:         in \(WaitTime.describe(seconds: wait))")
        } else if let lockout = device.lockoutRetrySeconds {
            Console.out(
                "next try:         in \(WaitTime.describe(seconds: lockout)) (the TPM: its last try kept in reserve, or its lockout)"
            )
        }
        if !counts.isEmpty {
            Console.out("items:            " + counts.map { "\($0.0) \($0.1)" }.joined(separator: ", "))
        }
        if !status.ledger.verified { Console.out("ledger:           \(status.ledger.summary)") }
        if let boot = status.boot {
            let bound = boot.pcrs.isEmpty ? "none" : boot.pcrs.map(String.init).joined(separator: ",")
            let match = boot.pcrs.isEmpty ? "" : boot.pcrsMatch ? " (match now)" : " (do not match now)"
            Console.out("pcrs:             \(bound)\(match)")
            if boot.recoveryRequired { Console.out("recovery required: run keyseal recover with the recovery key") }
            if boot.rolledBack { Console.out("rolled back:      \(boot.detail)") }
            Console.out("recovery key:     \(boot.recoveryKeySet ? "set" : "none")")
            if let index = boot.counterIndex {
                Console.out(
                    "anti-rollback:    TPM counter 0x\(String(index, radix: 16))"
                        + (boot.counterValue.map { " = \($0)" } ?? "")
                )
            }
        }
    }
}

var unexpected: CommandFailure { CommandFailure(status: -26275, message: "unexpected response from keyseald") }

struct UnlockCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock the store with the passcode (also checks it when already unlocked).",
        discussion: """
            The passcode is prompted for on the terminal without echo, or read as one line of standard input with \
            --passcode-stdin. During an escalating delay or a TPM lockout this fails (exit 51) and says how long to \
            wait and how many tries are left.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(name: .long, help: "Read the passcode from standard input (one line).")
    var passcodeStdin = false

    func execute(_ client: DaemonClient) throws {
        let passcode = try SecretInput.passcode("passcode", fromStandardInput: passcodeStdin)
        _ = try client.send(.unlock(passcode: passcode))
        if global.json {
            Console.out(JSON.object([("lockState", .string("unlocked"))]).rendered)
        } else {
            Console.out("unlocked")
        }
    }
}

struct LockCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Lock the store now.",
        discussion:
            "With no passcode set the store cannot lock: nothing changes, the reason is printed, and the exit status is 0."
    )

    @OptionGroup var global: GlobalOptions

    func execute(_ client: DaemonClient) throws {
        guard case .message(let reason) = try client.send(.lock) else { throw unexpected }
        if global.json {
            var members: [(String, JSON)] = [("locked", .bool(reason == nil))]
            if let reason { members.append(("message", .string(reason))) }
            Console.out(JSON.object(members).rendered)
        } else {
            Console.out(reason.map { "not locked: \($0)" } ?? "locked")
        }
    }
}

struct PasscodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passcode",
        abstract: "Set, change or remove the passcode.",
        discussion: """
            Passcodes are prompted for on the terminal without echo (new ones twice), or read from standard input \
            with --passcode-stdin, one per line. A new passcode needs at least 6 characters and must not be one \
            character repeated, a straight run (123456, abcdef) or one of the most common choices; \
            --allow-weak-passcode takes it anyway. The store is unlocked afterwards.
            """,
        subcommands: [Set.self, Change.self, Remove.self]
    )

    struct Set: ClientCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set a passcode (errSecParam if one is set). Standard input: the new passcode."
        )
        static var displayName: String { "passcode set" }

        @OptionGroup var global: GlobalOptions
        @Flag(name: .long, help: "Read the passcode from standard input (one line).")
        var passcodeStdin = false
        @OptionGroup var strength: WeakPasscodeFlag

        func execute(_ client: DaemonClient) throws {
            let passcode = try SecretInput.passcode("new passcode", fromStandardInput: passcodeStdin, confirm: true)
            try PasscodeCommand.checkStrength(passcode, allowWeak: strength.allowWeakPasscode)
            _ = try client.send(.setPasscode(passcode))
            PasscodeCommand.report(json: global.json, passcodeSet: true, "passcode set; the store is unlocked")
        }
    }

    struct Change: ClientCommand {
        static let configuration = CommandConfiguration(
            commandName: "change",
            abstract: "Change the passcode. Standard input: the current passcode, then the new one, one per line."
        )
        static var displayName: String { "passcode change" }

        @OptionGroup var global: GlobalOptions
        @Flag(name: .long, help: "Read the passcodes from standard input (current, then new; one per line).")
        var passcodeStdin = false
        @OptionGroup var strength: WeakPasscodeFlag

        func execute(_ client: DaemonClient) throws {
            let old: SecretBytes
            let new: SecretBytes
            if passcodeStdin {
                let lines = try SecretInput.lines(2, what: ["current passcode", "new passcode"])
                (old, new) = (lines[0], lines[1])
            } else {
                old = try SecretInput.passcode("current passcode", fromStandardInput: false)
                new = try SecretInput.passcode("new passcode", fromStandardInput: false, confirm: true)
            }
            try PasscodeCommand.checkStrength(new, allowWeak: strength.allowWeakPasscode)
            _ = try client.send(.changePasscode(old: old, new: new))
            PasscodeCommand.report(json: global.json, passcodeSet: true, "passcode changed; the store is unlocked")
        }
    }

    struct Remove: ClientCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove",
            abstract: "Remove the passcode. Standard input: the current passcode.",
            discussion:
                "Items of the when-passcode-set-this-device-only class are deleted: they cannot exist without a passcode."
        )
        static var displayName: String { "passcode remove" }

        @OptionGroup var global: GlobalOptions
        @Flag(name: .long, help: "Read the passcode from standard input (one line).")
        var passcodeStdin = false

        func execute(_ client: DaemonClient) throws {
            let passcode = try SecretInput.passcode("current passcode", fromStandardInput: passcodeStdin)
            _ = try client.send(.removePasscode(passcode))
            PasscodeCommand.report(json: global.json, passcodeSet: false, "passcode removed; the store stays unlocked")
        }
    }

    static func checkStrength(_ passcode: SecretBytes, allowWeak: Bool) throws(CommandFailure) {
        try SecretStrength.check(
            passcode,
            what: "new passcode",
            minimum: SecretStrength.passcodeMinimum,
            overrideFlag: "--allow-weak-passcode",
            allowWeak: allowWeak
        )
    }

    static func report(json: Bool, passcodeSet: Bool, _ sentence: String) {
        if json {
            Console.out(
                JSON.object([("passcodeSet", .bool(passcodeSet)), ("lockState", .string("unlocked"))]).rendered
            )
        } else {
            Console.out(sentence)
        }
    }
}

struct SettingsCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings",
        abstract: "Show or change the auto-lock timeout.",
        discussion:
            "With no flag, prints the settings. keyseald's --auto-lock/--no-auto-lock, when given, win at its next start."
    )

    @OptionGroup var global: GlobalOptions
    @Option(name: .customShort("t"), help: ArgumentHelp("Lock after this many idle seconds.", valueName: "seconds"))
    var timeout: Int?
    @Flag(name: .long, help: "Never lock on idle.")
    var noAutoLock = false

    func validate() throws {
        if timeout != nil && noAutoLock { throw ValidationError("give either -t SECONDS or --no-auto-lock") }
        if let timeout, timeout <= 0 {
            throw ValidationError("-t takes a positive number of seconds; use --no-auto-lock to turn auto-lock off")
        }
    }

    func execute(_ client: DaemonClient) throws {
        let response: WireResponse
        if timeout != nil || noAutoLock {
            _ = try client.send(.setSettings(WireSettings(autoLockSeconds: noAutoLock ? nil : timeout)))
            response = try client.send(.getSettings)
        } else {
            response = try client.send(.getSettings)
        }
        guard case .settings(let settings) = response else { throw unexpected }
        if global.json {
            Console.out(
                JSON.object([("autoLockSeconds", settings.autoLockSeconds.map { .int(Int64($0)) } ?? .null)]).rendered
            )
        } else {
            Console.out("auto-lock: \(settings.autoLockSeconds.map { "after \($0) s idle" } ?? "never")")
        }
    }
}

struct ErrorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "error",
        abstract: "Print the name and meaning of each OSStatus.",
        discussion: "Negative codes work as written: keyseal error -25308. Hexadecimal (0xFFFF9D2C) is accepted too."
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("OSStatus values.", valueName: "code"))
    var codes: [String]

    func validate() throws {
        if codes.isEmpty { throw ValidationError("give at least one code") }
        for code in codes where Self.parse(code) == nil { throw ValidationError("not a status code: \(code)") }
    }

    static func parse(_ text: String) -> Int32? {
        if text.hasPrefix("0x") || text.hasPrefix("0X") {
            return UInt32(text.dropFirst(2), radix: 16).map { Int32(bitPattern: $0) }
        }
        return Int32(text)
    }

    func run() throws {
        var entries: [JSON] = []
        for code in codes {
            guard let status = Self.parse(code) else { continue }
            let known = OSStatusTable.entries[status]
            if global.json {
                entries.append(
                    .object([
                        ("status", .int(Int64(status))), ("name", known.map { .string($0.name) } ?? .null),
                        ("message", .string(known?.message ?? "Unknown OSStatus.")),
                    ])
                )
            } else if let known {
                Console.out("\(status) \(known.name): \(known.message)")
            } else {
                Console.out("\(status): unknown OSStatus")
            }
        }
        if global.json { Console.out(JSON.object([("errors", .array(entries))]).rendered) }
    }
}

/// `--allow-weak-passcode` of the commands that take a new passcode.
struct WeakPasscodeFlag: ParsableArguments {
    @Flag(
        name: .long,
        help: "Take a new passcode that fails the strength floor (short, repeated, a straight run, common)."
    )
    var allowWeakPasscode = false
}
