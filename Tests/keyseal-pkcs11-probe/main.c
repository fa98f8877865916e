// A C program over the Keyseal PKCS#11 module, as every C caller sees it: dlopen, C_GetFunctionList, no Swift.
// Used by PKCS11ModuleTests (one behaviour per subcommand, one line of result on stdout) and by the benchmark.
//
//   keyseal-pkcs11-probe MODULE info                 token flags and mechanism count
//   keyseal-pkcs11-probe MODULE sign LABEL [PIN]      CKM_ECDSA over a SHA-256 digest: prints "rv=0x.. sig=HEX"
//   keyseal-pkcs11-probe MODULE fork LABEL            after fork(), parent and child sign at the same time
//   keyseal-pkcs11-probe MODULE threads LABEL N       N threads sign at once (p11-kit's null mutex callbacks): the
//                                                    public point, then "THREAD ROUND=SIGNATURE" (CKM_ECDSA_SHA256
//                                                    over thread_message's text; odd rounds signed a byte at a
//                                                    time), then "failures=.. rvs=.." (the CKRs other than OK)
//   keyseal-pkcs11-probe MODULE verify LABEL          C_Verify of an EC key: valid, tampered, short, multi-part
//   keyseal-pkcs11-probe MODULE errqueue LABEL        C_Verify (valid, tampered, r and s out of range) with an
//                                                    error of the caller's on libcrypto's queue: "kept=1 extra=0"
//                                                    when the queue is as the caller left it
//   keyseal-pkcs11-probe MODULE multipart LABEL       an RSA key's CKM_SHA256_RSA_PKCS: C_SignUpdate/C_SignFinal in
//                                                    three parts against one C_Sign (deterministic: equal bytes)
//   keyseal-pkcs11-probe MODULE interface             PKCS#11 v3.0's C_GetInterfaceList and C_GetInterface
//   keyseal-pkcs11-probe MODULE bad                   null pointers, unknown handles and mechanisms: one CKR each
//   keyseal-pkcs11-probe MODULE reinitialize          C_Initialize while initialized (before and after keyseald is
//                                                    reached), C_Finalize twice, C_Initialize again, and a forked
//                                                    child's C_Initialize: one CKR each
//   keyseal-pkcs11-probe MODULE attributes LABEL      CKA_VALUE of the private key, short buffers, sizes
//   keyseal-pkcs11-probe MODULE reconnect LABEL FILE [PIN]  signs, waits for FILE.down (daemon stopped, or store
//                                                    locked), signs, waits for FILE (restarted, unlocked), signs
//   keyseal-pkcs11-probe MODULE bench LABEL N [PIN]   N C_Sign calls on one session (logged in with PIN), after
//                                                    a warm-up: median microseconds
//   keyseal-pkcs11-probe MODULE sessionkey FILE       a session key pair (CKA_TOKEN false) made in a read-only
//                                                    session: its attributes, a signature, another session's search;
//                                                    creates FILE.made and waits for FILE.locked (the test locks the
//                                                    store): a signature; creates FILE.tried and waits for FILE
//                                                    (unlocked): a signature, then the session closed under a key
//   keyseal-pkcs11-probe MODULE exitwithkey FILE      a session key pair in the store's hardware, then FILE.made,
//                                                    and exits at FILE without C_Finalize or closing anything
//                                                    (the process's end)
//   keyseal-pkcs11-probe MODULE objects CERT          C_CreateObject: session objects in a read-only session (a
//                                                    certificate with a 32-byte non-UTF-8 label, its own CKA_ID and
//                                                    both public-key hashes; data), found by label and read back;
//                                                    token certificates with what the store cannot keep: one CKR each
//   keyseal-pkcs11-probe MODULE login [PIN]           the token's flags, C_Login(CKU_USER) with PIN (none: NULL, 0),
//                                                    and a signature with the key labelled "device"
//
// Sessions are opened on slot 1 (the Keyseal module's one slot), or with KEYSEAL_PROBE_TOKEN=LABEL on the slot whose
// token has that label (another module's token, e.g. tpm2-pkcs11's).
#include <dlfcn.h>
#include <p11-kit/pkcs11.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static CK_FUNCTION_LIST *p11;
static CK_SLOT_ID slot = 1;

static void load(const char *path) {
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (module == NULL) {
        printf("dlopen failed: %s\n", dlerror());
        exit(2);
    }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(module, "C_GetFunctionList");
    if (get == NULL || get(&p11) != CKR_OK) {
        printf("no C_GetFunctionList\n");
        exit(2);
    }
}

static CK_RV initialize(void) {
    // What p11-kit passes: CKF_OS_LOCKING_OK and no mutex callbacks.
    CK_C_INITIALIZE_ARGS args;
    memset(&args, 0, sizeof args);
    args.flags = CKF_OS_LOCKING_OK;
    return p11->C_Initialize(&args);
}

/// The slot whose token's label (blank-padded to 32 bytes) is `label`; exits when there is none.
static CK_SLOT_ID slot_of_token(const char *label) {
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    CK_RV rv = p11->C_GetSlotList(CK_TRUE, slots, &count);
    if (rv != CKR_OK) {
        printf("rv=0x%lx slots\n", rv);
        exit(3);
    }
    char padded[32];
    memset(padded, ' ', sizeof padded);
    memcpy(padded, label, strlen(label) < sizeof padded ? strlen(label) : sizeof padded);
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO token;
        if (p11->C_GetTokenInfo(slots[i], &token) == CKR_OK && memcmp(token.label, padded, sizeof padded) == 0) {
            return slots[i];
        }
    }
    printf("no token %s\n", label);
    exit(3);
}

static CK_SESSION_HANDLE open_session(void) {
    CK_SESSION_HANDLE session = 0;
    CK_RV rv = p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session);
    if (rv != CKR_OK) {
        printf("rv=0x%lx open\n", rv);
        exit(3);
    }
    return session;
}

static CK_OBJECT_HANDLE find_key(CK_SESSION_HANDLE session, const char *label, CK_OBJECT_CLASS class) {
    CK_ATTRIBUTE template[] = {
        {CKA_CLASS, &class, sizeof class},
        {CKA_LABEL, (void *)label, strlen(label)},
    };
    CK_OBJECT_HANDLE handle = 0;
    CK_ULONG found = 0;
    CK_RV rv = p11->C_FindObjectsInit(session, template, 2);
    if (rv == CKR_OK) rv = p11->C_FindObjects(session, &handle, 1, &found);
    p11->C_FindObjectsFinal(session);
    if (rv != CKR_OK || found != 1) {
        printf("rv=0x%lx find found=%lu\n", rv, found);
        exit(4);
    }
    return handle;
}

