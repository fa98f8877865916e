internal import CTSS2
internal import Crypto
import KeysealCore

/// One ESAPI context over one TCTI: the only owner of both C handles, and the only type that calls `Esys_*`.
///
/// Not thread-safe: ``TPMDeviceKey`` reaches it only under its lock. Every ESAPI output is freed in a `defer`
/// right where it is received; every transient object and session it creates is remembered until flushed, so
/// that ``close()`` can flush what an interrupted operation left behind.
final class ESYSConnection {
    private(set) var context: OpaquePointer?
    private var tcti: OpaquePointer?
    /// Transient objects and sessions loaded by us and not flushed yet.
    var live: Set<ESYS_TR> = []
    /// Set when a call failed on the wire: the context is then unusable and must be replaced.
    private(set) var broken = false
    /// Calls that succeeded since the owner last set it to zero: at zero after a wire failure, the failed call
    /// was the first of an operation.
    var commandsSucceeded = 0
    /// The storage primary and its Name, kept loaded on this connection between operations (``TPMDeviceKey``).
    var primary: (handle: ESYS_TR, name: [UInt8])?
    /// The salted HMAC session kept on this connection between operations.
    var session: ESYS_TR?
    /// Hardware keys kept loaded between operations, least recently used first, by their blob.
    var keys: [KeptKey] = []
    /// The unsalted, unbound HMAC session whose HMACs Keyseal computes itself (``sign(_:authorization:session:digest:)``).
    var hmacSession: HMACSession?

    /// A hardware key kept loaded: its blob, its handles and its Name (for the HMAC of each command).
    struct KeptKey {
        var blob: [UInt8]
        var handle: ESYS_TR
        var tpmHandle: UInt32
        var name: [UInt8]
    }

    /// A session Keyseal authorizes commands with through SAPI: its TPM handle and the TPM's last nonce.
    struct HMACSession {
        var handle: ESYS_TR
        var tpmHandle: UInt32
        var nonceTPM: [UInt8]
    }

    /// Loads the TCTI named by `configuration` (never the default search: that silently tries a simulator on
    /// 127.0.0.1) and starts an ESAPI context on it.
    init(tcti configuration: String) throws(TSS2Error) {
        var tcti: OpaquePointer?
        let rc = configuration.withCString { Tss2_TctiLdr_Initialize($0, &tcti) }
        try KeysealTPM.tss2("Tss2_TctiLdr_Initialize", rc)
        var context: OpaquePointer?
        let initRC = Esys_Initialize(&context, tcti, nil)
        if initRC != 0 {
            Tss2_TctiLdr_Finalize(&tcti)
            try KeysealTPM.tss2("Esys_Initialize", initRC)
        }
        self.context = context
        self.tcti = tcti
    }

    var isOpen: Bool { context != nil }

    /// The checking function for this context's calls: ``tss2(_:_:)``, which also marks the context broken when
    /// the wire to the TPM failed.
    func tss2(_ function: StaticString, _ rc: TSS2_RC) throws(TSS2Error) {
        do {
            try KeysealTPM.tss2(function, rc)
            commandsSucceeded += 1
        } catch {
            if error.code.isCommunicationFailure { broken = true }
            throw error
        }
    }

    /// Flushes what is still loaded (best effort), then finalizes ESAPI and the TCTI. Idempotent.
    func close() {
        guard context != nil else { return }
        if !broken {
            for handle in live { _ = Esys_FlushContext(context, handle) }
        }
        live.removeAll()
        primary = nil
        session = nil
        keys.removeAll()
        hmacSession = nil
        Esys_Finalize(&context)
        Tss2_TctiLdr_Finalize(&tcti)
        context = nil
        tcti = nil
    }

    deinit { close() }

    // MARK: Objects

    /// Creates the storage primary from the TCG template under the owner hierarchy (empty owner authorization).
    func createStoragePrimary() throws(TSS2Error) -> ESYS_TR {
        try createPrimary(in: ESYS_TR(ESYS_TR_RH_OWNER), template: keyseal_storage_primary_template())
    }

