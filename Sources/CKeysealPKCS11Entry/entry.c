// The PKCS#11 module's exported face: C_GetFunctionList and the v2.40 function list, and PKCS#11 v3.0's
// C_GetInterfaceList and C_GetInterface offering that list as the "PKCS 11" interface, version 2.40. The functions the module
// implements are in Swift (keyseal_p11_*); every other one answers CKR_FUNCTION_NOT_SUPPORTED.
#include "keyseal_pkcs11_entry.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#define UNSUPPORTED(name, args) \
    static CK_RV unsupported_##name args { return CKR_FUNCTION_NOT_SUPPORTED; }

UNSUPPORTED(WaitForSlotEvent, (CK_FLAGS f, CK_SLOT_ID *s, void *r))
UNSUPPORTED(InitToken, (CK_SLOT_ID s, CK_UTF8CHAR *p, CK_ULONG l, CK_UTF8CHAR *label))
UNSUPPORTED(InitPIN, (CK_SESSION_HANDLE s, CK_UTF8CHAR *p, CK_ULONG l))
UNSUPPORTED(SetPIN, (CK_SESSION_HANDLE s, CK_UTF8CHAR *o, CK_ULONG ol, CK_UTF8CHAR *n, CK_ULONG nl))
UNSUPPORTED(GetOperationState, (CK_SESSION_HANDLE s, CK_BYTE *st, CK_ULONG *l))
UNSUPPORTED(SetOperationState, (CK_SESSION_HANDLE s, CK_BYTE *st, CK_ULONG l, CK_OBJECT_HANDLE e, CK_OBJECT_HANDLE a))
UNSUPPORTED(CopyObject, (CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE *t, CK_ULONG c, CK_OBJECT_HANDLE *n))
UNSUPPORTED(GetObjectSize, (CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ULONG *size))
UNSUPPORTED(SetAttributeValue, (CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE *t, CK_ULONG c))
UNSUPPORTED(EncryptInit, (CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE k))
UNSUPPORTED(Encrypt, (CK_SESSION_HANDLE s, CK_BYTE *d, CK_ULONG dl, CK_BYTE *e, CK_ULONG *el))
UNSUPPORTED(EncryptUpdate, (CK_SESSION_HANDLE s, CK_BYTE *p, CK_ULONG pl, CK_BYTE *e, CK_ULONG *el))
UNSUPPORTED(EncryptFinal, (CK_SESSION_HANDLE s, CK_BYTE *e, CK_ULONG *el))
UNSUPPORTED(DecryptUpdate, (CK_SESSION_HANDLE s, CK_BYTE *e, CK_ULONG el, CK_BYTE *p, CK_ULONG *pl))
UNSUPPORTED(DecryptFinal, (CK_SESSION_HANDLE s, CK_BYTE *p, CK_ULONG *pl))
UNSUPPORTED(DigestInit, (CK_SESSION_HANDLE s, CK_MECHANISM *m))
UNSUPPORTED(Digest, (CK_SESSION_HANDLE s, CK_BYTE *d, CK_ULONG dl, CK_BYTE *g, CK_ULONG *gl))
UNSUPPORTED(DigestUpdate, (CK_SESSION_HANDLE s, CK_BYTE *p, CK_ULONG pl))
UNSUPPORTED(DigestKey, (CK_SESSION_HANDLE s, CK_OBJECT_HANDLE k))
UNSUPPORTED(DigestFinal, (CK_SESSION_HANDLE s, CK_BYTE *g, CK_ULONG *gl))
UNSUPPORTED(SignRecoverInit, (CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE k))
UNSUPPORTED(SignRecover, (CK_SESSION_HANDLE s, CK_BYTE *d, CK_ULONG dl, CK_BYTE *g, CK_ULONG *gl))
UNSUPPORTED(VerifyRecoverInit, (CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE k))
UNSUPPORTED(VerifyRecover, (CK_SESSION_HANDLE s, CK_BYTE *g, CK_ULONG gl, CK_BYTE *d, CK_ULONG *dl))
UNSUPPORTED(DigestEncryptUpdate, (CK_SESSION_HANDLE s, CK_BYTE *p, CK_ULONG pl, CK_BYTE *e, CK_ULONG *el))
UNSUPPORTED(DecryptDigestUpdate, (CK_SESSION_HANDLE s, CK_BYTE *e, CK_ULONG el, CK_BYTE *p, CK_ULONG *pl))
UNSUPPORTED(SignEncryptUpdate, (CK_SESSION_HANDLE s, CK_BYTE *p, CK_ULONG pl, CK_BYTE *e, CK_ULONG *el))
UNSUPPORTED(DecryptVerifyUpdate, (CK_SESSION_HANDLE s, CK_BYTE *e, CK_ULONG el, CK_BYTE *p, CK_ULONG *pl))
UNSUPPORTED(GenerateKey, (CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_ATTRIBUTE *t, CK_ULONG c, CK_OBJECT_HANDLE *k))
UNSUPPORTED(WrapKey,
    (CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE w, CK_OBJECT_HANDLE k, CK_BYTE *o, CK_ULONG *ol))
