#!/usr/bin/env bash
# The Debian package in a clean root (docs/OPERATIONS.md, "Installing"; CONTRIBUTING.md, "The package"): builds it
# (Scripts/package.sh), checks it with lintian and the shipped units with systemd-analyze, then makes a clean
# Debian 12 root with mmdebstrap (from the package registry: no /opt/swift, nothing of the build tree) and, inside it:
#   - installs a lower-versioned copy of the package with apt (its dependencies pulled from the registry), starts
#     keyseald from the system unit's own ExecStart line as the keyseal user (on swtpm: a TCTI on the command line,
#     which wins over the shipped configuration), adds items, locks, unlocks and finds them;
#   - upgrades to the package (keyseald stopped first, as the unit's restart does), and finds every item again;
#   - lists the PKCS#11 module through p11-kit and its token through the p11-kit proxy (pkcs11-tool);
#   - reaches the Secret Service with secret-tool by D-Bus activation from the shipped service file on a private
#     session bus; renders man pages; loads the bash completion;
#   - purges the package, and checks the store's files are byte-identical and still there.
# Usage: Scripts/test-package.sh [--deb FILE] (default: build it). Needs root (chroot, mounts) and the network.
set -euo pipefail
cd "$(dirname "$0")/.."

deb=""
while [ $# -gt 0 ]; do
  case "$1" in
    --deb) deb=${2:?--deb needs a file}; shift 2 ;;
    *) echo "test-package: unknown argument $1" >&2; exit 64 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "test-package: run as root (chroot and mounts)" >&2; exit 1; }

step() { printf '\ntest-package: %s\n' "$*"; }
fail() { echo "test-package: FAILED: $*" >&2; exit 1; }

if [ -z "$deb" ]; then
  step "building the package"
  deb=$(Scripts/package.sh | tail -n 1)
fi
[ -f "$deb" ] || fail "no package at $deb"
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
version=$(dpkg-deb -f "$deb" Version)

step "lintian $deb"
lintian --fail-on error,warning --tag-display-limit 0 "$deb" || fail "lintian reports the package"

step "the shipped units (systemd-analyze verify and security --offline=true)"
Scripts/systemd/verify.sh "$PWD/.build/package-build/release"

step "what the binaries link (no Swift runtime outside the package)"
extract=$(mktemp -d)
root=$(mktemp -d /tmp/keyseal-clean-root.XXXXXX)
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  # Every process still running inside the root (keyseald, swtpm, the session bus, the bridge).
  local process
  for process in /proc/[0-9]*; do
    [ "$(readlink "$process/root" 2>/dev/null)" = "$root" ] && kill -KILL "${process#/proc/}" 2>/dev/null
  done
  true
  rm -rf "$extract" "$root"
}
trap cleanup EXIT
dpkg-deb -x "$deb" "$extract"
for elf in "$extract"/usr/bin/* "$extract"/usr/libexec/keyseal/* "$extract"/usr/lib/*/pkcs11/*.so; do
  if ldd "$elf" | grep -E "swift|not found"; then fail "$elf links outside Debian's libraries"; fi
done
echo "every binary links only Debian's libraries"

step "a clean Debian 12 root (mmdebstrap --variant=apt)"
started=$(date +%s)
mmdebstrap --variant=apt --quiet \
  --include=ca-certificates,swtpm,swtpm-tools,libtss2-tcti-swtpm0,opensc,libsecret-tools,dbus,man-db,bash-completion,procps,util-linux \
  bookworm "$root" \
  "deb http://deb.debian.org/debian bookworm main" \
  "deb http://deb.debian.org/debian bookworm-updates main" \
  "deb http://deb.debian.org/debian-security bookworm-security main"
echo "made in $(($(date +%s) - started)) s"
[ ! -e "$root/opt/swift" ] || fail "the clean root has /opt/swift"
for dir in proc sys dev dev/pts; do
  mount --bind "/$dir" "$root/$dir"
  mounted+=("$root/$dir")
done
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# The same package under a lower version: the "previous release" the upgrade starts from.
previous=$(mktemp -d)
dpkg-deb -R "$deb" "$previous/tree"
sed -i "s/^Version: .*/Version: ${version}~previous/" "$previous/tree/DEBIAN/control"
dpkg-deb --root-owner-group -b "$previous/tree" "$root/tmp/keyseal-previous.deb" >/dev/null
rm -rf "$previous"
cp "$deb" "$root/tmp/keyseal.deb"

step "apt-get install the previous package"
in_root apt-get update -q >/dev/null   # mmdebstrap leaves the root without package lists
in_root apt-get install -y -q /tmp/keyseal-previous.deb >/dev/null
in_root dpkg-query -W -f='${Version}\n' keyseal | grep -qx "${version}~previous" || fail "the previous package is not installed"
in_root id keyseal | grep -q "(tss)" || fail "the keyseal user is not in group tss: $(in_root id keyseal)"
[ "$(in_root stat -c '%a %U' /var/lib/keyseal)" = "700 keyseal" ] || fail "/var/lib/keyseal is not 0700 keyseal"
in_root keyseal --version | grep -qE "^${version} \([0-9a-f]{12}(-modified)?\)$" \
  || fail "keyseal --version printed: $(in_root keyseal --version)"