    /// TPM2_CreatePrimary from `template` under `hierarchy` (empty hierarchy authorization, no sensitive data); the
    /// handle is remembered until flushed. `outPublic`, when given, receives ESAPI's copy of the object's
    /// TPM2B_PUBLIC, which the caller frees.
    func createPrimary(
        in hierarchy: ESYS_TR,
        template: TPM2B_PUBLIC,
        outPublic: UnsafeMutablePointer<UnsafeMutablePointer<TPM2B_PUBLIC>?>? = nil
    ) throws(TSS2Error) -> ESYS_TR {
        var template = template
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var outsideInfo = TPM2B_DATA()
        var creationPCR = TPML_PCR_SELECTION()
        var handle = ESYS_TR(ESYS_TR_NONE)
        try tss2(
            "Esys_CreatePrimary",
            Esys_CreatePrimary(
                context,
                hierarchy,
                ESYS_TR(ESYS_TR_PASSWORD),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &sensitive,
                &template,
                &outsideInfo,
                &creationPCR,
                &handle,
                outPublic,
                nil,
                nil,
                nil
            )
        )
        live.insert(handle)
        return handle
    }

    /// The Name of a loaded object (nameAlg ‖ digest of its public area). Not secret.
    func name(of handle: ESYS_TR) throws(TSS2Error) -> [UInt8] {
        var name: UnsafeMutablePointer<TPM2B_NAME>?
        try tss2("Esys_TR_GetName", Esys_TR_GetName(context, handle, &name))
        defer { Esys_Free(name) }
        guard let name else { return [] }
        let bytes = UnsafeBufferPointer(start: keyseal_name_bytes(name), count: Int(name.pointee.size))
        return Array(bytes)
    }

    /// What an authorization session is for (TPM2_SE).
    enum SessionType {
        /// HMAC authorization of commands.
        case hmac
        /// A policy the TPM checks before it lets the session authorize a command.
        case policy
        /// A trial policy: the TPM only computes its digest, and the session authorizes nothing.
        case trial

        var value: TPM2_SE {
            switch self {
            case .hmac: keyseal_TPM2_SE_HMAC
            case .policy: keyseal_TPM2_SE_POLICY
            case .trial: keyseal_TPM2_SE_TRIAL
            }
        }
    }

    /// Starts a SHA-256 session of `type` (the one place Keyseal calls `Esys_StartAuthSession`), unbound and
    /// remembered until flushed (ESAPI starts it with continueSession: it stays loaded until flushed). With a
    /// `tpmKey` it is salted with that key's public key and can encrypt parameters (AES-128-CFB), and is set to
    /// `attributes` (``setAttributes(_:of:)``: continueSession is always added); without one it is unsalted, with
    /// no parameter encryption.
    func startSession(
        _ type: SessionType,
        saltedWith tpmKey: ESYS_TR? = nil,
        attributes: TPMA_SESSION = 0
    )
        throws(TSS2Error) -> ESYS_TR
    {
        var symmetric = tpmKey == nil ? keyseal_no_symmetric() : keyseal_session_symmetric()
        var session = ESYS_TR(ESYS_TR_NONE)
        try tss2(
            "Esys_StartAuthSession",
            Esys_StartAuthSession(
                context,
                tpmKey ?? ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                nil,
                type.value,
                &symmetric,
                keyseal_TPM2_ALG_SHA256,
                &session
            )
        )
        live.insert(session)
        if tpmKey != nil { try setAttributes(attributes, of: session) }
        return session
    }

    /// Creates a sealed data object holding `secret` under `parent`, with `authorization` as its authValue and,
    /// when `policy` is given, that authPolicy (and no userWithAuth: only the policy authorizes it).
    /// Returns the TPM2B_PUBLIC and TPM2B_PRIVATE of the new object, marshalled.
    func createSealedObject(
        parent: ESYS_TR,
        session: ESYS_TR,
        secret: SecretBytes,
        authorization: SecretBytes?,
        dictionaryAttackProtected: Bool,
        policy: [UInt8]? = nil
    ) throws(TSS2Error) -> (public: [UInt8], private: [UInt8]) {
        let created = try create(
            parent: parent,
            session: session,
            template: keyseal_sealed_object_template(dictionaryAttackProtected ? 1 : 0),
            secret: secret,
            authorization: authorization,
            policy: policy
        )
        return (created.public, created.private)
    }

