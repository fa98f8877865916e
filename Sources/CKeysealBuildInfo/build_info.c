// The commit lives in an ELF section of its own, 64 bytes, that `Scripts/package.sh` fills in the linked binaries
// (`objcopy --update-section .keyseal_commit=FILE`), so that the commit is in the package without being a compiler
// flag: a flag that changes with every commit would make every release build start from nothing.
#include "keyseal_build_info.h"

__attribute__((section(".keyseal_commit"), used, aligned(1)))
const volatile char keyseal_commit[64] = "development build";

const char *keyseal_build_commit(void) {
    return (const char *)keyseal_commit;
}
