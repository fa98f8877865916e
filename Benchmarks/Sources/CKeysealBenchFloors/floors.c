#include "keyseal_floors.h"

#include <argon2.h>
#include <errno.h>
#include <openssl/evp.h>
#include <p11-kit/p11-kit.h>
#include <p11-kit/pkcs11.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>


#define TSS_CHECK(call)                                                          \
    do {                                                                         \
        rc = (call);                                                             \
        if (rc != TSS2_RC_SUCCESS) {                                             \
            fprintf(stderr, "floor: %s failed: 0x%x\n", #call, (unsigned)rc);    \
            goto out;                                                            \
        }                                                                        \
    } while (0)

struct keyseal_tpm_floor {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *context;
    ESYS_TR primary, key, sealed;
    TPM2B_PUBLIC primary_template;
};

static void storage_primary_template(TPM2B_PUBLIC *template) {
    memset(template, 0, sizeof *template);
    template->publicArea.type = TPM2_ALG_ECC;
    template->publicArea.nameAlg = TPM2_ALG_SHA256;
    template->publicArea.objectAttributes = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM |
        TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    template->publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    template->publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    template->publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    template->publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    template->publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    template->publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
}

static int create_primary(keyseal_tpm_floor *floor, ESYS_TR *handle) {
    TPM2B_SENSITIVE_CREATE sensitive;
    memset(&sensitive, 0, sizeof sensitive);
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    TSS2_RC rc = Esys_CreatePrimary(floor->context, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                    &sensitive, &floor->primary_template, &outside, &pcrs, handle, NULL, NULL, NULL,
                                    NULL);
    if (rc != TSS2_RC_SUCCESS) fprintf(stderr, "floor: Esys_CreatePrimary failed: 0x%x\n", (unsigned)rc);
    return (int)rc;
}

/// Creates and loads a child of the primary: Keyseal's hardware signing key (ECC P-256, 32-byte authValue) or a
/// sealed data object (32 bytes, empty authorization).
static int create_child(keyseal_tpm_floor *floor, int signing, ESYS_TR *handle) {
    TSS2_RC rc = TSS2_RC_SUCCESS;
    TPM2B_PRIVATE *private_area = NULL;
    TPM2B_PUBLIC *public_area = NULL;
    TPM2B_PUBLIC template;
    memset(&template, 0, sizeof template);
    TPM2B_SENSITIVE_CREATE sensitive;
    memset(&sensitive, 0, sizeof sensitive);
    if (signing) {
        // The same template as Keyseal's hardware keys, with a 32-byte authValue.
        template.publicArea.type = TPM2_ALG_ECC;
        template.publicArea.nameAlg = TPM2_ALG_SHA256;
        template.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
            TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT |
            TPMA_OBJECT_DECRYPT | TPMA_OBJECT_NODA;
        template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
        template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
        template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
        template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
        sensitive.sensitive.userAuth.size = 32;
        memset(sensitive.sensitive.userAuth.buffer, 0x5A, 32);
    } else {
        // A sealed data object as Keyseal's (keyed hash, fixedTPM, fixedParent, userWithAuth, noDA).
        template.publicArea.type = TPM2_ALG_KEYEDHASH;
        template.publicArea.nameAlg = TPM2_ALG_SHA256;
        template.publicArea.objectAttributes =
            TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
        template.publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
        sensitive.sensitive.data.size = 32;
        memset(sensitive.sensitive.data.buffer, 0x5A, 32);
    }
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    TSS_CHECK(Esys_Create(floor->context, floor->primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                          &template, &outside, &pcrs, &private_area, &public_area, NULL, NULL, NULL));
    TSS_CHECK(Esys_Load(floor->context, floor->primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, private_area,
                        public_area, handle));
    if (signing) {
        TPM2B_AUTH auth;
        auth.size = 32;
        memset(auth.buffer, 0x5A, 32);
        TSS_CHECK(Esys_TR_SetAuth(floor->context, *handle, &auth));
    }
out:
    Esys_Free(private_area);
    Esys_Free(public_area);
    return (int)rc;
}

keyseal_tpm_floor *keyseal_tpm_floor_open(const char *tcti_configuration, int children) {
    TSS2_RC rc = TSS2_RC_SUCCESS;
    keyseal_tpm_floor *floor = calloc(1, sizeof *floor);
    floor->primary = floor->key = floor->sealed = ESYS_TR_NONE;
    storage_primary_template(&floor->primary_template);
    TSS_CHECK(Tss2_TctiLdr_Initialize(tcti_configuration, &floor->tcti));
    TSS_CHECK(Esys_Initialize(&floor->context, floor->tcti, NULL));
    if (create_primary(floor, &floor->primary) != 0) goto out;
    if (children && create_child(floor, 1, &floor->key) != 0) goto out;
    if (children && create_child(floor, 0, &floor->sealed) != 0) goto out;
    return floor;
out:
    keyseal_tpm_floor_close(floor);
    return NULL;
}

int keyseal_tpm_floor_sign(keyseal_tpm_floor *floor) {
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
    TPMT_SIGNATURE *signature = NULL;
    TSS2_RC rc = Esys_Sign(floor->context, floor->key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &digest,
                           &scheme, &ticket, &signature);
    Esys_Free(signature);
    return (int)rc;
}

int keyseal_tpm_floor_unseal(keyseal_tpm_floor *floor) {
    TPM2B_SENSITIVE_DATA *unsealed = NULL;
    TSS2_RC rc = Esys_Unseal(floor->context, floor->sealed, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &unsealed);
    if (rc == TSS2_RC_SUCCESS && unsealed->size != 32) rc = TSS2_BASE_RC_GENERAL_FAILURE;
    Esys_Free(unsealed);
    return (int)rc;
}

int keyseal_tpm_floor_create_primary(keyseal_tpm_floor *floor) {
    ESYS_TR handle = ESYS_TR_NONE;
    int rc = create_primary(floor, &handle);
    if (rc == 0) Esys_FlushContext(floor->context, handle);
    return rc;
}

void keyseal_tpm_floor_close(keyseal_tpm_floor *floor) {
    if (floor == NULL) return;
    if (floor->context != NULL) {
        if (floor->key != ESYS_TR_NONE) Esys_FlushContext(floor->context, floor->key);
        if (floor->sealed != ESYS_TR_NONE) Esys_FlushContext(floor->context, floor->sealed);
        if (floor->primary != ESYS_TR_NONE) Esys_FlushContext(floor->context, floor->primary);
        Esys_Finalize(&floor->context);
    }
    if (floor->tcti != NULL) Tss2_TctiLdr_Finalize(&floor->tcti);
    free(floor);
}

#define CK_CHECK(call)                                                           \
    do {                                                                         \
        rv = (call);                                                             \
        if (rv != CKR_OK) {                                                      \
            fprintf(stderr, "floor: %s failed: 0x%lx\n", #call, (unsigned long)rv); \
            goto out;                                                            \
        }                                                                        \
    } while (0)

struct keyseal_pkcs11_floor {
    CK_FUNCTION_LIST *functions;
    CK_SESSION_HANDLE session;
    CK_OBJECT_HANDLE public_key, private_key;
    int initialized;
};

keyseal_pkcs11_floor *keyseal_pkcs11_floor_open(const char *module_path, const char *token_label, const char *pin) {
    CK_RV rv = CKR_OK;
    keyseal_pkcs11_floor *floor = calloc(1, sizeof *floor);
    floor->session = CK_INVALID_HANDLE;
    floor->public_key = floor->private_key = CK_INVALID_HANDLE;
    floor->functions = p11_kit_module_load(module_path, 0);
    if (floor->functions == NULL) {
        fprintf(stderr, "floor: cannot load %s\n", module_path);
        free(floor);
        return NULL;
    }
    CK_FUNCTION_LIST *functions = floor->functions;
    CK_CHECK(p11_kit_module_initialize(functions));
    floor->initialized = 1;

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
        goto out;
    }
    CK_CHECK(functions->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &floor->session));
    rv = functions->C_Login(floor->session, CKU_USER, (CK_UTF8CHAR *)pin, strlen(pin));
    if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN) CK_CHECK(rv);

    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_BYTE parameters[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
    // Token objects, as Keyseal's hardware keys are (SoftHSM2 keeps them apart from session objects); destroyed at
    // the close.
    CK_ATTRIBUTE public_template[] = {
        {CKA_TOKEN, &yes, sizeof yes},
        {CKA_EC_PARAMS, parameters, sizeof parameters},
    };
    CK_ATTRIBUTE private_template[] = {
        {CKA_TOKEN, &yes, sizeof yes},     {CKA_PRIVATE, &yes, sizeof yes}, {CKA_SENSITIVE, &yes, sizeof yes},
        {CKA_EXTRACTABLE, &no, sizeof no}, {CKA_SIGN, &yes, sizeof yes},
    };
    CK_MECHANISM generate = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
    CK_CHECK(functions->C_GenerateKeyPair(floor->session, &generate, public_template, 2, private_template, 5,
                                          &floor->public_key, &floor->private_key));
    return floor;
out:
    keyseal_pkcs11_floor_close(floor);
    return NULL;
}

