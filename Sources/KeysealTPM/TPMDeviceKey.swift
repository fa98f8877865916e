internal import CTSS2
import KeysealCore

import struct FoundationEssentials.Data

#if canImport(Glibc)
import Glibc
#endif

/// The device key in a TPM 2.0: secrets sealed into TPM data objects under the TCG storage primary key of the
/// owner hierarchy.
///
/// - The primary (ECC NIST P-256, `noDA`) is created from its template once per connection and kept loaded, with
///   one salted HMAC session, until ``close()`` or a lost connection; its Name is the ``deviceIdentity()``, which
///   re-creates it (docs/TPM.md, "Objects kept loaded").
/// - ``seal(_:)`` makes a `noDA` data object with an empty authorization; ``sealWithPasscode(_:authorization:)``
///   one protected by the TPM's dictionary-attack logic with the authorization as its authValue. The blob is
///   the object's public and private areas plus the primary's Name.
/// - Unsealing refuses a blob made under another primary before touching the TPM's
///   counters, loads the object and unseals it over a salted HMAC session with response encryption.
/// - Before a passcode try the TPM's lockout counter is read; the TPM's last try is never spent. A refusal made
///   before trying (the reserve, or the TPM's own lockout) is marked ``KeychainError/notTried``.
/// - Sealing compares the kept primary's Name with the identity read at open, so nothing is sealed
///   under another primary (a TPM cleared or replaced while the store is open).
/// - A call that fails on the wire on its first TPM command over a kept connection (a resource manager that
///   restarted while Keyseal was idle) reconnects and runs once more; a later failure is never retried.
/// - Every other transient object and session is flushed on every path. When the TPM no longer holds what was
///   kept (a TPM2_Clear, a reset under a resource manager), the call loads it afresh and runs once more.
///
/// The ESAPI context is guarded by a lock; calls are serialized. Call ``close()`` when done. `deinit` closes
/// quietly too (flushing what is left and finalizing), so an error thrown between `open` and `close` in a caller
/// never leaks a TPM connection; relying on it is still a bug.
public final class TPMDeviceKey: DeviceKeyProvider, @unchecked Sendable {
    /// The TCTI configuration, e.g. `device:/dev/tpmrm0` or `swtpm:path=/run/swtpm.sock`.
    public let tcti: String
    public var backendName: String { "tpm" }

    let lock = ConditionLock()
    /// The ESAPI context; nil after a lost connection until the next call reconnects.
    private var connection: ESYSConnection?
    private var opened = false
    private var closed = false
    /// The primary's Name as first read by ``deviceIdentity()`` (the engine compares it with the store's record
    /// right after open); every seal checks the primary against it.
    private var pinnedPrimaryName: [UInt8]?
    /// The SHA-256 PCRs new device and passcode objects are bound to (0: unbound); see TPMBinding.swift.
    var pcrMask: UInt32 = 0
    /// The key whose signed PCR policies new device and passcode objects are bound to (nil: plain `PolicyPCR`); see
    /// TPMSignedBinding.swift.
    var policyKey: PCRPolicyKey?
    /// Where signed PCR policies are read from at each unseal of an object bound to them, in order.
    public let signatureDirectories: [String]

    /// The largest authorization value for a passcode object: the size of a SHA-256 digest (the object's nameAlg).
    public static let maximumAuthorizationSize = 32
    /// The largest secret a sealed object holds (MAX_SYM_DATA on every TPM).
    public static let maximumSecretSize = Int(keyseal_max_sealed_size)

    /// - Parameters:
    ///   - tcti: always explicit (`device:/dev/tpmrm0` in production, `swtpm:path=…` in tests); never the TCTI
    ///     loader's default search.
    ///   - logging: when false and `TSS2_LOG` is not set, tpm2-tss's own stderr logging is silenced
    ///     (`TSS2_LOG=all+NONE`) before the first TSS call. The setting is process-wide and read once by
    ///     tpm2-tss, so the first key created in a process decides it.
    ///   - pcrs: the PCRs (SHA-256 bank, 0–23) that new device and passcode objects are bound to; empty: unbound.
    ///   - pcrPolicyKey: with `pcrs`, new objects are bound with `PolicyAuthorize` to policies this key signs.
    ///   - signatureDirectories: where the signed PCR policies of objects bound to them are read from.
    public init(
        tcti: String,
        logging: Bool = false,
        pcrs: [Int] = [],
        pcrPolicyKey: PCRPolicyKey? = nil,
        signatureDirectories: [String] = []
    ) {
        self.tcti = tcti
        self.pcrMask = SealedBlob.mask(pcrs.filter { (0..<24).contains($0) })
        self.policyKey = pcrPolicyKey
        self.signatureDirectories = signatureDirectories
        if !logging { _ = Self.silenceTSSLogging }
    }

    private static let silenceTSSLogging: Void = {
        if getenv("TSS2_LOG") == nil { setenv("TSS2_LOG", "all+NONE", 0) }
    }()

    deinit { connection?.close() }

    // MARK: DeviceKeyProvider

