internal import CTSS2

/// A tpm2-tss response code (`TSS2_RC`): an open set, matched by layer and base code.
///
/// The top 16 bits name the layer that produced the code (0 = the TPM itself); for TPM codes the low 12 bits
/// follow TPM 2.0 Part 2 §6.6: format-1 codes (bit 7 set) carry the handle, session or parameter number in
/// bits 6 and 8–11, so they are compared on their ``base`` code.
struct TSS2ResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    var rawValue: UInt32
    init(rawValue: UInt32) { self.rawValue = rawValue }

    static let success = TSS2ResultCode(rawValue: 0)

    /// The layer number (0 = TPM, 7 = ESAPI, 8 = SAPI, 9 = marshalling, 10 = TCTI, 11/12 = resource manager).
    var layer: UInt32 { rawValue >> 16 }
    var isTPM: Bool { layer == Layer.tpm }

    /// The TPM code without the handle, session or parameter number (TPM layer only), or the base code of a
    /// TSS layer.
    var base: UInt32 {
        let code = rawValue & 0xFFFF
        guard isTPM || layer == Layer.resourceManagerTPM else { return code }
        if code & 0x080 != 0 { return code & 0x0BF }  // format 1: error number and the format bit
        return code & 0xB7F  // format 0: error number, version, severity (warning) bits
    }

    enum Layer {
        static let tpm: UInt32 = 0
        static let esapi: UInt32 = 7
        static let sapi: UInt32 = 8
        static let marshalling: UInt32 = 9
        static let tcti: UInt32 = 10
        static let resourceManager: UInt32 = 11
        static let resourceManagerTPM: UInt32 = 12
    }

    // TPM codes (Part 2, §6.6.3), compared with `base`.
    enum TPM {
        static let initialize: UInt32 = 0x100
        static let failure: UInt32 = 0x101
        static let authFail: UInt32 = 0x08E  // wrong authorization, counted by dictionary-attack protection
        static let badAuth: UInt32 = 0x0A2  // wrong authorization of a noDA object, not counted
        static let integrity: UInt32 = 0x09F
        static let eccPoint: UInt32 = 0x0A7  // a point not on the key's curve
        static let noResult: UInt32 = 0x154  // e.g. ECDH giving the point at infinity
        static let lockout: UInt32 = 0x921  // in dictionary-attack lockout
        static let objectMemory: UInt32 = 0x902
        static let sessionMemory: UInt32 = 0x903
        static let sessionHandles: UInt32 = 0x905
        static let objectHandles: UInt32 = 0x906
        static let yielded: UInt32 = 0x908
        static let testing: UInt32 = 0x90A
        static let nvRate: UInt32 = 0x920
        static let retry: UInt32 = 0x922
        static let nvUnavailable: UInt32 = 0x923
        static let policyFail: UInt32 = 0x09D  // a policy session's digest is not the object's authPolicy
        static let handle: UInt32 = 0x08B  // no such handle (an NV index that is not defined)
        static let nvDefined: UInt32 = 0x14C
        static let nvUninitialized: UInt32 = 0x14A
        static let pcrChanged: UInt32 = 0x928
    }

    // Base codes of the TSS layers (tss2_common.h).
    enum TSS {
        static let badReference: UInt32 = 5
        static let badSequence: UInt32 = 7
        static let noConnection: UInt32 = 8
        static let tryAgain: UInt32 = 9
        static let ioError: UInt32 = 10
        static let badValue: UInt32 = 11
        static let malformedResponse: UInt32 = 17
        static let insufficientResponse: UInt32 = 19
        static let memory: UInt32 = 23
        static let badTR: UInt32 = 24
        static let responseAuthFailed: UInt32 = 27
        static let noTPM: UInt32 = 49
    }

    /// A TPM-layer code (directly, or relayed by a resource manager) whose base is `code`.
    func isTPM(_ code: UInt32) -> Bool { (isTPM || layer == Layer.resourceManagerTPM) && base == code }

    /// A handle of the command names a transient object or session the TPM does not hold (TPM_RC_REFERENCE_H0–H6,
    /// _S0–S6): what a connection kept loaded is gone (TPM2_Clear, a TPM reset under a resource manager). The
    /// TPM refused the command before doing anything.
    var isStaleReference: Bool {
        guard isTPM || layer == Layer.resourceManagerTPM else { return false }
        return (0x910...0x916).contains(base) || (0x918...0x91E).contains(base)
    }

    /// The wire to the TPM failed: nothing to reach, connection lost, or an answer that was cut off. (An ESAPI
    /// context in which this happened mid-command answers every later call with "bad sequence".)
    var isCommunicationFailure: Bool {
        switch layer {
        case Layer.tcti:
            return true
        case Layer.esapi, Layer.sapi, Layer.resourceManager:
            return [
                TSS.noConnection, TSS.tryAgain, TSS.ioError, TSS.insufficientResponse, TSS.noTPM, TSS.badSequence,
                TSS.malformedResponse,
            ].contains(base)
        default:
            return false
        }
    }

    /// Text from `Tss2_RC_Decode` (copied at once: the library returns a thread-local buffer).
    var description: String {
        let text = Tss2_RC_Decode(rawValue).map { String(cString: $0) } ?? "unknown"
        return "\(text) (0x\(String(rawValue, radix: 16)))"
    }
}

/// A failed tpm2-tss call: which function, and its code.
struct TSS2Error: Error, CustomStringConvertible {
    var function: String
    var code: TSS2ResultCode
    var description: String { "\(function): \(code)" }
}

/// The one checking function for tpm2-tss calls: `try tss2("Esys_Load", Esys_Load(…))`.
///
/// Codes that can only mean a bug in this module (a NULL argument, an unknown ESYS_TR) stop the program; every
/// other code is thrown as a ``TSS2Error`` for the caller to map to a meaning. (A call out of sequence is not a
/// precondition: ESAPI also reports it for every call after a lost connection left a command half done.)
func tss2(_ function: StaticString, _ rc: TSS2_RC) throws(TSS2Error) {
    guard rc != 0 else { return }
    let code = TSS2ResultCode(rawValue: rc)
    if code.layer == TSS2ResultCode.Layer.esapi {
        precondition(
            ![TSS2ResultCode.TSS.badReference, TSS2ResultCode.TSS.badTR].contains(code.base),
            "\(function) was misused: \(code)"
        )
    }
    throw TSS2Error(function: "\(function)", code: code)
}
