// AES-256-GCM opening through libcrypto's EVP interface, for the item envelope's hot path (KeysealCore/GCM.swift).
#ifndef KEYSEAL_LIBCRYPTO_SHIM_H
#define KEYSEAL_LIBCRYPTO_SHIM_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

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

#endif