    public func open(provisioning: Bool) throws {
        // The TPM needs nothing created at provisioning: the primary is deterministic and blobs live in the store.
        try lock.withLock {
            guard !closed else { throw Self.closedError }
            guard !opened else { throw KeychainError(KeychainStatus.param, "the TPM device key is already open") }
            let connection = try connect()
            do {
                if Self.reachesTPMDirectly(tcti) { _ = try connection.flushLeftovers() }
                _ = try readDictionaryAttackState(connection)
                if provisioning {
                    // Fails early on a TPM without ECC P-256 or with an owner authorization set.
                    _ = try storagePrimary(connection)
                }
            } catch {
                disconnect()
                if let error = error as? TSS2Error, error.code.isCommunicationFailure {
                    throw KeychainError(KeychainStatus.notAvailable, "no TPM reachable at TCTI \(tcti) (\(error.code))")
                }
                throw map(error, during: .other)
            }
            opened = true
        }
        // A new store bound to signed PCR policies: refused before anything is sealed unless a signed policy opens it
        // now (docs/TPM.md "Signed PCR policies").
        if provisioning { try requireSignedPolicyForCurrentValues() }
    }

    /// Whether `tcti` reaches the TPM without a resource manager: `swtpm:` and `mssim:` (simulators), or `device:`
    /// with a path that resolves to a `/dev/tpmN` node (not `/dev/tpmrmN`). Such a TPM serves one client at a time, so
    /// what it holds when Keyseal opens it was left by a client that is gone, and ``open(provisioning:)`` flushes it.
    /// Anything else (`tabrmd:`, `/dev/tpmrm0`, `device:` without a path, another TCTI) is treated as shared and left
    /// alone: a resource manager keeps other clients' sessions, which must not be touched.
    /// Whether `tcti` is tpm2-abrmd's, which parks its clients' sessions in the TPM as saved sessions and keeps their
    /// context blobs in its own memory: when it stops or is restarted, every session a client held stays in the TPM
    /// for good (no one can load it again, and a new tpm2-abrmd flushes it only with `--flush-all`), and the TPM
    /// holds 64 at most. So behind it Keyseal keeps no session between operations (docs/TPM.md, "A restarted
    /// tpm2-abrmd").
    package static func parksSessionsInTheTPM(_ tcti: String) -> Bool { tctiName(tcti) == "tabrmd" }