static CK_RV sign_once(CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, unsigned char *signature, CK_ULONG *length) {
    unsigned char digest[32];
    for (int i = 0; i < 32; i++) digest[i] = (unsigned char)i;
    CK_MECHANISM mechanism = {CKM_ECDSA, NULL, 0};
    CK_RV rv = p11->C_SignInit(session, &mechanism, key);
    if (rv != CKR_OK) return rv;
    return p11->C_Sign(session, digest, sizeof digest, signature, length);
}

static void print_hex(const unsigned char *bytes, CK_ULONG length) {
    for (CK_ULONG i = 0; i < length; i++) printf("%02x", bytes[i]);
}

static int sign_command(const char *label, const char *pin) {
    CK_SESSION_HANDLE session = open_session();
    if (pin != NULL) {
        CK_RV rv = p11->C_Login(session, CKU_USER, (CK_UTF8CHAR *)pin, strlen(pin));
        printf("login=0x%lx ", rv);
    }
    CK_OBJECT_HANDLE key = find_key(session, label, CKO_PRIVATE_KEY);
    unsigned char signature[200];
    CK_ULONG length = sizeof signature;
    CK_RV rv = sign_once(session, key, signature, &length);
    printf("rv=0x%lx", rv);
    if (rv == CKR_OK) {
        printf(" sig=");
        print_hex(signature, length);
    }
    printf("\n");
    return 0;
}

static int fork_command(const char *label) {
    CK_SESSION_HANDLE session = open_session();
    CK_OBJECT_HANDLE key = find_key(session, label, CKO_PRIVATE_KEY);
    unsigned char signature[200];
    CK_ULONG length = sizeof signature;
    CK_RV parent = sign_once(session, key, signature, &length);
    pid_t child = fork();
    if (child == 0) {
        // The child does not call C_Initialize again: the module must notice the new process by itself. It lists
        // and signs while the parent signs: on a shared connection their requests and answers would cross.
        int failures = 0;
        for (int i = 0; i < 30; i++) {
            CK_SESSION_HANDLE own = open_session();
            CK_OBJECT_HANDLE childKey = find_key(own, label, CKO_PRIVATE_KEY);
            length = sizeof signature;
            if (sign_once(own, childKey, signature, &length) != CKR_OK || length != 64) failures++;
            p11->C_CloseSession(own);
        }
        _exit(failures == 0 ? 0 : 1);
    }
    int failures = 0;
    for (int i = 0; i < 60; i++) {
        length = sizeof signature;
        if (sign_once(session, key, signature, &length) != CKR_OK || length != 64) failures++;
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("parent=0x%lx child=%d parent_failures=%d\n", parent, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
        failures);
    return 0;
}

#define THREAD_ROUNDS 20

struct thread_job {
    const char *label;
    int index;
    int failures;
    CK_RV rvs[4];
    int rv_count;
    unsigned char signatures[THREAD_ROUNDS][200];
    CK_ULONG lengths[THREAD_ROUNDS];
};

static void thread_record(struct thread_job *job, CK_RV rv) {
    if (rv == CKR_OK) return;
    job->failures++;
    for (int i = 0; i < job->rv_count; i++)
        if (job->rvs[i] == rv) return;
    if (job->rv_count < 4) job->rvs[job->rv_count++] = rv;
}

#define THREAD_MESSAGE 4000

// The message of a thread and round: its name, then dots up to THREAD_MESSAGE bytes. (A byte-at-a-time signature
// of it is 4000 C_SignUpdate calls: enough calls at once from every thread that a module without its lock corrupts
// its session table and crashes.)
static int thread_message(char message[THREAD_MESSAGE + 1], int thread, int round) {
    int length = snprintf(message, THREAD_MESSAGE + 1, "thread %d round %d, signed whole or a byte at a time ", thread,
        round);
    memset(message + length, '.', THREAD_MESSAGE - (size_t)length);
    message[THREAD_MESSAGE] = 0;
    return THREAD_MESSAGE;
}

static void *thread_main(void *argument) {
    struct thread_job *job = argument;
    // Sessions opened and closed, objects listed and keys used from every thread at once; a message of its own per
    // thread and round, so that a signature answered to the wrong caller does not verify.
    for (int i = 0; i < THREAD_ROUNDS; i++) {
        CK_SESSION_HANDLE session = 0;
        CK_RV rv = p11->C_OpenSession(1, CKF_SERIAL_SESSION, NULL, NULL, &session);
        thread_record(job, rv);
        if (rv != CKR_OK) continue;
        CK_OBJECT_CLASS class = CKO_PRIVATE_KEY;
        CK_ATTRIBUTE template[] = {
            {CKA_CLASS, &class, sizeof class},
            {CKA_LABEL, (void *)job->label, strlen(job->label)},
        };
        CK_OBJECT_HANDLE key = 0;
        CK_ULONG found = 0;
        rv = p11->C_FindObjectsInit(session, template, 2);
        if (rv == CKR_OK) rv = p11->C_FindObjects(session, &key, 1, &found);
        if (rv == CKR_OK) rv = p11->C_FindObjectsFinal(session);
        if (rv == CKR_OK && found != 1) rv = CKR_OBJECT_HANDLE_INVALID;
        char message[THREAD_MESSAGE + 1];
        int length = thread_message(message, job->index, i);
        CK_MECHANISM mechanism = {CKM_ECDSA_SHA256, NULL, 0};
        if (rv == CKR_OK) rv = p11->C_SignInit(session, &mechanism, key);
        job->lengths[i] = sizeof job->signatures[i];
        if (rv == CKR_OK && i % 2 == 0)
            rv = p11->C_Sign(session, (CK_BYTE *)message, (CK_ULONG)length, job->signatures[i], &job->lengths[i]);
        // Odd rounds: one C_SignUpdate per byte, each followed by C_GetSessionInfo, all while other threads open,
        // use and close their sessions.
        for (int byte = 0; rv == CKR_OK && i % 2 == 1 && byte < length; byte++) {
            CK_SESSION_INFO info;
            rv = p11->C_SignUpdate(session, (CK_BYTE *)message + byte, 1);
            if (rv == CKR_OK) rv = p11->C_GetSessionInfo(session, &info);
        }
        if (rv == CKR_OK && i % 2 == 1) rv = p11->C_SignFinal(session, job->signatures[i], &job->lengths[i]);
        if (rv != CKR_OK) job->lengths[i] = 0;
        thread_record(job, rv);
        thread_record(job, p11->C_CloseSession(session));
    }
    return NULL;
}

static int threads_command(const char *label, int count) {
    static struct thread_job jobs[64];
    pthread_t threads[64];
    if (count > 64) count = 64;
    CK_SESSION_HANDLE session = open_session();
    CK_OBJECT_HANDLE public = find_key(session, label, CKO_PUBLIC_KEY);
    unsigned char point[200];
    CK_ATTRIBUTE attribute = {CKA_EC_POINT, point, sizeof point};
    if (p11->C_GetAttributeValue(session, public, &attribute, 1) != CKR_OK) {
        printf("no point\n");
        return 1;
    }
    printf("point=");
    print_hex(point, attribute.ulValueLen);
    printf("\n");
    for (int i = 0; i < count; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].label = label;
        jobs[i].index = i;
        pthread_create(&threads[i], NULL, thread_main, &jobs[i]);
    }
    int failures = 0;
    for (int i = 0; i < count; i++) {
        pthread_join(threads[i], NULL);
        failures += jobs[i].failures;
    }
    for (int i = 0; i < count; i++) {
        for (int round = 0; round < THREAD_ROUNDS; round++) {
            printf("%d %d=", i, round);
            print_hex(jobs[i].signatures[round], jobs[i].lengths[round]);
            printf("\n");
        }
    }
    printf("failures=%d rvs=", failures);
    for (int i = 0; i < count; i++)
        for (int r = 0; r < jobs[i].rv_count; r++) printf("0x%lx,", jobs[i].rvs[r]);
    printf("\n");
    return 0;
}

