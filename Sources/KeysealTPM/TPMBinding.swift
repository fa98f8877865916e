internal import CTSS2
internal import Crypto
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

    /// Whether the PCRs a device blob is bound to have the values it was sealed to now (true for an unbound blob);
    /// for a blob bound to signed policies, whether a signed policy for their current values verifies.
    public func pcrsMatch(deviceBlob blob: Data) throws -> Bool {
        let parsed = try SealedBlob(decoding: blob, expecting: .device)
        guard parsed.pcrMask != 0 else { return true }
        return try withConnection { connection in
            if parsed.policyKey != nil {
                do {
                    return try signedApproval(connection, blob: parsed) != nil
                } catch let error as KeychainError where error.status == KeychainStatus.recoveryRequired {
                    return false
                }
            }
            return try connection.pcrPolicyDigest(mask: parsed.pcrMask, authValue: false) == parsed.policy
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
            throw Self.pcrMismatch(
                detail: "PCR \(SealedBlob.pcrs(blob.pcrMask).map(String.init).joined(separator: ","))"
            )
        }
    }

    /// The refusal of a PCR-bound object whose PCRs changed: nothing was tried.
    static func pcrMismatch(detail: String) -> KeychainError {
        KeychainError(
            KeychainStatus.recoveryRequired,
            "recovery required: the TPM's PCRs no longer have the values this store was sealed to (\(detail); a "
                + "firmware or boot change, or another system booted); run `keyseal recover` with the recovery key",
            notTried: true
        )
    }

    // MARK: Anti-rollback counter

    /// Defines a new anti-rollback counter (an NV counter index in 0x01004B00…0x01005AFF that only the holder of
    /// `authorization` increments), increments it once so that it can be read, and returns its index, value and
    /// Name (which the store records under its keybag's MAC and compares at every use).
    public func defineCounter(authorization: SecretBytes) throws -> (index: UInt32, value: UInt64, name: Data) {
        try withConnection { connection in
            let session = try keptSession(connection, attributes: keyseal_TPMA_SESSION_DECRYPT)
            let index = try connection.defineCounter(authorization: authorization, session: session)
            return try connection.withNVIndex(index, session: session) {
                (handle) throws(TSS2Error) -> (UInt32, UInt64, Data) in
                try connection.setAttributes(0, of: session)
                try connection.incrementCounter(handle, authorization: authorization, session: session)
                let value = try connection.readCounter(handle, session: session)
                // Read after the increment: TPMA_NV_WRITTEN, part of the Name, is set by the first write.
                return (index, value, Data(try connection.name(of: handle)))
            }
        }
    }

    /// The Name of Keyseal's counter at `index` once it has been incremented: 0x000B ‖ SHA-256 of its public area
    /// (type counter; `AUTHWRITE | AUTHREAD | OWNERREAD | NO_DA | WRITTEN`; no authPolicy; 8 bytes). Every counter
    /// Keyseal defined has it, so a keybag written before the Name was recorded is checked against this one.
    public static func counterName(index: UInt32) -> Data {
        var buffer = [UInt8](repeating: 0, count: MemoryLayout<TPMS_NV_PUBLIC>.size)
        let size = buffer.withUnsafeMutableBufferPointer {
            keyseal_nv_counter_written_public(index, $0.baseAddress, $0.count)
        }
        precondition(size > 0, "the counter's public area fits its own type")
        return Data([0x00, 0x0B] + SHA256.hash(data: buffer[0..<size]))
    }

    /// The counter's value now, after checking that the index at `index` is the counter whose Name is `name`. A
    /// missing index is `errSecDecode` (it was deleted: the TPM cannot vouch for the store's freshness any more);
    /// an index with another Name is `errKeysealRolledBack` (``counterReplaced(_:)``).
    public func readCounter(index: UInt32, name: Data) throws -> UInt64 {
        try withCounter(index, name: name) { (connection, handle, session) throws(TSS2Error) -> UInt64 in
            try connection.readCounter(handle, session: session)
        }
    }

    /// Increments the counter (checked as ``readCounter(index:name:)`` checks it) and returns its new value.
    public func incrementCounter(index: UInt32, name: Data, authorization: SecretBytes) throws -> UInt64 {
        try withCounter(index, name: name) { (connection, handle, session) throws(TSS2Error) -> UInt64 in
            try connection.incrementCounter(handle, authorization: authorization, session: session)
            return try connection.readCounter(handle, session: session)
        }
    }

    /// Runs `body` (with the kept salted session) on the NV index `index` once its Name, as the TPM reports it
    /// (`TPM2_NV_ReadPublic` under that session, its response HMAC checked; ESAPI checks the Name against the public
    /// area), is `name`: its type, attributes and authPolicy are those of the counter the store defined. Root can
    /// undefine the counter with the empty owner authorization and define in its place an ordinary index, which it
    /// writes at will, or a counter of other attributes; either has another Name. Every read and increment then runs
    /// over the same session, so neither the Name nor the value can be changed on the bus.
    private func withCounter<Result>(
        _ index: UInt32,
        name: Data,
        _ body: (ESYSConnection, ESYS_TR, ESYS_TR) throws(TSS2Error) -> Result
    ) throws -> Result {
        try withConnection { connection in
            let session = try keptSession(connection, attributes: 0)
            let result: Result?
            do {
                result = try connection.withNVIndex(index, session: session) { (handle) throws(TSS2Error) -> Result? in
                    guard try connection.name(of: handle) == Array(name) else { return nil }
                    return try body(connection, handle, session)
                }
            } catch let error as TSS2Error where error.code.isTPM(TSS2ResultCode.TPM.handle) {
                throw Self.counterMissing(index)
            }
            guard let result else { throw Self.counterReplaced(index) }
            return result
        }
    }

    private static func counterMissing(_ index: UInt32) -> KeychainError {
        KeychainError(
            KeychainStatus.decode,
            "the TPM's anti-rollback counter 0x\(String(index, radix: 16)) of this store is gone (undefined, or the "
                + "TPM was cleared)"
        )
    }

    /// The index at the counter's handle is not the store's counter: `errKeysealRolledBack`.
    static func counterReplaced(_ index: UInt32) -> KeychainError {
        KeychainError(
            KeychainStatus.rolledBack,
            "the TPM's NV index 0x\(String(index, radix: 16)) is not this store's anti-rollback counter: its Name "
                + "(type, attributes, authPolicy) differs from the one the store recorded, so the counter was "
                + "undefined and another index defined in its place"
        )
    }
}