    /// The TCTI's name in `tcti`: `device` for `device:/dev/tpm0` and for `libtss2-tcti-device.so.0:…`.
    static func tctiName(_ tcti: String) -> Substring {
        var name = Substring(tcti.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)[0])
        if name.hasPrefix("libtss2-tcti-") { name = name.dropFirst("libtss2-tcti-".count) }
        if let suffix = name.firstIndex(of: ".") { name = name[..<suffix] }  // libtss2-tcti-device.so.0
        return name
    }

    package static func reachesTPMDirectly(_ tcti: String) -> Bool {
        let parts = tcti.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        switch tctiName(tcti) {
        case "swtpm", "mssim":
            return true
        case "device":
            guard parts.count == 2, !parts[1].isEmpty else { return false }
            let path = String(parts[1])
            var resolved = path
            if let real = realpath(path, nil) {
                resolved = String(cString: real)
                free(real)
            }
            let node = resolved.split(separator: "/").last.map(String.init) ?? ""
            return node.hasPrefix("tpm") && !node.hasPrefix("tpmrm")
        default:
            return false
        }
    }

    public func deviceIdentity() throws -> Data {
        try withConnection { connection in
            // Created afresh: the TPM may have been cleared since the kept one was made (and with it the keys).
            dropKept(connection)
            let name = try storagePrimary(connection).name
            if pinnedPrimaryName == nil { pinnedPrimaryName = name }
            return Data(name)
        }
    }

    public func seal(_ secret: SecretBytes) throws -> Data {
        try checkSecretSize(secret)
        return try withConnection { connection in
            try sealObject(connection, secret: secret, authorization: nil)
        }
    }

    public func unseal(_ blob: Data) throws -> SecretBytes {
        let blob = try SealedBlob(decoding: blob, expecting: .device)
        return try withConnection { connection in
            try unsealObject(connection, blob: blob, authorization: nil)
        }
    }

    public func sealWithPasscode(_ secret: SecretBytes, authorization: SecretBytes) throws -> Data {
        try checkSecretSize(secret)
        try checkAuthorizationSize(authorization)
        return try withConnection { connection in
            try sealObject(connection, secret: secret, authorization: authorization)
        }
    }

    public func unsealWithPasscode(_ blob: Data, authorization: SecretBytes) throws -> SecretBytes {
        try checkAuthorizationSize(authorization)
        let blob = try SealedBlob(decoding: blob, expecting: .passcode)
        return try withConnection { connection in
            try unsealObject(connection, blob: blob, authorization: authorization)
        }
    }

    public func status() throws -> DeviceKeyStatus {
        let state = try withConnection { try readDictionaryAttackState($0) }
        let limited = state.lockoutAuthSet && state.counting
        var detail: String
        if limited {
            detail = "passcode guessing is limited by the TPM: \(state.limitsDescription)"
        } else if !state.lockoutAuthSet {
            detail = "passcode guessing is not hardware-limited (TPM lockout authorization is empty)"
            if state.counting { detail += "; \(state.limitsDescription)" }
        } else {
            detail = "passcode guessing is not hardware-limited (TPM dictionary-attack protection is disabled)"
        }
        if state.counting {
            detail += "; Keyseal keeps the TPM's last try in reserve"
            if state.tpmLockedOut {
                detail += "; the TPM is in dictionary-attack lockout"
            } else if state.atReserve {
                detail += ", and it is the only one left: no passcode try until the TPM forgets a failure"
            }
        }
        return DeviceKeyStatus(
            backend: backendName,
            hardwareBacked: true,
            guessingHardwareLimited: limited,
            detail: detail,
            hardwareTriesLeft: state.counting ? state.usableTriesLeft : nil,
            lockoutRetrySeconds: state.secondsUntilNextTry
        )
    }

    public func close() {
        lock.withLock {
            disconnect()
            closed = true
        }
    }

    // MARK: Administration

    /// Sets a random lockout authorization when the TPM's is empty, so that only its holder can reset the
    /// dictionary-attack counter, and returns it: 32 lowercase hex characters, the authorization's bytes
    /// themselves, usable as `tpm2_dictionarylockout -c -p <value>`. Keep it offline; Keyseal does not store it.
    public func protectLockout() throws -> SecretBytes {
        var kept: SecretBytes?
        try protectLockout { kept = $0 }
        return kept!
    }

    /// Sets a random lockout authorization when the TPM's is empty, handing the value to `keep` first: `keep`
    /// must put it somewhere durable (a synced file, a terminal) and throw when it cannot, and then the TPM is
    /// left unchanged. The value is 32 lowercase hex characters, usable as `tpm2_dictionarylockout -c -p <value>`.
    ///
    /// The new value crosses the wire encrypted (a salted session with command parameter encryption).
    /// - Throws: `errSecParam` if the lockout authorization is already set.
    public func protectLockout(keeping keep: (SecretBytes) throws -> Void) throws {
        try withConnection { connection in
            let state = try readDictionaryAttackState(connection)
            guard !state.lockoutAuthSet else { throw Self.lockoutAlreadySet }
            let value = Self.randomHexAuthorization()
            try keep(value)
            let session = try keptSession(connection, attributes: keyseal_TPMA_SESSION_DECRYPT)
            do {
                try connection.changeLockoutAuthorization(to: value, session: session)
            } catch let error as TSS2Error
                where error.code.isTPM(TSS2ResultCode.TPM.authFail) || error.code.isTPM(TSS2ResultCode.TPM.badAuth)
                || error.code.isTPM(TSS2ResultCode.TPM.lockout)
            {
                throw Self.lockoutAlreadySet  // someone set it between our check and our change
            }
        }
    }

    /// The handles this connection holds in the TPM: transient objects, loaded and saved sessions. Between
    /// operations only what is kept loaded (the storage primary and one session); for diagnostics and tests.
    /// (Without a resource manager, every client's handles.)
    public func handlesInUse() throws -> [UInt32] {
        try withConnection { connection in
            try connection.handles(type: keyseal_TPM2_HT_TRANSIENT)
                + connection.handles(type: keyseal_TPM2_HT_LOADED_SESSION)
                + connection.handles(type: keyseal_TPM2_HT_SAVED_SESSION)
        }
    }

    // MARK: Operations (lock held)

    func sealObject(
        _ connection: ESYSConnection,
        secret: SecretBytes,
        authorization: SecretBytes?,
        bound: Bool = true
    ) throws -> Data {
        let mask = bound ? pcrMask : 0
        let key = mask == 0 ? nil : policyKey
        let (primary, primaryName) = try pinnedStoragePrimary(connection, otherwise: "nothing was sealed")
        // Command parameter encryption: the secret and the authorization cross the wire encrypted.
        let policy =
            mask == 0
            ? nil
            : try key.map { SignedPCRPolicy.authorizedPolicy(key: $0, authValue: authorization != nil) }
                ?? connection.pcrPolicyDigest(mask: mask, authValue: authorization != nil)
        let session = try keptSession(connection, attributes: keyseal_TPMA_SESSION_DECRYPT)
        makeRoom(connection)  // TPM2_Create holds the new object in a slot while it works
        let created = try connection.createSealedObject(
            parent: primary,
            session: session,
            secret: secret,
            authorization: authorization,
            dictionaryAttackProtected: authorization != nil,
            policy: policy
        )
        return SealedBlob.encode(
            kind: authorization == nil ? .device : .passcode,
            primaryName: primaryName,
            marshalledPublic: created.public,
            marshalledPrivate: created.private,
            pcrMask: mask,
            policyKey: key
        )
    }

    func unsealObject(
        _ connection: ESYSConnection,
        blob: SealedBlob,
        authorization: SecretBytes?
    ) throws
        -> SecretBytes
    {
        let (primary, primaryName) = try storagePrimary(connection)
        guard primaryName == blob.primaryName else {
            throw KeychainError(KeychainStatus.decode, "this store was sealed by another device")
        }
        // A signed binding: the policy for the current values, verified by the TPM, before anything is counted.
        let approval = try signedApproval(connection, blob: blob)
        if approval == nil { try checkPCRs(connection, blob: blob, passcode: authorization != nil) }
        if authorization != nil {
            let state = try readDictionaryAttackState(connection)
            if let refusal = Self.refusal(state) { throw refusal }
        }
        makeRoom(connection)
        let object = try load(connection, parent: primary, blob: blob)
        defer { connection.flush(object) }
        // Response parameter encryption: the secret comes back encrypted under the salted session's key.
        // A bound object: a policy session of its own (PolicyPCR, then PolicyAuthValue for a passcode object),
        // salted and with response encryption too, flushed after the unseal.
        let policySession =
            blob.pcrMask == 0
            ? nil
            : try approval.map {
                try connection.startAuthorizedPolicySession(
                    tpmKey: primary,
                    mask: blob.pcrMask,
                    key: $0.key,
                    approvedPolicy: $0.policy,
                    ticket: $0.ticket,
                    epoch: $0.epoch,
                    authValue: authorization != nil
                )
            } ?? connection.startPCRPolicySession(tpmKey: primary, mask: blob.pcrMask, authValue: authorization != nil)
        defer { if let policySession { connection.flush(policySession) } }
        let session = try policySession ?? keptSession(connection, attributes: keyseal_TPMA_SESSION_ENCRYPT)
        guard let authorization else { return try connection.unseal(object, session: session) }

        try connection.setAuthorization(authorization, for: object)
        do {
            return try connection.unseal(object, session: session)
        } catch {
            throw try passcodeFailure(error, connection)
        }
    }

    /// What a failed passcode unseal means, with the tries left read from the TPM after the failure.
    private func passcodeFailure(_ error: TSS2Error, _ connection: ESYSConnection) throws -> any Error {
        if error.code.isTPM(TSS2ResultCode.TPM.authFail) {
            let state = try readDictionaryAttackState(connection)
            guard state.counting else { return KeychainError(KeychainStatus.authFailed, "wrong passcode") }
            let tries = state.usableTriesLeft
            return KeychainError(
                KeychainStatus.authFailed,
                "wrong passcode; the TPM allows \(tries) more \(tries == 1 ? "try" : "tries") before lockout",
                retryAfterSeconds: state.secondsUntilNextTry,
                triesLeft: tries
            )
        }
        if error.code.isTPM(TSS2ResultCode.TPM.lockout) {
            // In lockout the TPM refuses before checking: nothing was counted.
            let state = try readDictionaryAttackState(connection)
            return Self.lockoutError(state)
        }
        if error.code.isTPM(TSS2ResultCode.TPM.badAuth) {
            return KeychainError(KeychainStatus.authFailed, "wrong passcode")
        }
        if error.code.isTPM(TSS2ResultCode.TPM.policyFail) || error.code.isTPM(TSS2ResultCode.TPM.pcrChanged) {
            return Self.pcrMismatch(detail: "\(error)")
        }
        return error
    }

    /// Why a passcode try must not be made now, or nil. Every refusal is made before trying: ``KeychainError/notTried``.
    private static func refusal(_ state: DictionaryAttackState) -> KeychainError? {
        guard state.counting else { return nil }
        guard state.triesPossible else {
            return KeychainError(
                KeychainStatus.authFailed,
                "the TPM allows \(state.maxFailures) passcode \(state.maxFailures == 1 ? "try" : "tries") in all and "
                    + "Keyseal keeps one in reserve; raise TPM2_PT_MAX_AUTH_FAIL (tpm2_dictionarylockout -s -n)",
                triesLeft: 0,
                notTried: true
            )
        }
        if state.tpmLockedOut { return lockoutError(state) }
        if state.usableTriesLeft == 0 {
            let seconds = state.secondsUntilNextTry ?? state.interval
            return KeychainError(
                KeychainStatus.authFailed,
                "no passcode try was made: Keyseal keeps the TPM's last try in reserve, and it is the only one left "
                    + "(\(state.limitsDescription); \(state.failures) counted); try again in \(seconds) s, or reset "
                    + "the TPM's counter now with \(resetCommand(state))",
                retryAfterSeconds: seconds,
                triesLeft: 0,
                notTried: true
            )
        }
        return nil
    }

    /// The refusal while the TPM is in dictionary-attack lockout.
    private static func lockoutError(_ state: DictionaryAttackState) -> KeychainError {
        let seconds = state.secondsUntilNextTry ?? state.interval
        return KeychainError(
            KeychainStatus.authFailed,
            "the TPM is in dictionary-attack lockout; try again in \(seconds) s (\(state.limitsDescription)), or "
                + "reset its counter with \(resetCommand(state))",
            retryAfterSeconds: seconds,
            triesLeft: 0,
            notTried: true
        )
    }

    /// The tpm2-tools command that resets the dictionary-attack counter.
    private static func resetCommand(_ state: DictionaryAttackState) -> String {
        state.lockoutAuthSet
            ? "`tpm2_dictionarylockout -c -p <lockout authorization>`" : "`tpm2_dictionarylockout -c`"
    }

    private func readDictionaryAttackState(_ connection: ESYSConnection) throws -> DictionaryAttackState {
        let permanent = keyseal_TPM2_PT_PERMANENT
        let wanted = [
            permanent, keyseal_TPM2_PT_LOCKOUT_COUNTER, keyseal_TPM2_PT_MAX_AUTH_FAIL,
            keyseal_TPM2_PT_LOCKOUT_INTERVAL, keyseal_TPM2_PT_LOCKOUT_RECOVERY,
        ]
        let values = try connection.properties(wanted)
        guard wanted.allSatisfy({ values[$0] != nil }) else {
            throw KeychainError(
                KeychainStatus.internalComponent,
                "the TPM did not report its dictionary-attack properties"
            )
        }
        let attributes = values[permanent]!
        return DictionaryAttackState(
            lockoutAuthSet: attributes & keyseal_TPMA_PERMANENT_LOCKOUTAUTHSET != 0,
            inLockout: attributes & keyseal_TPMA_PERMANENT_INLOCKOUT != 0,
            failures: Int(values[keyseal_TPM2_PT_LOCKOUT_COUNTER]!),
            maxFailures: Int(values[keyseal_TPM2_PT_MAX_AUTH_FAIL]!),
            interval: Int(values[keyseal_TPM2_PT_LOCKOUT_INTERVAL]!),
            recovery: Int(values[keyseal_TPM2_PT_LOCKOUT_RECOVERY]!)
        )
    }

    // MARK: Objects kept loaded (lock held)

    /// The storage primary kept loaded on `connection`, created on its first use, and its Name.
    func storagePrimary(_ connection: ESYSConnection) throws -> (handle: ESYS_TR, name: [UInt8]) {
        if let kept = connection.primary { return kept }
        let handle = try connection.createStoragePrimary()
        do {
            let primary = (handle: handle, name: try connection.name(of: handle))
            connection.primary = primary
            return primary
        } catch {
            connection.flush(handle)
            throw error
        }
    }

    /// ``storagePrimary(_:)``, if the primary is the one this store was opened with; if not (the TPM was
    /// cleared or replaced), errSecDecode, whose message ends with `outcome` ("nothing was sealed").
    private func pinnedStoragePrimary(
        _ connection: ESYSConnection,
        otherwise outcome: String
    ) throws -> (
        handle: ESYS_TR, name: [UInt8]
    ) {
        let primary = try storagePrimary(connection)
        if let pinned = pinnedPrimaryName, pinned != primary.name {
            throw KeychainError(
                KeychainStatus.decode,
                "the TPM's storage primary is not the one this store was opened with (the TPM was cleared or "
                    + "replaced); \(outcome)"
            )
        }
        return primary
    }

    /// The salted HMAC session kept on `connection` (salted with the storage primary; AES-128-CFB), set to
    /// `attributes` (encrypt, decrypt) for the next command. Started on first use; dropped after any failure.
    func keptSession(_ connection: ESYSConnection, attributes: TPMA_SESSION) throws -> ESYS_TR {
        let session: ESYS_TR
        if let kept = connection.session {
            session = kept
        } else {
            session = try connection.startSession(.hmac, saltedWith: storagePrimary(connection).handle)
            connection.session = session
        }
        try connection.setAttributes(attributes, of: session)
        return session
    }

    /// Flushes what `connection` keeps loaded (best effort) and forgets it, so the next use loads it afresh.
    func dropKept(_ connection: ESYSConnection) {
        for key in connection.keys { connection.flush(key.handle) }
        if let session = connection.hmacSession { connection.flush(session.handle) }
        if let session = connection.session { connection.flush(session) }
        if let primary = connection.primary { connection.flush(primary.handle) }
    }

    /// Transient object slots used on one connection: 3, the minimum a TPM provides (TPM2_PT_HR_TRANSIENT_MIN of
    /// the PC-client profile), what swtpm has, and what the kernel's resource manager gives each connection. The
    /// kept primary takes one; up to two hardware keys stay loaded.
    static let transientSlots = 3

    /// Evicts the least recently used kept keys until one more object fits next to the primary (a load, or the
    /// slot TPM2_Create uses while it works).
    func makeRoom(_ connection: ESYSConnection) {
        while 1 + connection.keys.count >= Self.transientSlots, let oldest = connection.keys.first {
            connection.flush(oldest.handle)
        }
    }

    /// TPM2_Load of a blob's object under the primary. A refusal of the object itself is `errSecDecode`; a lost
    /// wire or a primary the TPM no longer holds is thrown as it is (``run(_:on:)`` reconnects or reloads).
    private func load(_ connection: ESYSConnection, parent: ESYS_TR, blob: SealedBlob) throws -> ESYS_TR {
        do {
            return try connection.load(parent: parent, public: blob.publicArea, private: blob.privateArea)
        } catch  where error.code.isStaleReference || error.code.isCommunicationFailure {
            throw error
        } catch {
            throw map(error, during: .load)
        }
    }

    // MARK: Plumbing

    /// Runs `body` with the connection under the lock; turns tpm2-tss failures into KeychainErrors.
    ///
    /// A connection that failed on the wire is dropped after the call, and the next call connects again: a TPM
    /// (or swtpm, or resource manager) that restarted is used again without reopening the key. Every operation
    /// starts from the primary, so nothing from the lost connection is needed.
    ///
    /// A kept connection that fails on the call's first TPM command (a resource manager restarted while Keyseal
    /// was idle: the old connection's first write fails) is replaced at once and the call runs once more. Every
    /// operation's first command only reads or creates the primary, so nothing was counted or changed; a failure
    /// after the first command is never retried (a passcode try may have reached the TPM).
    func withConnection<Result>(_ body: (ESYSConnection) throws -> Result) throws -> Result {
        try lock.withLock {
            guard !closed else { throw Self.closedError }
            guard opened else { throw KeychainError(KeychainStatus.notAvailable, "the TPM device key is not open") }
            let kept = self.connection
            do {
                return try run(body, on: try kept ?? connect())
            } catch let error as TSS2Error {
                guard kept != nil else { throw map(error, during: .other) }
                do {
                    return try run(body, on: try connect())
                } catch let error as TSS2Error {
                    throw map(error, during: .other)
                }
            }
        }
    }

    /// One run of `body` (lock held): KeychainErrors pass and tpm2-tss failures are mapped, except a wire failure
    /// on the first command, which is thrown as it is for the caller to retry.
    ///
    /// A command refused because the TPM no longer holds what the connection kept loaded (TPM_RC_REFERENCE_*: a
    /// TPM2_Clear, a TPM reset under a resource manager) did nothing: the kept objects are dropped and `body` runs
    /// once more, loading them afresh. After any other failure the kept session is dropped (its nonces are not
    /// trusted after a refused command); the primary stays.
    private func run<Result>(_ body: (ESYSConnection) throws -> Result, on connection: ESYSConnection) throws -> Result
    {
        connection.commandsSucceeded = 0
        defer {
            if connection.broken {
                disconnect()
            } else if Self.parksSessionsInTheTPM(tcti) {
                // Its own sessions, by its own handles, over its own live connection: never another client's.
                if let session = connection.hmacSession { connection.flush(session.handle) }
                if let session = connection.session { connection.flush(session) }
            }
        }
        do {
            do {
                return try body(connection)
            } catch let error as TSS2Error where error.code.isStaleReference {
                dropKept(connection)
                return try body(connection)
            }
        } catch {
            if let session = connection.session { connection.flush(session) }
            if error is KeychainError { throw error }
            if let error = error as? TSS2Error, connection.broken, connection.commandsSucceeded == 0 { throw error }
            throw map(error, during: .other)
        }
    }

    /// A new ESAPI context on the TCTI (lock held).
    private func connect() throws -> ESYSConnection {
        do {
            let connection = try ESYSConnection(tcti: tcti)
            self.connection = connection
            return connection
        } catch {
            throw KeychainError(KeychainStatus.notAvailable, "no TPM reachable at TCTI \(tcti) (\(error.code))")
        }
    }

    /// Drops the ESAPI context (lock held).
    private func disconnect() {
        connection?.close()
        connection = nil
    }

    private enum Operation { case load, other }

    /// What a tpm2-tss failure means to a keychain user.
    private func map(_ error: any Error, during operation: Operation) -> KeychainError {
        guard let error = error as? TSS2Error else {
            return error as? KeychainError ?? KeychainError(KeychainStatus.internalComponent, "\(error)")
        }
        let code = error.code
        typealias TPM = TSS2ResultCode.TPM
        if code.isCommunicationFailure {
            return KeychainError(KeychainStatus.notAvailable, "lost the TPM at TCTI \(tcti) (\(error))")
        }
        if code.isTPM(TPM.initialize) {
            return KeychainError(KeychainStatus.notAvailable, "the TPM at \(tcti) has not been started (\(error))")
        }
        if code.isTPM(TPM.failure) {
            return KeychainError(KeychainStatus.notAvailable, "the TPM at \(tcti) is in failure mode (\(error))")
        }
        if code.isTPM(TPM.lockout) {
            return KeychainError(KeychainStatus.authFailed, "the TPM is in dictionary-attack lockout (\(error))")
        }
        if code.isTPM(TPM.policyFail) || code.isTPM(TPM.pcrChanged) {
            return Self.pcrMismatch(detail: "\(error)")
        }
        if [TPM.yielded, TPM.testing, TPM.nvRate, TPM.retry, TPM.nvUnavailable].contains(where: code.isTPM) {
            return KeychainError(KeychainStatus.notAvailable, "the TPM is busy; try again shortly (\(error))")
        }
        if [TPM.objectMemory, TPM.sessionMemory, TPM.objectHandles, TPM.sessionHandles].contains(where: code.isTPM) {
            return KeychainError(
                KeychainStatus.internalComponent,
                "the TPM has no free object or session slot; another program may hold them (\(error))"
            )
        }
        if error.function == "Esys_CreatePrimary",
            code.isTPM(TPM.authFail) || code.isTPM(TPM.badAuth)
        {
            return KeychainError(
                KeychainStatus.notAvailable,
                "the TPM owner hierarchy has an authorization value; Keyseal needs it empty (\(error))"
            )
        }
        let blobRelated =
            code.isTPM || code.layer == TSS2ResultCode.Layer.marshalling
            || (code.layer == TSS2ResultCode.Layer.esapi && code.base == TSS2ResultCode.TSS.badValue)
        if operation == .load, blobRelated, !isWarning(code) {
            return KeychainError(
                KeychainStatus.decode,
                "the TPM refused the sealed object: it was edited or is not from this TPM (\(error))"
            )
        }
        if code.layer == TSS2ResultCode.Layer.esapi, code.base == TSS2ResultCode.TSS.responseAuthFailed {
            return KeychainError(
                KeychainStatus.internalComponent,
                "a TPM response failed its integrity check (\(error))"
            )
        }
        return KeychainError(KeychainStatus.internalComponent, "TPM error in \(error)")
    }

    private func isWarning(_ code: TSS2ResultCode) -> Bool {
        code.isTPM && code.rawValue & 0x080 == 0 && code.rawValue & 0x800 != 0
    }

    private func checkSecretSize(_ secret: SecretBytes) throws {
        guard secret.count <= Self.maximumSecretSize else {
            throw KeychainError(
                KeychainStatus.param,
                "a TPM sealed object holds at most \(Self.maximumSecretSize) bytes"
            )
        }
    }

    private func checkAuthorizationSize(_ authorization: SecretBytes) throws {
        guard (1...Self.maximumAuthorizationSize).contains(authorization.count) else {
            throw KeychainError(
                KeychainStatus.param,
                "a TPM passcode authorization is 1 to \(Self.maximumAuthorizationSize) bytes"
            )
        }
    }

    /// 16 random bytes as 32 lowercase hex characters, built in secret storage.
    private static func randomHexAuthorization() -> SecretBytes {
        let raw = SecretBytes.random(count: 16)
        let digits = Array("0123456789abcdef".utf8)
        return SecretBytes(count: 32) { out in
            raw.withUnsafeBytes { bytes in
                for (index, byte) in bytes.enumerated() {
                    out[2 * index] = digits[Int(byte >> 4)]
                    out[2 * index + 1] = digits[Int(byte & 0x0F)]
                }
            }
        }
    }

    private static let closedError = KeychainError(KeychainStatus.notAvailable, "the TPM device key is closed")
    private static let lockoutAlreadySet = KeychainError(
        KeychainStatus.param,
        "the TPM lockout authorization is already set"
    )
}

