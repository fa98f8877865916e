internal import CTSS2
import KeysealCore

/// PCR policies and the anti-rollback NV counter, over one ESAPI context (docs/TPM.md "Boot binding" and
/// "Anti-rollback counter"). Like the rest of ``ESYSConnection``: not thread-safe, reached under
/// ``TPMDeviceKey``'s lock; every session is flushed and every NV handle closed on every path.
extension ESYSConnection {
    /// The policy digest of `PolicyPCR` over the current values of the SHA-256 PCRs in `mask`, followed by
    /// `PolicyAuthValue` when `authValue` is true, computed by the TPM in a trial session.
    func pcrPolicyDigest(mask: UInt32, authValue: Bool) throws(TSS2Error) -> [UInt8] {
        let session = try startSession(.trial)
        defer { flush(session) }
        try applyPCRPolicy(session, mask: mask, authValue: authValue)
        var digest: UnsafeMutablePointer<TPM2B_DIGEST>?
        try tss2(
            "Esys_PolicyGetDigest",
            Esys_PolicyGetDigest(
                context,
                session,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &digest
            )
        )
        defer { Esys_Free(digest) }
        guard let digest else { return [] }
        return Array(UnsafeBufferPointer(start: keyseal_digest_bytes(digest), count: Int(digest.pointee.size)))
    }

    /// A policy session salted with `tpmKey` (AES-128-CFB, SHA-256) whose response parameters are encrypted,
    /// satisfied for a PCR-bound object: `PolicyPCR` over the current values of `mask` (the TPM refuses the
    /// object's use with TPM_RC_POLICY_FAIL when they differ from the sealed ones) and `PolicyAuthValue` when
    /// `authValue` is true (the object's authValue then keys the session's HMAC, as in an HMAC session).
    func startPCRPolicySession(tpmKey: ESYS_TR, mask: UInt32, authValue: Bool) throws(TSS2Error) -> ESYS_TR {
        let session = try startSession(.policy, saltedWith: tpmKey, attributes: keyseal_TPMA_SESSION_ENCRYPT)
        try applyPCRPolicy(session, mask: mask, authValue: authValue)
        return session
    }

    private func applyPCRPolicy(_ session: ESYS_TR, mask: UInt32, authValue: Bool) throws(TSS2Error) {
        var current = TPM2B_DIGEST()  // empty: the TPM uses the PCRs' current values
        var selection = keyseal_pcr_selection_sha256(mask)
        try tss2(
            "Esys_PolicyPCR",
            Esys_PolicyPCR(
                context,
                session,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &current,
                &selection
            )
        )
        if authValue { try policyAuthValue(session) }
    }

    /// `PolicyAuthValue`: the object's authValue then keys the policy session's HMAC, as in an HMAC session.
    func policyAuthValue(_ session: ESYS_TR) throws(TSS2Error) {
        try tss2(
            "Esys_PolicyAuthValue",
            Esys_PolicyAuthValue(context, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE))
        )
    }

    // MARK: NV counter

    /// Defines Keyseal's anti-rollback counter at the first free index of Keyseal's range (0x01004B00…0x01005AFF,
    /// owner hierarchy, empty owner authorization), with `authorization` as its authValue sent encrypted by
    /// `session` (a salted session with the decrypt attribute). Returns the index's TPM handle.
    func defineCounter(authorization: SecretBytes, session: ESYS_TR) throws(TSS2Error) -> UInt32 {
        try withAuth(authorization) { (value) throws(TSS2Error) -> UInt32 in
            var lastError: TSS2Error?
            // The first index of the range that no NV index holds yet (one capability read), then the next ones if
            // another program defines it first.
            let taken = Set(try handles(type: 0x01))
            for offset in 0..<keyseal_nv_index_count where !taken.contains(keyseal_nv_index_first + offset) {
                let index = keyseal_nv_index_first + offset
                var info = keyseal_nv_counter_public(index)
                var handle = ESYS_TR(ESYS_TR_NONE)
                do throws(TSS2Error) {
                    try tss2(
                        "Esys_NV_DefineSpace",
                        Esys_NV_DefineSpace(
                            context,
                            ESYS_TR(ESYS_TR_RH_OWNER),
                            session,
                            ESYS_TR(ESYS_TR_NONE),
                            ESYS_TR(ESYS_TR_NONE),
                            value,
                            &info,
                            &handle
                        )
                    )
                    _ = Esys_TR_Close(context, &handle)
                    return index
                } catch  where error.code.isTPM(TSS2ResultCode.TPM.nvDefined) {
                    lastError = error
                    continue
                }
            }
            throw lastError ?? TSS2Error(function: "Esys_NV_DefineSpace", code: TSS2ResultCode(rawValue: 0x14C))
        }
    }

    /// Runs `body` with an ESAPI handle for the NV index `index`, closed afterwards (not flushed: NV indexes are
    /// not transient). The index's public area and Name come from `TPM2_NV_ReadPublic`, run under `session` (a
    /// salted HMAC session) with the audit attribute: the TPM then HMACs the response with the session key, and
    /// ESAPI refuses an answer that was changed on the way (a bus interposer cannot give another public area or Name).
    func withNVIndex<Result>(
        _ index: UInt32,
        session: ESYS_TR,
        _ body: (ESYS_TR) throws(TSS2Error) -> Result
    ) throws(TSS2Error)
        -> Result
    {
        var handle = ESYS_TR(ESYS_TR_NONE)
        try setAttributes(keyseal_TPMA_SESSION_AUDIT, of: session)
        try tss2(
            "Esys_TR_FromTPMPublic",
            Esys_TR_FromTPMPublic(
                context,
                index,
                session,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &handle
            )
        )
        defer { _ = Esys_TR_Close(context, &handle) }
        return try body(handle)
    }

    /// The counter's value, read with the owner's empty authorization over `session` (a salted HMAC session): the
    /// command's HMAC covers the index's Name as ESAPI holds it (checked by the caller), so the TPM refuses the read
    /// of an index with another Name, and the response's HMAC covers the value, so ESAPI refuses one changed on the
    /// way.
    func readCounter(_ handle: ESYS_TR, session: ESYS_TR) throws(TSS2Error) -> UInt64 {
        var data: UnsafeMutablePointer<TPM2B_MAX_NV_BUFFER>?
        try setAttributes(0, of: session)
        try tss2(
            "Esys_NV_Read",
            Esys_NV_Read(
                context,
                ESYS_TR(ESYS_TR_RH_OWNER),
                handle,
                session,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                8,
                0,
                &data
            )
        )
        defer { Esys_Free(data) }
        guard let data else { return 0 }
        return keyseal_nv_counter_value(data)
    }

    /// Increments the counter, authorized by its authValue over `session` (a salted HMAC session: the authValue
    /// keys the HMAC and never crosses the bus).
    func incrementCounter(_ handle: ESYS_TR, authorization: SecretBytes, session: ESYS_TR) throws(TSS2Error) {
        try setAttributes(0, of: session)
        try setAuthorization(authorization, for: handle)
        try tss2(
            "Esys_NV_Increment",
            Esys_NV_Increment(context, handle, handle, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE))
        )
    }
}
