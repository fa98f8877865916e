#include "keyseal_floors.h"

#include <p11-kit/p11-kit.h>
#include <p11-kit/pkcs11.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#define TSS_CHECK(call)                                                          \
    do {                                                                         \
        rc = (call);                                                             \
        if (rc != TSS2_RC_SUCCESS) {                                             \
            fprintf(stderr, "floor: %s failed: 0x%x\n", #call, (unsigned)rc);    \
            goto out;                                                            \
        }                                                                        \
    } while (0)

int keyseal_floor_tpm_sign(const char *tcti_configuration, uint64_t *samples, int count) {
    TSS2_RC rc = TSS2_RC_SUCCESS;
    TSS2_TCTI_CONTEXT *tcti = NULL;
    ESYS_CONTEXT *context = NULL;
    ESYS_TR primary = ESYS_TR_NONE, key = ESYS_TR_NONE;
    TPM2B_PRIVATE *private_area = NULL;
    TPM2B_PUBLIC *public_area = NULL;

    TSS_CHECK(Tss2_TctiLdr_Initialize(tcti_configuration, &tcti));
    TSS_CHECK(Esys_Initialize(&context, tcti, NULL));

    TPM2B_PUBLIC primary_template;
    memset(&primary_template, 0, sizeof primary_template);
    primary_template.publicArea.type = TPM2_ALG_ECC;
    primary_template.publicArea.nameAlg = TPM2_ALG_SHA256;
    primary_template.publicArea.objectAttributes = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT |
        TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
        TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    primary_template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    primary_template.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    primary_template.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    primary_template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    primary_template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    primary_template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    TPM2B_SENSITIVE_CREATE sensitive;
    memset(&sensitive, 0, sizeof sensitive);
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    TSS_CHECK(Esys_CreatePrimary(context, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                 &sensitive, &primary_template, &outside, &pcrs, &primary, NULL, NULL, NULL, NULL));

    // The same template as Keyseal's hardware keys, with a 32-byte authValue.
    TPM2B_PUBLIC key_template;
    memset(&key_template, 0, sizeof key_template);
    key_template.publicArea.type = TPM2_ALG_ECC;
    key_template.publicArea.nameAlg = TPM2_ALG_SHA256;
    key_template.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
        TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT |
        TPMA_OBJECT_DECRYPT | TPMA_OBJECT_NODA;
    key_template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    key_template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    key_template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    key_template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    sensitive.sensitive.userAuth.size = 32;
    memset(sensitive.sensitive.userAuth.buffer, 0x5A, 32);
    TSS_CHECK(Esys_Create(context, primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                          &key_template, &outside, &pcrs, &private_area, &public_area, NULL, NULL, NULL));
    TSS_CHECK(Esys_Load(context, primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, private_area, public_area,
                        &key));
    TPM2B_AUTH auth;
    auth.size = 32;
    memset(auth.buffer, 0x5A, 32);
    TSS_CHECK(Esys_TR_SetAuth(context, key, &auth));

    TPM2B_DIGEST digest;
    digest.size = 32;
    memset(digest.buffer, 0x11, 32);
    TPMT_SIG_SCHEME scheme;
    memset(&scheme, 0, sizeof scheme);
    scheme.scheme = TPM2_ALG_ECDSA;
    scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    TPMT_TK_HASHCHECK ticket;
    memset(&ticket, 0, sizeof ticket);
    ticket.tag = TPM2_ST_HASHCHECK;
    ticket.hierarchy = TPM2_RH_NULL;
    for (int i = 0; i < count; i++) {
        TPMT_SIGNATURE *signature = NULL;
        uint64_t start = now_ns();
        TSS_CHECK(Esys_Sign(context, key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &digest, &scheme, &ticket,
                            &signature));
        samples[i] = now_ns() - start;
        Esys_Free(signature);
    }
out:
    Esys_Free(private_area);
    Esys_Free(public_area);
    if (context != NULL) {
        if (key != ESYS_TR_NONE) Esys_FlushContext(context, key);
        if (primary != ESYS_TR_NONE) Esys_FlushContext(context, primary);
        Esys_Finalize(&context);
    }
    if (tcti != NULL) Tss2_TctiLdr_Finalize(&tcti);
    return (int)rc;
}

#define CK_CHECK(call)                                                           \
    do {                                                                         \
        rv = (call);                                                             \
        if (rv != CKR_OK) {                                                      \
            fprintf(stderr, "floor: %s failed: 0x%lx\n", #call, (unsigned long)rv); \
            goto out;                                                            \
        }                                                                        \
    } while (0)

int keyseal_floor_pkcs11_sign(const char *module_path, const char *token_label, const char *pin, uint64_t *samples,
                              int count) {
    CK_RV rv = CKR_OK;
    CK_FUNCTION_LIST *functions = p11_kit_module_load(module_path, 0);
    CK_SESSION_HANDLE session = CK_INVALID_HANDLE;
    CK_OBJECT_HANDLE public_key = CK_INVALID_HANDLE, private_key = CK_INVALID_HANDLE;
    int initialized = 0;
    if (functions == NULL) {
        fprintf(stderr, "floor: cannot load %s\n", module_path);
        return -1;
    }
    CK_CHECK(p11_kit_module_initialize(functions));
    initialized = 1;

    CK_SLOT_ID slots[64];
    CK_ULONG slot_count = 64;
    CK_CHECK(functions->C_GetSlotList(CK_TRUE, slots, &slot_count));
    CK_SLOT_ID slot = (CK_SLOT_ID)-1;
    size_t label_length = strlen(token_label);
    for (CK_ULONG i = 0; i < slot_count; i++) {
        CK_TOKEN_INFO info;
        if (functions->C_GetTokenInfo(slots[i], &info) != CKR_OK) continue;
        if (label_length <= sizeof info.label && memcmp(info.label, token_label, label_length) == 0 &&
            (label_length == sizeof info.label || info.label[label_length] == ' ')) {
            slot = slots[i];
            break;
        }
    }
    if (slot == (CK_SLOT_ID)-1) {
        fprintf(stderr, "floor: no token labelled %s\n", token_label);
        rv = CKR_TOKEN_NOT_PRESENT;
        goto out;
    }
    CK_CHECK(functions->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session));
    rv = functions->C_Login(session, CKU_USER, (CK_UTF8CHAR *)pin, strlen(pin));
    if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN) CK_CHECK(rv);

    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_BYTE parameters[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
    // Token objects, as Keyseal's hardware keys are (SoftHSM2 keeps them apart from session objects); destroyed at
    // the end.
    CK_ATTRIBUTE public_template[] = {
        {CKA_TOKEN, &yes, sizeof yes},
        {CKA_EC_PARAMS, parameters, sizeof parameters},
    };
    CK_ATTRIBUTE private_template[] = {
        {CKA_TOKEN, &yes, sizeof yes},     {CKA_PRIVATE, &yes, sizeof yes}, {CKA_SENSITIVE, &yes, sizeof yes},
        {CKA_EXTRACTABLE, &no, sizeof no}, {CKA_SIGN, &yes, sizeof yes},
    };
    CK_MECHANISM generate = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
    CK_CHECK(functions->C_GenerateKeyPair(session, &generate, public_template, 2, private_template, 5, &public_key,
                                          &private_key));
    CK_BYTE digest[32];
    memset(digest, 0x11, sizeof digest);
    CK_MECHANISM ecdsa = {CKM_ECDSA, NULL, 0};
    for (int i = 0; i < count; i++) {
        CK_BYTE signature[64];
        CK_ULONG length = sizeof signature;
        uint64_t start = now_ns();
        CK_CHECK(functions->C_SignInit(session, &ecdsa, private_key));
        CK_CHECK(functions->C_Sign(session, digest, sizeof digest, signature, &length));
        samples[i] = now_ns() - start;
    }
out:
    if (private_key != CK_INVALID_HANDLE) functions->C_DestroyObject(session, private_key);
    if (public_key != CK_INVALID_HANDLE) functions->C_DestroyObject(session, public_key);
    if (session != CK_INVALID_HANDLE) functions->C_CloseSession(session);
    if (initialized) p11_kit_module_finalize(functions);
    p11_kit_module_release(functions);
    return (int)rv;
}