// MARK: - Key pairs inside the TPM

extension TPMDeviceKey: HardwareKeyProvider {
    /// Creates an ECC P-256 key under the storage primary (`fixedTPM | fixedParent | sensitiveDataOrigin |
    /// userWithAuth | sign | decrypt | noDA`, authValue = `authorization`, sent encrypted by the salted session).
    /// The blob is the storage primary's Name, the key's TPM2B_PUBLIC and TPM2B_PRIVATE (``SealedBlob``, kind 3);
    /// the private area is encrypted by the primary, so it is usable only in this TPM.
    public func generateP256Key(authorization: SecretBytes) throws -> HardwareKeyBlob {
        try checkKeyAuthorization(authorization)
        return try withConnection { connection in
            let (primary, primaryName) = try pinnedStoragePrimary(connection, otherwise: "no key was created")
            let session = try keptSession(connection, attributes: keyseal_TPMA_SESSION_DECRYPT)
            makeRoom(connection)  // TPM2_Create holds the new object in a slot while it works
            let created = try connection.createHardwareKey(
                parent: primary,
                session: session,
                authorization: authorization
            )
            guard created.point.count == 64 else {
                throw KeychainError(KeychainStatus.internalComponent, "the TPM returned no P-256 public key")
            }
            let blob = SealedBlob.encode(
                kind: .key,
                primaryName: primaryName,
                marshalledPublic: created.public,
                marshalledPrivate: created.private
            )
            return HardwareKeyBlob(blob: blob, publicKey: Data([0x04] + created.point))
        }
    }

