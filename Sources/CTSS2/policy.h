#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <string.h>

// Signed PCR policies (docs/TPM.md "Signed PCR policies"): the public area of the key that signs the policies, its
// signatures as TPMT_SIGNATURE, and PCR values read from the TPM. Nothing here allocates or talks to the TPM.

/// The attributes of a policy-signing public key loaded with TPM2_LoadExternal (systemd's choice for the same key):
/// userWithAuth, sign, decrypt; the key carries no authPolicy and no scheme (the scheme comes with each signature).
static const TPMA_OBJECT keyseal_policy_key_attributes =
    TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT;
static const TPM2_ALG_ID keyseal_TPM2_ALG_RSA = TPM2_ALG_RSA;
static const TPM2_ALG_ID keyseal_TPM2_ALG_RSASSA = TPM2_ALG_RSASSA;
static const TPM2_ALG_ID keyseal_TPM2_ALG_ECDSA = TPM2_ALG_ECDSA;
static const TPM2_CC keyseal_TPM2_CC_PolicyPCR = TPM2_CC_PolicyPCR;
static const TPM2_CC keyseal_TPM2_CC_PolicyAuthorize = TPM2_CC_PolicyAuthorize;
static const TPM2_CC keyseal_TPM2_CC_PolicyAuthValue = TPM2_CC_PolicyAuthValue;
static const TPM2_CC keyseal_TPM2_CC_PolicyCounterTimer = TPM2_CC_PolicyCounterTimer;
static const TPM2_EO keyseal_TPM2_EO_UNSIGNED_LE = TPM2_EO_UNSIGNED_LE;
/// An ordinary NV index the owner reads and writes, for `writeNVOnce` (defined and undefined at once).
static const TPMA_NV keyseal_scratch_nv_attributes = TPMA_NV_OWNERWRITE | TPMA_NV_OWNERREAD | TPMA_NV_NO_DA;

/// A TPM2B_OPERAND holding `size` bytes of `bytes` (at most 8: the policy epoch's operand is a Clock value).
/// Returns 0, or -1 if too long.
static inline int keyseal_fill_operand(TPM2B_OPERAND *out, const uint8_t *bytes, size_t size) {
    memset(out, 0, sizeof *out);
    if (size > 8 || size > sizeof out->buffer) return -1;
    memcpy(out->buffer, bytes, size);
    out->size = (UINT16)size;
    return 0;
}

/// The public area of an RSA public key: `modulus` (big-endian, 256 bytes for RSA 2048) and `exponent` (0 stands for
/// 65537, as the TPM wants it). Returns 0, or -1 if the modulus does not fit.
static inline int keyseal_rsa_policy_key(TPM2B_PUBLIC *out, const uint8_t *modulus, size_t size, UINT32 exponent) {
    memset(out, 0, sizeof *out);
    if (size > sizeof out->publicArea.unique.rsa.buffer) return -1;
    out->publicArea.type = TPM2_ALG_RSA;
    out->publicArea.nameAlg = TPM2_ALG_SHA256;
    out->publicArea.objectAttributes = keyseal_policy_key_attributes;
    out->publicArea.parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_NULL;
    out->publicArea.parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
    out->publicArea.parameters.rsaDetail.keyBits = (TPMI_RSA_KEY_BITS)(size * 8);
    out->publicArea.parameters.rsaDetail.exponent = exponent == 65537 ? 0 : exponent;
    memcpy(out->publicArea.unique.rsa.buffer, modulus, size);
    out->publicArea.unique.rsa.size = (UINT16)size;
    return 0;
}

/// The public area of an ECC NIST P-256 public key from X ‖ Y (32 bytes each).
static inline TPM2B_PUBLIC keyseal_ecc_policy_key(const uint8_t xy[64]) {
    TPM2B_PUBLIC out;
    memset(&out, 0, sizeof out);
    out.publicArea.type = TPM2_ALG_ECC;
    out.publicArea.nameAlg = TPM2_ALG_SHA256;
    out.publicArea.objectAttributes = keyseal_policy_key_attributes;
    out.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    out.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    out.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    out.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    memcpy(out.publicArea.unique.ecc.x.buffer, xy, 32);
    out.publicArea.unique.ecc.x.size = 32;
    memcpy(out.publicArea.unique.ecc.y.buffer, xy + 32, 32);
    out.publicArea.unique.ecc.y.size = 32;
    return out;
}

