#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_mu.h>
#include <string.h>

// Helpers for what Swift imports badly: templates made of nested unions, casted macros, and fixed-size
// C arrays (imported as tuples). Nothing here allocates; nothing here talks to the TPM.

/// Attribute and code constants as plain integers (the headers define them as casted macros).
static const TPMA_OBJECT keyseal_TPMA_OBJECT_FIXEDTPM = TPMA_OBJECT_FIXEDTPM;
static const TPMA_OBJECT keyseal_TPMA_OBJECT_FIXEDPARENT = TPMA_OBJECT_FIXEDPARENT;
static const TPMA_OBJECT keyseal_TPMA_OBJECT_USERWITHAUTH = TPMA_OBJECT_USERWITHAUTH;
static const TPMA_OBJECT keyseal_TPMA_OBJECT_NODA = TPMA_OBJECT_NODA;
static const TPMA_OBJECT keyseal_TPMA_OBJECT_SENSITIVEDATAORIGIN = TPMA_OBJECT_SENSITIVEDATAORIGIN;
static const TPMA_OBJECT keyseal_TPMA_OBJECT_SIGN_ENCRYPT = TPMA_OBJECT_SIGN_ENCRYPT;
static const TPMA_OBJECT keyseal_TPMA_OBJECT_DECRYPT = TPMA_OBJECT_DECRYPT;
static const TPM2_ALG_ID keyseal_TPM2_ALG_KEYEDHASH = TPM2_ALG_KEYEDHASH;
static const TPM2_ALG_ID keyseal_TPM2_ALG_SHA256 = TPM2_ALG_SHA256;
static const TPM2_SE keyseal_TPM2_SE_HMAC = TPM2_SE_HMAC;
static const TPMA_SESSION keyseal_TPMA_SESSION_CONTINUESESSION = TPMA_SESSION_CONTINUESESSION;
static const TPMA_SESSION keyseal_TPMA_SESSION_DECRYPT = TPMA_SESSION_DECRYPT;
static const TPMA_SESSION keyseal_TPMA_SESSION_ENCRYPT = TPMA_SESSION_ENCRYPT;
static const TPMA_SESSION keyseal_TPMA_SESSION_AUDIT = TPMA_SESSION_AUDIT;
static const TPM2_CAP keyseal_TPM2_CAP_HANDLES = TPM2_CAP_HANDLES;
static const TPM2_CAP keyseal_TPM2_CAP_TPM_PROPERTIES = TPM2_CAP_TPM_PROPERTIES;
static const TPM2_PT keyseal_TPM2_PT_PERMANENT = TPM2_PT_PERMANENT;
static const TPM2_PT keyseal_TPM2_PT_LOCKOUT_COUNTER = TPM2_PT_LOCKOUT_COUNTER;
static const TPM2_PT keyseal_TPM2_PT_MAX_AUTH_FAIL = TPM2_PT_MAX_AUTH_FAIL;
static const TPM2_PT keyseal_TPM2_PT_LOCKOUT_INTERVAL = TPM2_PT_LOCKOUT_INTERVAL;
static const TPM2_PT keyseal_TPM2_PT_LOCKOUT_RECOVERY = TPM2_PT_LOCKOUT_RECOVERY;
static const TPMA_PERMANENT keyseal_TPMA_PERMANENT_LOCKOUTAUTHSET = TPMA_PERMANENT_LOCKOUTAUTHSET;
static const TPMA_PERMANENT keyseal_TPMA_PERMANENT_INLOCKOUT = TPMA_PERMANENT_INLOCKOUT;
static const UINT32 keyseal_TPM2_HT_TRANSIENT = TPM2_HT_TRANSIENT;
static const UINT32 keyseal_TPM2_HT_LOADED_SESSION = TPM2_HT_LOADED_SESSION;
static const UINT32 keyseal_TPM2_HT_SAVED_SESSION = TPM2_HT_SAVED_SESSION;
/// Largest secret a sealed data object holds on every TPM (MAX_SYM_DATA of the TPM 2.0 reference, 128).
static const UINT16 keyseal_max_sealed_size = 128;