    /// TPM2_Sign, ECDSA with the NULL hashcheck ticket, over the kept unsalted HMAC session whose HMAC Keyseal
    /// computes itself (the authorization never crosses the bus; ``ESYSConnection/sign(_:keyName:authorization:session:digest:)``). The digest is brought to 32 bytes as ECDSA on P-256 uses it (X9.62: its leftmost 256 bits as an
    /// integer, so a shorter digest is left-padded with zeros and a longer one cut) and signed under the SHA-256
    /// scheme, so every digest size from 20 to 64 bytes signs on every TPM.
    public func sign(digest: [UInt8], keyBlob: Data, authorization: SecretBytes) throws -> Data {
        let digest = try Self.p256Digest(digest)
        try checkKeyAuthorization(authorization)
        let rs = try withConnection { connection in
            let key = try loadedKey(connection, keyBlob: keyBlob)
            var session = try connection.hmacSession ?? connection.startHMACSession()
            connection.hmacSession = session
            do {
                let rs = try connection.sign(key, authorization: authorization, session: &session, digest: digest)
                connection.hmacSession = session
                return rs
            } catch {
                connection.flush(session.handle)  // its nonces are not trusted after a failure
                if let error = error as? TSS2Error, Self.isWrongAuthorization(error) {
                    throw Self.wrongKeyAuthorization
                }
                throw error
            }
        }
        return Self.derSignature(rs)
    }

