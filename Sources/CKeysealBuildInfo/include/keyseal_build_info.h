// The commit a release binary was built from, for `keyseal --version` and `keyseald --version`.
#ifndef KEYSEAL_BUILD_INFO_H
#define KEYSEAL_BUILD_INFO_H

/// A NUL-terminated string: "development build", or the commit `Scripts/package.sh` wrote into the binary.
const char *keyseal_build_commit(void);

#endif