// libcrypto's error queue is the caller's: C_Verify leaves an error the caller queued, and queues none of its own.
// libcrypto is reached with dlopen (the module's own copy: one soname, one queue), so the probe links no OpenSSL.
static int errqueue_command(const char *label) {
    void *crypto = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (crypto == NULL) {
        printf("libcrypto: %s\n", dlerror());
        return 1;
    }
    void (*err_new)(void) = (void (*)(void))dlsym(crypto, "ERR_new");
    void (*err_set_error)(int, int, const char *, ...) = (void (*)(int, int, const char *, ...))dlsym(crypto, "ERR_set_error");
    unsigned long (*peek_first)(void) = (unsigned long (*)(void))dlsym(crypto, "ERR_peek_error");
    unsigned long (*peek_last)(void) = (unsigned long (*)(void))dlsym(crypto, "ERR_peek_last_error");
    if (err_new == NULL || err_set_error == NULL || peek_first == NULL || peek_last == NULL) {
        printf("libcrypto: no ERR functions\n");
        return 1;
    }
    CK_SESSION_HANDLE session = open_session();
    CK_OBJECT_HANDLE private = find_key(session, label, CKO_PRIVATE_KEY);
    CK_OBJECT_HANDLE public = find_key(session, label, CKO_PUBLIC_KEY);
    unsigned char signature[200];
    CK_ULONG length = sizeof signature;
    unsigned char digest[32];
    for (int i = 0; i < 32; i++) digest[i] = (unsigned char)i;
    CK_RV rv = sign_once(session, private, signature, &length);
    if (rv != CKR_OK) {
        printf("sign=0x%lx\n", rv);
        return 1;
    }
    // ERR_LIB_USER (128), reason 42: the caller's own error, queued before the module is called.
    err_new();
    err_set_error(128, 42, NULL);
    unsigned long mine = peek_last();
    CK_MECHANISM ecdsa = {CKM_ECDSA, NULL, 0};
    CK_RV rvs[3];
    rv = p11->C_VerifyInit(session, &ecdsa, public);
    rvs[0] = rv == CKR_OK ? p11->C_Verify(session, digest, sizeof digest, signature, length) : rv;
    signature[length - 1] ^= 0x01;
    rv = p11->C_VerifyInit(session, &ecdsa, public);
    rvs[1] = rv == CKR_OK ? p11->C_Verify(session, digest, sizeof digest, signature, length) : rv;
    // r and s all ones: above the curve's order, which libcrypto refuses with an error of its own.
    memset(signature, 0xff, length);
    rv = p11->C_VerifyInit(session, &ecdsa, public);
    rvs[2] = rv == CKR_OK ? p11->C_Verify(session, digest, sizeof digest, signature, length) : rv;
    printf("valid=0x%lx tampered=0x%lx range=0x%lx kept=%d extra=%d\n", rvs[0], rvs[1], rvs[2],
           mine != 0 && peek_first() == mine, peek_last() != mine);
    return 0;
}

static int verify_command(const char *label) {
    CK_SESSION_HANDLE session = open_session();
    CK_OBJECT_HANDLE private = find_key(session, label, CKO_PRIVATE_KEY);
    CK_OBJECT_HANDLE public = find_key(session, label, CKO_PUBLIC_KEY);
    unsigned char signature[200];
    CK_ULONG length = sizeof signature;
    unsigned char digest[32];
    for (int i = 0; i < 32; i++) digest[i] = (unsigned char)i;
    CK_RV rv = sign_once(session, private, signature, &length);
    if (rv != CKR_OK) {
        printf("sign=0x%lx\n", rv);
        return 1;
    }
    CK_MECHANISM ecdsa = {CKM_ECDSA, NULL, 0};
    rv = p11->C_VerifyInit(session, &ecdsa, public);
    if (rv == CKR_OK) rv = p11->C_Verify(session, digest, sizeof digest, signature, length);
    printf("valid=0x%lx ", rv);
    signature[length - 1] ^= 0x01;
    rv = p11->C_VerifyInit(session, &ecdsa, public);
    if (rv == CKR_OK) rv = p11->C_Verify(session, digest, sizeof digest, signature, length);
    printf("tampered=0x%lx ", rv);
    signature[length - 1] ^= 0x01;
    digest[0] ^= 0x80;
    rv = p11->C_VerifyInit(session, &ecdsa, public);
    if (rv == CKR_OK) rv = p11->C_Verify(session, digest, sizeof digest, signature, length);
    printf("otherdata=0x%lx ", rv);
    digest[0] ^= 0x80;
    rv = p11->C_VerifyInit(session, &ecdsa, public);
    if (rv == CKR_OK) rv = p11->C_Verify(session, digest, sizeof digest, signature, length - 1);
    printf("short=0x%lx ", rv);
    // The operation ended with the failure: C_Verify again is not initialized.
    printf("ended=0x%lx ", p11->C_Verify(session, digest, sizeof digest, signature, length));
    printf("private=0x%lx ", p11->C_VerifyInit(session, &ecdsa, private));
    // CKM_ECDSA_SHA256: signed in two parts, verified in one and in three.
    CK_MECHANISM hashed = {CKM_ECDSA_SHA256, NULL, 0};
    const char *message = "a message in parts";
    length = sizeof signature;
    rv = p11->C_SignInit(session, &hashed, private);
    if (rv == CKR_OK) rv = p11->C_SignUpdate(session, (CK_BYTE *)message, 6);
    if (rv == CKR_OK) rv = p11->C_SignUpdate(session, (CK_BYTE *)message + 6, strlen(message) - 6);
    if (rv == CKR_OK) rv = p11->C_SignFinal(session, signature, &length);
    printf("signparts=0x%lx ", rv);
    rv = p11->C_VerifyInit(session, &hashed, public);
    if (rv == CKR_OK) rv = p11->C_Verify(session, (CK_BYTE *)message, strlen(message), signature, length);
    printf("oneshot=0x%lx ", rv);
    rv = p11->C_VerifyInit(session, &hashed, public);
    for (size_t offset = 0; rv == CKR_OK && offset < strlen(message); offset += 7) {
        size_t part = strlen(message) - offset < 7 ? strlen(message) - offset : 7;
        rv = p11->C_VerifyUpdate(session, (CK_BYTE *)message + offset, part);
    }
    if (rv == CKR_OK) rv = p11->C_VerifyFinal(session, signature, length);
    printf("verifyparts=0x%lx ", rv);
    rv = p11->C_VerifyInit(session, &hashed, public);
    if (rv == CKR_OK) rv = p11->C_VerifyUpdate(session, (CK_BYTE *)message, 6);
    if (rv == CKR_OK) rv = p11->C_VerifyFinal(session, signature, length);
    printf("verifyprefix=0x%lx\n", rv);
    return 0;
}