int keyseal_pkcs11_floor_sign(keyseal_pkcs11_floor *floor) {
    CK_BYTE digest[32];
    memset(digest, 0x11, sizeof digest);
    CK_MECHANISM ecdsa = {CKM_ECDSA, NULL, 0};
    CK_BYTE signature[64];
    CK_ULONG length = sizeof signature;
    CK_RV rv = floor->functions->C_SignInit(floor->session, &ecdsa, floor->private_key);
    if (rv == CKR_OK) rv = floor->functions->C_Sign(floor->session, digest, sizeof digest, signature, &length);
    return (int)rv;
}

void keyseal_pkcs11_floor_close(keyseal_pkcs11_floor *floor) {
    if (floor == NULL) return;
    CK_FUNCTION_LIST *functions = floor->functions;
    if (floor->private_key != CK_INVALID_HANDLE) functions->C_DestroyObject(floor->session, floor->private_key);
    if (floor->public_key != CK_INVALID_HANDLE) functions->C_DestroyObject(floor->session, floor->public_key);
    if (floor->session != CK_INVALID_HANDLE) functions->C_CloseSession(floor->session);
    if (floor->initialized) p11_kit_module_finalize(functions);
    p11_kit_module_release(functions);
    free(floor);
}

// MARK: - SQLite