    /// Creates a hardware key pair (``keyseal_hardware_key_template``: ECC P-256, noDA) under `parent` with
    /// `authorization` as its authValue, which crosses the wire encrypted by `session` (decrypt attribute).
    /// Returns the new object's TPM2B_PUBLIC and TPM2B_PRIVATE, marshalled, and its public point X ‖ Y.
    func createHardwareKey(
        parent: ESYS_TR,
        session: ESYS_TR,
        authorization: SecretBytes
    ) throws(TSS2Error)
        -> (public: [UInt8], private: [UInt8], point: [UInt8])
    {
        try create(
            parent: parent,
            session: session,
            template: keyseal_hardware_key_template(),
            secret: SecretBytes(count: 0) { _ in },
            authorization: authorization
        )
    }

    /// TPM2_Create under `parent` from `template`, with `secret` as its data and `authorization` as its authValue.
    private func create(
        parent: ESYS_TR,
        session: ESYS_TR,
        template: TPM2B_PUBLIC,
        secret: SecretBytes,
        authorization: SecretBytes?,
        policy: [UInt8]? = nil
    ) throws(TSS2Error) -> (public: [UInt8], private: [UInt8], point: [UInt8]) {
        var template = template
        if let policy {
            let set = policy.withUnsafeBufferPointer {
                keyseal_template_set_policy(&template, $0.baseAddress, $0.count)
            }
            precondition(set == 0, "a policy digest is at most 64 bytes")
        }
        // The sensitive part holds the secret and the authorization: keep it out of Swift's copies and wipe it.
        let sensitive = UnsafeMutablePointer<TPM2B_SENSITIVE_CREATE>.allocate(capacity: 1)
        defer {
            zeroize(sensitive, MemoryLayout<TPM2B_SENSITIVE_CREATE>.size)
            sensitive.deallocate()
        }
        let filled = secret.withUnsafeBytes { data in
            (authorization ?? SecretBytes(count: 0) { _ in }).withUnsafeBytes { auth in
                keyseal_fill_sensitive_create(
                    sensitive,
                    data.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    data.count,
                    auth.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    auth.count
                )
            }
        }
        precondition(filled == 0, "secret or authorization too long (checked by the caller)")
        var outsideInfo = TPM2B_DATA()
        var creationPCR = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        defer { scrubStoredCreateInput() }
        try tss2(
            "Esys_Create",
            Esys_Create(
                context,
                parent,
                session,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                sensitive,
                &template,
                &outsideInfo,
                &creationPCR,
                &outPrivate,
                &outPublic,
                nil,
                nil,
                nil
            )
        )
        defer {
            Esys_Free(outPrivate)
            Esys_Free(outPublic)
        }
        guard let outPrivate, let outPublic else { throw Self.malformed("Esys_Create") }
        var point = [UInt8](repeating: 0, count: 64)
        if keyseal_public_point(outPublic, &point) != 0 { point = [] }
        return (
            try marshalled(outPublic, Tss2_MU_TPM2B_PUBLIC_Marshal),
            try marshalled(outPrivate, Tss2_MU_TPM2B_PRIVATE_Marshal),
            point
        )
    }

    /// A response ESAPI accepted but that lacks what it must hold: ESAPI's "malformed response".
    private static func malformed(_ function: String) -> TSS2Error {
        TSS2Error(function: function, code: TSS2ResultCode(rawValue: 0x7_0000 | TSS2ResultCode.TSS.malformedResponse))
    }

    /// Loads a sealed object under `parent` (password authorization of the primary, whose authValue is empty).
    func load(parent: ESYS_TR, public: TPM2B_PUBLIC, private: TPM2B_PRIVATE) throws(TSS2Error) -> ESYS_TR {
        var inPublic = `public`
        var inPrivate = `private`
        var handle = ESYS_TR(ESYS_TR_NONE)
        try tss2(
            "Esys_Load",
            Esys_Load(
                context,
                parent,
                ESYS_TR(ESYS_TR_PASSWORD),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &inPrivate,
                &inPublic,
                &handle
            )
        )
        live.insert(handle)
        return handle
    }