/// The TCG storage primary key template (TCG TPM v2.0 Provisioning Guidance, storage root key, ECC NIST P-256):
/// restricted decryption key, AES-128-CFB for its children, owner hierarchy, no authorization, `noDA`.
/// Deterministic: the same TPM (same owner seed) re-creates the same key and Name every time.
static inline TPM2B_PUBLIC keyseal_storage_primary_template(void) {
    TPM2B_PUBLIC result;
    memset(&result, 0, sizeof result);
    result.publicArea.type = TPM2_ALG_ECC;
    result.publicArea.nameAlg = TPM2_ALG_SHA256;
    result.publicArea.objectAttributes = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM |
        TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    result.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    result.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    result.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    result.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    result.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    result.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    // unique.ecc.x and .y stay empty, as the TCG template says.
    return result;
}

/// A sealed data object (keyed hash, no scheme): fixedTPM, fixedParent, userWithAuth; `noDA` unless
/// `dictionary_attack_protected`.
static inline TPM2B_PUBLIC keyseal_sealed_object_template(int dictionary_attack_protected) {
    TPM2B_PUBLIC result;
    memset(&result, 0, sizeof result);
    result.publicArea.type = TPM2_ALG_KEYEDHASH;
    result.publicArea.nameAlg = TPM2_ALG_SHA256;
    result.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_USERWITHAUTH |
        (dictionary_attack_protected ? 0 : TPMA_OBJECT_NODA);
    result.publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
    return result;
}

/// The symmetric algorithm of our sessions: AES-128-CFB parameter encryption.
static inline TPMT_SYM_DEF keyseal_session_symmetric(void) {
    TPMT_SYM_DEF symmetric;
    memset(&symmetric, 0, sizeof symmetric);
    symmetric.algorithm = TPM2_ALG_AES;
    symmetric.keyBits.aes = 128;
    symmetric.mode.aes = TPM2_ALG_CFB;
    return symmetric;
}

/// Fills `sensitive` with `data` and the authorization value `auth`. Returns 0, or -1 if either is too long.
static inline int keyseal_fill_sensitive_create(
    TPM2B_SENSITIVE_CREATE *sensitive, const uint8_t *data, size_t data_size, const uint8_t *auth, size_t auth_size) {
    memset(sensitive, 0, sizeof *sensitive);
    if (data_size > keyseal_max_sealed_size || auth_size > sizeof sensitive->sensitive.userAuth.buffer) return -1;
    if (data_size > 0) memcpy(sensitive->sensitive.data.buffer, data, data_size);
    sensitive->sensitive.data.size = (UINT16)data_size;
    if (auth_size > 0) memcpy(sensitive->sensitive.userAuth.buffer, auth, auth_size);
    sensitive->sensitive.userAuth.size = (UINT16)auth_size;
    return 0;
}

/// Fills an authorization value. Returns 0, or -1 if `auth` is too long.
static inline int keyseal_fill_auth(TPM2B_AUTH *value, const uint8_t *auth, size_t auth_size) {
    memset(value, 0, sizeof *value);
    if (auth_size > sizeof value->buffer) return -1;
    if (auth_size > 0) memcpy(value->buffer, auth, auth_size);
    value->size = (UINT16)auth_size;
    return 0;
}

/// The bytes of TPM2B outputs, without copying the fixed-size arrays through Swift tuples.
static inline const uint8_t *keyseal_sensitive_data_bytes(const TPM2B_SENSITIVE_DATA *data) { return data->buffer; }
static inline const uint8_t *keyseal_name_bytes(const TPM2B_NAME *name) { return name->name; }

/// The attributes and algorithms of a public area, for checking a blob's object before loading it.
static inline TPMA_OBJECT keyseal_public_attributes(const TPM2B_PUBLIC *object) {
    return object->publicArea.objectAttributes;
}
static inline TPM2_ALG_ID keyseal_public_type(const TPM2B_PUBLIC *object) { return object->publicArea.type; }
static inline TPM2_ALG_ID keyseal_public_name_alg(const TPM2B_PUBLIC *object) { return object->publicArea.nameAlg; }

