#ifndef KEYSEAL_PKCS11_ENTRY_H
#define KEYSEAL_PKCS11_ENTRY_H

// The PKCS#11 types (p11-kit's pkcs11.h, with the CK_ names) and the module's entry points implemented in Swift
// (KeysealPKCS11Module, `@_cdecl`): the function list in entry.c points at these.
#include <p11-kit/pkcs11.h>

CK_RV keyseal_p11_Initialize(void *init_args);
CK_RV keyseal_p11_Finalize(void *reserved);
CK_RV keyseal_p11_GetInfo(CK_INFO *info);
CK_RV keyseal_p11_GetSlotList(CK_BBOOL token_present, CK_SLOT_ID *slot_list, CK_ULONG *count);
CK_RV keyseal_p11_GetSlotInfo(CK_SLOT_ID slot_id, CK_SLOT_INFO *info);
CK_RV keyseal_p11_GetTokenInfo(CK_SLOT_ID slot_id, CK_TOKEN_INFO *info);
CK_RV keyseal_p11_GetMechanismList(CK_SLOT_ID slot_id, CK_MECHANISM_TYPE *list, CK_ULONG *count);
CK_RV keyseal_p11_GetMechanismInfo(CK_SLOT_ID slot_id, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO *info);
CK_RV keyseal_p11_OpenSession(
    CK_SLOT_ID slot_id, CK_FLAGS flags, void *application, CK_NOTIFY notify, CK_SESSION_HANDLE *session);
CK_RV keyseal_p11_CloseSession(CK_SESSION_HANDLE session);
CK_RV keyseal_p11_CloseAllSessions(CK_SLOT_ID slot_id);
CK_RV keyseal_p11_GetSessionInfo(CK_SESSION_HANDLE session, CK_SESSION_INFO *info);
CK_RV keyseal_p11_Login(CK_SESSION_HANDLE session, CK_USER_TYPE user_type, CK_UTF8CHAR *pin, CK_ULONG pin_len);
CK_RV keyseal_p11_Logout(CK_SESSION_HANDLE session);
CK_RV keyseal_p11_CreateObject(
    CK_SESSION_HANDLE session, CK_ATTRIBUTE *templ, CK_ULONG count, CK_OBJECT_HANDLE *object);
CK_RV keyseal_p11_DestroyObject(CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object);
CK_RV keyseal_p11_GetAttributeValue(
    CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object, CK_ATTRIBUTE *templ, CK_ULONG count);
CK_RV keyseal_p11_FindObjectsInit(CK_SESSION_HANDLE session, CK_ATTRIBUTE *templ, CK_ULONG count);
CK_RV keyseal_p11_FindObjects(
    CK_SESSION_HANDLE session, CK_OBJECT_HANDLE *object, CK_ULONG max_object_count, CK_ULONG *object_count);
CK_RV keyseal_p11_FindObjectsFinal(CK_SESSION_HANDLE session);
CK_RV keyseal_p11_DecryptInit(CK_SESSION_HANDLE session, CK_MECHANISM *mechanism, CK_OBJECT_HANDLE key);
CK_RV keyseal_p11_Decrypt(
    CK_SESSION_HANDLE session, CK_BYTE *encrypted, CK_ULONG encrypted_len, CK_BYTE *data, CK_ULONG *data_len);
CK_RV keyseal_p11_SignInit(CK_SESSION_HANDLE session, CK_MECHANISM *mechanism, CK_OBJECT_HANDLE key);
CK_RV keyseal_p11_Sign(
    CK_SESSION_HANDLE session, CK_BYTE *data, CK_ULONG data_len, CK_BYTE *signature, CK_ULONG *signature_len);
CK_RV keyseal_p11_SignUpdate(CK_SESSION_HANDLE session, CK_BYTE *part, CK_ULONG part_len);
CK_RV keyseal_p11_SignFinal(CK_SESSION_HANDLE session, CK_BYTE *signature, CK_ULONG *signature_len);
CK_RV keyseal_p11_VerifyInit(CK_SESSION_HANDLE session, CK_MECHANISM *mechanism, CK_OBJECT_HANDLE key);
CK_RV keyseal_p11_Verify(
    CK_SESSION_HANDLE session, CK_BYTE *data, CK_ULONG data_len, CK_BYTE *signature, CK_ULONG signature_len);
CK_RV keyseal_p11_VerifyUpdate(CK_SESSION_HANDLE session, CK_BYTE *part, CK_ULONG part_len);
CK_RV keyseal_p11_VerifyFinal(CK_SESSION_HANDLE session, CK_BYTE *signature, CK_ULONG signature_len);
CK_RV keyseal_p11_GenerateKeyPair(
    CK_SESSION_HANDLE session, CK_MECHANISM *mechanism, CK_ATTRIBUTE *public_key_template,
    CK_ULONG public_key_attribute_count, CK_ATTRIBUTE *private_key_template, CK_ULONG private_key_attribute_count,
    CK_OBJECT_HANDLE *public_key, CK_OBJECT_HANDLE *private_key);
CK_RV keyseal_p11_DeriveKey(
    CK_SESSION_HANDLE session, CK_MECHANISM *mechanism, CK_OBJECT_HANDLE base_key, CK_ATTRIBUTE *templ,
    CK_ULONG attribute_count, CK_OBJECT_HANDLE *key);
CK_RV keyseal_p11_GenerateRandom(CK_SESSION_HANDLE session, CK_BYTE *random_data, CK_ULONG random_len);

/// Installs the fork handlers once (pthread_atfork): the module's lock is taken before a fork and released after it
/// in both processes, so that a child never starts with it held by a thread that does not exist there.
void keyseal_p11_install_fork_handlers(void (*prepare)(void), void (*parent)(void), void (*child)(void));

#endif
