// The TPM's own ECDSA sign time, the floor of every P-256 signature a PKCS#11 module makes in it
// (Scripts/bench-pkcs11.sh): ESAPI TPM2_Sign (ECDSA, SHA-256, 32-byte digest) on a loaded P-256 primary key over a
// password session, the cheapest authorization a TPM command has, through the TCTI given (tpm2-abrmd's in the
// benchmark). Built by the script with the system's C compiler:
//
//   cc -O2 -o bench-tpm-sign Scripts/bench_tpm_sign.c -ltss2-esys -ltss2-tctildr
//   bench-tpm-sign TCTI N        N signatures after a warm-up: prints "median_us=…"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static TSS2_RC sign(ESYS_CONTEXT *context, ESYS_TR key) {
    TPM2B_DIGEST digest = {.size = 32};
    for (int i = 0; i < 32; i++) digest.buffer[i] = (unsigned char)i;
    TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_ECDSA, .details.ecdsa.hashAlg = TPM2_ALG_SHA256};
    TPMT_TK_HASHCHECK ticket = {.tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL};
    TPMT_SIGNATURE *signature = NULL;
    TSS2_RC rc = Esys_Sign(
        context, key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &digest, &scheme, &ticket, &signature);
    Esys_Free(signature);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 3 || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: bench-tpm-sign TCTI N\n");
        return 64;
    }
    int count = atoi(argv[2]);
    TSS2_TCTI_CONTEXT *tcti = NULL;
    ESYS_CONTEXT *context = NULL;
    TSS2_RC rc = Tss2_TctiLdr_Initialize(argv[1], &tcti);
    if (rc == TSS2_RC_SUCCESS) rc = Esys_Initialize(&context, tcti, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        printf("rc=0x%x initialize\n", rc);
        return 1;
    }
    // An unrestricted P-256 signing key (no scheme of its own, empty authorization) in the null hierarchy.
    TPM2B_PUBLIC template = {0};
    template.publicArea.type = TPM2_ALG_ECC;
    template.publicArea.nameAlg = TPM2_ALG_SHA256;
    template.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
        TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_NODA;
    template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    ESYS_TR key = ESYS_TR_NONE;
    rc = Esys_CreatePrimary(context, ESYS_TR_RH_NULL, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
        &template, &outside, &pcrs, &key, NULL, NULL, NULL, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        printf("rc=0x%x create\n", rc);
        return 1;
    }
    double *times = calloc((size_t)count, sizeof(double));
    int result = 0;
    for (int i = -10; i < count; i++) {
        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        rc = sign(context, key);
        clock_gettime(CLOCK_MONOTONIC, &end);
        if (rc != TSS2_RC_SUCCESS) {
            printf("rc=0x%x sign\n", rc);
            result = 1;
            break;
        }
        // The first ten are the warm-up.
        if (i >= 0) {
            times[i] = (double)(end.tv_sec - start.tv_sec) * 1e6 + (double)(end.tv_nsec - start.tv_nsec) / 1e3;
        }
    }
    if (result == 0) {
        qsort(times, (size_t)count, sizeof(double), compare);
        printf("median_us=%.1f\n", times[count / 2]);
    }
    free(times);
    Esys_FlushContext(context, key);
    Esys_Finalize(&context);
    Tss2_TctiLdr_Finalize(&tcti);
    return result;
}