/// Handles and properties out of capability data (unions of fixed arrays).
static inline UINT32 keyseal_capability_handle_count(const TPMS_CAPABILITY_DATA *data) {
    return data->data.handles.count;
}
static inline TPM2_HANDLE keyseal_capability_handle(const TPMS_CAPABILITY_DATA *data, UINT32 index) {
    return data->data.handles.handle[index];
}
static inline UINT32 keyseal_capability_property_count(const TPMS_CAPABILITY_DATA *data) {
    return data->data.tpmProperties.count;
}
static inline TPMS_TAGGED_PROPERTY keyseal_capability_property(const TPMS_CAPABILITY_DATA *data, UINT32 index) {
    return data->data.tpmProperties.tpmProperty[index];
}

// PCR policies and the anti-rollback counter (docs/TPM.md "Boot binding", "Anti-rollback counter").

static const TPM2_SE keyseal_TPM2_SE_POLICY = TPM2_SE_POLICY;
static const TPM2_SE keyseal_TPM2_SE_TRIAL = TPM2_SE_TRIAL;
static const TPM2_HANDLE keyseal_nv_index_first = 0x01004B00;
static const UINT32 keyseal_nv_index_count = 4096;

/// A selection of the SHA-256 bank with the PCRs whose bits are set in `mask` (PCRs 0–23).
static inline TPML_PCR_SELECTION keyseal_pcr_selection_sha256(UINT32 mask) {
    TPML_PCR_SELECTION selection;
    memset(&selection, 0, sizeof selection);
    selection.count = 1;
    selection.pcrSelections[0].hash = TPM2_ALG_SHA256;
    selection.pcrSelections[0].sizeofSelect = 3;
    selection.pcrSelections[0].pcrSelect[0] = (BYTE)(mask & 0xFF);
    selection.pcrSelections[0].pcrSelect[1] = (BYTE)((mask >> 8) & 0xFF);
    selection.pcrSelections[0].pcrSelect[2] = (BYTE)((mask >> 16) & 0xFF);
    return selection;
}

/// Gives a template an authPolicy and clears userWithAuth, so that only the policy authorizes the object.
/// Returns 0, or -1 if the digest is too long.
static inline int keyseal_template_set_policy(TPM2B_PUBLIC *object, const uint8_t *digest, size_t size) {
    if (size > sizeof object->publicArea.authPolicy.buffer) return -1;
    if (size > 0) memcpy(object->publicArea.authPolicy.buffer, digest, size);
    object->publicArea.authPolicy.size = (UINT16)size;
    object->publicArea.objectAttributes &= ~TPMA_OBJECT_USERWITHAUTH;
    return 0;
}

static inline const uint8_t *keyseal_public_policy_bytes(const TPM2B_PUBLIC *object) {
    return object->publicArea.authPolicy.buffer;
}
static inline UINT16 keyseal_public_policy_size(const TPM2B_PUBLIC *object) { return object->publicArea.authPolicy.size; }
static inline const uint8_t *keyseal_digest_bytes(const TPM2B_DIGEST *digest) { return digest->buffer; }

/// The public area of Keyseal's anti-rollback counter at `index`: an 8-byte counter that only the holder of its
/// authValue increments (AUTHWRITE), that anyone may read with the owner's (empty) authorization or the authValue,
/// and whose authorization failures are not counted (NO_DA: the authValue is 256 bits). Not ORDERLY: every
/// increment reaches NV at once, so a power cut never moves it.
static inline TPM2B_NV_PUBLIC keyseal_nv_counter_public(TPM2_HANDLE index) {
    TPM2B_NV_PUBLIC result;
    memset(&result, 0, sizeof result);
    result.nvPublic.nvIndex = index;
    result.nvPublic.nameAlg = TPM2_ALG_SHA256;
    result.nvPublic.attributes = (TPM2_NT_COUNTER << TPMA_NV_TPM2_NT_SHIFT) | TPMA_NV_AUTHWRITE | TPMA_NV_AUTHREAD |
        TPMA_NV_OWNERREAD | TPMA_NV_NO_DA;
    result.nvPublic.dataSize = 8;
    return result;
}

/// The TPMS_NV_PUBLIC of Keyseal's counter at `index` once it has been incremented (TPMA_NV_WRITTEN set), as the
/// TPM hashes it into the index's Name, marshalled into `buffer`. Returns the size, or 0 if `size` is too small.
static inline size_t keyseal_nv_counter_written_public(TPM2_HANDLE index, uint8_t *buffer, size_t size) {
    TPM2B_NV_PUBLIC info = keyseal_nv_counter_public(index);
    info.nvPublic.attributes |= TPMA_NV_WRITTEN;
    size_t offset = 0;
    if (Tss2_MU_TPMS_NV_PUBLIC_Marshal(&info.nvPublic, buffer, size, &offset) != TSS2_RC_SUCCESS) return 0;
    return offset;
}