static int multipart_command(const char *label) {
    CK_SESSION_HANDLE session = open_session();
    CK_OBJECT_HANDLE private = find_key(session, label, CKO_PRIVATE_KEY);
    CK_OBJECT_HANDLE public = find_key(session, label, CKO_PUBLIC_KEY);
    CK_MECHANISM mechanism = {CKM_SHA256_RSA_PKCS, NULL, 0};
    const char *message = "one message, signed whole and in three parts";
    CK_ULONG size = strlen(message);
    unsigned char whole[1024], parts[1024];
    CK_ULONG wholeLength = sizeof whole, partsLength = sizeof parts;
    CK_RV rv = p11->C_SignInit(session, &mechanism, private);
    if (rv == CKR_OK) rv = p11->C_Sign(session, (CK_BYTE *)message, size, whole, &wholeLength);
    printf("oneshot=0x%lx ", rv);
    rv = p11->C_SignInit(session, &mechanism, private);
    if (rv == CKR_OK) rv = p11->C_SignUpdate(session, (CK_BYTE *)message, 3);
    if (rv == CKR_OK) rv = p11->C_SignUpdate(session, NULL, 0);
    if (rv == CKR_OK) rv = p11->C_SignUpdate(session, (CK_BYTE *)message + 3, 20);
    if (rv == CKR_OK) rv = p11->C_SignUpdate(session, (CK_BYTE *)message + 23, size - 23);
    // A size query first: the operation stays active.
    CK_ULONG query = 0;
    if (rv == CKR_OK) rv = p11->C_SignFinal(session, NULL, &query);
    if (rv == CKR_OK) rv = p11->C_SignFinal(session, parts, &partsLength);
    printf("parts=0x%lx query=%lu ", rv, query);
    printf("equal=%d ", wholeLength == partsLength && memcmp(whole, parts, wholeLength) == 0);
    rv = p11->C_VerifyInit(session, &mechanism, public);
    if (rv == CKR_OK) rv = p11->C_Verify(session, (CK_BYTE *)message, size, parts, partsLength);
    printf("verify=0x%lx ", rv);
    // C_Sign after C_SignUpdate is refused (and ends the operation).
    rv = p11->C_SignInit(session, &mechanism, private);
    if (rv == CKR_OK) rv = p11->C_SignUpdate(session, (CK_BYTE *)message, 3);
    CK_ULONG length = sizeof parts;
    if (rv == CKR_OK) rv = p11->C_Sign(session, (CK_BYTE *)message, size, parts, &length);
    printf("mixed=0x%lx ", rv);
    /* Raw PKCS#1 v1.5 verification of a block longer than the key can sign (k - 11 bytes): the data's length is out of
       range, whatever the signature. */
    CK_MECHANISM raw = {CKM_RSA_PKCS, NULL, 0};
    unsigned char block[250] = {0};
    rv = p11->C_VerifyInit(session, &raw, public);
    if (rv == CKR_OK) rv = p11->C_Verify(session, block, sizeof block, parts, partsLength);
    printf("rawlong=0x%lx ", rv);
    /* PSS over a digest the caller made: a digest of another size than its hash's is out of range. */
    CK_RSA_PKCS_PSS_PARAMS pss = {CKM_SHA256, CKG_MGF1_SHA256, 32};
    CK_MECHANISM pssDigest = {CKM_RSA_PKCS_PSS, &pss, sizeof pss};
    rv = p11->C_VerifyInit(session, &pssDigest, public);
    if (rv == CKR_OK) rv = p11->C_Verify(session, block, 31, parts, partsLength);
    printf("pssshort=0x%lx\n", rv);
    return 0;
}

// PKCS#11 v3.0's CK_INTERFACE (p11-kit's header is v2.40's).
typedef struct {
    CK_UTF8CHAR *pInterfaceName;
    void *pFunctionList;
    CK_FLAGS flags;
} v3_interface;

static int interface_command(const char *path) {
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CK_RV (*list)(v3_interface *, CK_ULONG *) = (CK_RV(*)(v3_interface *, CK_ULONG *))dlsym(module, "C_GetInterfaceList");
    CK_RV (*get)(CK_UTF8CHAR *, CK_VERSION *, v3_interface **, CK_FLAGS) =
        (CK_RV(*)(CK_UTF8CHAR *, CK_VERSION *, v3_interface **, CK_FLAGS))dlsym(module, "C_GetInterface");
    if (list == NULL || get == NULL) {
        printf("no C_GetInterfaceList or C_GetInterface\n");
        return 1;
    }
    CK_ULONG count = 0;
    CK_RV rv = list(NULL, &count);
    printf("count=0x%lx,%lu ", rv, count);
    v3_interface interfaces[4];
    count = 4;
    rv = list(interfaces, &count);
    CK_FUNCTION_LIST *listed = interfaces[0].pFunctionList;
    printf("list=0x%lx name=%s version=%d.%d same=%d ", rv, (char *)interfaces[0].pInterfaceName,
        listed->version.major, listed->version.minor, listed == p11);
    v3_interface *found = NULL;
    rv = get((CK_UTF8CHAR *)"PKCS 11", NULL, &found, 0);
    printf("get=0x%lx same=%d ", rv, rv == CKR_OK && found->pFunctionList == (void *)p11);
    rv = get(NULL, NULL, &found, 0);
    printf("default=0x%lx ", rv);
    CK_VERSION three = {3, 0};
    printf("v3=0x%lx ", get((CK_UTF8CHAR *)"PKCS 11", &three, &found, 0));
    printf("other=0x%lx ", get((CK_UTF8CHAR *)"Vendor", NULL, &found, 0));
    // Through the interface's list, as a v3.0 caller calls.
    CK_INFO info;
    rv = ((CK_FUNCTION_LIST *)found->pFunctionList)->C_GetInfo(&info);
    printf("info=0x%lx cryptoki=%d.%d\n", rv, info.cryptokiVersion.major, info.cryptokiVersion.minor);
    return 0;
}