    /// ESAPI keeps a copy of each TPM2_Create's inSensitive (the new object's authValue and sealed data) in its context
    /// until a later command stores its own inputs over it (tpm2-tss 3.2 and later: `in.Create` of the context,
    /// never wiped). An asynchronous TPM2_Create whose parent is a handle ESAPI never issued stores a zeroed
    /// inSensitive over that copy and is refused before anything is sent to the TPM (TSS2_ESYS_RC_BAD_TR); the
    /// context stays usable. Measured on Debian's tpm2-tss 3.2.1: one copy of the authValue before, none after.
    private func scrubStoredCreateInput() {
        guard context != nil else { return }
        let zeroed = UnsafeMutablePointer<TPM2B_SENSITIVE_CREATE>.allocate(capacity: 1)
        defer { zeroed.deallocate() }
        zeroize(zeroed, MemoryLayout<TPM2B_SENSITIVE_CREATE>.size)
        _ = Esys_Create_Async(
            context,
            ESYS_TR(0x7FFF_FFFF),
            ESYS_TR(ESYS_TR_PASSWORD),
            ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE),
            zeroed,
            nil,
            nil,
            nil
        )
    }

    /// Sets the authValue ESAPI uses for `handle` in HMAC computations (never sent to the TPM).
    func setAuthorization(_ authorization: SecretBytes, for handle: ESYS_TR) throws(TSS2Error) {
        try withAuth(authorization) { (value) throws(TSS2Error) in
            try tss2("Esys_TR_SetAuth", Esys_TR_SetAuth(context, handle, value))
        }
    }

    /// Runs `body` with `authorization` as a TPM2B_AUTH, kept out of Swift's copies and wiped afterwards.
    func withAuth<Result>(
        _ authorization: SecretBytes,
        _ body: (UnsafeMutablePointer<TPM2B_AUTH>) throws(TSS2Error) -> Result
    ) throws(TSS2Error) -> Result {
        let value = UnsafeMutablePointer<TPM2B_AUTH>.allocate(capacity: 1)
        defer {
            zeroize(value, MemoryLayout<TPM2B_AUTH>.size)
            value.deallocate()
        }
        let filled = authorization.withUnsafeBytes {
            keyseal_fill_auth(value, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count)
        }
        precondition(filled == 0, "authorization too long (checked by the caller)")
        return try body(value)
    }

    /// Unseals a loaded data object, authorized by `session`.
    func unseal(_ object: ESYS_TR, session: ESYS_TR) throws(TSS2Error) -> SecretBytes {
        var out: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
        try tss2(
            "Esys_Unseal",
            Esys_Unseal(context, object, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &out)
        )
        defer {
            if let out { zeroize(out, MemoryLayout<TPM2B_SENSITIVE_DATA>.size) }
            Esys_Free(out)
        }
        guard let out else { return SecretBytes(count: 0) { _ in } }
        let count = min(Int(out.pointee.size), MemoryLayout<TPM2B_SENSITIVE_DATA>.size - 2)
        return SecretBytes(count: count) { buffer in
            if count > 0 { buffer.baseAddress!.copyMemory(from: keyseal_sensitive_data_bytes(out), byteCount: count) }
        }
    }

    /// The TPM handle behind an ESAPI object.
    func tpmHandle(of handle: ESYS_TR) throws(TSS2Error) -> UInt32 {
        var tpmHandle: TPM2_HANDLE = 0
        try tss2("Esys_TR_GetTpmHandle", Esys_TR_GetTpmHandle(context, handle, &tpmHandle))
        return tpmHandle
    }

    /// Starts an unsalted, unbound HMAC session (SHA-256, no parameter encryption) for
    /// ``sign(_:authorization:session:digest:)``. Its session key is empty (TPM 2.0 Part 1, §19.6.8), so
    /// each HMAC is keyed by the object's authValue alone, which never crosses the bus: with a 256-bit random
    /// authValue an observer of the bus learns nothing usable.
    func startHMACSession() throws(TSS2Error) -> HMACSession {
        let session = try startSession(.hmac)
        let tpmHandle = try self.tpmHandle(of: session)
        var nonce: UnsafeMutablePointer<TPM2B_NONCE>?
        try tss2("Esys_TRSess_GetNonceTPM", Esys_TRSess_GetNonceTPM(context, session, &nonce))
        defer { Esys_Free(nonce) }
        var bytes = [UInt8](repeating: 0, count: 64)
        guard let nonce else { throw Self.malformed("Esys_TRSess_GetNonceTPM") }
        let count = keyseal_nonce_bytes(nonce, &bytes)
        guard count > 0 else { throw Self.malformed("Esys_TRSess_GetNonceTPM") }
        return HMACSession(handle: session, tpmHandle: tpmHandle, nonceTPM: Array(bytes.prefix(Int(count))))
    }

    /// TPM2_Sign (ECDSA/SHA-256 over a 32-byte `digest`, NULL hashcheck ticket) through SAPI, authorized by
    /// `session` with an HMAC computed here (swift-crypto) instead of by ESAPI: tpm2-tss 3.2 with OpenSSL 3.0
    /// spends 2–5 ms of CPU on each HMAC-session command, ten times the command itself. The response HMAC is
    /// verified. `session.nonceTPM` is advanced on success; after a failure the caller drops the session.
    /// Returns r ‖ s.
    func sign(
        _ key: KeptKey,
        authorization: SecretBytes,
        session: inout HMACSession,
        digest: [UInt8]
    )
        throws(TSS2Error) -> [UInt8]
    {
        precondition(digest.count == 32, "the caller sizes the digest")
        let keyHandle = key.tpmHandle
        let keyName = key.name
        var sys: OpaquePointer?
        try tss2("Esys_GetSysContext", Esys_GetSysContext(context, &sys))
        var inDigest = digest.withUnsafeBufferPointer { keyseal_digest32($0.baseAddress) }
        var scheme = keyseal_ecdsa_sha256_scheme()
        var ticket = keyseal_null_hashcheck()
        try tss2("Tss2_Sys_Sign_Prepare", Tss2_Sys_Sign_Prepare(sys, keyHandle, &inDigest, &scheme, &ticket))

        let commandCode = Self.bigEndian(keyseal_TPM2_CC_Sign)
        var cpSize = 0
        var cpBuffer: UnsafePointer<UInt8>?
        try tss2("Tss2_Sys_GetCpBuffer", Tss2_Sys_GetCpBuffer(sys, &cpSize, &cpBuffer))
        var cpHash = SHA256()
        cpHash.update(data: commandCode + keyName)
        if let cpBuffer { cpHash.update(bufferPointer: UnsafeRawBufferPointer(start: cpBuffer, count: cpSize)) }
        let nonceCaller = randomBytes(32)
        let attributes = UInt8(truncatingIfNeeded: keyseal_TPMA_SESSION_CONTINUESESSION)
        // The HMAC key is sessionKey (empty) ‖ authValue without trailing zeros, as the TPM keeps it.
        let hmacKey = authorization.withUnsafeBytes { bytes in
            SymmetricKey(data: bytes.prefix(bytes.lastIndex { $0 != 0 }.map { $0 + 1 } ?? 0))
        }
        let commandMAC = Array(
            HMAC<SHA256>.authenticationCode(
                for: Array(cpHash.finalize()) + nonceCaller + session.nonceTPM + [attributes],
                using: hmacKey
            )
        )
        var commandAuths = TSS2L_SYS_AUTH_COMMAND()
        let filled = keyseal_fill_command_auth(
            &commandAuths,
            session.tpmHandle,
            nonceCaller,
            nonceCaller.count,
            TPMA_SESSION(attributes),
            commandMAC,
            commandMAC.count
        )
        precondition(filled == 0, "nonce and HMAC are 32 bytes")
        try tss2("Tss2_Sys_SetCmdAuths", Tss2_Sys_SetCmdAuths(sys, &commandAuths))
        try tss2("Tss2_Sys_Sign", Tss2_Sys_Execute(sys))

        var responseAuths = TSS2L_SYS_AUTH_RESPONSE()
        try tss2("Tss2_Sys_GetRspAuths", Tss2_Sys_GetRspAuths(sys, &responseAuths))
        var nonceTPM = [UInt8](repeating: 0, count: 64)
        var responseMAC = [UInt8](repeating: 0, count: 64)
        var nonceSize = 0
        var macSize = 0
        var responseAttributes = TPMA_SESSION(0)
        guard
            keyseal_response_auth(
                &responseAuths,
                &nonceTPM,
                &nonceSize,
                &responseMAC,
                &macSize,
                &responseAttributes
            ) == 0
        else { throw Self.malformed("Tss2_Sys_Sign") }
        var rpSize = 0
        var rpBuffer: UnsafePointer<UInt8>?
        try tss2("Tss2_Sys_GetRpBuffer", Tss2_Sys_GetRpBuffer(sys, &rpSize, &rpBuffer))
        var rpHash = SHA256()
        rpHash.update(data: [0, 0, 0, 0] + commandCode)  // response code TPM_RC_SUCCESS ‖ command code
        if let rpBuffer { rpHash.update(bufferPointer: UnsafeRawBufferPointer(start: rpBuffer, count: rpSize)) }
        let newNonce = Array(nonceTPM.prefix(nonceSize))
        let responseData =
            Array(rpHash.finalize()) + newNonce + nonceCaller + [UInt8(truncatingIfNeeded: responseAttributes)]
        guard
            HMAC<SHA256>.isValidAuthenticationCode(
                Array(responseMAC.prefix(macSize)),
                authenticating: responseData,
                using: hmacKey
            )
        else {
            throw TSS2Error(
                function: "Tss2_Sys_Sign",
                code: TSS2ResultCode(rawValue: 0x7_0000 | TSS2ResultCode.TSS.responseAuthFailed)
            )
        }
        session.nonceTPM = newNonce

        var signature = TPMT_SIGNATURE()
        try tss2("Tss2_Sys_Sign_Complete", Tss2_Sys_Sign_Complete(sys, &signature))
        var rs = [UInt8](repeating: 0, count: 64)
        guard keyseal_ecdsa_signature(&signature, &rs) == 0 else { throw Self.malformed("Tss2_Sys_Sign") }
        return rs
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// Clears the authValue ESAPI keeps for `handle` (best effort), so it is not held longer than one operation.
    func clearAuthorization(for handle: ESYS_TR) {
        var empty = TPM2B_AUTH()
        _ = Esys_TR_SetAuth(context, handle, &empty)
    }

    /// TPM2_Sign with ECDSA/SHA-256 over a 32-byte `digest` and the NULL hashcheck ticket, authorized by
    /// `session`. Returns r ‖ s (32 bytes each).
    func sign(_ key: ESYS_TR, session: ESYS_TR, digest: [UInt8]) throws(TSS2Error) -> [UInt8] {
        precondition(digest.count == 32, "the caller sizes the digest")
        var inDigest = digest.withUnsafeBufferPointer { keyseal_digest32($0.baseAddress) }
        var scheme = keyseal_ecdsa_sha256_scheme()
        var ticket = keyseal_null_hashcheck()
        var signature: UnsafeMutablePointer<TPMT_SIGNATURE>?
        try tss2(
            "Esys_Sign",
            Esys_Sign(
                context,
                key,
                session,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &inDigest,
                &scheme,
                &ticket,
                &signature
            )
        )
        defer { Esys_Free(signature) }
        var rs = [UInt8](repeating: 0, count: 64)
        guard let signature, keyseal_ecdsa_signature(signature, &rs) == 0 else { throw Self.malformed("Esys_Sign") }
        return rs
    }

    /// TPM2_ECDH_ZGen with the peer's point X ‖ Y (64 bytes), authorized by `session` (whose encrypt attribute
    /// protects the answer on the wire). Returns Z's x-coordinate.
    func ecdhZGen(_ key: ESYS_TR, session: ESYS_TR, peerPoint: [UInt8]) throws(TSS2Error) -> SecretBytes {
        precondition(peerPoint.count == 64, "the caller checks the point's size")
        var inPoint = peerPoint.withUnsafeBufferPointer { keyseal_ecc_point($0.baseAddress) }
        var outPoint: UnsafeMutablePointer<TPM2B_ECC_POINT>?
        try tss2(
            "Esys_ECDH_ZGen",
            Esys_ECDH_ZGen(context, key, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &inPoint, &outPoint)
        )
        defer {
            if let outPoint { zeroize(outPoint, MemoryLayout<TPM2B_ECC_POINT>.size) }
            Esys_Free(outPoint)
        }
        guard let outPoint else { throw Self.malformed("Esys_ECDH_ZGen") }
        var failed = false
        let z = SecretBytes(count: 32) { buffer in
            failed = keyseal_ecc_point_x(outPoint, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)) != 0
        }
        if failed { throw Self.malformed("Esys_ECDH_ZGen") }
        return z
    }

    /// Sets the lockout hierarchy's authorization (current value empty), with `newAuth` encrypted on the wire
    /// by `session` (decrypt attribute).
    func changeLockoutAuthorization(to newAuth: SecretBytes, session: ESYS_TR) throws(TSS2Error) {
        try withAuth(newAuth) { (value) throws(TSS2Error) in
            try tss2(
                "Esys_HierarchyChangeAuth",
                Esys_HierarchyChangeAuth(
                    context,
                    ESYS_TR(ESYS_TR_RH_LOCKOUT),
                    session,
                    ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE),
                    value
                )
            )
        }
    }

    /// Sets the attributes of a session for its next command (continueSession is always added).
    func setAttributes(_ attributes: TPMA_SESSION, of session: ESYS_TR) throws(TSS2Error) {
        let flags = attributes | keyseal_TPMA_SESSION_CONTINUESESSION
        try tss2("Esys_TRSess_SetAttributes", Esys_TRSess_SetAttributes(context, session, flags, 0xFF))
    }

    /// Flushes a transient object or session. Best effort: returns the failure instead of throwing, because
    /// it runs in `defer` blocks after the real outcome is decided.
    @discardableResult
    func flush(_ handle: ESYS_TR) -> TSS2Error? {
        guard context != nil, !broken, live.contains(handle) else { return nil }
        live.remove(handle)
        if primary?.handle == handle { primary = nil }
        if session == handle { session = nil }
        if hmacSession?.handle == handle { hmacSession = nil }
        keys.removeAll { $0.handle == handle }
        do {
            try tss2("Esys_FlushContext", Esys_FlushContext(context, handle))
            return nil
        } catch {
            return error
        }
    }

    // MARK: Capabilities

    /// TPM2_GetCapability: up to `count` values of `capability` from `property` on, and whether the TPM has more.
    /// The caller frees the data (`Esys_Free`).
    private func capability(
        _ capability: TPM2_CAP,
        from property: UInt32,
        count: UInt32
    ) throws(TSS2Error) -> (data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?, more: Bool) {
        var more: TPMI_YES_NO = 0
        var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
        try tss2(
            "Esys_GetCapability",
            Esys_GetCapability(
                context,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                capability,
                property,
                count,
                &more,
                &data
            )
        )
        return (data, more != 0)
    }

    /// The values of TPM properties (TPM2_CAP_TPM_PROPERTIES) in `properties`, by property.
    func properties(_ wanted: [UInt32]) throws(TSS2Error) -> [UInt32: UInt32] {
        var found: [UInt32: UInt32] = [:]
        for property in wanted where found[property] == nil {
            let last = wanted.max()!
            let (data, _) = try capability(keyseal_TPM2_CAP_TPM_PROPERTIES, from: property, count: last - property + 1)
            defer { Esys_Free(data) }
            guard let data else { continue }
            for index in 0..<keyseal_capability_property_count(data) {
                let tagged = keyseal_capability_property(data, index)
                found[tagged.property] = tagged.value
            }
        }
        return found
    }

    /// The handles the TPM lists for the handle type `type` (TPM2_CAP_HANDLES): transient objects (0x80), loaded
    /// sessions (0x02), saved sessions (0x03), NV indexes (0x01). A session is listed under its own handle, 0x02… for
    /// an HMAC session and 0x03… for a policy one, whichever list it is in. Behind a resource manager, only this
    /// connection's objects.
    func handles(type: UInt32) throws(TSS2Error) -> [UInt32] {
        let session = type == keyseal_TPM2_HT_LOADED_SESSION || type == keyseal_TPM2_HT_SAVED_SESSION
        func listed(_ handle: UInt32) -> Bool {
            session
                ? [keyseal_TPM2_HT_LOADED_SESSION, keyseal_TPM2_HT_SAVED_SESSION].contains(handle >> 24)
                : handle >> 24 == type
        }
        var result: [UInt32] = []
        var next = type << 24
        while true {
            let (data, more) = try capability(keyseal_TPM2_CAP_HANDLES, from: next, count: 64)
            defer { Esys_Free(data) }
            guard let data else { break }
            let count = keyseal_capability_handle_count(data)
            for index in 0..<count {
                let handle = keyseal_capability_handle(data, index)
                if listed(handle) { result.append(handle) }
            }
            guard more, count > 0, let last = result.last, listed(last) else { break }
            next = type << 24 | (last & 0x00FF_FFFF) + 1
        }
        return result
    }

    /// Flushes every transient object and session the TPM holds, by its TPM handle (through SAPI: ESAPI has no
    /// object for what another context loaded). Only for a TPM reached directly, where one client at a time talks
    /// to the TPM, so that what is loaded when a client connects was left by one that is gone (killed, or exited
    /// without closing); never behind a resource manager, which keeps other clients' sessions. Call right after
    /// connecting, before anything of this connection is loaded. Returns how many were flushed.
    func flushLeftovers() throws(TSS2Error) -> Int {
        precondition(live.isEmpty, "nothing of this connection is loaded yet")
        var sys: OpaquePointer?
        try tss2("Esys_GetSysContext", Esys_GetSysContext(context, &sys))
        var flushed = 0
        for type in [keyseal_TPM2_HT_TRANSIENT, keyseal_TPM2_HT_LOADED_SESSION, keyseal_TPM2_HT_SAVED_SESSION] {
            for handle in try handles(type: type) {
                // One that is gone by now (another client flushed it first) is no failure; a lost wire is.
                let rc = Tss2_Sys_FlushContext(sys, handle)
                if rc == 0 {
                    flushed += 1
                } else if TSS2ResultCode(rawValue: rc).isCommunicationFailure {
                    try tss2("Tss2_Sys_FlushContext", rc)
                }
            }
        }
        return flushed
    }

    // MARK: Marshalling

    /// Unmarshals a TPM structure from its marshalled bytes (the templates in Attestation.swift, a CA's blobs).
    func unmarshal<T>(
        _ bytes: [UInt8],
        into value: inout T,
        _ function: (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<T>?) -> TSS2_RC
    ) throws(TSS2Error) {
        var offset = 0
        let rc = bytes.withUnsafeBufferPointer { function($0.baseAddress, $0.count, &offset, &value) }
        try KeysealTPM.tss2("Tss2_MU_Unmarshal", rc)
        guard offset == bytes.count else {
            throw TSS2Error(function: "Tss2_MU_Unmarshal", code: TSS2ResultCode(rawValue: 0x9_0000 | 5))
        }
    }

    /// Marshals a TPM structure (what a sealed blob or an attestation records).
    func marshalled<T>(
        _ value: UnsafePointer<T>,
        _ function: (UnsafePointer<T>?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?) -> TSS2_RC
    ) throws(TSS2Error) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: MemoryLayout<T>.size)
        var offset = 0
        let rc = buffer.withUnsafeMutableBufferPointer { function(value, $0.baseAddress, $0.count, &offset) }
        try KeysealTPM.tss2("Tss2_MU_Marshal", rc)
        return Array(buffer[0..<offset])
    }
}
