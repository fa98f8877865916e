import FoundationEssentials
import KeysealCore

/// Passcode checks by keyseald's clients (callers that are not administrators), counted in memory by uid and never
/// in the store's keybag: a client's wrong passcode neither delays an administrator's unlock nor moves the
/// anti-rollback counter, and clients together spend a bounded number of the hardware's tries (docs/SECURITY-MODEL.md,
/// "Passcode tries by clients").
///
/// A client may check the passcode only through an authentication (`LAContext`'s device-passcode evaluation); it
/// never unlocks. Each uid has ``perClient`` wrong tries, each after the delay the store's policy sets for as many
/// failures past its undelayed ones, and all clients together have ``allClients``; an administrator's successful
/// passcode check (an unlock, a passcode change, its own authentication) gives every client its tries back. A
/// daemon restart does too: the counts live only as long as keyseald, and the hardware's own count (the TPM's
/// dictionary-attack counter) is what outlives it.
struct ClientPasscodeTries {
    /// Wrong tries one uid may make between two successful administrator checks.
    static let perClient = 3
    /// Wrong tries all clients together may make between two successful administrator checks.
    static let allClients = 6
    /// A client's check is not made while the hardware has this many usable tries left or fewer: they are the
    /// administrator's (on top of the TPM's last try, which Keyseal never spends).
    static let administratorHardwareReserve = 2
    /// The store's policy delays a client as if it had this many more failures: its first wrong try is free, the
    /// second waits the store's first delay.
    static let delayOffset = 3

    private var failures: [UInt32: (count: Int, last: Date)] = [:]
    private(set) var total = 0

    /// Why `uid` may not try now (authFailed, nothing tried), or nil.
    func refusal(uid: UInt32, policy: PasscodePolicy, now: Date) -> KeychainError? {
        let mine = failures[uid]?.count ?? 0
        if mine >= Self.perClient {
            return KeychainError(
                KeychainStatus.authFailed,
                "no passcode check was made: uid \(uid) has made \(mine) wrong passcode tries, all a client has "
                    + "until an administrator next unlocks",
                notTried: true
            )
        }
        if total >= Self.allClients {
            return KeychainError(
                KeychainStatus.authFailed,
                "no passcode check was made: clients have made \(total) wrong passcode tries, all they have "
                    + "together until an administrator next unlocks",
                notTried: true
            )
        }
        if let last = failures[uid]?.last {
            let delay = policy.delay(mine + Self.delayOffset)
            let wait = Int((Double(delay) - now.timeIntervalSince(last)).rounded(.up))
            if wait > 0 {
                return KeychainError(
                    KeychainStatus.authFailed,
                    "no passcode check was made: uid \(uid) has made \(mine) wrong passcode "
                        + "\(mine == 1 ? "try" : "tries"); try again in \(wait) s",
                    retryAfterSeconds: wait,
                    notTried: true
                )
            }
        }
        return nil
    }

    /// Counts a try of `uid` before it is made; ``takeBack(uid:previous:)`` undoes it when nothing was tried.
    mutating func record(uid: UInt32, now: Date) -> (count: Int, last: Date)? {
        let previous = failures[uid]
        failures[uid] = ((previous?.count ?? 0) + 1, now)
        total += 1
        return previous
    }

    mutating func takeBack(uid: UInt32, previous: (count: Int, last: Date)?) {
        failures[uid] = previous
        total -= 1
    }

    /// The right passcode from `uid`: its own count is cleared and this try is not counted (it was no failure);
    /// its earlier wrong tries stay in the clients' total.
    mutating func succeeded(uid: UInt32) {
        failures[uid] = nil
        total -= 1
    }

    /// The message added to a client's failed check.
    func failureDetail(uid: UInt32, policy: PasscodePolicy) -> String {
        let mine = failures[uid]?.count ?? 0
        let left = max(0, min(Self.perClient - mine, Self.allClients - total))
        var detail =
            "; uid \(uid) has \(left) client \(left == 1 ? "try" : "tries") left until an administrator unlocks"
        let delay = policy.delay(mine + Self.delayOffset)
        if left > 0, delay > 0 { detail += "; next try in \(delay) s" }
        return detail
    }

    /// An administrator checked the passcode successfully: every client has its tries again.
    mutating func reset() {
        failures.removeAll()
        total = 0
    }
}

extension KeychainEngine {
    /// Checks the store's passcode for a client (a caller that is not an administrator) through the hardware, counted
    /// in ``ClientPasscodeTries`` and never in the keybag. Refused without a try during the store's own delay, past
    /// the client's or all clients' tries, inside the client's delay, and when the hardware has no more than
    /// ``ClientPasscodeTries/administratorHardwareReserve`` usable tries left. The store's lock state and the
    /// keybag do not change.
    func verifyClientPasscode(_ secret: SecretBytes, uid: UInt32) throws {
        guard let record = keybag.passcode else { throw KeychainError(KeychainStatus.param, "no passcode is set") }
        let now = configuration.clock()
        let storeWait = remainingDelay(now: now)
        if storeWait > 0 {
            throw KeychainError(
                KeychainStatus.authFailed,
                "no passcode check was made: the store waits \(storeWait) s after failed attempts",
                retryAfterSeconds: storeWait,
                notTried: true
            )
        }
        if let refusal = clientPasscodeTries.refusal(uid: uid, policy: configuration.passcodePolicy, now: now) {
            throw refusal
        }
        if let left = (try? device.status())?.hardwareTriesLeft,
            left <= ClientPasscodeTries.administratorHardwareReserve
        {
            throw KeychainError(
                KeychainStatus.authFailed,
                "no passcode check was made: the hardware has \(left) passcode \(left == 1 ? "try" : "tries") left, "
                    + "which are kept for an administrator",
                triesLeft: 0,
                notTried: true
            )
        }
        let previous = clientPasscodeTries.record(uid: uid, now: now)
        do {
            let passcodeKey = try Argon2id.derive(secret, salt: record.salt, parameters: record.argon2)
            let passcodeSecret = try device.unsealWithPasscode(record.sealedSecret, authorization: passcodeKey)
            do {
                _ = try unwrapPasscodeClassKeys(passcodeSecret: passcodeSecret, passcodeKey: passcodeKey)
            } catch {
                throw KeychainError(KeychainStatus.authFailed, "wrong passcode")
            }
        } catch let error as KeychainError where error.notTried {
            clientPasscodeTries.takeBack(uid: uid, previous: previous)
            throw error
        } catch let error as KeychainError where error.status == KeychainStatus.authFailed {
            var message =
                error.message.hasPrefix("wrong passcode") ? error.message : "wrong passcode (\(error.message))"
            message += clientPasscodeTries.failureDetail(uid: uid, policy: configuration.passcodePolicy)
            throw KeychainError(KeychainStatus.authFailed, message, triesLeft: error.triesLeft)
        }
        // Any other failure stays counted: the hardware may have seen the try.
        clientPasscodeTries.succeeded(uid: uid)
    }
}
