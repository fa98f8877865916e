import Foundation
import Keyseal
import KeysealCore
import KeysealModel
import KeysealSecurity
import Synchronization

/// An authentication context (`LAContext`), over the keychain store `KeychainStore.default` uses (the one
/// `KeysealSecurity` reads). `.deviceOwnerAuthentication` asks for the store's passcode through the askpass program
/// (`$KEYSEAL_ASKPASS`, else `$SSH_ASKPASS`, within `$KEYSEAL_ASKPASS_TIMEOUT` seconds, default 120) with
/// ``localizedReason`` as the prompt, and has the store check it: an unlock attempt in all but its effect (a wrong
/// passcode counts toward the store's delays; the store stays as it is). A success leaves the context holding an
/// authentication token the store issued (bound, through keyseald, to the caller's uid), which SecItem and SecKey
/// calls given this context as `kSecUseAuthenticationContext` present for items and keys whose access control asks
/// for user presence — every call until ``invalidate()``, as on Apple, and at most 300 s after the evaluation.
/// Biometric policies use fprintd (`fprintd-list`, `fprintd-verify`) where it is installed: docs/COMPATIBILITY.md,
/// "LocalAuthentication on Linux", says what that proves and what it does not.
open class LAContext: NSObject, SecAuthenticationContext, @unchecked Sendable {
    private struct State {
        var localizedReason = ""
        var localizedCancelTitle: String?
        var localizedFallbackTitle: String?
        var interactionNotAllowed = false
        var reuseDuration: TimeInterval = 0
        var token: SecretBytes?
        /// The store that issued ``token``, which ``invalidate()`` asks to forget it.
        var issuer: KeychainStore?
        var invalidated = false
        /// The askpass program of an evaluation under way, which ``invalidate()`` dismisses.
        var prompt: PromptProgram?
        var biometryType: LABiometryType = .none
    }

    private let state = Mutex(State())

    public override init() { super.init() }

    /// The prompt of an evaluation this context runs for a SecItem or SecKey call (the askpass program's argument).
    open var localizedReason: String {
        get { state.withLock { $0.localizedReason } }
        set { state.withLock { $0.localizedReason = newValue } }
    }

    /// Kept for compatibility; the askpass program draws its own buttons.
    open var localizedCancelTitle: String? {
        get { state.withLock { $0.localizedCancelTitle } }
        set { state.withLock { $0.localizedCancelTitle = newValue } }
    }

    /// Kept for compatibility; the askpass program draws its own buttons.
    open var localizedFallbackTitle: String? {
        get { state.withLock { $0.localizedFallbackTitle } }
        set { state.withLock { $0.localizedFallbackTitle = newValue } }
    }

    /// When true, an evaluation that would ask fails with ``LAError/Code/notInteractive``, and SecItem calls given
    /// this context fail with errSecInteractionNotAllowed instead of asking.
    open var interactionNotAllowed: Bool {
        get { state.withLock { $0.interactionNotAllowed } }
        set { state.withLock { $0.interactionNotAllowed = newValue } }
    }