struct keyseal_sqlite_floor {
    sqlite3 *db;
    sqlite3_stmt *statement;
    int rows;
};

static void floor_key(uint8_t key[32], uint64_t index) {
    memset(key, 0, 32);
    for (int i = 0; i < 8; i++) key[i] = (uint8_t)(index >> (56 - 8 * i));
}

static int sqlite_fail(sqlite3 *db, const char *what) {
    fprintf(stderr, "floor: SQLite %s: %s\n", what, sqlite3_errmsg(db));
    return -1;
}

keyseal_sqlite_floor *keyseal_sqlite_lookup_floor_open(const char *path, int rows) {
    keyseal_sqlite_floor *floor = calloc(1, sizeof *floor);
    floor->rows = rows;
    if (sqlite3_open(path, &floor->db) != SQLITE_OK ||
        sqlite3_exec(floor->db, "PRAGMA journal_mode=WAL; CREATE TABLE t(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID",
                     NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(floor->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        sqlite_fail(floor->db, "open");
        keyseal_sqlite_floor_close(floor);
        return NULL;
    }
    sqlite3_stmt *insert = NULL;
    sqlite3_prepare_v2(floor->db, "INSERT INTO t VALUES (?, ?)", -1, &insert, NULL);
    uint8_t value[200];
    memset(value, 7, sizeof value);
    for (int i = 0; i < rows; i++) {
        uint8_t key[32];
        floor_key(key, (uint64_t)i);
        sqlite3_bind_blob(insert, 1, key, 32, SQLITE_TRANSIENT);
        sqlite3_bind_blob(insert, 2, value, sizeof value, SQLITE_TRANSIENT);
        if (sqlite3_step(insert) != SQLITE_DONE) sqlite_fail(floor->db, "insert");
        sqlite3_reset(insert);
    }
    sqlite3_finalize(insert);
    if (sqlite3_exec(floor->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(floor->db, "SELECT v FROM t WHERE k = ?", -1, &floor->statement, NULL) != SQLITE_OK) {
        sqlite_fail(floor->db, "commit");
        keyseal_sqlite_floor_close(floor);
        return NULL;
    }
    return floor;
}

int keyseal_sqlite_lookup_floor(keyseal_sqlite_floor *floor, uint64_t random) {
    uint8_t key[32];
    floor_key(key, random % (uint64_t)floor->rows);
    sqlite3_bind_blob(floor->statement, 1, key, 32, SQLITE_STATIC);
    int rc = sqlite3_step(floor->statement);
    const void *value = sqlite3_column_blob(floor->statement, 0);
    sqlite3_reset(floor->statement);
    return rc == SQLITE_ROW && value != NULL ? 0 : -1;
}

keyseal_sqlite_floor *keyseal_sqlite_commit_floor_open(const char *path) {
    keyseal_sqlite_floor *floor = calloc(1, sizeof *floor);
    if (sqlite3_open(path, &floor->db) != SQLITE_OK ||
        sqlite3_exec(floor->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; "
                     "CREATE TABLE t(k BLOB PRIMARY KEY, v BLOB)", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(floor->db, "INSERT INTO t VALUES (?, ?)", -1, &floor->statement, NULL) != SQLITE_OK) {
        sqlite_fail(floor->db, "open");
        keyseal_sqlite_floor_close(floor);
        return NULL;
    }
    return floor;
}

int keyseal_sqlite_commit_floor(keyseal_sqlite_floor *floor, uint64_t index) {
    uint8_t key[32], value[200];
    floor_key(key, index);
    memset(value, 7, sizeof value);
    if (sqlite3_exec(floor->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) return sqlite_fail(floor->db, "begin");
    sqlite3_bind_blob(floor->statement, 1, key, 32, SQLITE_TRANSIENT);
    sqlite3_bind_blob(floor->statement, 2, value, sizeof value, SQLITE_TRANSIENT);
    int rc = sqlite3_step(floor->statement);
    sqlite3_reset(floor->statement);
    if (rc != SQLITE_DONE) return sqlite_fail(floor->db, "insert");
    if (sqlite3_exec(floor->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) return sqlite_fail(floor->db, "commit");
    return 0;
}

void keyseal_sqlite_floor_close(keyseal_sqlite_floor *floor) {
    if (floor == NULL) return;
    sqlite3_finalize(floor->statement);
    sqlite3_close(floor->db);
    free(floor);
}

// MARK: - AES-256-GCM open through libcrypto

struct keyseal_gcm {
    EVP_CIPHER_CTX *context;
};

keyseal_gcm *keyseal_gcm_new(const uint8_t key[32]) {
    keyseal_gcm *gcm = calloc(1, sizeof *gcm);
    gcm->context = EVP_CIPHER_CTX_new();
    if (EVP_DecryptInit_ex(gcm->context, EVP_aes_256_gcm(), NULL, key, NULL) != 1) {
        keyseal_gcm_free(gcm);
        return NULL;
    }
    return gcm;
}

void keyseal_gcm_free(keyseal_gcm *gcm) {
    if (gcm == NULL) return;
    EVP_CIPHER_CTX_free(gcm->context);
    free(gcm);
}

static int gcm_open(EVP_CIPHER_CTX *context, const uint8_t *key, const uint8_t *combined, size_t length,
                    const uint8_t *aad, size_t aad_length, uint8_t *plaintext) {
    if (length < 28) return -1;
    size_t body = length - 28;
    int written = 0;
    if (EVP_DecryptInit_ex(context, key == NULL ? NULL : EVP_aes_256_gcm(), NULL, key, combined) != 1) return -1;
    if (EVP_DecryptUpdate(context, NULL, &written, aad, (int)aad_length) != 1) return -1;
    if (EVP_DecryptUpdate(context, plaintext, &written, combined + 12, (int)body) != 1) return -1;
    if (EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, (void *)(combined + 12 + body)) != 1) return -1;
    return EVP_DecryptFinal_ex(context, plaintext + written, &written) == 1 ? 0 : -1;
}

int keyseal_gcm_open(keyseal_gcm *gcm, const uint8_t *combined, size_t length, const uint8_t *aad, size_t aad_length,
                     uint8_t *plaintext) {
    return gcm_open(gcm->context, NULL, combined, length, aad, aad_length, plaintext);
}

int keyseal_gcm_open_fresh(const uint8_t key[32], const uint8_t *combined, size_t length, const uint8_t *aad,
                           size_t aad_length, uint8_t *plaintext) {
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    int rc = gcm_open(context, key, combined, length, aad, aad_length, plaintext);
    EVP_CIPHER_CTX_free(context);
    return rc;
}

// MARK: - Argon2id

int keyseal_argon2id(const uint8_t *passcode, size_t passcode_length, const uint8_t *salt, size_t salt_length,
                     uint32_t memory_kib, uint32_t iterations, uint32_t parallelism, uint8_t out[32]) {
    return argon2id_hash_raw(iterations, memory_kib, parallelism, passcode, passcode_length, salt, salt_length, out, 32);
}

// MARK: - Unix-socket ping-pong

static int read_exactly(int fd, uint8_t *buffer, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = read(fd, buffer + done, count - done);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

static int write_exactly(int fd, const uint8_t *buffer, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = write(fd, buffer + done, count - done);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

static int unix_address(struct sockaddr_un *address, const char *path) {
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof address->sun_path) return -1;
    strcpy(address->sun_path, path);
    return 0;
}

int keyseal_floor_echo_server(const char *path, int reply_bytes) {
    struct sockaddr_un address;
    if (unix_address(&address, path) != 0) return 2;
    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 1) != 0) return 2;
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) return 3;
    uint8_t *reply = malloc(4 + (size_t)reply_bytes);
    memset(reply, 0x5a, 4 + (size_t)reply_bytes);
    uint32_t length = (uint32_t)reply_bytes;
    reply[0] = (uint8_t)(length >> 24), reply[1] = (uint8_t)(length >> 16), reply[2] = (uint8_t)(length >> 8),
    reply[3] = (uint8_t)length;
    size_t capacity = 1 << 16;
    uint8_t *buffer = malloc(capacity);
    for (;;) {
        uint8_t header[4];
        if (read_exactly(fd, header, 4) != 0) break;
        size_t request = (size_t)header[0] << 24 | (size_t)header[1] << 16 | (size_t)header[2] << 8 | header[3];
        if (request > capacity) {
            capacity = request;
            buffer = realloc(buffer, capacity);
        }
        if (read_exactly(fd, buffer, request) != 0) break;
        if (write_exactly(fd, reply, 4 + (size_t)reply_bytes) != 0) break;
    }
    free(buffer);
    free(reply);
    close(fd);
    close(listener);
    unlink(path);
    return 0;
}

int keyseal_pingpong_connect(const char *path) {
    struct sockaddr_un address;
    if (unix_address(&address, path) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int keyseal_pingpong_round_trip(int fd, const uint8_t *request, size_t request_length, uint8_t *reply,
                                size_t reply_length) {
    if (write_exactly(fd, request, request_length) != 0) return -1;
    // Two reads, as the wire client reads a frame: the length, then the payload.
    if (read_exactly(fd, reply, 4) != 0) return -1;
    return read_exactly(fd, reply + 4, reply_length - 4);
}