UNSUPPORTED(UnwrapKey,
    (CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE u, CK_BYTE *w, CK_ULONG wl, CK_ATTRIBUTE *t, CK_ULONG c,
        CK_OBJECT_HANDLE *k))
UNSUPPORTED(SeedRandom, (CK_SESSION_HANDLE s, CK_BYTE *seed, CK_ULONG l))
UNSUPPORTED(GetFunctionStatus, (CK_SESSION_HANDLE s))
UNSUPPORTED(CancelFunction, (CK_SESSION_HANDLE s))

static CK_RV get_function_list(CK_FUNCTION_LIST **list);

static CK_FUNCTION_LIST function_list = {
    .version = {2, 40},
    .C_Initialize = keyseal_p11_Initialize,
    .C_Finalize = keyseal_p11_Finalize,
    .C_GetInfo = keyseal_p11_GetInfo,
    .C_GetFunctionList = get_function_list,
    .C_GetSlotList = keyseal_p11_GetSlotList,
    .C_GetSlotInfo = keyseal_p11_GetSlotInfo,
    .C_GetTokenInfo = keyseal_p11_GetTokenInfo,
    .C_GetMechanismList = keyseal_p11_GetMechanismList,
    .C_GetMechanismInfo = keyseal_p11_GetMechanismInfo,
    .C_InitToken = unsupported_InitToken,
    .C_InitPIN = unsupported_InitPIN,
    .C_SetPIN = unsupported_SetPIN,
    .C_OpenSession = keyseal_p11_OpenSession,
    .C_CloseSession = keyseal_p11_CloseSession,
    .C_CloseAllSessions = keyseal_p11_CloseAllSessions,
    .C_GetSessionInfo = keyseal_p11_GetSessionInfo,
    .C_GetOperationState = unsupported_GetOperationState,
    .C_SetOperationState = unsupported_SetOperationState,
    .C_Login = keyseal_p11_Login,
    .C_Logout = keyseal_p11_Logout,
    .C_CreateObject = keyseal_p11_CreateObject,
    .C_CopyObject = unsupported_CopyObject,
    .C_DestroyObject = keyseal_p11_DestroyObject,
    .C_GetObjectSize = unsupported_GetObjectSize,
    .C_GetAttributeValue = keyseal_p11_GetAttributeValue,
    .C_SetAttributeValue = unsupported_SetAttributeValue,
    .C_FindObjectsInit = keyseal_p11_FindObjectsInit,
    .C_FindObjects = keyseal_p11_FindObjects,
    .C_FindObjectsFinal = keyseal_p11_FindObjectsFinal,
    .C_EncryptInit = unsupported_EncryptInit,
    .C_Encrypt = unsupported_Encrypt,
    .C_EncryptUpdate = unsupported_EncryptUpdate,
    .C_EncryptFinal = unsupported_EncryptFinal,
    .C_DecryptInit = keyseal_p11_DecryptInit,
    .C_Decrypt = keyseal_p11_Decrypt,
    .C_DecryptUpdate = unsupported_DecryptUpdate,
    .C_DecryptFinal = unsupported_DecryptFinal,
    .C_DigestInit = unsupported_DigestInit,
    .C_Digest = unsupported_Digest,
    .C_DigestUpdate = unsupported_DigestUpdate,
    .C_DigestKey = unsupported_DigestKey,
    .C_DigestFinal = unsupported_DigestFinal,
    .C_SignInit = keyseal_p11_SignInit,
    .C_Sign = keyseal_p11_Sign,
    .C_SignUpdate = keyseal_p11_SignUpdate,
    .C_SignFinal = keyseal_p11_SignFinal,
    .C_SignRecoverInit = unsupported_SignRecoverInit,
    .C_SignRecover = unsupported_SignRecover,
    .C_VerifyInit = keyseal_p11_VerifyInit,
    .C_Verify = keyseal_p11_Verify,
    .C_VerifyUpdate = keyseal_p11_VerifyUpdate,
    .C_VerifyFinal = keyseal_p11_VerifyFinal,
    .C_VerifyRecoverInit = unsupported_VerifyRecoverInit,
    .C_VerifyRecover = unsupported_VerifyRecover,
    .C_DigestEncryptUpdate = unsupported_DigestEncryptUpdate,
    .C_DecryptDigestUpdate = unsupported_DecryptDigestUpdate,
    .C_SignEncryptUpdate = unsupported_SignEncryptUpdate,
    .C_DecryptVerifyUpdate = unsupported_DecryptVerifyUpdate,
    .C_GenerateKey = unsupported_GenerateKey,
    .C_GenerateKeyPair = keyseal_p11_GenerateKeyPair,
    .C_WrapKey = unsupported_WrapKey,
    .C_UnwrapKey = unsupported_UnwrapKey,
    .C_DeriveKey = keyseal_p11_DeriveKey,
    .C_SeedRandom = unsupported_SeedRandom,
    .C_GenerateRandom = keyseal_p11_GenerateRandom,
    .C_GetFunctionStatus = unsupported_GetFunctionStatus,
    .C_CancelFunction = unsupported_CancelFunction,
    .C_WaitForSlotEvent = unsupported_WaitForSlotEvent,
};

