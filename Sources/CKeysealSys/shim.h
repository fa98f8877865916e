// Linux calls the daemon needs that Swift cannot import directly (variadic prctl, the SO_PEERCRED struct).
#ifndef KEYSEAL_SYS_SHIM_H
#define KEYSEAL_SYS_SHIM_H

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/// The layout of Linux's `struct ucred` (SO_PEERCRED), declared here because glibc hides it without _GNU_SOURCE.
typedef struct {
    int32_t pid;
    uint32_t uid;
    uint32_t gid;
} keyseal_peer_credentials;

static const int keyseal_so_peercred = SO_PEERCRED;

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of the peer's process as of connect(); ENOPROTOOPT on older kernels.
static const int keyseal_so_peerpidfd = SO_PEERPIDFD;

/// syscall(2), declared here rather than through <unistd.h>, whose declarations belong to Glibc's module.
extern long syscall(long number, ...);

/// pidfd_open(2) (Linux 5.3), close-on-exec; -1 and errno on failure.
static inline int keyseal_pidfd_open(int32_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

/// A path's mode (stat, or lstat when `follow` is 0): 0 and `*mode` set, or -1 and errno. Swift code never sees
/// `struct stat`, whose defining Clang module depends on which modules a compile job loaded first.
static inline int keyseal_file_mode(const char *path, int follow, uint32_t *mode) {
    struct stat info;
    int result = follow ? stat(path, &info) : lstat(path, &info);
    if (result == 0) *mode = (uint32_t)info.st_mode;
    return result;
}

/// A path's device and inode (stat, following links; for /proc/PID/exe, the file the process runs, whatever mount
/// namespace it was reached through): 0 and both set, or -1 and errno.
static inline int keyseal_file_id(const char *path, uint64_t *device, uint64_t *inode) {
    struct stat info;
    int result = stat(path, &info);
    if (result == 0) {
        *device = (uint64_t)info.st_dev;
        *inode = (uint64_t)info.st_ino;
    }
    return result;
}

/// Makes the process non-dumpable (no core files, no ptrace by other processes of the same user).
static inline int keyseal_set_nondumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

/// Sets the core file size limit to zero, soft and hard.
static inline int keyseal_disable_core_files(void) {
    struct rlimit none = {0, 0};
    return setrlimit(RLIMIT_CORE, &none);
}

/// Returns freed heap pages of every malloc arena to the system (glibc).
static inline int keyseal_malloc_trim(void) { return malloc_trim(0); }

/// Keeps blocks up to `mmap_threshold` bytes on the heap and up to `trim_threshold` free bytes at its top, instead of
/// glibc's defaults (128 KiB, 256 KiB, raised only as blocks are freed): a 1 MiB value's buffers then reuse resident
/// pages instead of mapping fresh zero pages (a page fault each 4 KiB) at every request. At most `arena_max` arenas
/// (glibc's default: 8 per core, one per thread that allocates): `malloc_trim` returns the free top of the main
/// arena but only the free chunks of the others, so each other arena keeps up to `trim_threshold` resident.
/// Returns 0 on failure.
static inline int keyseal_tune_heap(int mmap_threshold, int trim_threshold, int arena_max) {
    return mallopt(M_MMAP_THRESHOLD, mmap_threshold) && mallopt(M_TRIM_THRESHOLD, trim_threshold)
        && mallopt(M_ARENA_MAX, arena_max);
}

/// Allocation functions for the daemon's network buffers, which carry passcodes and secrets: a block is zeroed in
/// full (its usable size) before it is freed, and growing a block moves it to a new one and zeroes the old,
/// so no freed heap memory keeps those bytes. They abort on exhaustion, as the default allocator does.
static inline void *keyseal_wiping_malloc(size_t size) {
    void *block = malloc(size == 0 ? 1 : size);
    if (block == NULL) abort();
    return block;
}

static inline void keyseal_wiping_free(void *block) {
    if (block == NULL) return;
    explicit_bzero(block, malloc_usable_size(block));
    free(block);
}

static inline void *keyseal_wiping_realloc(void *block, size_t old_size, size_t new_size) {
    void *grown = keyseal_wiping_malloc(new_size);
    if (block != NULL) {
        memcpy(grown, block, old_size < new_size ? old_size : new_size);
        keyseal_wiping_free(block);
    }
    return grown;
}

#endif