static int reinitialize_command(void) {
    // main() initialized the module; nothing has reached keyseald yet.
    printf("again=0x%lx ", initialize());
    printf("again_null=0x%lx ", p11->C_Initialize(NULL));
    CK_TOKEN_INFO token;
    printf("token=0x%lx ", p11->C_GetTokenInfo(slot, &token));
    printf("again_connected=0x%lx ", initialize());
    printf("finalize=0x%lx ", p11->C_Finalize(NULL));
    printf("finalize_again=0x%lx ", p11->C_Finalize(NULL));
    printf("initialize=0x%lx ", initialize());
    printf("token_after=0x%lx ", p11->C_GetTokenInfo(slot, &token));
    // A child after fork() may initialize anew, as the standard asks of it.
    pid_t child = fork();
    if (child == 0) _exit(initialize() == CKR_OK && p11->C_GetTokenInfo(slot, &token) == CKR_OK ? 0 : 1);
    int status = 0;
    waitpid(child, &status, 0);
    printf("child=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

static int bad_command(void) {
    CK_SESSION_HANDLE session = open_session();
    CK_MECHANISM ecdsa = {CKM_ECDSA, NULL, 0};
    CK_MECHANISM unknown = {0x7fffffffUL, NULL, 0};
    CK_ULONG count = 0;
    printf("getinfo_null=0x%lx ", p11->C_GetInfo(NULL));
    printf("slotlist_null=0x%lx ", p11->C_GetSlotList(CK_TRUE, NULL, NULL));
    printf("tokeninfo_badslot=0x%lx ", p11->C_GetTokenInfo(99, NULL));
    printf("session_unknown=0x%lx ", p11->C_SignInit(424242, &ecdsa, 1));
    printf("key_unknown=0x%lx ", p11->C_SignInit(session, &ecdsa, 999999));
    printf("mechanism_null=0x%lx ", p11->C_SignInit(session, NULL, 1));
    printf("object_unknown=0x%lx ", p11->C_GetAttributeValue(session, 999999, NULL, 0));
    printf("sign_uninitialized=0x%lx ", p11->C_Sign(session, NULL, 0, NULL, &count));
    printf("findobjects_null=0x%lx ", p11->C_FindObjects(session, NULL, 1, NULL));
    printf("unsupported=0x%lx ", p11->C_DigestInit(session, &ecdsa));
    printf("mechinfo_unknown=0x%lx ", p11->C_GetMechanismInfo(1, unknown.mechanism, NULL));
    CK_MECHANISM_INFO info;
    printf("mechinfo_unknown2=0x%lx ", p11->C_GetMechanismInfo(1, unknown.mechanism, &info));
    printf("login_so=0x%lx ", p11->C_Login(session, CKU_SO, NULL, 0));
    printf("random_null=0x%lx ", p11->C_GenerateRandom(session, NULL, 16));
    unsigned char random[16];
    printf("random_huge=0x%lx", p11->C_GenerateRandom(session, random, ~(CK_ULONG)0));
    printf("\n");
    return 0;
}

static int attributes_command(const char *label) {
    CK_SESSION_HANDLE session = open_session();
    CK_OBJECT_HANDLE private = find_key(session, label, CKO_PRIVATE_KEY);
    CK_OBJECT_HANDLE public = find_key(session, label, CKO_PUBLIC_KEY);
    unsigned char buffer[256];
    CK_ATTRIBUTE value = {CKA_VALUE, buffer, sizeof buffer};
    CK_RV sensitive = p11->C_GetAttributeValue(session, private, &value, 1);
    printf("value=0x%lx value_len=%ld ", sensitive, (long)value.ulValueLen);
    CK_ATTRIBUTE point = {CKA_EC_POINT, NULL, 0};
    CK_RV size = p11->C_GetAttributeValue(session, public, &point, 1);
    printf("point_size=0x%lx point_len=%lu ", size, point.ulValueLen);
    CK_ATTRIBUTE shortPoint = {CKA_EC_POINT, buffer, 10};
    CK_RV tooSmall = p11->C_GetAttributeValue(session, public, &shortPoint, 1);
    printf("short=0x%lx short_len=%ld ", tooSmall, (long)shortPoint.ulValueLen);
    CK_ATTRIBUTE missing = {CKA_MODULUS, buffer, sizeof buffer};
    CK_RV invalid = p11->C_GetAttributeValue(session, public, &missing, 1);
    printf("modulus=0x%lx ", invalid);
    unsigned char signature[200];
    CK_ULONG length = 0;
    CK_MECHANISM mechanism = {CKM_ECDSA, NULL, 0};
    unsigned char digest[32] = {0};
    p11->C_SignInit(session, &mechanism, private);
    CK_RV query = p11->C_Sign(session, digest, 32, NULL, &length);
    printf("sigsize=0x%lx siglen=%lu ", query, length);
    length = 8;
    CK_RV shortSig = p11->C_Sign(session, digest, 32, signature, &length);
    printf("sigshort=0x%lx sigshort_len=%lu ", shortSig, length);
    length = sizeof signature;
    CK_RV done = p11->C_Sign(session, digest, 32, signature, &length);
    printf("sig=0x%lx ", done);
    /* A length past what the signature needs (here the largest there is) is room enough, never a crash. */
    p11->C_SignInit(session, &mechanism, private);
    length = ~(CK_ULONG)0;
    CK_RV huge = p11->C_Sign(session, digest, 32, signature, &length);
    printf("sighuge=0x%lx sighuge_len=%lu\n", huge, length);
    return 0;
}

static int reconnect_command(const char *label, const char *flag, const char *pin) {
    CK_SESSION_HANDLE session = open_session();
    if (pin != NULL) printf("login=0x%lx ", p11->C_Login(session, CKU_USER, (CK_UTF8CHAR *)pin, strlen(pin)));
    CK_OBJECT_HANDLE key = find_key(session, label, CKO_PRIVATE_KEY);
    unsigned char signature[200];
    CK_ULONG length = sizeof signature;
    CK_RV before = sign_once(session, key, signature, &length);
    printf("before=0x%lx ", before);
    fflush(stdout);
    // The test stops keyseald and creates FLAG.down, then restarts it and creates FLAG.
    char down[4096];
    snprintf(down, sizeof down, "%s.down", flag);
    struct stat info;
    for (int i = 0; i < 3000 && stat(down, &info) != 0; i++) usleep(10000);
    length = sizeof signature;
    CK_RV during = sign_once(session, key, signature, &length);
    CK_TOKEN_INFO token;
    CK_RV absent = p11->C_GetTokenInfo(1, &token);
    printf("during=0x%lx token=0x%lx ", during, absent);
    fflush(stdout);
    for (int i = 0; i < 3000 && stat(flag, &info) != 0; i++) usleep(10000);
    length = sizeof signature;
    CK_RV after = sign_once(session, key, signature, &length);
    printf("after=0x%lx\n", after);
    return 0;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int bench_command(const char *label, int count, const char *pin) {
    CK_SESSION_HANDLE session = open_session();
    if (pin != NULL) {
        CK_RV rv = p11->C_Login(session, CKU_USER, (CK_UTF8CHAR *)pin, strlen(pin));
        if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN) {
            printf("login=0x%lx\n", rv);
            return 1;
        }
    }
    CK_OBJECT_HANDLE key = find_key(session, label, CKO_PRIVATE_KEY);
    // Warm-up: the module's first signature may load the key, open a connection or start a TPM session.
    for (int i = 0; i < 10; i++) {
        unsigned char signature[200];
        CK_ULONG length = sizeof signature;
        CK_RV rv = sign_once(session, key, signature, &length);
        if (rv != CKR_OK) {
            printf("rv=0x%lx\n", rv);
            return 1;
        }
    }
    double *times = calloc((size_t)count, sizeof(double));
    for (int i = 0; i < count; i++) {
        unsigned char signature[200];
        CK_ULONG length = sizeof signature;
        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        CK_RV rv = sign_once(session, key, signature, &length);
        clock_gettime(CLOCK_MONOTONIC, &end);
        if (rv != CKR_OK) {
            printf("rv=0x%lx\n", rv);
            return 1;
        }
        times[i] = (double)(end.tv_sec - start.tv_sec) * 1e6 + (double)(end.tv_nsec - start.tv_nsec) / 1e3;
    }
    qsort(times, (size_t)count, sizeof(double), compare);
    printf("median_us=%.1f\n", times[count / 2]);
    free(times);
    return 0;
}

static CK_RV attribute(CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object, CK_ATTRIBUTE_TYPE type, void *value,
                       CK_ULONG *length) {
    CK_ATTRIBUTE template = {type, value, *length};
    CK_RV rv = p11->C_GetAttributeValue(session, object, &template, 1);
    *length = template.ulValueLen;
    return rv;
}

/// How many objects `template` finds in `session`.
static CK_ULONG count_objects(CK_SESSION_HANDLE session, CK_ATTRIBUTE *template, CK_ULONG count) {
    CK_OBJECT_HANDLE handles[64];
    CK_ULONG found = 0;
    if (p11->C_FindObjectsInit(session, template, count) != CKR_OK) return 999;
    p11->C_FindObjects(session, handles, 64, &found);
    p11->C_FindObjectsFinal(session);
    return found;
}

static void wait_for(const char *flag, const char *suffix) {
    char path[4096];
    snprintf(path, sizeof path, "%s%s", flag, suffix);
    struct stat info;
    for (int i = 0; i < 6000 && stat(path, &info) != 0; i++) usleep(10000);
}

static void touch(const char *flag, const char *suffix) {
    char path[4096];
    snprintf(path, sizeof path, "%s%s", flag, suffix);
    FILE *file = fopen(path, "w");
    if (file != NULL) fclose(file);
}

static const unsigned char p256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};

/// C_GenerateKeyPair of a P-256 key with CKA_TOKEN `token` on both halves, labelled `label`, CKA_ID ab cd.
static CK_RV generate_in(CK_SESSION_HANDLE session, CK_BBOOL token, const char *label, CK_BBOOL hardware,
                         CK_OBJECT_HANDLE *public, CK_OBJECT_HANDLE *private);

static CK_RV generate(CK_SESSION_HANDLE session, CK_BBOOL token, const char *label, CK_OBJECT_HANDLE *public,
                      CK_OBJECT_HANDLE *private) {
    return generate_in(session, token, label, 2, public, private);
}

/// `hardware` 0 or 1 sets Keyseal's attribute (software or the store's hardware); 2 leaves it to the backend.
static CK_RV generate_in(CK_SESSION_HANDLE session, CK_BBOOL token, const char *label, CK_BBOOL hardware,
                         CK_OBJECT_HANDLE *public, CK_OBJECT_HANDLE *private) {
    CK_MECHANISM mechanism = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    unsigned char id[] = {0xab, 0xcd};
    CK_ATTRIBUTE publicTemplate[] = {
        {CKA_EC_PARAMS, (void *)p256, sizeof p256}, {CKA_TOKEN, &token, 1},   {CKA_VERIFY, &yes, 1},
        {CKA_LABEL, (void *)label, strlen(label)},  {CKA_ID, id, sizeof id},
    };
    CK_ATTRIBUTE privateTemplate[] = {
        {CKA_TOKEN, &token, 1}, {CKA_SIGN, &yes, 1},    {CKA_SENSITIVE, &yes, 1},
        {CKA_EXTRACTABLE, &no, 1}, {CKA_LABEL, (void *)label, strlen(label)}, {CKA_ID, id, sizeof id},
        {0x80000000UL | 0x4B530001UL, &hardware, 1},
    };
    CK_ULONG privateCount = hardware == 2 ? 6 : 7;
    return p11->C_GenerateKeyPair(session, &mechanism, publicTemplate, 5, privateTemplate, privateCount, public,
                                  private);
}

static int sessionkey_command(const char *flag) {
    CK_SESSION_HANDLE readOnly = 0, other = 0;
    p11->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &readOnly);
    p11->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &other);
    CK_OBJECT_HANDLE public = 0, private = 0, tokenPublic = 0, tokenPrivate = 0;
    printf("gen=0x%lx ", generate(readOnly, CK_FALSE, "session-key", &public, &private));
    printf("tokengen=0x%lx ", generate(readOnly, CK_TRUE, "token-key", &tokenPublic, &tokenPrivate));
    CK_BBOOL flag1 = 9, flag2 = 9, flag3 = 9;
    CK_ULONG length = 1;
    attribute(readOnly, private, CKA_TOKEN, &flag1, &length);
    length = 1;
    attribute(readOnly, public, CKA_TOKEN, &flag2, &length);
    printf("token=%d,%d ", flag1, flag2);
    length = 1;
    attribute(readOnly, private, CKA_EXTRACTABLE, &flag3, &length);
    printf("extractable=%d ", flag3);
    unsigned char buffer[256];
    length = sizeof buffer;
    printf("value=0x%lx ", attribute(readOnly, private, CKA_VALUE, buffer, &length));
    length = sizeof buffer;
    attribute(readOnly, private, CKA_ID, buffer, &length);
    printf("id=");
    print_hex(buffer, length);
    unsigned char signature[200];
    length = sizeof signature;
    printf(" sign=0x%lx ", sign_once(readOnly, private, signature, &length));
    CK_ATTRIBUTE byLabel[] = {{CKA_LABEL, "session-key", 11}};
    printf("found=%lu\n", count_objects(other, byLabel, 1));
    touch(flag, ".made");
    wait_for(flag, ".locked");
    length = sizeof signature;
    printf("locked=0x%lx\n", sign_once(readOnly, private, signature, &length));
    touch(flag, ".tried");
    wait_for(flag, "");
    length = sizeof signature;
    printf("unlocked=0x%lx ", sign_once(other, private, signature, &length));
    printf("destroy=0x%lx ", p11->C_DestroyObject(other, private));
    length = sizeof signature;
    printf("destroyed=0x%lx ", sign_once(other, private, signature, &length));
    printf("gen2=0x%lx ", generate(readOnly, CK_FALSE, "session-key-2", &public, &private));
    printf("close=0x%lx ", p11->C_CloseSession(readOnly));
    length = sizeof signature;
    printf("closed=0x%lx ", sign_once(other, private, signature, &length));
    CK_ATTRIBUTE byLabel2[] = {{CKA_LABEL, "session-key-2", 13}};
    printf("after=%lu,%lu\n", count_objects(other, byLabel, 1), count_objects(other, byLabel2, 1));
    return 0;
}