    /// TPM2_ECDH_ZGen over the salted session with response encryption: Z crosses the bus encrypted.
    public func keyExchange(peerPublicKey: Data, keyBlob: Data, authorization: SecretBytes) throws -> SecretBytes {
        guard peerPublicKey.count == 65, peerPublicKey.first == 0x04 else {
            throw KeychainError(
                KeychainStatus.param,
                "the peer's public key is not an uncompressed P-256 point (04 ‖ X ‖ Y, 65 bytes)"
            )
        }
        try checkKeyAuthorization(authorization)
        return try withConnection { connection in
            let key = try loadedKey(connection, keyBlob: keyBlob).handle
            let session = try keptSession(connection, attributes: keyseal_TPMA_SESSION_ENCRYPT)
            try connection.setAuthorization(authorization, for: key)
            defer { connection.clearAuthorization(for: key) }
            do {
                return try connection.ecdhZGen(key, session: session, peerPoint: Array(peerPublicKey.dropFirst()))
            } catch let error as TSS2Error where Self.isWrongAuthorization(error) {
                throw Self.wrongKeyAuthorization
            } catch let error as TSS2Error
                where error.code.isTPM(TSS2ResultCode.TPM.eccPoint) || error.code.isTPM(TSS2ResultCode.TPM.noResult)
            {
                throw KeychainError(KeychainStatus.param, "the peer's public key is not a point on P-256")
            }
        }
    }

