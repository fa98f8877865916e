internal import CTSS2
import KeysealCore

import struct FoundationEssentials.Data

/// Boot binding (PCR policies), the recovery object and the anti-rollback counter (docs/TPM.md).
extension TPMDeviceKey {
    /// The PCRs new device and passcode objects are bound to (SHA-256 bank), ascending; empty: unbound.
    public var boundPCRs: [Int] { lock.withLock { SealedBlob.pcrs(pcrMask) } }

    /// Binds new device and passcode objects to `pcrs` (empty: unbound). Objects already sealed keep theirs.
    public func bind(to pcrs: [Int]) throws {
        guard pcrs.allSatisfy({ (0..<24).contains($0) }) else {
            throw KeychainError(KeychainStatus.param, "a PCR number is 0 to 23")
        }
        lock.withLock { pcrMask = SealedBlob.mask(pcrs) }
    }

    /// The PCRs a sealed blob (device or passcode object) is bound to; empty for an unbound object.
    public static func boundPCRs(ofBlob blob: Data) throws -> [Int] {
        let parsed: SealedBlob
        do {
            parsed = try SealedBlob(decoding: blob, expecting: .device)
        } catch {
            parsed = try SealedBlob(decoding: blob, expecting: .passcode)
        }
        return SealedBlob.pcrs(parsed.pcrMask)
    }

    /// Whether the PCRs a device blob is bound to have the values it was sealed to now (true for an unbound blob).
    public func pcrsMatch(deviceBlob blob: Data) throws -> Bool {
        let parsed = try SealedBlob(decoding: blob, expecting: .device)
        guard parsed.pcrMask != 0 else { return true }
        return try withConnection { connection in
            try connection.pcrPolicyDigest(mask: parsed.pcrMask, authValue: false) == parsed.policy
        }
    }

    /// Seals `secret` in a dictionary-attack protected object with `authorization` as its authValue and no PCR
    /// policy, whatever ``boundPCRs`` says: the recovery object, which must open after the PCRs change. Unsealed
    /// with ``unsealWithPasscode(_:authorization:)``; every wrong authorization is counted by the TPM.
    public func sealUnbound(_ secret: SecretBytes, authorization: SecretBytes) throws -> Data {
        guard secret.count <= Self.maximumSecretSize,
            (1...Self.maximumAuthorizationSize).contains(authorization.count)
        else { throw KeychainError(KeychainStatus.param, "a recovery secret or authorization of the wrong size") }
        return try withConnection { connection in
            try sealObject(connection, secret: secret, authorization: authorization, bound: false)
        }
    }

    /// Refuses, before any counted call, an object whose PCRs no longer have the values it was sealed to. The
    /// trial digest of `PolicyPCR` over the current values (then `PolicyAuthValue` for a passcode object) must be
    /// the object's authPolicy. Lock held.
    func checkPCRs(_ connection: ESYSConnection, blob: SealedBlob, passcode: Bool) throws {
        guard blob.pcrMask != 0 else { return }
        let current = try connection.pcrPolicyDigest(mask: blob.pcrMask, authValue: passcode)
        guard current == blob.policy else {
            throw Self.pcrMismatch(detail: "PCR \(SealedBlob.pcrs(blob.pcrMask).map(String.init).joined(separator: ","))")
        }
    }

    /// The refusal of a PCR-bound object whose PCRs changed: nothing was tried.
    static func pcrMismatch(detail: String) -> KeychainError {
        KeychainError(
            KeychainStatus.recoveryRequired,
            "recovery required: the TPM's PCRs no longer have the values this store was sealed to (\(detail); a "
                + "firmware or boot change, or another system booted); run `keyseal recover` with the recovery key",
            notTried: true)
    }

    // MARK: Anti-rollback counter

    /// Defines a new anti-rollback counter (an NV counter index in 0x01004B00…0x01005AFF that only the holder of
    /// `authorization` increments), increments it once so that it can be read, and returns its index and value.
    public func defineCounter(authorization: SecretBytes) throws -> (index: UInt32, value: UInt64) {
        try withConnection { connection in
            let session = try keptSession(connection, attributes: keyseal_TPMA_SESSION_DECRYPT)
            let index = try connection.defineCounter(authorization: authorization, session: session)
            let value = try connection.withNVIndex(index) { (handle) throws(TSS2Error) -> UInt64 in
                try connection.setAttributes(0, of: session)
                try connection.incrementCounter(handle, authorization: authorization, session: session)
                return try connection.readCounter(handle)
            }
            return (index, value)
        }
    }

    /// The counter's value now. A missing index is `errSecDecode` (it was deleted: the TPM cannot vouch for the
    /// store's freshness any more).
    public func readCounter(index: UInt32) throws -> UInt64 {
        try withConnection { connection in
            do {
                return try connection.withNVIndex(index) { (handle) throws(TSS2Error) -> UInt64 in
                    try connection.readCounter(handle)
                }
            } catch let error as TSS2Error where error.code.isTPM(TSS2ResultCode.TPM.handle) {
                throw Self.counterMissing(index)
            }
        }
    }

    /// Increments the counter and returns its new value.
    public func incrementCounter(index: UInt32, authorization: SecretBytes) throws -> UInt64 {
        try withConnection { connection in
            let session = try keptSession(connection, attributes: 0)
            do {
                return try connection.withNVIndex(index) { (handle) throws(TSS2Error) -> UInt64 in
                    try connection.incrementCounter(handle, authorization: authorization, session: session)
                    return try connection.readCounter(handle)
                }
            } catch let error as TSS2Error where error.code.isTPM(TSS2ResultCode.TPM.handle) {
                throw Self.counterMissing(index)
            }
        }
    }

    private static func counterMissing(_ index: UInt32) -> KeychainError {
        KeychainError(
            KeychainStatus.decode,
            "the TPM's anti-rollback counter 0x\(String(index, radix: 16)) of this store is gone (undefined, or the "
                + "TPM was cleared)")
    }
}