static int exitwithkey_command(const char *flag) {
    CK_SESSION_HANDLE session = open_session();
    CK_OBJECT_HANDLE public = 0, private = 0;
    printf("gen=0x%lx\n", generate_in(session, CK_FALSE, "leaving-key", CK_TRUE, &public, &private));
    touch(flag, ".made");
    wait_for(flag, "");
    _exit(0);
}

static int read_file(const char *path, unsigned char *buffer, size_t size) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) return -1;
    int length = (int)fread(buffer, 1, size, file);
    fclose(file);
    return length;
}

static int objects_command(const char *certificatePath) {
    unsigned char der[8192];
    int derLength = read_file(certificatePath, der, sizeof der);
    if (derLength <= 0) {
        printf("no certificate\n");
        return 5;
    }
    CK_SESSION_HANDLE readOnly = 0, readWrite = 0;
    p11->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &readOnly);
    p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &readWrite);
    CK_OBJECT_CLASS certificateClass = CKO_CERTIFICATE, dataClass = CKO_DATA;
    CK_CERTIFICATE_TYPE x509 = CKC_X_509;
    CK_BBOOL yes = CK_TRUE;
    // 32 bytes that are not UTF-8 (crypto11 labels its objects with random bytes), an ID and two hashes of its own.
    unsigned char label[32], id[20], subjectHash[20], issuerHash[20];
    for (int i = 0; i < 32; i++) label[i] = (unsigned char)(0xff - i * 7);
    for (int i = 0; i < 20; i++) {
        id[i] = (unsigned char)(i * 13 + 1);
        subjectHash[i] = (unsigned char)(i + 0x40);
        issuerHash[i] = (unsigned char)(i + 0x80);
    }
    CK_ATTRIBUTE certificate[] = {
        {CKA_CLASS, &certificateClass, sizeof certificateClass},
        {CKA_CERTIFICATE_TYPE, &x509, sizeof x509},
        {CKA_VALUE, der, (CK_ULONG)derLength},
        {CKA_LABEL, label, sizeof label},
        {CKA_ID, id, sizeof id},
        {CKA_HASH_OF_SUBJECT_PUBLIC_KEY, subjectHash, sizeof subjectHash},
        {CKA_HASH_OF_ISSUER_PUBLIC_KEY, issuerHash, sizeof issuerHash},
    };
    CK_OBJECT_HANDLE created = 0, found = 0;
    printf("session=0x%lx ", p11->C_CreateObject(readOnly, certificate, 7, &created));
    CK_ATTRIBUTE byLabel[] = {{CKA_LABEL, label, sizeof label}};
    CK_ULONG count = 0;
    p11->C_FindObjectsInit(readWrite, byLabel, 1);
    p11->C_FindObjects(readWrite, &found, 1, &count);
    p11->C_FindObjectsFinal(readWrite);
    printf("found=%lu same=%d ", count, found == created);
    unsigned char buffer[64];
    CK_ULONG length = sizeof buffer;
    CK_RV rv = attribute(readOnly, created, CKA_HASH_OF_SUBJECT_PUBLIC_KEY, buffer, &length);
    int kept = rv == CKR_OK && length == 20 && memcmp(buffer, subjectHash, 20) == 0;
    length = sizeof buffer;
    rv = attribute(readOnly, created, CKA_HASH_OF_ISSUER_PUBLIC_KEY, buffer, &length);
    kept += rv == CKR_OK && length == 20 && memcmp(buffer, issuerHash, 20) == 0;
    length = sizeof buffer;
    rv = attribute(readOnly, created, CKA_ID, buffer, &length);
    kept += rv == CKR_OK && length == 20 && memcmp(buffer, id, 20) == 0;
    CK_BBOOL token = 9;
    length = 1;
    attribute(readOnly, created, CKA_TOKEN, &token, &length);
    printf("kept=%d token=%d ", kept, token);
    CK_ATTRIBUTE data[] = {
        {CKA_CLASS, &dataClass, sizeof dataClass},
        {CKA_LABEL, "a data object", 13},
        {CKA_VALUE, "some bytes", 10},
    };
    CK_OBJECT_HANDLE dataObject = 0;
    printf("data=0x%lx ", p11->C_CreateObject(readOnly, data, 3, &dataObject));
    // Token certificates: the read-only session may not; what the store cannot keep is refused.
    CK_ATTRIBUTE tokenCertificate[] = {
        {CKA_CLASS, &certificateClass, sizeof certificateClass},
        {CKA_TOKEN, &yes, 1},
        {CKA_VALUE, der, (CK_ULONG)derLength},
        {CKA_LABEL, "stored certificate", 18},
        {CKA_ID, id, sizeof id},
        {CKA_HASH_OF_SUBJECT_PUBLIC_KEY, subjectHash, sizeof subjectHash},
    };
    CK_OBJECT_HANDLE stored = 0;
    printf("tokenro=0x%lx ", p11->C_CreateObject(readOnly, tokenCertificate, 4, &stored));
    CK_ATTRIBUTE withHash[] = {tokenCertificate[0], tokenCertificate[1], tokenCertificate[2], tokenCertificate[5]};
    printf("hash=0x%lx ", p11->C_CreateObject(readWrite, withHash, 4, &stored));
    CK_ATTRIBUTE rawLabel[] = {tokenCertificate[0], tokenCertificate[1], tokenCertificate[2], {CKA_LABEL, label, 32}};
    printf("label=0x%lx ", p11->C_CreateObject(readWrite, rawLabel, 4, &stored));
    CK_ATTRIBUTE otherID[] = {tokenCertificate[0], tokenCertificate[1], tokenCertificate[2], tokenCertificate[4]};
    printf("id=0x%lx ", p11->C_CreateObject(readWrite, otherID, 4, &stored));
    CK_ATTRIBUTE tokenCertificates[] = {{CKA_CLASS, &certificateClass, sizeof certificateClass}, {CKA_TOKEN, &yes, 1}};
    printf("stored=%lu ", count_objects(readWrite, tokenCertificates, 2));
    printf("token=0x%lx ", p11->C_CreateObject(readWrite, tokenCertificate, 4, &stored));
    printf("stored=%lu ", count_objects(readWrite, tokenCertificates, 2));
    printf("close=0x%lx ", p11->C_CloseSession(readOnly));
    CK_ATTRIBUTE dataLabel[] = {{CKA_LABEL, "a data object", 13}};
    printf("after=%lu,%lu\n", count_objects(readWrite, byLabel, 1), count_objects(readWrite, dataLabel, 1));
    return 0;
}