    /// Flushes the kept salted session: keyExchange and certify authorize a key through it with ESAPI, which keeps
    /// sessionKey ‖ authValue in its record of the session until the session is flushed (tpm2-tss 3.2; the record is
    /// then freed, and keyseald's freed memory is wiped). The next operation starts a new session.
    public func forgetKeyAuthorizations() {
        lock.withLock {
            guard let connection, let session = connection.session else { return }
            connection.flush(session)
        }
    }

    /// A TPM key lives only in its blob: nothing to remove, except the key from the loaded ones if it is there.
    public func deleteKey(keyBlob: Data) throws {
        let bytes = Array(keyBlob)
        lock.withLock {
            guard let connection else { return }
            for kept in connection.keys where kept.blob == bytes { connection.flush(kept.handle) }
            if connection.broken { disconnect() }
        }
    }

    // MARK: Helpers (lock held where a connection is passed)

    /// The key of `keyBlob`: found among the kept keys (then marked most recently used), or checked, loaded under
    /// the kept primary and kept. A blob made under another primary is `errSecDecode` before anything is loaded.
    func loadedKey(_ connection: ESYSConnection, keyBlob: Data) throws -> ESYSConnection.KeptKey {
        let bytes = Array(keyBlob)
        if let index = connection.keys.firstIndex(where: { $0.blob == bytes }) {
            let kept = connection.keys.remove(at: index)
            connection.keys.append(kept)
            return kept
        }
        let blob = try SealedBlob(decoding: keyBlob, expecting: .key)
        let (primary, primaryName) = try storagePrimary(connection)
        guard primaryName == blob.primaryName else {
            throw KeychainError(KeychainStatus.decode, "this key was created by another device")
        }
        makeRoom(connection)
        let handle = try load(connection, parent: primary, blob: blob)
        do {
            let kept = ESYSConnection.KeptKey(
                blob: bytes,
                handle: handle,
                tpmHandle: try connection.tpmHandle(of: handle),
                name: try connection.name(of: handle)
            )
            connection.keys.append(kept)
            return kept
        } catch {
            connection.flush(handle)
            throw error
        }
    }