/// The TPMT_PUBLIC of a public area, marshalled into `buffer` (what its Name hashes). Returns the size, or 0.
static inline size_t keyseal_marshal_public_area(const TPM2B_PUBLIC *object, uint8_t *buffer, size_t size) {
    size_t offset = 0;
    if (Tss2_MU_TPMT_PUBLIC_Marshal(&object->publicArea, buffer, size, &offset) != 0) return 0;
    return offset;
}

/// Whether a public area is one that ``keyseal_rsa_policy_key`` (2048 bits) or ``keyseal_ecc_policy_key`` makes.
static inline int keyseal_is_policy_key(const TPM2B_PUBLIC *object) {
    const TPMT_PUBLIC *area = &object->publicArea;
    if (area->nameAlg != TPM2_ALG_SHA256 || area->objectAttributes != keyseal_policy_key_attributes) return 0;
    if (area->authPolicy.size != 0) return 0;
    if (area->type == TPM2_ALG_RSA) {
        return area->parameters.rsaDetail.symmetric.algorithm == TPM2_ALG_NULL &&
            area->parameters.rsaDetail.scheme.scheme == TPM2_ALG_NULL && area->parameters.rsaDetail.keyBits == 2048 &&
            area->unique.rsa.size == 256;
    }
    if (area->type == TPM2_ALG_ECC) {
        return area->parameters.eccDetail.symmetric.algorithm == TPM2_ALG_NULL &&
            area->parameters.eccDetail.scheme.scheme == TPM2_ALG_NULL &&
            area->parameters.eccDetail.curveID == TPM2_ECC_NIST_P256 &&
            area->parameters.eccDetail.kdf.scheme == TPM2_ALG_NULL && area->unique.ecc.x.size == 32 &&
            area->unique.ecc.y.size == 32;
    }
    return 0;
}

/// An RSASSA (PKCS#1 v1.5) SHA-256 signature. Returns 0, or -1 if it does not fit.
static inline int keyseal_rsassa_signature(TPMT_SIGNATURE *out, const uint8_t *signature, size_t size) {
    memset(out, 0, sizeof *out);
    if (size > sizeof out->signature.rsassa.sig.buffer) return -1;
    out->sigAlg = TPM2_ALG_RSASSA;
    out->signature.rsassa.hash = TPM2_ALG_SHA256;
    memcpy(out->signature.rsassa.sig.buffer, signature, size);
    out->signature.rsassa.sig.size = (UINT16)size;
    return 0;
}

/// An ECDSA SHA-256 signature from r ‖ s (32 bytes each).
static inline TPMT_SIGNATURE keyseal_ecdsa_sha256_signature(const uint8_t rs[64]) {
    TPMT_SIGNATURE out;
    memset(&out, 0, sizeof out);
    out.sigAlg = TPM2_ALG_ECDSA;
    out.signature.ecdsa.hash = TPM2_ALG_SHA256;
    memcpy(out.signature.ecdsa.signatureR.buffer, rs, 32);
    out.signature.ecdsa.signatureR.size = 32;
    memcpy(out.signature.ecdsa.signatureS.buffer, rs + 32, 32);
    out.signature.ecdsa.signatureS.size = 32;
    return out;
}

/// A digest of up to 64 bytes. Returns 0, or -1 if longer.
static inline int keyseal_fill_digest(TPM2B_DIGEST *out, const uint8_t *bytes, size_t size) {
    memset(out, 0, sizeof *out);
    if (size > sizeof out->buffer) return -1;
    memcpy(out->buffer, bytes, size);
    out->size = (UINT16)size;
    return 0;
}

/// The first digest of a PCR read (TPM2_PCR_Read of one PCR) into `out` (32 bytes). Returns 0, or -1.
static inline int keyseal_pcr_value(const TPML_DIGEST *values, uint8_t out[32]) {
    if (values->count < 1 || values->digests[0].size != 32) return -1;
    memcpy(out, values->digests[0].buffer, 32);
    return 0;
}
