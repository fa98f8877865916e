internal import CTSS2
internal import Crypto
import KeysealCore

/// `PolicyAuthorize` sessions and PCR reads over one ESAPI context (docs/TPM.md "Signed PCR policies"). Like the rest
/// of ``ESYSConnection``: under ``TPMDeviceKey``'s lock; every object and session flushed on every path.
extension ESYSConnection {
    /// `TPM2_VerifySignature` of `policy`'s signature by `key` (loaded with `TPM2_LoadExternal` in the owner
    /// hierarchy, so that the ticket is not a NULL one, and flushed at once): the ticket `PolicyAuthorize` takes.
    /// Throws TPM_RC_SIGNATURE (and the like) for a signature the key did not make.
    func verifyPolicySignature(
        key: PCRPolicyKey,
        approvedPolicy: [UInt8],
        signature: TPMT_SIGNATURE
    ) throws(TSS2Error) -> TPMT_TK_VERIFIED {
        var publicArea = key.publicArea
        var handle = ESYS_TR(ESYS_TR_NONE)
        try tss2(
            "Esys_LoadExternal",
            Esys_LoadExternal(
                context,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                nil,
                &publicArea,
                ESYS_TR(ESYS_TR_RH_OWNER),
                &handle
            )
        )
        live.insert(handle)
        defer { flush(handle) }
        // aHash = SHA-256(approvedPolicy ‖ policyRef), policyRef empty.
        var digest = TPM2B_DIGEST()
        let aHash = Array(SHA256.hash(data: approvedPolicy))
        _ = aHash.withUnsafeBufferPointer { keyseal_fill_digest(&digest, $0.baseAddress, $0.count) }
        var signature = signature
        var validation: UnsafeMutablePointer<TPMT_TK_VERIFIED>?
        try tss2(
            "Esys_VerifySignature",
            Esys_VerifySignature(
                context,
                handle,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &digest,
                &signature,
                &validation
            )
        )
        defer { Esys_Free(validation) }
        guard let validation else { throw TSS2Error(function: "Esys_VerifySignature", code: .init(rawValue: 0x7000B)) }
        return validation.pointee
    }

    /// ``verifyPolicySignature(key:approvedPolicy:signature:)``, or nil when the TPM refuses the signature itself
    /// (TPM_RC_SIGNATURE and the other format-1 codes: not this key's signature, or not a well-formed one).
    func verifiedPolicyTicket(
        key: PCRPolicyKey,
        approvedPolicy: [UInt8],
        signature: TPMT_SIGNATURE
    ) throws(TSS2Error) -> TPMT_TK_VERIFIED? {
        do {
            return try verifyPolicySignature(key: key, approvedPolicy: approvedPolicy, signature: signature)
        } catch {
            guard error.function == "Esys_VerifySignature", error.code.isTPM, error.code.rawValue & 0x080 != 0 else {
                throw error
            }
            return nil
        }
    }