    /// Apple's reuse of a recent Touch ID device unlock: there is none on Linux, so it changes nothing; kept (at most
    /// ``LATouchIDAuthenticationMaximumAllowableReuseDuration``) for compatibility. As on Apple, it does not limit the
    /// context: an evaluated context opens every SecItem and SecKey call given it until ``invalidate()`` — here at
    /// most ``LATouchIDAuthenticationMaximumAllowableReuseDuration`` seconds after the evaluation, when the store
    /// forgets its token and the next call asks again.
    open var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { state.withLock { $0.reuseDuration } }
        set {
            state.withLock {
                $0.reuseDuration = min(max(newValue, 0), LATouchIDAuthenticationMaximumAllowableReuseDuration)
            }
        }
    }

    /// The biometry the host offers: `.touchID` when fprintd has a fingerprint reader (enrolled fingers or not), else
    /// `.none`. Set by ``canEvaluatePolicy(_:error:)`` and the evaluations, as on Apple.
    open var biometryType: LABiometryType { state.withLock { $0.biometryType } }

    /// Apple's `evaluatedPolicyDomainState`: no enrolment database is exposed on Linux (nil).
    open var evaluatedPolicyDomainState: Data? { nil }

    /// Ends the context: its token is forgotten, an evaluation under way is dismissed and fails with
    /// ``LAError/Code/appCancel`` (as Apple's "stops any pending policy evaluations"), and later evaluations fail with
    /// ``LAError/Code/invalidContext``.
    open func invalidate() {
        let (prompt, token, issuer) = state.withLock {
            let held = ($0.prompt, $0.token, $0.issuer)
            $0.token = nil
            $0.issuer = nil
            $0.invalidated = true
            return held
        }
        prompt?.terminate()
        // The store forgets the token too, so that a copy of its bytes opens nothing more. Best effort: a store that
        // is gone has forgotten it already, and the token expires 300 s after its evaluation anyway.
        if let token, let issuer { try? issuer.revokeAuthentication(token) }
    }

    /// Whether `policy` can be evaluated now. `.deviceOwnerAuthentication`: a passcode is set on the store
    /// (``LAError/Code/passcodeNotSet`` otherwise) and an askpass program is configured
    /// (``LAError/Code/notInteractive`` otherwise), or biometry is available. The biometric policies: fprintd is
    /// installed (``LAError/Code/biometryNotAvailable`` otherwise). Companion and wrist policies:
    /// ``LAError/Code/companionNotAvailable``.
    open func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        do {
            try check(policy, store: KeychainStore.default, settingBiometryType: true)
            return true
        } catch let failure {
            error?.pointee = failure as NSError
            return false
        }
    }

    /// Evaluates `policy`, asking with `localizedReason`; `reply` is called on another thread.
    open func evaluatePolicy(
        _ policy: LAPolicy,
        localizedReason: String,
        reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        evaluateDetached(reply: reply) { [self] store in
            try evaluateNow(policy, localizedReason: localizedReason, store: store)
        }
    }

    /// Evaluates `policy`, asking with `localizedReason`: true, or an ``LAError``.
    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        try await evaluateDetached { [self] store in
            try evaluateNow(policy, localizedReason: localizedReason, store: store)
        }
    }

    /// Evaluates what `accessControl` asks for `operation`: its constraints' policy (biometry alone: the
    /// biometric policy; otherwise the device-owner one). An access control with no constraint succeeds at once.
    open func evaluateAccessControl(
        _ accessControl: SecAccessControl,
        operation: LAAccessControlOperation,
        localizedReason: String,
        reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        evaluateDetached(reply: reply) { [self] store in
            try evaluateNow(accessControl, localizedReason: localizedReason, store: store)
        }
    }

    /// The async form of ``evaluateAccessControl(_:operation:localizedReason:reply:)``.
    open func evaluateAccessControl(
        _ accessControl: SecAccessControl,
        operation: LAAccessControlOperation,
        localizedReason: String
    ) async throws -> Bool {
        try await evaluateDetached { [self] store in
            try evaluateNow(accessControl, localizedReason: localizedReason, store: store)
        }
    }

    /// Runs `evaluate` with the default store on a thread of its own and passes the outcome to `reply`.
    private func evaluateDetached(
        reply: @escaping @Sendable (Bool, (any Error)?) -> Void,
        _ evaluate: @escaping @Sendable (KeychainStore) throws -> Void
    ) {
        let store = KeychainStore.default
        Thread.detachNewThread {
            do {
                try evaluate(store)
                reply(true, nil)
            } catch {
                reply(false, error as NSError)
            }
        }
    }

    /// Runs `evaluate` with the default store on a thread of its own: true, or its error.
    private func evaluateDetached(_ evaluate: @escaping @Sendable (KeychainStore) throws -> Void) async throws -> Bool {
        let store = KeychainStore.default
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                do {
                    try evaluate(store)
                    continuation.resume(returning: true)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    // MARK: SecAuthenticationContext

    /// The token, reusable by every call until the store forgets it (as Apple's evaluated context is reusable until
    /// invalidated, whatever its reuse duration).
    public var authenticationToken: (token: SecretBytes?, reuseSeconds: Int) {
        state.withLock { ($0.invalidated ? nil : $0.token, ItemAuthentication.maximumReuseSeconds) }
    }

    public var authenticationPrompt: String? {
        let reason = localizedReason
        return reason.isEmpty ? nil : reason
    }

    public func authenticateForUse(prompt: String) throws(KeychainError) {
        do {
            try evaluateNow(.deviceOwnerAuthentication, localizedReason: prompt, store: KeychainStore.default)
        } catch let error as LAError {
            throw KeychainError(Self.status(error.code), error.message)
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "\(error)")
        }
    }

    // MARK: Evaluation

    private func evaluateNow(
        _ accessControl: SecAccessControl,
        localizedReason: String,
        store: KeychainStore
    ) throws {
        let flags = accessControl.flags
        let passcode: SecAccessControlCreateFlags = [.userPresence, .devicePasscode]
        let biometry: SecAccessControlCreateFlags = [.biometryAny, .biometryCurrentSet]
        if flags.isDisjoint(with: passcode.union(biometry)) { return }
        if flags.isDisjoint(with: passcode) {
            try evaluateNow(.deviceOwnerAuthenticationWithBiometrics, localizedReason: localizedReason, store: store)
        } else {
            try evaluateNow(.deviceOwnerAuthentication, localizedReason: localizedReason, store: store)
        }
    }

    private func evaluateNow(_ policy: LAPolicy, localizedReason: String, store: KeychainStore) throws {
        guard !localizedReason.isEmpty else {
            throw LAError(.invalidContext, "localizedReason must not be empty")
        }
        try check(policy, store: store, settingBiometryType: false)
        if interactionNotAllowed { throw LAError(.notInteractive, "interaction is not allowed on this context") }
        switch policy {
        case .deviceOwnerAuthentication where Self.passcodeSet(store):
            let passcode: SecretBytes
            do {
                passcode = try PasscodePrompt.answer(localizedReason) { program in
                    let invalidated = state.withLock {
                        $0.prompt = program
                        return $0.invalidated
                    }
                    if invalidated { program.terminate() }
                }
                state.withLock { $0.prompt = nil }
            } catch {
                state.withLock { $0.prompt = nil }
                if state.withLock({ $0.invalidated }) {
                    throw LAError(.appCancel, "the context was invalidated during the evaluation")
                }
                switch error {
                case .notConfigured(let message): throw LAError(.notInteractive, message)
                case .dismissed(let message): throw LAError(.userCancel, message)
                case .systemCanceled(let message): throw LAError(.systemCancel, message)
                }
            }
            if state.withLock({ $0.invalidated }) {
                throw LAError(.appCancel, "the context was invalidated during the evaluation")
            }
            do {
                let token = try store.authenticate(passcode: passcode)
                let kept = state.withLock {
                    guard !$0.invalidated else { return false }
                    $0.token = token
                    $0.issuer = store
                    return true
                }
                if !kept {
                    try? store.revokeAuthentication(token)
                    throw LAError(.appCancel, "the context was invalidated during the evaluation")
                }
            } catch let error as KeychainError {
                if error.status == KeychainStatus.authFailed { throw LAError(.authenticationFailed, error.message) }
                throw LAError(.systemCancel, error.message)
            }
        default:
            // Biometry (check(policy) found a reader with enrolled fingers): a fingerprint match. It gives no store
            // token: items whose access control asks for biometry alone cannot be opened through it
            // (docs/COMPATIBILITY.md).
            try Fingerprint.verify()
        }
    }

    /// Whether `policy` can be evaluated, as ``canEvaluatePolicy(_:error:)`` answers. fprintd is asked (a process and
    /// a call on the system bus) only when the answer needs it, or `settingBiometryType` (canEvaluatePolicy, which
    /// sets ``biometryType`` whatever the policy, as on Apple): not for each passcode evaluation.
    private func check(_ policy: LAPolicy, store: KeychainStore, settingBiometryType: Bool) throws {
        if state.withLock({ $0.invalidated }) { throw LAError(.invalidContext, "the context was invalidated") }
        var found: Fingerprint.Reader?
        func fingerprintReader() -> Fingerprint.Reader {
            if let found { return found }
            let reader = Fingerprint.reader()
            state.withLock { $0.biometryType = reader == .unavailable ? .none : .touchID }
            found = reader
            return reader
        }
        if settingBiometryType { _ = fingerprintReader() }
        switch policy {
        case .deviceOwnerAuthentication:
            if Self.passcodeSet(store) {
                guard PasscodePrompt.program != nil else {
                    throw LAError(
                        .notInteractive,
                        "no askpass program is configured (KEYSEAL_ASKPASS or SSH_ASKPASS) to ask for the passcode"
                    )
                }
            } else if fingerprintReader() != .enrolled {
                throw LAError(.passcodeNotSet, "no passcode is set on the keychain store")
            }
        case .deviceOwnerAuthenticationWithBiometrics, .deviceOwnerAuthenticationWithBiometricsOrCompanion:
            switch fingerprintReader() {
            case .unavailable:
                throw LAError(.biometryNotAvailable, "fprintd has no fingerprint reader (or is not installed)")
            case .notEnrolled:
                throw LAError(.biometryNotEnrolled, "no finger of this user is enrolled with fprintd")
            case .enrolled:
                break
            }
        case .deviceOwnerAuthenticationWithCompanion, .deviceOwnerAuthenticationWithWristDetection:
            throw LAError(.companionNotAvailable, "companion devices do not exist on Linux")
        }
    }

    private static func passcodeSet(_ store: KeychainStore) -> Bool { (try? store.status().passcodeSet) ?? false }

    private static func status(_ code: LAError.Code) -> OSStatus {
        switch code {
        case .userCancel, .appCancel, .systemCancel: KeychainStatus.userCanceled
        case .notInteractive: KeychainStatus.interactionNotAllowed
        default: KeychainStatus.authFailed
        }
    }
}

