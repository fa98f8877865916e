import Crypto
import FoundationEssentials
import KeysealCore

/// A token's record: whom it was issued to, when, and whether a single-request token was spent.
struct AuthenticationGrant {
    let uid: UInt32?
    let issued: Date
    var spent: Bool
}

/// The authentication tokens the engine issued, by the SHA-256 of the token (the token itself is not kept). In memory
/// only: a restart or a close forgets them, as an `LAContext` does not outlive its process on Apple.
struct AuthenticationGrants {
    /// The most tokens kept; the oldest is dropped first.
    static let capacity = 1024

    private var grants: [Data: AuthenticationGrant] = [:]

    static func digest(_ token: SecretBytes) -> Data { token.withUnsafeBytes { Data(SHA256.hash(data: $0)) } }

    mutating func issue(uid: UInt32?, now: Date) -> SecretBytes {
        prune(now: now)
        if grants.count >= Self.capacity, let oldest = grants.min(by: { $0.value.issued < $1.value.issued })?.key {
            grants[oldest] = nil
        }
        let token = SecretBytes.random(count: ItemAuthentication.tokenSize)
        grants[Self.digest(token)] = AuthenticationGrant(uid: uid, issued: now, spent: false)
        return token
    }

    /// Whether `token` was issued to `uid` and is still usable under `reuseSeconds` (0: one request, which spends
    /// it); a usable single-request token is spent by this call.
    mutating func redeem(_ token: SecretBytes, uid: UInt32?, reuseSeconds: Int, now: Date) -> Bool {
        let key = Self.digest(token)
        guard var grant = grants[key], grant.uid == uid else { return false }
        let age = now.timeIntervalSince(grant.issued)
        guard age >= 0, age <= Double(ItemAuthentication.maximumReuseSeconds) else {
            grants[key] = nil
            return false
        }
        // Spent by a single request, it stays spent whatever reuse a later request claims.
        guard !grant.spent else { return false }
        if reuseSeconds == 0 {
            grant.spent = true
            grants[key] = grant
            return true
        }
        return age <= Double(reuseSeconds)
    }

    mutating func removeAll() { grants.removeAll() }

    /// Forgets `token` when it was issued to `uid`; whether it did.
    mutating func revoke(_ token: SecretBytes, uid: UInt32?) -> Bool {
        let key = Self.digest(token)
        guard grants[key]?.uid == uid else { return false }
        grants[key] = nil
        return true
    }

    private mutating func prune(now: Date) {
        grants = grants.filter {
            now.timeIntervalSince($0.value.issued) <= Double(ItemAuthentication.maximumReuseSeconds)
        }
    }
}

/// The decision for one request's items that need an authentication, taken once (a single-request token is spent
/// by the first item that needs it, and then covers the request's other items).
struct AuthenticationCheck {
    enum Outcome { case allowed, skip }

    let caller: Caller
    private var authenticated: Bool?

    init(caller: Caller) {
        self.caller = caller
    }

    /// The caller's authentication: the one the request carries through keyseald, else (embedded) the task's.
    var authentication: ItemAuthentication? {
        caller.authentication ?? (caller.uid == nil ? ItemAuthentication.current : nil)
    }

    /// Whether an item recorded with access-control `flags` may be used: `.allowed`, `.skip` (the request asked
    /// to leave such items out), or errSecInteractionNotAllowed (no usable authentication) / errSecAuthFailed (a
    /// constraint no authentication of this store can meet: biometry alone).
    mutating func check(flags: UInt?, engine: KeychainEngine) throws(KeychainError) -> Outcome {
        guard let flags, flags & AccessControlFlag.authenticationConstraints != 0 else { return .allowed }
        guard Self.passcodeSatisfies(flags) else {
            if authentication?.ui == .skip { return .skip }
            throw KeychainError(
                KeychainStatus.authFailed,
                "the item's access control asks for biometry, which Keyseal cannot check (no biometric "
                    + "authentication is bound to the store)"
            )
        }
        if authenticated == nil {
            authenticated = engine.redeem(authentication, caller: caller)
        }
        if authenticated == true { return .allowed }
        if authentication?.ui == .skip { return .skip }
        throw KeychainError(KeychainStatus.interactionNotAllowed, ItemAuthentication.requiredMessage)
    }

