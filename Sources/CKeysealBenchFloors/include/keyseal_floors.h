#ifndef KEYSEAL_FLOORS_H
#define KEYSEAL_FLOORS_H

#include <stdint.h>

// Floors for keyseal-bench, in C straight on the libraries: each fills `samples` with the nanoseconds of `count`
// operations and returns 0, or a library code (and prints what failed on stderr).

/// A raw ESAPI TPM2_Sign loop (ECDSA P-256, SHA-256 scheme, NULL ticket, 32-byte digest) on a key loaded once
/// under the TCG storage primary, authorized with a password session (the cheapest authorization ESAPI has).
int keyseal_floor_tpm_sign(const char *tcti, uint64_t *samples, int count);

/// A raw PKCS#11 loop of C_SignInit + C_Sign (CKM_ECDSA, 32-byte digest) on a P-256 session key pair, on the
/// token labelled `token_label` of `module`, logged in with `pin`.
int keyseal_floor_pkcs11_sign(const char *module, const char *token_label, const char *pin, uint64_t *samples,
                              int count);

#endif
