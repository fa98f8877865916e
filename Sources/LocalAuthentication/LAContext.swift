import Foundation
import Keyseal
import KeysealCore
import KeysealSecurity
import Synchronization

/// An authentication context (`LAContext`), over the keychain store `KeychainStore.default` uses (the one
/// `KeysealSecurity` reads). `.deviceOwnerAuthentication` asks for the store's passcode through the askpass program
/// (`$KEYSEAL_ASKPASS`, else `$SSH_ASKPASS`) with ``localizedReason`` as the prompt, and has the store check it: an
/// unlock attempt in all but its effect (a wrong passcode counts toward the store's delays; the store stays as it
/// is). A success leaves the context holding an authentication token the store issued (bound, through keyseald, to
/// the caller's uid), which SecItem and SecKey calls given this context as `kSecUseAuthenticationContext` present for
/// items and keys whose access control asks for user presence — for one call, or within
/// ``touchIDAuthenticationAllowableReuseDuration``. Biometric policies use fprintd (`fprintd-verify`) where it is
/// installed: docs/COMPATIBILITY.md, "LocalAuthentication on Linux", says what that proves and what it does not.
open class LAContext: NSObject, SecAuthenticationContext, @unchecked Sendable {
    private struct State {
        var localizedReason = ""
        var localizedCancelTitle: String?
        var localizedFallbackTitle: String?
        var interactionNotAllowed = false
        var reuseDuration: TimeInterval = 0
        var token: SecretBytes?
        var invalidated = false
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

    /// How long after a successful evaluation its token still opens items and keys, seconds (0, the default: one
    /// SecItem or SecKey call); at most ``LATouchIDAuthenticationMaximumAllowableReuseDuration``.
    open var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { state.withLock { $0.reuseDuration } }
        set {
            state.withLock {
                $0.reuseDuration = min(max(newValue, 0), LATouchIDAuthenticationMaximumAllowableReuseDuration)
            }
        }
    }

    /// The biometry the host offers: `.touchID` when fprintd's `fprintd-verify` is installed, else `.none`. Set by
    /// ``canEvaluatePolicy(_:error:)``, as on Apple.
    open private(set) var biometryType: LABiometryType = .none

    /// Apple's `evaluatedPolicyDomainState`: no enrolment database is exposed on Linux (nil).
    open var evaluatedPolicyDomainState: Data? { nil }

    /// Ends the context: its token is forgotten and later evaluations fail with ``LAError/Code/invalidContext``.
    open func invalidate() {
        state.withLock {
            $0.token = nil
            $0.invalidated = true
        }
    }

    /// Whether `policy` can be evaluated now. `.deviceOwnerAuthentication`: a passcode is set on the store
    /// (``LAError/Code/passcodeNotSet`` otherwise) and an askpass program is configured
    /// (``LAError/Code/notInteractive`` otherwise), or biometry is available. The biometric policies: fprintd is
    /// installed (``LAError/Code/biometryNotAvailable`` otherwise). Companion and wrist policies:
    /// ``LAError/Code/companionNotAvailable``.
    open func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        do {
            try check(policy, store: KeychainStore.default)
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

    public var authenticationToken: (token: SecretBytes?, reuseSeconds: Int) {
        state.withLock { ($0.token, Int($0.reuseDuration)) }
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
        try check(policy, store: store)
        if interactionNotAllowed { throw LAError(.notInteractive, "interaction is not allowed on this context") }
        switch policy {
        case .deviceOwnerAuthentication where Self.passcodeSet(store):
            let passcode: SecretBytes
            do {
                passcode = try PasscodePrompt.ask(localizedReason)
            } catch {
                throw error.status == KeychainStatus.userCanceled
                    ? LAError(.userCancel, error.message) : LAError(.notInteractive, error.message)
            }
            do {
                let token = try store.authenticate(passcode: passcode)
                state.withLock { $0.token = token }
            } catch let error as KeychainError {
                if error.status == KeychainStatus.authFailed { throw LAError(.authenticationFailed, error.message) }
                throw LAError(.systemCancel, error.message)
            }
        default:
            // Biometry (check(policy) found fprintd): a fingerprint match. It gives no store token: items whose
            // access control asks for biometry alone cannot be opened through it (docs/COMPATIBILITY.md).
            try Fingerprint.verify()
        }
    }

    private func check(_ policy: LAPolicy, store: KeychainStore) throws {
        if state.withLock({ $0.invalidated }) { throw LAError(.invalidContext, "the context was invalidated") }
        let fingerprint = Fingerprint.available
        biometryType = fingerprint ? .touchID : .none
        switch policy {
        case .deviceOwnerAuthentication:
            if Self.passcodeSet(store) {
                guard PasscodePrompt.program != nil else {
                    throw LAError(
                        .notInteractive,
                        "no askpass program is configured (KEYSEAL_ASKPASS or SSH_ASKPASS) to ask for the passcode"
                    )
                }
            } else if !fingerprint {
                throw LAError(.passcodeNotSet, "no passcode is set on the keychain store")
            }
        case .deviceOwnerAuthenticationWithBiometrics, .deviceOwnerAuthenticationWithBiometricsOrCompanion:
            guard fingerprint else {
                throw LAError(.biometryNotAvailable, "no fingerprint reader service (fprintd) is installed")
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

/// fprintd's command-line tools, where installed: `fprintd-verify` checks the user's finger against their enrolled
/// prints (through fprintd on the system bus).
enum Fingerprint {
    /// The tool, if on the PATH (`KEYSEAL_FPRINTD_VERIFY` names another, for tests).
    static var tool: String? {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["KEYSEAL_FPRINTD_VERIFY"] {
            return FileManager.default.isExecutableFile(atPath: path) ? path : nil
        }
        for directory in (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/fprintd-verify"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    static var available: Bool { tool != nil }

    static func verify() throws {
        guard let tool else { throw LAError(.biometryNotAvailable, "no fingerprint reader service (fprintd)") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw LAError(.biometryNotAvailable, "cannot run \(tool): \(error)")
        }
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw LAError(.authenticationFailed, "the fingerprint did not match")
        }
    }
}