/// fprintd, through its own clients (Debian package `fprintd`): `fprintd-list USER` says whether fprintd has a reader
/// and which of the user's fingers are enrolled; `fprintd-verify` asks fprintd to match the user's finger. Both talk
/// to fprintd on the system bus. They are found on the `PATH`, which, like the askpass program's variables and the
/// system bus address, is this process's environment: trusted (docs/SECURITY-MODEL.md, "User presence").
enum Fingerprint {
    /// What fprintd offers this user.
    enum Reader: Equatable {
        /// No fprintd, or no reader.
        case unavailable
        /// A reader, and no finger of the user enrolled.
        case notEnrolled
        /// A reader with at least one of the user's fingers enrolled.
        case enrolled
    }

    /// How long fprintd-list may take, seconds (a call on the system bus that a running fprintd answers in
    /// milliseconds).
    static let listTimeoutSeconds = 2
    /// How long an fprintd that did not answer within ``listTimeoutSeconds`` is taken as absent without asking again.
    static let unansweredSeconds = 60
    /// The most fprintd's tools may print (a status line per attempt).
    static let outputLimit = 65536

    /// When fprintd last did not answer, by where it was asked (the system bus address and `PATH`).
    private static let unanswered = Mutex<[String: ContinuousClock.Instant]>([:])

