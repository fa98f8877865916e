import Foundation
import Keyseal
import KeysealCore
import KeysealModel
import Synchronization

// User presence for items and keys whose `SecAccessControl` asks for it (`.userPresence`, `.devicePasscode`,
// `.biometry…`): each use carries an authentication token the store issued (docs/COMPATIBILITY.md, "LocalAuthentication
// on Linux"). An `LAContext` given as `kSecUseAuthenticationContext` supplies its token; without a usable one the call
// runs the authentication itself (the askpass program), unless `kSecUseAuthenticationUI` says fail or skip.

/// What an evaluated `LAContext` gives a SecItem or SecKey call (LocalAuthentication's `LAContext` conforms).
public protocol SecAuthenticationContext: AnyObject, Sendable {
    /// The token of the context's last successful evaluation, if any, and its reuse duration (seconds).
    var authenticationToken: (token: SecretBytes?, reuseSeconds: Int) { get }
    /// `interactionNotAllowed`: the call fails instead of asking.
    var interactionNotAllowed: Bool { get }
    /// The prompt the context shows (`localizedReason`), if set.
    var authenticationPrompt: String? { get }
    /// Runs the device-owner authentication now with `prompt`, keeping its token in the context.
    func authenticateForUse(prompt: String) throws(KeychainError)
}

/// The askpass program that asks for the store's passcode: `$KEYSEAL_ASKPASS`, else `$SSH_ASKPASS`; it is run with
/// the prompt as its one argument and prints the passcode on its standard output (one line), exiting 0; any other
/// exit is a cancel. It has `$KEYSEAL_ASKPASS_TIMEOUT` seconds (default 120) to answer and may print at most 4 KiB:
/// past either its process group is killed and the prompt counts as cancelled by the system.
public enum PasscodePrompt {
    /// Why no passcode was had.
    public enum Failure: Error, Sendable {
        /// No askpass program is configured.
        case notConfigured(String)
        /// The program exited non-zero, died or could not be run: the user dismissed the prompt.
        case dismissed(String)
        /// The program did not answer within the time limit, or printed more than a passcode line: the system
        /// dismissed the prompt.
        case systemCanceled(String)

        /// The message.
        public var message: String {
            switch self {
            case .notConfigured(let message), .dismissed(let message), .systemCanceled(let message): message
            }
        }

        /// The SecItem status: errSecInteractionNotAllowed without a program, errSecUserCanceled (−128) otherwise.
        public var keychainError: KeychainError {
            if case .notConfigured = self { return KeychainError(KeychainStatus.interactionNotAllowed, message) }
            return KeychainError(KeychainStatus.userCanceled, message)
        }
    }

    /// The program, if one is configured.
    public static var program: String? {
        let environment = ProcessInfo.processInfo.environment
        for name in ["KEYSEAL_ASKPASS", "SSH_ASKPASS"] {
            if let value = environment[name], !value.isEmpty { return value }
        }
        return nil
    }

    /// The time limit, seconds: `$KEYSEAL_ASKPASS_TIMEOUT` (1 to 3600), else 120.
    public static var timeoutSeconds: Int {
        guard let value = ProcessInfo.processInfo.environment["KEYSEAL_ASKPASS_TIMEOUT"].flatMap({ Int($0) }),
            (1...3600).contains(value)
        else { return PromptProgram.defaultTimeoutSeconds }
        return value
    }

    /// The passcode the program prints for `prompt`, as a SecItem error: no program is errSecInteractionNotAllowed;
    /// a failure to run it, a non-zero exit, a timeout or too much output are errSecUserCanceled (−128).
    public static func ask(_ prompt: String) throws(KeychainError) -> SecretBytes {
        do {
            return try answer(prompt)
        } catch {
            throw error.keychainError
        }
    }

    /// The passcode the program prints for `prompt` (its first line), or why there is none; an empty line is a
    /// dismissal (no passcode is empty), not a wrong passcode.
    public static func answer(_ prompt: String) throws(Failure) -> SecretBytes {
        try answer(prompt) { _ in }
    }

    /// As ``answer(_:)``; `started` is given the running program, whose ``PromptProgram/terminate()`` dismisses it.
    package static func answer(
        _ prompt: String,
        started: (PromptProgram) -> Void
    ) throws(Failure) -> SecretBytes {
        guard let program else {
            throw .notConfigured(
                "no askpass program is configured (KEYSEAL_ASKPASS or SSH_ASKPASS) to ask for the passcode"
            )
        }
        let child: PromptProgram
        do {
            child = try PromptProgram.spawn([program, prompt])
        } catch {
            throw .dismissed("cannot run the askpass program: \(error)")
        }
        started(child)
        let timeout = timeoutSeconds
        switch child.finish(timeoutSeconds: timeout) {
        case .exited(0, let output):
            let line = PromptProgram.firstLine(output)
            guard line.count > 0 else { throw .dismissed("the askpass program answered an empty line") }
            return line
        case .exited, .signaled:
            throw .dismissed("the askpass program was dismissed")
        case .timedOut:
            throw .systemCanceled("the askpass program did not answer within \(timeout) s and was stopped")
        case .outputTooLong:
            throw .systemCanceled(
                "the askpass program printed more than \(PromptProgram.defaultOutputLimit) bytes and was stopped"
            )
        }
    }
}

