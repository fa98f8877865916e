#!/usr/bin/env bash
# Installs the Debian packages Keyseal builds and tests with (run as root, or with sudo available).
set -euo pipefail

packages=(
  pkg-config libsqlite3-dev sqlite3 libargon2-dev libssl-dev
  libtss2-dev tpm2-tools swtpm swtpm-tools
  softhsm2 p11-kit libp11-kit-dev gnutls-bin
  bsdutils util-linux
  tpm2-abrmd libtss2-tcti-tabrmd0 dbus libtpm2-pkcs11-1 libtpm2-pkcs11-tools
  qemu-system-x86 busybox-static cpio kmod e2fsprogs
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "bootstrap: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "bootstrap: done"