static CK_RV get_function_list(CK_FUNCTION_LIST **list) {
    if (list == NULL) return CKR_ARGUMENTS_BAD;
    *list = &function_list;
    return CKR_OK;
}

__attribute__((visibility("default"))) CK_RV C_GetFunctionList(CK_FUNCTION_LIST **list) {
    return get_function_list(list);
}

// PKCS#11 v3.0's interfaces (the p11-kit header is v2.40's: CK_INTERFACE is declared here as v3.0 has it). The one
// interface is "PKCS 11" with the v2.40 function list (its version says which list a caller gets), and safe across
// fork(): a child's first call opens a connection of its own, without C_Initialize.
typedef struct keyseal_interface {
    CK_UTF8CHAR *pInterfaceName;
    void *pFunctionList;
    CK_FLAGS flags;
} keyseal_interface;

#define KEYSEAL_CKF_INTERFACE_FORK_SAFE 0x00000001UL

static keyseal_interface interface = {(CK_UTF8CHAR *)"PKCS 11", &function_list, KEYSEAL_CKF_INTERFACE_FORK_SAFE};

__attribute__((visibility("default"))) CK_RV C_GetInterfaceList(keyseal_interface *list, CK_ULONG *count) {
    if (count == NULL) return CKR_ARGUMENTS_BAD;
    if (list == NULL) {
        *count = 1;
        return CKR_OK;
    }
    if (*count < 1) {
        *count = 1;
        return CKR_BUFFER_TOO_SMALL;
    }
    list[0] = interface;
    *count = 1;
    return CKR_OK;
}

__attribute__((visibility("default"))) CK_RV C_GetInterface(
    CK_UTF8CHAR *name, CK_VERSION *version, keyseal_interface **found, CK_FLAGS flags) {
    if (found == NULL) return CKR_ARGUMENTS_BAD;
    // No interface of that name, version or flags: CKR_ARGUMENTS_BAD, as the standard has it.
    if (name != NULL && strcmp((const char *)name, (const char *)interface.pInterfaceName) != 0)
        return CKR_ARGUMENTS_BAD;
    if (version != NULL && (version->major != function_list.version.major
                               || version->minor != function_list.version.minor))
        return CKR_ARGUMENTS_BAD;
    if ((flags & interface.flags) != flags) return CKR_ARGUMENTS_BAD;
    *found = &interface;
    return CKR_OK;
}

static pthread_once_t fork_handlers_once = PTHREAD_ONCE_INIT;
static void (*fork_prepare)(void);
static void (*fork_parent)(void);
static void (*fork_child)(void);

static void install_fork_handlers(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

void keyseal_p11_install_fork_handlers(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
    fork_prepare = prepare;
    fork_parent = parent;
    fork_child = child;
    pthread_once(&fork_handlers_once, install_fork_handlers);
}