static int login_command(const char *pin) {
    CK_TOKEN_INFO token;
    CK_RV info = p11->C_GetTokenInfo(slot, &token);
    printf("info=0x%lx protected=%d ", info, (token.flags & CKF_PROTECTED_AUTHENTICATION_PATH) != 0);
    CK_SESSION_HANDLE session = open_session();
    CK_RV rv = pin == NULL ? p11->C_Login(session, CKU_USER, NULL, 0)
                           : p11->C_Login(session, CKU_USER, (CK_UTF8CHAR *)pin, strlen(pin));
    printf("login=0x%lx ", rv);
    CK_OBJECT_CLASS class = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE template[] = {{CKA_CLASS, &class, sizeof class}, {CKA_LABEL, "device", 6}};
    CK_OBJECT_HANDLE key = 0;
    CK_ULONG found = 0;
    rv = p11->C_FindObjectsInit(session, template, 2);
    if (rv == CKR_OK) rv = p11->C_FindObjects(session, &key, 1, &found);
    p11->C_FindObjectsFinal(session);
    if (rv != CKR_OK || found != 1) {
        printf("find=0x%lx\n", rv);
        return 0;
    }
    unsigned char signature[200];
    CK_ULONG length = sizeof signature;
    printf("sign=0x%lx\n", sign_once(session, key, signature, &length));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: keyseal-pkcs11-probe MODULE COMMAND [ARGUMENTS]\n");
        return 64;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    load(argv[1]);
    CK_RV rv = initialize();
    if (rv != CKR_OK) {
        printf("rv=0x%lx initialize\n", rv);
        return 3;
    }
    const char *token = getenv("KEYSEAL_PROBE_TOKEN");
    if (token != NULL) slot = slot_of_token(token);
    const char *command = argv[2];
    int result = 64;
    if (strcmp(command, "info") == 0) {
        CK_TOKEN_INFO token;
        CK_ULONG count = 0;
        CK_RV info = p11->C_GetTokenInfo(1, &token);
        p11->C_GetMechanismList(1, NULL, &count);
        printf("rv=0x%lx flags=0x%lx mechanisms=%lu\n", info, token.flags, count);
        result = 0;
    } else if (strcmp(command, "sign") == 0 && argc >= 4) {
        result = sign_command(argv[3], argc >= 5 ? argv[4] : NULL);
    } else if (strcmp(command, "fork") == 0 && argc >= 4) {
        result = fork_command(argv[3]);
    } else if (strcmp(command, "threads") == 0 && argc >= 5) {
        result = threads_command(argv[3], atoi(argv[4]));
    } else if (strcmp(command, "verify") == 0 && argc >= 4) {
        result = verify_command(argv[3]);
    } else if (strcmp(command, "errqueue") == 0 && argc >= 4) {
        result = errqueue_command(argv[3]);
    } else if (strcmp(command, "multipart") == 0 && argc >= 4) {
        result = multipart_command(argv[3]);
    } else if (strcmp(command, "interface") == 0) {
        result = interface_command(argv[1]);
    } else if (strcmp(command, "reinitialize") == 0) {
        result = reinitialize_command();
    } else if (strcmp(command, "bad") == 0) {
        result = bad_command();
    } else if (strcmp(command, "attributes") == 0 && argc >= 4) {
        result = attributes_command(argv[3]);
    } else if (strcmp(command, "reconnect") == 0 && argc >= 5) {
        result = reconnect_command(argv[3], argv[4], argc >= 6 ? argv[5] : NULL);
    } else if (strcmp(command, "bench") == 0 && argc >= 5) {
        result = bench_command(argv[3], atoi(argv[4]), argc >= 6 ? argv[5] : NULL);
    } else if (strcmp(command, "sessionkey") == 0 && argc >= 4) {
        result = sessionkey_command(argv[3]);
    } else if (strcmp(command, "exitwithkey") == 0 && argc >= 4) {
        result = exitwithkey_command(argv[3]);
    } else if (strcmp(command, "objects") == 0 && argc >= 4) {
        result = objects_command(argv[3]);
    } else if (strcmp(command, "login") == 0) {
        result = login_command(argc >= 4 ? argv[3] : NULL);
    }
    p11->C_Finalize(NULL);
    return result;
}