    private func checkKeyAuthorization(_ authorization: SecretBytes) throws {
        guard (1...Self.maximumAuthorizationSize).contains(authorization.count) else {
            throw KeychainError(
                KeychainStatus.param,
                "a hardware key's authorization is 1 to \(Self.maximumAuthorizationSize) bytes"
            )
        }
    }

    /// The digest as ECDSA on P-256 uses it: 32 bytes (see ``sign(digest:keyBlob:authorization:)``).
    static func p256Digest(_ digest: [UInt8]) throws -> [UInt8] {
        guard (20...64).contains(digest.count) else {
            throw KeychainError(KeychainStatus.param, "a digest to sign is 20 to 64 bytes, not \(digest.count)")
        }
        if digest.count >= 32 { return Array(digest.prefix(32)) }
        return [UInt8](repeating: 0, count: 32 - digest.count) + digest
    }

    /// X9.62 `SEQUENCE { INTEGER r, INTEGER s }` from r ‖ s (32 bytes each).
    static func derSignature(_ rs: [UInt8]) -> Data {
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.isEmpty { value = [0] }
            if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(rs[0..<32]) + integer(rs[32..<64])
        return Data([0x30, UInt8(body.count)] + body)
    }

    private static func isWrongAuthorization(_ error: TSS2Error) -> Bool {
        error.code.isTPM(TSS2ResultCode.TPM.badAuth) || error.code.isTPM(TSS2ResultCode.TPM.authFail)
    }

    private static let wrongKeyAuthorization = KeychainError(
        KeychainStatus.authFailed,
        "wrong authorization for the hardware key"
    )
}