    /// The reader state, from `fprintd-list` for the process's user. An fprintd that hangs costs the caller at most
    /// ``listTimeoutSeconds``, once: for ``unansweredSeconds`` after that it is taken as absent at once.
    static func reader() -> Reader {
        let environment = ProcessInfo.processInfo.environment
        let place = (environment["DBUS_SYSTEM_BUS_ADDRESS"] ?? "") + "\u{0}" + (environment["PATH"] ?? "")
        let now = ContinuousClock.now
        let recentlyUnanswered = unanswered.withLock { table in
            table = table.filter { now - $0.value < .seconds(unansweredSeconds) }
            return table[place] != nil
        }
        guard !recentlyUnanswered, let user = userName, let child = try? PromptProgram.spawn(["fprintd-list", user])
        else { return .unavailable }
        let outcome = child.finish(timeoutSeconds: listTimeoutSeconds, outputLimit: outputLimit)
        if case .timedOut = outcome { unanswered.withLock { $0[place] = ContinuousClock.now } }
        guard case .exited(0, let output) = outcome else { return .unavailable }
        // "Fingerprints for user U on READER (TYPE):" then " - #0: right-index-finger" per finger; "User U has no
        // fingers enrolled for READER." when none; "No devices available" (exit 1) without a reader.
        let lines = output.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }.split(separator: "\n")
        if lines.contains(where: { $0.hasPrefix(" - #") }) { return .enrolled }
        if lines.contains(where: { $0.hasPrefix("Using device ") }) { return .notEnrolled }
        return .unavailable
    }

    /// Asks fprintd to match the user's finger (`fprintd-verify`, with the askpass program's time limit): a match,
    /// or ``LAError/Code/authenticationFailed``; a timeout is ``LAError/Code/systemCancel``.
    static func verify() throws {
        let child: PromptProgram
        do {
            child = try PromptProgram.spawn(["fprintd-verify"])
        } catch {
            throw LAError(.biometryNotAvailable, "cannot run fprintd-verify: \(error)")
        }
        let timeout = PasscodePrompt.timeoutSeconds
        switch child.finish(timeoutSeconds: timeout, outputLimit: outputLimit) {
        case .exited(0, _):
            return
        case .exited, .signaled:
            throw LAError(.authenticationFailed, "the fingerprint did not match")
        case .timedOut:
            throw LAError(.systemCancel, "fprintd-verify did not answer within \(timeout) s and was stopped")
        case .outputTooLong:
            throw LAError(.systemCancel, "fprintd-verify printed more than \(outputLimit) bytes and was stopped")
        }
    }

    /// The process's user name (its effective uid's).
    static var userName: String? {
        guard let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name else { return nil }
        return String(cString: name)
    }
}
