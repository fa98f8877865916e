internal import CTSS2
import KeysealCore

import struct FoundationEssentials.Data

#if canImport(Glibc)
import Glibc
#endif

/// Boot binding to signed PCR policies (docs/TPM.md "Signed PCR policies"): the device and passcode objects' policy is
/// `PolicyAuthorize` of a public key; at each unseal the current values' `PolicyPCR` digest must be one that key
/// signed, as found in the signature directories and checked by the TPM (`TPM2_VerifySignature`).
extension TPMDeviceKey {
    /// A signed policy for the current PCR values, verified by the TPM: what `PolicyAuthorize` needs.
    struct Approval {
        var key: PCRPolicyKey
        var policy: [UInt8]
        var ticket: TPMT_TK_VERIFIED
        /// The policy epoch the signature names (the session then runs `PolicyCounterTimer` before `PolicyAuthorize`).
        var epoch: Int?
    }

    /// The most signatures one unseal hands to the TPM's `TPM2_VerifySignature`: only entries whose signature already
    /// verified in software get there, so more than one means the TPM disagrees with swift-crypto.
    static let maximumTPMSignatureTries = 4

    /// The key whose signed PCR policies new device and passcode objects are bound to (nil: plain `PolicyPCR`).
    public var pcrPolicyKey: PCRPolicyKey? { lock.withLock { policyKey } }

    /// Binds new device and passcode objects to policies signed by `key` (with ``bind(to:)``'s PCRs), or to plain
    /// `PolicyPCR` (nil). Objects already sealed keep theirs.
    public func bind(signedBy key: PCRPolicyKey?) {
        lock.withLock { policyKey = key }
    }

    /// Takes the binding of a sealed device blob: its PCRs and, for a signed binding, its key (an existing store
    /// keeps what it was sealed with, whatever keyseald was started with).
    public func adoptBinding(ofBlob blob: Data) throws {
        let parsed = try SealedBlob(decoding: blob, expecting: .device)
        lock.withLock {
            pcrMask = parsed.pcrMask
            policyKey = parsed.policyKey
        }
    }

    /// The fingerprint of the key a device blob's signed binding names; nil for an unbound or `PolicyPCR` blob.
    public static func pcrPolicyKeyFingerprint(ofBlob blob: Data) -> String? {
        (try? SealedBlob(decoding: blob, expecting: .device))?.policyKey?.fingerprintHex
    }

    /// Refuses a signed binding that would not open now: no policy signed by the bound key for the current values
    /// of the bound PCRs verifies in the TPM. Checked before a store is created and before a reseal, so that binding
    /// cannot leave a device that needs its recovery key at the next start. Nothing for an unbound or `PolicyPCR`
    /// binding.
    public func requireSignedPolicyForCurrentValues() throws {
        let (mask, key) = lock.withLock { (pcrMask, policyKey) }
        guard mask != 0, let key else { return }
        try withConnection { connection in
            do {
                _ = try approval(connection, mask: mask, key: key)
            } catch let error as KeychainError where error.status == KeychainStatus.recoveryRequired {
                throw KeychainError(
                    KeychainStatus.param,
                    "no policy signed by the PCR policy key \(key.fingerprintHex) matches the current values of PCR "
                        + "\(describe(mask)) in \(directoriesText); nothing was bound (sign one with `keyseal tpm "
                        + "sign-policy` and put it there first)"
                )
            }
        }
    }

    /// A signed policy for the current values of `blob`'s PCRs (nil for a blob that is not bound to signed policies),
    /// or the recovery-required refusal when there is none. Lock held.
    func signedApproval(_ connection: ESYSConnection, blob: SealedBlob) throws -> Approval? {
        guard blob.pcrMask != 0, let key = blob.policyKey else { return nil }
        return try approval(connection, mask: blob.pcrMask, key: key)
    }

    /// The first policy in the signature directories for `mask`'s PCRs, named by `key`'s fingerprint, whose digest is
    /// that of `PolicyPCR` over the PCRs' current values (computed by the TPM in a trial session) — followed by
    /// `PolicyCounterTimer` for an entry that names a policy epoch, which must not be below the TPM's —, and whose
    /// signature verifies with `key`, first in software, then in the TPM. Entries are read and matched without the
    /// TPM: however many a directory holds, at most ``maximumTPMSignatureTries`` reach `TPM2_VerifySignature`. Lock
    /// held.
    private func approval(_ connection: ESYSConnection, mask: UInt32, key: PCRPolicyKey) throws -> Approval {
        let current = try connection.pcrPolicyDigest(mask: mask, authValue: false)
        let pcrs = SealedBlob.pcrs(mask)
        let named = SignedPCRPolicy.load(directories: signatureDirectories).filter {
            $0.pcrs == pcrs && key.isNamed(by: SignedPCRPolicy.bytes(hex: $0.pkfp))
        }
        let verifies = key.softwareVerifier()
        var epochNow: Int?
        var refused = 0
        var withdrawn = 0
        var tpmTries = 0
        var seen: Set<String> = []
        for candidate in named {
            guard let expected = candidate.expectedPolicy(pcrPolicy: current), candidate.policyDigest == expected,
                seen.insert(candidate.sig).inserted
            else { continue }
            if let epoch = candidate.epoch {
                // The TPM checks it again in the policy session; this only spares a withdrawn entry its tries.
                let now = try epochNow ?? Self.epoch(ofClock: connection.readClock())
                epochNow = now
                guard epoch >= now else {
                    withdrawn += 1
                    continue
                }
            }
            guard verifies(candidate.sig, expected), tpmTries < Self.maximumTPMSignatureTries,
                let signature = candidate.tpmSignature(for: key)
            else {
                refused += 1
                continue
            }
            tpmTries += 1
            makeRoom(connection)  // TPM2_LoadExternal takes a slot for the key while it verifies
            guard
                let ticket = try connection.verifiedPolicyTicket(
                    key: key,
                    approvedPolicy: expected,
                    signature: signature
                )
            else {
                refused += 1
                continue
            }
            return Approval(key: key, policy: expected, ticket: ticket, epoch: candidate.epoch)
        }
        var detail = "in \(directoriesText)"
        if refused > 0 { detail += "; \(refused) signature\(refused == 1 ? "" : "s") for them did not verify" }
        if withdrawn > 0, let epochNow {
            detail +=
                "; \(withdrawn) signature\(withdrawn == 1 ? " was" : "s were") withdrawn (signed for an epoch below the "
                + "TPM's policy epoch \(epochNow))"
        }
        throw KeychainError(
            KeychainStatus.recoveryRequired,
            "recovery required: no policy signed by the PCR policy key \(key.fingerprintHex) for the current values "
                + "of PCR \(describe(mask)) (\(detail); a boot state nobody signed, or another system booted); install "
                + "its signed policy, or run `keyseal recover` with the recovery key",
            notTried: true
        )
    }

