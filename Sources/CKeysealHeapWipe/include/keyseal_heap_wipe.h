#ifndef KEYSEAL_HEAP_WIPE_H
#define KEYSEAL_HEAP_WIPE_H

/// Whether this process's free, realloc and reallocarray are the wiping ones of CKeysealHeapWipe (heap_wipe.c):
/// 1 when the executable links them and the C library's calls reach them.
int keyseal_heap_wipe_active(void);

#endif
