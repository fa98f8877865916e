#!/usr/bin/env bash
# A first look at Keyseal on a fresh Debian machine: installs what it needs, builds, starts a private swtpm,
# and tours an embedded store sealed by it (passcode, add, lock, a refused find, unlock, find, status).
set -euo pipefail
cd "$(dirname "$0")/.."

bash Scripts/bootstrap.sh
export PATH="/opt/swift/usr/bin:$PATH"

echo "demo: building"
swift build --product keyseal-tour >/dev/null

work=$(mktemp -d /tmp/keyseal-demo.XXXXXX)
chmod 700 "$work"
mkdir -m 700 "$work/tpm"
cleanup() {
  [ -n "${swtpm_pid:-}" ] && kill "$swtpm_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "demo: starting swtpm in $work/tpm"
swtpm socket --tpm2 --tpmstate dir="$work/tpm" \
  --server type=unixio,path="$work/tpm/swtpm.sock" --ctrl type=unixio,path="$work/tpm/swtpm.sock.ctrl" \
  --flags not-need-init,startup-clear --log file="$work/tpm/swtpm.log" &
swtpm_pid=$!
for _ in $(seq 1 100); do [ -S "$work/tpm/swtpm.sock" ] && break; sleep 0.05; done

"$(swift build --show-bin-path)/keyseal-tour" --store "$work/store" --tcti "swtpm:path=$work/tpm/swtpm.sock"
echo
echo "demo: done (the store and the swtpm state are removed)"
