// Linux calls the daemon (and the test fixtures) need that Swift cannot import directly (variadic prctl, the
// SO_PEERCRED struct, glibc's _GNU_SOURCE-only calls).
#ifndef KEYSEAL_SYS_SHIM_H
#define KEYSEAL_SYS_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>

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
/// close(2), likewise.
extern int close(int fd);

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

#ifndef SO_COOKIE
#define SO_COOKIE 57
#endif
/// `SO_COOKIE`: a socket's 64-bit identifier, unique for the system's uptime.
static const int keyseal_so_cookie = SO_COOKIE;

/// A NETLINK_SOCK_DIAG socket (close-on-exec) for the network namespace of the Unix sockets it will be asked about:
/// the caller's own when `netns` is -1, else the namespace `netns` (a descriptor of /proc/PID/ns/net) — made on a
/// thread of its own that enters that namespace, so no thread of the caller changes namespace. The socket, or -1.
static inline void *keyseal_diag_socket_thread(void *argument) {
    int *io = argument; /* [0] the namespace in, [1] the socket out */
    io[1] = -1;
    if (syscall(SYS_setns, io[0], 0x40000000 /* CLONE_NEWNET */) != 0) return 0;
    io[1] = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    return 0;
}
static inline int keyseal_sock_diag_socket(int netns) {
    if (netns < 0) return socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    int io[2] = {netns, -1};
    pthread_t thread;
    if (pthread_create(&thread, 0, keyseal_diag_socket_thread, io) != 0) return -1;
    pthread_join(thread, 0);
    return io[1];
}

/// Asks `diag` (``keyseal_sock_diag_socket``) for the Unix socket of inode `inode` in its namespace, which must
/// have the cookie `cookie` (`SO_COOKIE`) unless it is ~0: 0 and `*peer` set to its peer's inode (0 when it has
/// none), or -1 when there is no such socket. One exact request, not a dump: its cost does not grow with the
/// number of sockets on the system.
static inline int keyseal_unix_diag_peer(int diag, uint32_t inode, uint64_t cookie, uint32_t *peer) {
    struct {
        struct nlmsghdr header;
        struct unix_diag_req request;
    } message;
    memset(&message, 0, sizeof(message));
    message.header.nlmsg_len = sizeof(message);
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.request.sdiag_family = AF_UNIX;
    message.request.udiag_states = ~0u;
    message.request.udiag_ino = inode;
    message.request.udiag_show = UDIAG_SHOW_PEER;
    message.request.udiag_cookie[0] = (uint32_t)cookie;
    message.request.udiag_cookie[1] = (uint32_t)(cookie >> 32);
    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof(kernel));
    kernel.nl_family = AF_NETLINK;
    if (sendto(diag, &message, sizeof(message), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) return -1;
    char buffer[1024] __attribute__((aligned(4)));
    ssize_t count = recv(diag, buffer, sizeof(buffer), 0);
    if (count <= 0) return -1;
    struct nlmsghdr *header = (struct nlmsghdr *)buffer;
    if (!NLMSG_OK(header, (size_t)count) || header->nlmsg_type != SOCK_DIAG_BY_FAMILY) return -1;
    if (header->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg))) return -1;
    struct unix_diag_msg *socketInfo = NLMSG_DATA(header);
    if (socketInfo->udiag_ino != inode) return -1;
    *peer = 0;
    char *attribute = (char *)(socketInfo + 1);
    char *end = (char *)header + header->nlmsg_len;
    while (attribute + sizeof(struct nlattr) <= end) {
        struct nlattr *field = (struct nlattr *)attribute;
        if (field->nla_len < sizeof(struct nlattr) || attribute + field->nla_len > end) break;
        if (field->nla_type == UNIX_DIAG_PEER && field->nla_len >= NLA_HDRLEN + sizeof(uint32_t)) {
            memcpy(peer, attribute + NLA_HDRLEN, sizeof(uint32_t));
        }
        attribute += NLA_ALIGN(field->nla_len);
    }
    return 0;
}

/// pipe2(2) with O_CLOEXEC: both ends close-on-exec from the start, so no child spawned meanwhile by another thread
/// inherits them (glibc declares pipe2 only with _GNU_SOURCE).
static inline int keyseal_pipe_cloexec(int descriptors[2]) {
    return (int)syscall(SYS_pipe2, descriptors, O_CLOEXEC);
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34): the child closes every descriptor from `from` on.
/// Declared here with the actions as an untyped pointer: <spawn.h> declares it only with _GNU_SOURCE.
extern int posix_spawn_file_actions_addclosefrom_np(void *actions, int from);

/// posix_spawn attributes for a child in a process group of its own (its pid), with no signal blocked and every signal
/// at its default whatever the parent ignores or blocks: the one setup of the package's and the tests' spawns.
static inline int keyseal_spawnattr_own_group(posix_spawnattr_t *attributes) {
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    int result = posix_spawnattr_setsigmask(attributes, &none);
    if (result == 0) result = posix_spawnattr_setsigdefault(attributes, &all);
    if (result == 0) result = posix_spawnattr_setpgroup(attributes, 0);
    if (result == 0)
        result = posix_spawnattr_setflags(attributes,
                                          POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    return result;
}

/// Makes the process non-dumpable (no core files, no ptrace by other processes of the same user).
/// Whether child `pid` has exited, without reaping it (WNOWAIT: while it is a zombie its process group id cannot be
/// reused, so the group may still be signalled): 1 exited, 0 running, -1 not a child to wait for (already reaped,
/// e.g. when the process ignores SIGCHLD).
static inline int keyseal_child_exited(int32_t pid) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    int result;
    do {
        result = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT);
    } while (result == -1 && errno == EINTR);
    if (result == -1) return -1;
    return info.si_pid == pid ? 1 : 0;
}

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