    private var directoriesText: String {
        signatureDirectories.isEmpty ? "(no signature directory)" : signatureDirectories.joined(separator: ", ")
    }

    private func describe(_ mask: UInt32) -> String {
        SealedBlob.pcrs(mask).map(String.init).joined(separator: ",")
    }

    // MARK: Policy epoch (docs/TPM.md "Withdrawing signed states")

    /// The policy epoch a TPM Clock value holds: its top 16 bits.
    static func epoch(ofClock clock: UInt64) -> Int { Int(clock >> 48) }

    /// The policy epoch of the TPM at `tcti` (no store, no keyseald: for `keyseal tpm advance-policy-epoch`).
    public static func policyEpoch(tcti: String) throws -> Int {
        try withAdministrationConnection(tcti: tcti, doing: "read the Clock of") { connection throws(TSS2Error) in
            epoch(ofClock: try connection.readClock())
        }
    }

    /// Moves the policy epoch of the TPM at `tcti` to `epoch` (`TPM2_ClockSet` to `epoch` × 2⁴⁸ ms, with the owner's
    /// empty authorization): signatures made for a lower epoch no longer satisfy their policy. The TPM never moves
    /// its Clock back, so neither Keyseal nor anyone else can lower the epoch again. Returns the epoch then; nothing
    /// changes when it is already `epoch`, and a lower `epoch` is refused.
    public static func advancePolicyEpoch(tcti: String, to epoch: Int) throws -> Int {
        guard (0...SignedPCRPolicy.maximumEpoch).contains(epoch) else {
            throw KeychainError(KeychainStatus.param, "a policy epoch is 0 to \(SignedPCRPolicy.maximumEpoch)")
        }
        let now = try policyEpoch(tcti: tcti)
        guard epoch >= now else {
            throw KeychainError(
                KeychainStatus.param,
                "the TPM's policy epoch is \(now), above \(epoch); it never moves back (the TPM's Clock only advances)"
            )
        }
        guard epoch > now else { return now }
        return try withAdministrationConnection(tcti: tcti, doing: "set the Clock of") { connection throws(TSS2Error) in
            try connection.setClock(UInt64(epoch) << 48)
            // The last handle of Keyseal's NV range: counters take the first free ones.
            try connection.writeNVOnce(scratch: keyseal_nv_index_first + keyseal_nv_index_count - 1)
            return Self.epoch(ofClock: try connection.readClock())
        }
    }

    /// Runs `body` on a connection of its own to the TPM at `tcti`, mapping failures to KeychainErrors.
    private static func withAdministrationConnection<Result>(
        tcti: String,
        doing what: String,
        _ body: (ESYSConnection) throws(TSS2Error) -> Result
    ) throws -> Result {
        if getenv("TSS2_LOG") == nil { setenv("TSS2_LOG", "all+NONE", 0) }
        let connection: ESYSConnection
        do {
            connection = try ESYSConnection(tcti: tcti)
        } catch {
            throw KeychainError(KeychainStatus.notAvailable, "no TPM reachable at TCTI \(tcti) (\(error.code))")
        }
        defer { connection.close() }
        do {
            return try body(connection)
        } catch {
            throw KeychainError(KeychainStatus.notAvailable, "cannot \(what) the TPM at \(tcti) (\(error))")
        }
    }

    // MARK: PCR values

    /// The current values of the SHA-256 PCRs `pcrs` of the TPM at `tcti` (no store, no keyseald: for `keyseal tpm
    /// sign-policy --current`). Reading PCRs needs no authorization.
    public static func readPCRs(tcti: String, pcrs: [Int]) throws -> [Int: [UInt8]] {
        guard !pcrs.isEmpty, pcrs.allSatisfy({ (0..<24).contains($0) }) else {
            throw KeychainError(KeychainStatus.param, "PCR numbers are 0 to 23")
        }
        return try withAdministrationConnection(tcti: tcti, doing: "read the PCRs of") {
            (connection) throws(TSS2Error) in
            try connection.readPCRs(pcrs)
        }
    }
}
