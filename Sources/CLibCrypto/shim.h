// libcrypto for the lookup's hot path: AES-256-GCM opening through the EVP interface (KeysealCore/GCM.swift), and
// HMAC-SHA256 with prepared key states and SHA-256 through the plain SHA-256 functions (KeysealCore/PreparedHMAC.swift);
// SHA-224, which swift-crypto lacks, for Apple's …SHA224 key algorithms; RSA through EVP_PKEY for software RSA keys
// (KeysealCore/RSAOperations.swift: every padding Apple names, and 1024-bit keys, which swift-crypto refuses).
#ifndef KEYSEAL_LIBCRYPTO_SHIM_H
#define KEYSEAL_LIBCRYPTO_SHIM_H

// SHA256_Init/Update/Final are deprecated in OpenSSL 3 in favour of EVP_MD_CTX, whose state copies allocate. They are
// still part of the 3.x API; the plain struct is what lets a prepared HMAC state be copied on the stack.
#define OPENSSL_SUPPRESS_DEPRECATED 1

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pkcs12.h>
#include <openssl/provider.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/sha.h>

/// The AES-256-GCM cipher, fetched from the default provider (NULL if libcrypto has none).
static inline EVP_CIPHER *keyseal_gcm_fetch(void) { return EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL); }

/// A decryption context for `cipher`, keyed with the 32 bytes at `key` (NULL on failure). Freeing it with
/// EVP_CIPHER_CTX_free clears its key schedule.
static inline EVP_CIPHER_CTX *keyseal_gcm_context(const EVP_CIPHER *cipher, const uint8_t *key) {
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    if (context == NULL) return NULL;
    if (EVP_DecryptInit_ex2(context, cipher, key, NULL, NULL) != 1) {
        EVP_CIPHER_CTX_free(context);
        return NULL;
    }
    return context;
}

/// Decrypts `length` bytes of `ciphertext` into `out` under the context's key, a 12-byte `nonce` and `aad`, and
/// checks the 16-byte `tag`. Returns 1 when the data is authentic; otherwise 0, with `out` zeroed.
static inline int keyseal_gcm_open(
    EVP_CIPHER_CTX *context, const uint8_t *nonce, const uint8_t *aad, size_t aad_length, const uint8_t *ciphertext,
    size_t length, const uint8_t *tag, uint8_t *out) {
    int written = 0;
    if (EVP_DecryptInit_ex2(context, NULL, NULL, nonce, NULL) != 1) return 0;
    size_t offset = 0;
    while (offset < aad_length) {
        size_t chunk = aad_length - offset > INT_MAX / 2 ? INT_MAX / 2 : aad_length - offset;
        if (EVP_DecryptUpdate(context, NULL, &written, aad + offset, (int)chunk) != 1) return 0;
        offset += chunk;
    }
    offset = 0;
    while (offset < length) {
        size_t chunk = length - offset > INT_MAX / 2 ? INT_MAX / 2 : length - offset;
        if (EVP_DecryptUpdate(context, out + offset, &written, ciphertext + offset, (int)chunk) != 1
            || (size_t)written != chunk) {
            OPENSSL_cleanse(out, length);
            return 0;
        }
        offset += chunk;
    }
    if (EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, 16, (void *)tag) != 1
        || EVP_DecryptFinal_ex(context, out + length, &written) != 1) {
        if (length > 0) OPENSSL_cleanse(out, length);
        return 0;
    }
    return 1;
}

/// One open under `key` with a context of its own, freed (and so cleared) before returning. As keyseal_gcm_open.
static inline int keyseal_gcm_open_once(
    const EVP_CIPHER *cipher, const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, size_t aad_length,
    const uint8_t *ciphertext, size_t length, const uint8_t *tag, uint8_t *out) {
    EVP_CIPHER_CTX *context = keyseal_gcm_context(cipher, key);
    if (context == NULL) {
        if (length > 0) OPENSSL_cleanse(out, length);
        return 0;
    }
    int result = keyseal_gcm_open(context, nonce, aad, aad_length, ciphertext, length, tag, out);
    EVP_CIPHER_CTX_free(context);
    return result;
}

/// The size of the prepared HMAC-SHA256 key states: the inner and the outer SHA-256 state, one after the other.
static inline size_t keyseal_hmac_states_size(void) { return 2 * sizeof(SHA256_CTX); }