/// The eight bytes of a counter read (big-endian), or 0 if the buffer is short.
static inline UINT64 keyseal_nv_counter_value(const TPM2B_MAX_NV_BUFFER *data) {
    if (data->size < 8) return 0;
    UINT64 value = 0;
    for (int i = 0; i < 8; i++) value = (value << 8) | data->buffer[i];
    return value;
}

// Key pairs generated in the TPM (HardwareKeyProvider).

/// The attributes of a hardware key: fixedTPM, fixedParent, sensitiveDataOrigin, userWithAuth, sign, decrypt
/// (ECDH) and noDA (a wrong authorization never counts against the dictionary-attack limit).
static const TPMA_OBJECT keyseal_hardware_key_attributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
    TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT |
    TPMA_OBJECT_NODA;
static const TPM2_ALG_ID keyseal_TPM2_ALG_ECC = TPM2_ALG_ECC;
static const TPM2_ECC_CURVE keyseal_TPM2_ECC_NIST_P256 = TPM2_ECC_NIST_P256;

/// An unrestricted ECC NIST P-256 key, nameAlg SHA-256, no scheme (so that it both signs and does ECDH; the
/// scheme is given with each TPM2_Sign), with ``keyseal_hardware_key_attributes``.
static inline TPM2B_PUBLIC keyseal_hardware_key_template(void) {
    TPM2B_PUBLIC result;
    memset(&result, 0, sizeof result);
    result.publicArea.type = TPM2_ALG_ECC;
    result.publicArea.nameAlg = TPM2_ALG_SHA256;
    result.publicArea.objectAttributes = keyseal_hardware_key_attributes;
    result.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    result.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    result.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    result.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    return result;
}

static inline TPM2_ECC_CURVE keyseal_public_curve(const TPM2B_PUBLIC *object) {
    return object->publicArea.parameters.eccDetail.curveID;
}

/// Copies a coordinate (at most `size` bytes, left-padded with zeros) into `out`. Returns 0, or -1 if too long.
static inline int keyseal_copy_padded(const uint8_t *bytes, UINT16 length, uint8_t *out, size_t size) {
    if (length > size) return -1;
    memset(out, 0, size);
    memcpy(out + (size - length), bytes, length);
    return 0;
}

/// The public point of an ECC P-256 public area as X ‖ Y (64 bytes). Returns 0, or -1 if it is not one.
static inline int keyseal_public_point(const TPM2B_PUBLIC *object, uint8_t out[64]) {
    const TPMS_ECC_POINT *point = &object->publicArea.unique.ecc;
    if (object->publicArea.type != TPM2_ALG_ECC) return -1;
    if (keyseal_copy_padded(point->x.buffer, point->x.size, out, 32) != 0) return -1;
    return keyseal_copy_padded(point->y.buffer, point->y.size, out + 32, 32);
}

/// ECDSA with SHA-256 as the scheme of a TPM2_Sign.
static inline TPMT_SIG_SCHEME keyseal_ecdsa_sha256_scheme(void) {
    TPMT_SIG_SCHEME scheme;
    memset(&scheme, 0, sizeof scheme);
    scheme.scheme = TPM2_ALG_ECDSA;
    scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    return scheme;
}

/// The NULL hashcheck ticket: the digest was not made by the TPM (allowed for an unrestricted key).
static inline TPMT_TK_HASHCHECK keyseal_null_hashcheck(void) {
    TPMT_TK_HASHCHECK ticket;
    memset(&ticket, 0, sizeof ticket);
    ticket.tag = TPM2_ST_HASHCHECK;
    ticket.hierarchy = TPM2_RH_NULL;
    return ticket;
}

/// A 32-byte digest for TPM2_Sign.
static inline TPM2B_DIGEST keyseal_digest32(const uint8_t digest[32]) {
    TPM2B_DIGEST result;
    memset(&result, 0, sizeof result);
    memcpy(result.buffer, digest, 32);
    result.size = 32;
    return result;
}

