#!/usr/bin/env bash
# Installs the PKCS#11 module (run as root): libkeyseal-pkcs11.so into p11-kit's module directory and
# keyseal.module into /usr/share/p11-kit/modules/, so that p11-kit, GnuTLS, OpenSSL's engine and the p11-kit proxy
# find it. Builds the release module first unless --no-build. docs/OPERATIONS.md, "The PKCS#11 module".
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != "--no-build" ]; then
  swift build -c release --product keyseal-pkcs11
fi
library=.build/release/libkeyseal-pkcs11.so
module_dir=$(pkg-config --variable=p11_module_path p11-kit-1 2>/dev/null || echo /usr/lib/x86_64-linux-gnu/pkcs11)
config_dir=$(pkg-config --variable=p11_module_configs p11-kit-1 2>/dev/null || echo /usr/share/p11-kit/modules)
install -d -m 0755 "$module_dir" "$config_dir"
install -m 0644 "$library" "$module_dir/libkeyseal-pkcs11.so"
install -m 0644 Scripts/pkcs11/keyseal.module "$config_dir/keyseal.module"
echo "installed $module_dir/libkeyseal-pkcs11.so and $config_dir/keyseal.module"