/// How a SecKey taken from a query uses its item: the query's context and `kSecUseAuthenticationUI`.
struct KeyAuthentication: Sendable {
    var context: (any SecAuthenticationContext)?
    var ui: AuthenticationUI
    var prompt: String?
}

/// Side table of keys' authentication, by key identity (a SecKey made by a query with a context keeps it).
let keyAuthentications = Mutex<[ObjectIdentifier: KeyAuthentication]>([:])

enum ItemAuthenticationRunner {
    static let defaultPrompt = "authenticate to use a keychain item"

    /// The query dictionary's authentication options.
    static func options(_ dictionary: [String: Any]) -> KeyAuthentication {
        let context = dictionary[kSecUseAuthenticationContext as String] as? any SecAuthenticationContext
        var ui = AuthenticationUI.allow
        if let value = dictionary[kSecUseAuthenticationUI as String] as? String {
            if value == kSecUseAuthenticationUIFail { ui = .fail }
            if value == kSecUseAuthenticationUISkip { ui = .skip }
        }
        if dictionary[kSecUseNoAuthenticationUI as String] as? Bool == true { ui = .fail }
        if context?.interactionNotAllowed == true, ui == .allow { ui = .fail }
        let prompt = dictionary[kSecUseOperationPrompt as String] as? String
        return KeyAuthentication(context: context, ui: ui, prompt: prompt)
    }

    /// The authentication options `SecKeyCreateRandomKey` gives the key it returns: the context and the prompt, at
    /// the top level or in `kSecPrivateKeyAttrs` (which wins). The UI mode is a query's, not a key's; a context's
    /// `interactionNotAllowed` still applies.
    static func generationOptions(_ parameters: [String: Any]) -> KeyAuthentication {
        var use: [String: Any] = [:]
        for key in [kSecUseAuthenticationContext as String, kSecUseOperationPrompt as String] {
            if let value = parameters[key] { use[key] = value }
            if let own = parameters[kSecPrivateKeyAttrs as String] as? [String: Any], let value = own[key] {
                use[key] = value
            }
        }
        return options(use)
    }

    /// Runs `body` with the options' authentication; when it needs one it lacks and the UI is allowed, authenticates
    /// (through the context, else the askpass program) and runs it once more with the new token.
    static func run<T>(_ options: KeyAuthentication, _ body: () throws -> T) throws -> T {
        let first = options.context?.authenticationToken
        let carried = ItemAuthentication(
            token: first?.token,
            reuseSeconds: first?.reuseSeconds ?? 0,
            ui: options.ui == .allow ? .fail : options.ui
        )
        do {
            return try ItemAuthentication.$current.withValue(carried) { try body() }
        } catch let error as KeychainError
            where options.ui == .allow && error.status == KeychainStatus.interactionNotAllowed
            && error.message == ItemAuthentication.requiredMessage
        {
            let prompt = options.prompt ?? options.context?.authenticationPrompt ?? defaultPrompt
            let retry: ItemAuthentication
            if let context = options.context {
                try context.authenticateForUse(prompt: prompt)
                let token = context.authenticationToken
                retry = ItemAuthentication(token: token.token, reuseSeconds: token.reuseSeconds, ui: .fail)
            } else {
                let passcode = try PasscodePrompt.ask(prompt)
                let token = try KeychainStore.default.authenticate(passcode: passcode)
                retry = ItemAuthentication(token: token, reuseSeconds: 0, ui: .fail)
            }
            return try ItemAuthentication.$current.withValue(retry) { try body() }
        }
    }

    /// Runs a private-key operation of `key` with the authentication of the query it came from.
    static func run<T>(key: SecKey, _ body: () throws -> T) throws -> T {
        let options =
            keyAuthentications.withLock { $0[ObjectIdentifier(key)] }
            ?? KeyAuthentication(context: nil, ui: .allow, prompt: nil)
        return try run(options, body)
    }

    /// Gives the keys in a query's result the query's authentication options.
    static func attach(_ result: AnyObject?, _ options: KeyAuthentication) {
        guard options.context != nil || options.ui != .allow || options.prompt != nil else { return }
        var keys: [SecKey] = []
        func collect(_ value: Any?) {
            if let key = value as? SecKey {
                keys.append(key)
            } else if let array = value as? [Any] {
                array.forEach(collect)
            } else if let dictionary = value as? [String: Any] {
                collect(dictionary[kSecValueRef as String])
            }
        }
        collect(result)
        guard !keys.isEmpty else { return }
        keyAuthentications.withLock { table in
            for key in keys { table[ObjectIdentifier(key)] = options }
        }
    }

    /// Forgets a key's options (its deinit).
    static func forget(_ key: SecKey) {
        _ = keyAuthentications.withLock { $0.removeValue(forKey: ObjectIdentifier(key)) }
    }
}