/// Prepares HMAC-SHA256 (RFC 2104) for a key of at most one block (64 bytes) into `states`
/// (keyseal_hmac_states_size() bytes, suitably aligned): SHA-256 over key ^ ipad, and over key ^ opad.
/// Returns 0 for a longer key.
static inline int keyseal_hmac_prepare(const uint8_t *key, size_t key_length, void *states) {
    if (key_length > 64) return 0;
    uint8_t pad[64];
    SHA256_CTX *inner = (SHA256_CTX *)states;
    SHA256_CTX *outer = inner + 1;
    for (size_t index = 0; index < 64; index++) pad[index] = (index < key_length ? key[index] : 0) ^ 0x36;
    SHA256_Init(inner);
    SHA256_Update(inner, pad, 64);
    for (size_t index = 0; index < 64; index++) pad[index] = (index < key_length ? key[index] : 0) ^ 0x5c;
    SHA256_Init(outer);
    SHA256_Update(outer, pad, 64);
    OPENSSL_cleanse(pad, sizeof pad);
    return 1;
}

/// HMAC-SHA256 of first ‖ second ‖ third (any may be empty) under prepared `states`, into the 32 bytes at `out`.
/// The working copies of the states are cleared before returning.
static inline void keyseal_hmac_sha256(
    const void *states, const uint8_t *first, size_t first_length, const uint8_t *second, size_t second_length,
    const uint8_t *third, size_t third_length, uint8_t *out) {
    const SHA256_CTX *prepared = (const SHA256_CTX *)states;
    SHA256_CTX context = prepared[0];
    uint8_t inner[SHA256_DIGEST_LENGTH];
    if (first_length > 0) SHA256_Update(&context, first, first_length);
    if (second_length > 0) SHA256_Update(&context, second, second_length);
    if (third_length > 0) SHA256_Update(&context, third, third_length);
    SHA256_Final(inner, &context);
    context = prepared[1];
    SHA256_Update(&context, inner, sizeof inner);
    SHA256_Final(out, &context);
    OPENSSL_cleanse(&context, sizeof context);
    OPENSSL_cleanse(inner, sizeof inner);
}

/// SHA-256 of `length` bytes at `data` into the 32 bytes at `out`. (OpenSSL 3's one-shot SHA256() fetches the
/// digest by name through EVP on every call, which costs more than hashing a few blocks.)
/// SHA-224 of `length` bytes at `data` into the 28 bytes at `out` (Apple's …SHA224 key algorithms).
static inline void keyseal_sha224(const uint8_t *data, size_t length, uint8_t *out) {
    SHA256_CTX context;
    SHA224_Init(&context);
    if (length > 0) SHA224_Update(&context, data, length);
    SHA224_Final(out, &context);
}

static inline void keyseal_sha256(const uint8_t *data, size_t length, uint8_t *out) {
    SHA256_CTX context;
    SHA256_Init(&context);
    if (length > 0) SHA256_Update(&context, data, length);
    SHA256_Final(out, &context);
}

/// Gives OAEP `context` the label `label` (`length` bytes, copied: the context owns the copy). Returns 1 on success.
/// (EVP_PKEY_CTX_set0_rsa_oaep_label takes memory from OPENSSL_malloc, a macro Swift cannot call.)
static inline int keyseal_rsa_oaep_label(EVP_PKEY_CTX *context, const uint8_t *label, size_t length) {
    unsigned char *copy = OPENSSL_memdup(label, length == 0 ? 1 : length);
    if (copy == NULL) return 0;
    if (EVP_PKEY_CTX_set0_rsa_oaep_label(context, copy, (int)length) != 1) {
        OPENSSL_free(copy);
        return 0;
    }
    return 1;
}

/// The number of certificates in a PKCS#12 file's chain (`sk_X509_num` is a macro Swift cannot call).
static inline int keyseal_x509_stack_count(const STACK_OF(X509) *stack) { return stack ? sk_X509_num(stack) : 0; }

/// The certificate at `index` of a chain, still owned by the chain.
static inline X509 *keyseal_x509_stack_value(const STACK_OF(X509) *stack, int index) {
    return sk_X509_value(stack, index);
}

/// Frees a chain and its certificates.
static inline void keyseal_x509_stack_free(STACK_OF(X509) *stack) { sk_X509_pop_free(stack, X509_free); }

#endif