step "keyseald as the keyseal user, from the unit's ExecStart, on swtpm"
mkdir -p "$root/var/lib/swtpm-test"
in_root swtpm_setup --tpm2 --tpmstate /var/lib/swtpm-test --createek --overwrite >/dev/null
in_root swtpm socket --tpm2 --tpmstate dir=/var/lib/swtpm-test --flags startup-clear \
  --server type=tcp,port=23321 --ctrl type=tcp,port=23322 --daemon
exec_start=$(sed -n 's/^ExecStart=//p' "$root/lib/systemd/system/keyseald.service")
[ -n "$exec_start" ] || fail "keyseald.service has no ExecStart"
tcti="swtpm:host=127.0.0.1,port=23321"
start_keyseald() {
  install -d -o "$(in_root id -u keyseal)" -g "$(in_root id -g keyseal)" -m 0750 "$root/run/keyseal"
  # shellcheck disable=SC2086 # the unit's command line, split as systemd splits it (no quoting in it)
  chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin setpriv --reuid keyseal --regid keyseal --init-groups \
    $exec_start --tcti "$tcti" >"$root/tmp/keyseald.log" 2>&1 &
  for _ in $(seq 1 300); do
    [ -S "$root/run/keyseal/keyseal.sock" ] && return 0
    sleep 0.1
  done
  cat "$root/tmp/keyseald.log" >&2
  fail "keyseald did not listen within 30 s"
}
stop_keyseald() {
  pkill -TERM -f "^/usr/bin/keyseald --config" || true
  for _ in $(seq 1 300); do
    pgrep -f "^/usr/bin/keyseald --config" >/dev/null || return 0
    sleep 0.1
  done
  fail "keyseald did not stop within 30 s of SIGTERM"
}
start_keyseald
in_root ps -o user= -C keyseald | grep -qx keyseal || fail "keyseald does not run as keyseal"

step "keyseal: passcode, add, lock, unlock, find"
ks() { in_root keyseal --socket /run/keyseal/keyseal.sock "$@"; }
printf 'correct horse\n' | ks passcode set --passcode-stdin
for n in 1 2 3; do
  printf 'secret-%s\n' "$n" | ks add-generic-password -a "account$n" -s clean-root.example --password-stdin
done
ks lock
set +e
ks find-generic-password -a account1 -s clean-root.example -w >/dev/null 2>&1
status=$?
set -e
[ "$status" -eq 36 ] || fail "a find while locked exited $status, not 36"
printf 'correct horse\n' | ks unlock --passcode-stdin
[ "$(ks find-generic-password -a account2 -s clean-root.example -w)" = "secret-2" ] || fail "find after unlock"

step "upgrade to $version (keyseald stopped first, as the unit's restart does)"
stop_keyseald
in_root apt-get install -y -q /tmp/keyseal.deb >/dev/null
in_root dpkg-query -W -f='${Version}\n' keyseal | grep -qx "$version" || fail "the upgrade did not install $version"
start_keyseald
printf 'correct horse\n' | ks unlock --passcode-stdin
for n in 1 2 3; do
  [ "$(ks find-generic-password -a "account$n" -s clean-root.example -w)" = "secret-$n" ] \
    || fail "item $n lost in the upgrade"
done
echo "every item is there after the upgrade"

step "the PKCS#11 module through p11-kit"
in_root p11-kit list-modules 2>/dev/null | grep -q "^keyseal: libkeyseal-pkcs11.so$" || fail "p11-kit does not list the keyseal module"
in_root env KEYSEAL_SOCKET=/run/keyseal/keyseal.sock pkcs11-tool \
  --module /usr/lib/x86_64-linux-gnu/p11-kit-proxy.so -L | grep -qi "keyseal" \
  || fail "pkcs11-tool through the p11-kit proxy lists no Keyseal token"

step "the Secret Service by D-Bus activation (secret-tool on a private session bus)"
bus=$(in_root env KEYSEAL_SOCKET=/run/keyseal/keyseal.sock dbus-daemon --session --fork --print-address=1)
[ -n "$bus" ] || fail "no session bus"
printf 'from secret-tool' | in_root env DBUS_SESSION_BUS_ADDRESS="$bus" \
  secret-tool store --label="clean root" service clean-root.example user dana
[ "$(in_root env DBUS_SESSION_BUS_ADDRESS="$bus" secret-tool lookup service clean-root.example user dana)" \
  = "from secret-tool" ] || fail "secret-tool lookup"
pkill -f "dbus-daemon --session --fork" || true

step "man pages and the bash completion"
for page in keyseal keyseald keyseal-secret-service; do
  in_root man -P cat "$page" 2>/dev/null | grep -q "$page" || fail "man $page does not render"
done
in_root bash -c '. /usr/share/bash-completion/bash_completion; _completion_loader keyseal; complete -p keyseal' \
  | grep -q keyseal || fail "the bash completion does not load"

step "purge: the store stays, byte for byte"
stop_keyseald
before=$(cd "$root/var/lib/keyseal" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
in_root apt-get purge -y -q keyseal >/dev/null
[ ! -e "$root/usr/bin/keyseald" ] || fail "purge left /usr/bin/keyseald"
[ ! -e "$root/etc/keyseal/keyseald.conf" ] || fail "purge left the configuration file"
after=$(cd "$root/var/lib/keyseal" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
[ -n "$before" ] && [ "$before" = "$after" ] || fail "the store's files changed in the purge"
echo "the store's $(printf '%s\n' "$before" | wc -l) files are unchanged after the purge"

printf '\ntest-package: the package installs, upgrades and purges in a clean Debian 12 root\n'