    /// A policy session salted with `tpmKey` whose response parameters are encrypted, satisfied for an object bound
    /// to `key` with `PolicyAuthorize`: `PolicyPCR` over the current values of `mask` (its digest is then
    /// `approvedPolicy`, or `PolicyAuthorize` fails), `PolicyCounterTimer` when the signature names an `epoch` (the
    /// TPM refuses it once its policy epoch has moved past that one), `PolicyAuthorize` with the ticket, then
    /// `PolicyAuthValue` when `authValue` is true.
    func startAuthorizedPolicySession(
        tpmKey: ESYS_TR,
        mask: UInt32,
        key: PCRPolicyKey,
        approvedPolicy: [UInt8],
        ticket: TPMT_TK_VERIFIED,
        epoch: Int?,
        authValue: Bool
    ) throws(TSS2Error) -> ESYS_TR {
        let session = try startPCRPolicySession(tpmKey: tpmKey, mask: mask, authValue: false)
        do {
            if let epoch { try policyEpoch(session, atMost: epoch) }
            var approved = TPM2B_DIGEST()
            _ = approvedPolicy.withUnsafeBufferPointer { keyseal_fill_digest(&approved, $0.baseAddress, $0.count) }
            var policyRef = TPM2B_NONCE()
            var keyName = TPM2B_NAME()
            let name = key.name
            withUnsafeMutableBytes(of: &keyName.name) { $0.copyBytes(from: name) }
            keyName.size = UInt16(name.count)
            var ticket = ticket
            try tss2(
                "Esys_PolicyAuthorize",
                Esys_PolicyAuthorize(
                    context,
                    session,
                    ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE),
                    &approved,
                    &policyRef,
                    &keyName,
                    &ticket
                )
            )
            if authValue { try policyAuthValue(session) }
            return session
        } catch {
            flush(session)
            throw error
        }
    }

    // MARK: Policy epoch (docs/TPM.md "Withdrawing signed states")

    /// `PolicyCounterTimer`: the session holds only while the top 16 bits of the TPM's Clock are at most `epoch`.
    func policyEpoch(_ session: ESYS_TR, atMost epoch: Int) throws(TSS2Error) {
        var operand = TPM2B_OPERAND()
        let bytes = SignedPCRPolicy.epochOperand(epoch)
        _ = bytes.withUnsafeBufferPointer { keyseal_fill_operand(&operand, $0.baseAddress, $0.count) }
        try tss2(
            "Esys_PolicyCounterTimer",
            Esys_PolicyCounterTimer(
                context,
                session,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &operand,
                SignedPCRPolicy.epochOffset,
                keyseal_TPM2_EO_UNSIGNED_LE
            )
        )
    }

    /// The TPM's Clock (milliseconds; `TPM2_ReadClock`, no authorization).
    func readClock() throws(TSS2Error) -> UInt64 {
        var time: UnsafeMutablePointer<TPMS_TIME_INFO>?
        try tss2(
            "Esys_ReadClock",
            Esys_ReadClock(context, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &time)
        )
        defer { Esys_Free(time) }
        guard let time else { throw TSS2Error(function: "Esys_ReadClock", code: .init(rawValue: 0x7000B)) }
        return time.pointee.clockInfo.clock
    }

    /// `TPM2_ClockSet` to `value`, with the owner's (empty) authorization. The TPM refuses a value below its Clock.
    func setClock(_ value: UInt64) throws(TSS2Error) {
        try tss2(
            "Esys_ClockSet",
            Esys_ClockSet(
                context,
                ESYS_TR(ESYS_TR_RH_OWNER),
                ESYS_TR(ESYS_TR_PASSWORD),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                value
            )
        )
    }

    /// Makes the TPM write its NV state once: defines and undefines an 8-byte ordinary index at `index` (owner
    /// authorization, empty). After `TPM2_ClockSet`, for TPMs that keep the new Clock in memory until their next NV
    /// write or orderly shutdown: swtpm 0.7.1 does (measured: a kill right after `TPM2_ClockSet` loses it, one NV write
    /// after it keeps it), although the specification asks the TPM to write it at once.
    func writeNVOnce(scratch index: UInt32) throws(TSS2Error) {
        var info = TPM2B_NV_PUBLIC()
        info.nvPublic.nvIndex = index
        info.nvPublic.nameAlg = keyseal_TPM2_ALG_SHA256
        info.nvPublic.attributes = keyseal_scratch_nv_attributes
        info.nvPublic.dataSize = 8
        var auth = TPM2B_AUTH()
        var handle = ESYS_TR(ESYS_TR_NONE)
        try tss2(
            "Esys_NV_DefineSpace",
            Esys_NV_DefineSpace(
                context,
                ESYS_TR(ESYS_TR_RH_OWNER),
                ESYS_TR(ESYS_TR_PASSWORD),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &auth,
                &info,
                &handle
            )
        )
        try tss2(
            "Esys_NV_UndefineSpace",
            Esys_NV_UndefineSpace(
                context,
                ESYS_TR(ESYS_TR_RH_OWNER),
                handle,
                ESYS_TR(ESYS_TR_PASSWORD),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE)
            )
        )
    }

    /// The current value of each SHA-256 PCR in `pcrs` (one `TPM2_PCR_Read` per PCR).
    func readPCRs(_ pcrs: [Int]) throws(TSS2Error) -> [Int: [UInt8]] {
        var values: [Int: [UInt8]] = [:]
        for pcr in pcrs {
            var selection = keyseal_pcr_selection_sha256(UInt32(1) << UInt32(pcr))
            var counter: UInt32 = 0
            var selected: UnsafeMutablePointer<TPML_PCR_SELECTION>?
            var digests: UnsafeMutablePointer<TPML_DIGEST>?
            try tss2(
                "Esys_PCR_Read",
                Esys_PCR_Read(
                    context,
                    ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE),
                    &selection,
                    &counter,
                    &selected,
                    &digests
                )
            )
            defer {
                Esys_Free(selected)
                Esys_Free(digests)
            }
            var value = [UInt8](repeating: 0, count: 32)
            guard let digests, value.withUnsafeMutableBufferPointer({ keyseal_pcr_value(digests, $0.baseAddress) }) == 0
            else { throw TSS2Error(function: "Esys_PCR_Read", code: .init(rawValue: 0x7000B)) }
            values[pcr] = value
        }
        return values
    }
}