/// r ‖ s of an ECDSA signature (32 bytes each, left-padded). Returns 0, or -1 if it is not a P-256 ECDSA one.
static inline int keyseal_ecdsa_signature(const TPMT_SIGNATURE *signature, uint8_t out[64]) {
    if (signature->sigAlg != TPM2_ALG_ECDSA) return -1;
    const TPMS_SIGNATURE_ECDSA *ecdsa = &signature->signature.ecdsa;
    if (keyseal_copy_padded(ecdsa->signatureR.buffer, ecdsa->signatureR.size, out, 32) != 0) return -1;
    return keyseal_copy_padded(ecdsa->signatureS.buffer, ecdsa->signatureS.size, out + 32, 32);
}

/// A P-256 point from X ‖ Y (64 bytes).
static inline TPM2B_ECC_POINT keyseal_ecc_point(const uint8_t xy[64]) {
    TPM2B_ECC_POINT point;
    memset(&point, 0, sizeof point);
    memcpy(point.point.x.buffer, xy, 32);
    point.point.x.size = 32;
    memcpy(point.point.y.buffer, xy + 32, 32);
    point.point.y.size = 32;
    point.size = sizeof(UINT16) + 32 + sizeof(UINT16) + 32;
    return point;
}

/// The x-coordinate of a point (32 bytes, left-padded). Returns 0, or -1 if longer.
static inline int keyseal_ecc_point_x(const TPM2B_ECC_POINT *point, uint8_t out[32]) {
    return keyseal_copy_padded(point->point.x.buffer, point->point.x.size, out, 32);
}

// Commands whose HMAC authorization Keyseal computes itself (SAPI under the ESAPI context).

static const TPM2_CC keyseal_TPM2_CC_Sign = TPM2_CC_Sign;

/// A nonce's bytes into `out` (64 bytes). Returns the size, or -1 if longer.
static inline int keyseal_nonce_bytes(const TPM2B_NONCE *nonce, uint8_t out[64]) {
    if (nonce->size > 64) return -1;
    memcpy(out, nonce->buffer, nonce->size);
    return nonce->size;
}

/// One session's command authorization: `nonce` and `hmac` at most 64 bytes each (checked: returns -1).
static inline int keyseal_fill_command_auth(
    TSS2L_SYS_AUTH_COMMAND *area, TPMI_SH_AUTH_SESSION session, const uint8_t *nonce, size_t nonce_size,
    TPMA_SESSION attributes, const uint8_t *hmac, size_t hmac_size) {
    memset(area, 0, sizeof *area);
    if (nonce_size > sizeof area->auths[0].nonce.buffer || hmac_size > sizeof area->auths[0].hmac.buffer) return -1;
    area->count = 1;
    area->auths[0].sessionHandle = session;
    area->auths[0].nonce.size = (UINT16)nonce_size;
    memcpy(area->auths[0].nonce.buffer, nonce, nonce_size);
    area->auths[0].sessionAttributes = attributes;
    area->auths[0].hmac.size = (UINT16)hmac_size;
    memcpy(area->auths[0].hmac.buffer, hmac, hmac_size);
    return 0;
}

/// The first response authorization's nonce and HMAC (64-byte buffers) and attributes. Returns 0, or -1.
static inline int keyseal_response_auth(
    const TSS2L_SYS_AUTH_RESPONSE *area, uint8_t nonce[64], size_t *nonce_size, uint8_t hmac[64], size_t *hmac_size,
    TPMA_SESSION *attributes) {
    if (area->count < 1 || area->auths[0].nonce.size > 64 || area->auths[0].hmac.size > 64) return -1;
    memcpy(nonce, area->auths[0].nonce.buffer, area->auths[0].nonce.size);
    *nonce_size = area->auths[0].nonce.size;
    memcpy(hmac, area->auths[0].hmac.buffer, area->auths[0].hmac.size);
    *hmac_size = area->auths[0].hmac.size;
    *attributes = area->auths[0].sessionAttributes;
    return 0;
}

/// No parameter encryption (a session used only for HMAC authorization).
static inline TPMT_SYM_DEF keyseal_no_symmetric(void) {
    TPMT_SYM_DEF symmetric;
    memset(&symmetric, 0, sizeof symmetric);
    symmetric.algorithm = TPM2_ALG_NULL;
    return symmetric;
}
