// Freed memory is wiped in the executables that link this target (keyseald, keyseal, keyseal-secret-service and the
// test processes): free, realloc and reallocarray defined here take the place of the C library's for the whole
// process — the executable's definitions come first in the dynamic linker's lookup, so tpm2-tss, OpenSSL, GLib,
// SQLite and the Swift runtime all call them. Each clears a block's usable size before glibc gets it back, so that
// no secret a library copied and freed without wiping (tpm2-tss keeps a session's HMAC key, sessionKey ‖ authValue,
// in memory it frees unwiped) outlives its use in the heap (docs/SECURITY-MODEL.md, "Prepared keys";
// docs/ARCHITECTURE.md, "Freed memory"). A heap block only moves by realloc here: glibc's realloc would free the old
// block itself, unwiped.

#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keyseal_heap_wipe.h"

// glibc's own allocator entry points, which the definitions below call once a block is wiped.
extern void *__libc_malloc(size_t size);
extern void __libc_free(void *block);
extern void *__libc_realloc(void *block, size_t size);

static int wiped_frees;

void free(void *block) {
    if (block == NULL) return;
    explicit_bzero(block, malloc_usable_size(block));
    __atomic_store_n(&wiped_frees, 1, __ATOMIC_RELAXED);
    __libc_free(block);
}

// Whether glibc holds `block` in a mapping of its own (the IS_MMAPPED bit of the chunk's size word): such a block is
// moved by mremap or handed back to the kernel whole, so glibc's realloc leaves no copy of it on the heap.
static int held_in_own_mapping(void *block) { return (((size_t *)block)[-1] & 2) != 0; }

void *realloc(void *block, size_t size) {
    if (block == NULL) return __libc_malloc(size);
    if (size == 0) {
        free(block);
        return NULL;
    }
    if (held_in_own_mapping(block)) return __libc_realloc(block, size);
    size_t usable = malloc_usable_size(block);
    if (size <= usable) {
        // Kept in place: a shrink leaves the tail inside the block (wiped when the block is freed).
        return block;
    }
    // Moved here, never by glibc. With room to grow: a caller that grows a block a little at a time (which glibc
    // would mostly extend in place) then copies it once per doubling, not at each step (measured: 64-byte steps to
    // 12.8 KB, 2,000 times, 0.018 s with glibc's realloc, 0.51 s copying at each step).
    size_t target = (usable <= SIZE_MAX / 2 && size < 2 * usable) ? 2 * usable : size;
    void *moved = __libc_malloc(target);
    if (moved == NULL && target != size) moved = __libc_malloc(size);
    if (moved == NULL) return NULL;  // errno is ENOMEM; the old block stays the caller's
    memcpy(moved, block, usable);
    free(block);
    return moved;
}

void *reallocarray(void *block, size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(block, total);
}

int keyseal_heap_wipe_active(void) {
    // A block freed through the C library's own entry point (a library's call) reaches `free` above only when
    // the interposition holds: free one through a call the compiler cannot see as ours.
    void *(*volatile allocate)(size_t) = malloc;
    void (*volatile release)(void *) = free;
    void *probe = allocate(16);
    if (probe == NULL) return 0;
    __atomic_store_n(&wiped_frees, 0, __ATOMIC_RELAXED);
    release(probe);
    return __atomic_load_n(&wiped_frees, __ATOMIC_RELAXED);
}
