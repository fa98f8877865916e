#!/usr/bin/env bash
# Checks both units with systemd-analyze verify, with ExecStart pointed at the built keyseald.
set -euo pipefail
cd "$(dirname "$0")"
command -v systemd-analyze >/dev/null || { echo "verify: systemd-analyze is not installed; skipped"; exit 0; }
bin=$(cd ../.. && swift build --show-bin-path)/keyseald
[ -x "$bin" ] || { echo "verify: build keyseald first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|/usr/local/bin/keyseald|$bin|" keyseald.service >"$tmp/keyseald.service"
sed "s|%h/.local/bin/keyseald|$bin|" keyseald-user.service >"$tmp/keyseald-user.service"
systemd-analyze verify "$tmp/keyseald.service"
mkdir -p "$tmp/runtime" && chmod 0700 "$tmp/runtime"
XDG_RUNTIME_DIR="$tmp/runtime" systemd-analyze --user verify "$tmp/keyseald-user.service"
echo "verify: both units pass systemd-analyze verify"
