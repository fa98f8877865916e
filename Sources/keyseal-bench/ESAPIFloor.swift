import CTSS2

/// The least a TPM unseal costs on one stack, measured with raw ESAPI in the benchmark's own process: a sealed
/// object (32 bytes, `noDA`, empty authorization) created and loaded once under the storage primary Keyseal uses,
/// then a loop of `Esys_Unseal` over a password session — no primary, no load, no HMAC session, no parameter
/// encryption. Also the storage primary's `Esys_CreatePrimary` alone (ECC P-256), which an unlock may or may not
/// repeat. Every object is flushed before returning.
struct ESAPIFloor {
    var unseal: (p50: Double, max: Double)
    var createPrimary: (p50: Double, max: Double)

    static func measure(tcti: String, count: Int) throws -> ESAPIFloor {
        var tctiContext: OpaquePointer?
        try check("Tss2_TctiLdr_Initialize", tcti.withCString { Tss2_TctiLdr_Initialize($0, &tctiContext) })
        defer { Tss2_TctiLdr_Finalize(&tctiContext) }
        var context: OpaquePointer?
        try check("Esys_Initialize", Esys_Initialize(&context, tctiContext, nil))
        defer { Esys_Finalize(&context) }
        let none = ESYS_TR(ESYS_TR_NONE)
        let password = ESYS_TR(ESYS_TR_PASSWORD)

        func createPrimary() throws -> ESYS_TR {
            var template = keyseal_storage_primary_template()
            var sensitive = TPM2B_SENSITIVE_CREATE()
            var outsideInfo = TPM2B_DATA()
            var creationPCR = TPML_PCR_SELECTION()
            var handle = none
            try check(
                "Esys_CreatePrimary",
                Esys_CreatePrimary(
                    context, ESYS_TR(ESYS_TR_RH_OWNER), password, none, none, &sensitive, &template, &outsideInfo,
                    &creationPCR, &handle, nil, nil, nil, nil))
            return handle
        }
        let createSamples = try milliseconds(count: count) {
            let handle = try createPrimary()
            _ = Esys_FlushContext(context, handle)
        }

        let primary = try createPrimary()
        defer { _ = Esys_FlushContext(context, primary) }
        var template = keyseal_sealed_object_template(0)
        var sensitive = TPM2B_SENSITIVE_CREATE()
        let data = [UInt8](repeating: 0x5A, count: 32)
        guard keyseal_fill_sensitive_create(&sensitive, data, data.count, nil, 0) == 0 else {
            throw BenchError("the sealed object's data does not fit")
        }
        var outsideInfo = TPM2B_DATA()
        var creationPCR = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        try check(
            "Esys_Create",
            Esys_Create(
                context, primary, password, none, none, &sensitive, &template, &outsideInfo, &creationPCR,
                &outPrivate, &outPublic, nil, nil, nil))
        defer {
            Esys_Free(outPrivate)
            Esys_Free(outPublic)
        }
        var object = none
        try check("Esys_Load", Esys_Load(context, primary, password, none, none, outPrivate, outPublic, &object))
        defer { _ = Esys_FlushContext(context, object) }
        let unsealSamples = try milliseconds(count: count) {
            var unsealed: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
            try check("Esys_Unseal", Esys_Unseal(context, object, password, none, none, &unsealed))
            guard let unsealed, unsealed.pointee.size == 32 else { throw BenchError("Esys_Unseal returned no data") }
            Esys_Free(unsealed)
        }
        return ESAPIFloor(unseal: unsealSamples, createPrimary: createSamples)
    }

    private static func check(_ function: String, _ rc: TSS2_RC) throws {
        guard rc != 0 else { return }
        let text = Tss2_RC_Decode(rc).map { String(cString: $0) } ?? "0x\(String(rc, radix: 16))"
        throw BenchError("\(function): \(text)")
    }
}