    /// Whether the store's passcode meets `flags`' constraints: user presence and device passcode are met by it,
    /// biometry is not; with `.or` one met constraint is enough, otherwise (`.and`, or one constraint) all must be.
    static func passcodeSatisfies(_ flags: UInt) -> Bool {
        let constraints = [
            AccessControlFlag.userPresence, AccessControlFlag.devicePasscode, AccessControlFlag.biometryAny,
            AccessControlFlag.biometryCurrentSet,
        ].filter { flags & $0 != 0 }
        let met = constraints.map { $0 == AccessControlFlag.userPresence || $0 == AccessControlFlag.devicePasscode }
        return flags & AccessControlFlag.or != 0 ? met.contains(true) : !met.contains(false)
    }
}

extension KeychainEngine {
    /// Checks the store's passcode for `caller` and issues an authentication token bound to its uid. An
    /// administrator's check is an unlock attempt in all but its effect: refused during the store's delays, a wrong
    /// passcode counts toward them, a right one clears the count. A client's is counted by its uid in memory, never
    /// in the store (``verifyClientPasscode(_:uid:)``). The store's lock state does not change.
    func authenticate(passcode: SecretBytes, caller: Caller) throws -> SecretBytes {
        guard passcodeSet else { throw KeychainError(KeychainStatus.param, "no passcode is set") }
        try requireNotRolledBack()
        if let uid = caller.uid, !caller.isAdministrator {
            try verifyClientPasscode(passcode, uid: uid)
        } else {
            _ = try verifyPasscode(passcode)
        }
        return authenticationGrants.issue(uid: caller.uid, now: configuration.clock())
    }

    /// Forgets `token` when it was issued to `caller`'s uid; whether it did.
    func revokeAuthentication(_ token: SecretBytes, caller: Caller) -> Bool {
        authenticationGrants.revoke(token, uid: caller.uid)
    }

    func redeem(_ authentication: ItemAuthentication?, caller: Caller) -> Bool {
        guard let authentication, let token = authentication.token else { return false }
        return authenticationGrants.redeem(
            token,
            uid: caller.uid,
            reuseSeconds: authentication.reuseSeconds,
            now: configuration.clock()
        )
    }

    /// The access-control flags an item's attributes record.
    static func accessControlFlags(_ attributes: [String: AttributeValue]) -> UInt? {
        guard case .int(let flags)? = attributes[AttributeKey.accessControl] else { return nil }
        return UInt(truncatingIfNeeded: flags)
    }

    /// `records` (found with their attributes) as the request may have them: those that need an authentication
    /// it lacks are left out (skip) or refuse the request; the attributes are dropped when `keepAttributes` is false.
    func authorized(
        _ records: [ItemRecord],
        caller: Caller,
        keepAttributes: Bool,
        limit: Int?
    ) throws -> [ItemRecord] {
        var check = AuthenticationCheck(caller: caller)
        var kept: [ItemRecord] = []
        for var record in records {
            if let limit, kept.count >= limit { break }
            guard try check.check(flags: Self.accessControlFlags(record.attributes), engine: self) == .allowed else {
                continue
            }
            if !keepAttributes { record.attributes = [:] }
            kept.append(record)
        }
        guard !kept.isEmpty else { throw KeychainError.itemNotFound }
        return kept
    }

    /// Whether the request needs the items' access control looked at: their data is returned (or, for a key, used),
    /// or the caller asked to skip the items that need an authentication.
    static func needsAuthorization(_ query: ItemQuery, caller: Caller) -> Bool {
        if query.returns.contains(.data) { return true }
        return AuthenticationCheck(caller: caller).authentication?.ui == .skip
    }
}

extension KeychainEngine {
    /// The `accc` an update that changes only the accessibility keeps: the item's constraints that ask for an
    /// authentication are never dropped that way (nil when it has none, as before).
    static func keptAccessControl(_ attributes: [String: AttributeValue]) -> AttributeValue? {
        guard let flags = accessControlFlags(attributes), flags & AccessControlFlag.authenticationConstraints != 0
        else { return nil }
        return .int(Int64(flags))
    }
}
