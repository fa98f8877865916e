#ifndef KEYSEAL_FLOORS_H
#define KEYSEAL_FLOORS_H

#include <stddef.h>
#include <stdint.h>

// The benchmarks' floors, in C straight on the libraries. Each opens its state once; every call of
// the measured function is one operation, timed by the benchmark harness like the figure it is the floor of.

/// tpm2-tss (ESAPI): the TCG storage primary (ECC P-256) created once, under it Keyseal's signing key (P-256,
/// 32-byte authValue) and a 32-byte sealed data object (noDA, empty authorization), both loaded once. Each call is
/// one command over a password session (the cheapest authorization ESAPI has): TPM2_Sign (ECDSA SHA-256, NULL
/// ticket, 32-byte digest), TPM2_Unseal, or TPM2_CreatePrimary of the storage primary (flushed again). Returns 0 or
/// the TSS2 code. Close flushes every object. Without `children` only the primary is loaded (a TPM without a resource
/// manager has three transient slots: the primary, its two children and a second primary do not fit).
typedef struct keyseal_tpm_floor keyseal_tpm_floor;
keyseal_tpm_floor *keyseal_tpm_floor_open(const char *tcti, int children);
int keyseal_tpm_floor_sign(keyseal_tpm_floor *floor);
int keyseal_tpm_floor_unseal(keyseal_tpm_floor *floor);
int keyseal_tpm_floor_create_primary(keyseal_tpm_floor *floor);
void keyseal_tpm_floor_close(keyseal_tpm_floor *floor);

/// PKCS#11 (p11-kit): a P-256 token key pair on the token labelled `token_label` of `module`, logged in with `pin`;
/// each call is one C_SignInit + C_Sign (CKM_ECDSA, 32-byte digest). Returns CKR_OK (0) or the CK_RV. Close
/// destroys the pair.
typedef struct keyseal_pkcs11_floor keyseal_pkcs11_floor;
keyseal_pkcs11_floor *keyseal_pkcs11_floor_open(const char *module, const char *token_label, const char *pin);
int keyseal_pkcs11_floor_sign(keyseal_pkcs11_floor *floor);
void keyseal_pkcs11_floor_close(keyseal_pkcs11_floor *floor);

/// SQLite: a table of `rows` rows shaped like the item table (32-byte key, 200-byte value, WAL) and a prepared
/// primary-key SELECT of the row `random % rows`; and an INSERT + COMMIT per call with synchronous=FULL.
typedef struct keyseal_sqlite_floor keyseal_sqlite_floor;
keyseal_sqlite_floor *keyseal_sqlite_lookup_floor_open(const char *path, int rows);
int keyseal_sqlite_lookup_floor(keyseal_sqlite_floor *floor, uint64_t random);
keyseal_sqlite_floor *keyseal_sqlite_commit_floor_open(const char *path);
int keyseal_sqlite_commit_floor(keyseal_sqlite_floor *floor, uint64_t index);
void keyseal_sqlite_floor_close(keyseal_sqlite_floor *floor);

/// AES-256-GCM open of `combined` (12-byte nonce, ciphertext, 16-byte tag) through libcrypto's EVP interface: on a
/// context keyed once (as the engine keeps one per class key) or on a fresh context (as for an item key).
typedef struct keyseal_gcm keyseal_gcm;
keyseal_gcm *keyseal_gcm_new(const uint8_t key[32]);
void keyseal_gcm_free(keyseal_gcm *gcm);
int keyseal_gcm_open(keyseal_gcm *gcm, const uint8_t *combined, size_t length, const uint8_t *aad, size_t aad_length,
                     uint8_t *plaintext);
int keyseal_gcm_open_fresh(const uint8_t key[32], const uint8_t *combined, size_t length, const uint8_t *aad,
                           size_t aad_length, uint8_t *plaintext);

/// Argon2id through libargon2, as an unlock derives (32-byte output). Returns ARGON2_OK (0) or libargon2's code.
int keyseal_argon2id(const uint8_t *passcode, size_t passcode_length, const uint8_t *salt, size_t salt_length,
                     uint32_t memory_kib, uint32_t iterations, uint32_t parallelism, uint8_t out[32]);

/// The ping-pong floor: a server (keyseal-bench-echo) that answers each length-prefixed frame on the unix socket
/// `path` with a frame of `reply_bytes`, and the client's round trip (a whole frame out; the reply read as the
/// wire client reads it, length then payload). `reply_length` counts the 4-byte length.
int keyseal_floor_echo_server(const char *path, int reply_bytes);
int keyseal_pingpong_connect(const char *path);
int keyseal_pingpong_round_trip(int fd, const uint8_t *request, size_t request_length, uint8_t *reply,
                                size_t reply_length);

#endif
