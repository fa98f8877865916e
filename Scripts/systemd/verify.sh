#!/usr/bin/env bash
# Checks the units with systemd-analyze verify, with ExecStart pointed at the built keyseald.
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
bridge=$(cd ../.. && swift build --show-bin-path)/keyseal-secret-service
[ -x "$bridge" ] || { echo "verify: build keyseal-secret-service first" >&2; exit 1; }
sed "s|%h/.local/bin/keyseal-secret-service|$bridge|" keyseal-secret-service.service >"$tmp/keyseal-secret-service.service"
XDG_RUNTIME_DIR="$tmp/runtime" systemd-analyze --user verify "$tmp/keyseal-secret-service.service"
agent=$(cd ../.. && swift build --show-bin-path)/keyseal
[ -x "$agent" ] || { echo "verify: build keyseal first" >&2; exit 1; }
sed "s|%h/.local/bin/keyseal|$agent|" keyseal-ssh-agent.service >"$tmp/keyseal-ssh-agent.service"
cp keyseal-ssh-agent.socket "$tmp/keyseal-ssh-agent.socket"
XDG_RUNTIME_DIR="$tmp/runtime" systemd-analyze --user verify "$tmp/keyseal-ssh-agent.socket" "$tmp/keyseal-ssh-agent.service"
grep -q "^SystemdService=keyseal-secret-service.service$" org.freedesktop.secrets.service
grep -q "^DBusName=org.freedesktop.secrets$" keyseal.portal
grep -q "^Interfaces=org.freedesktop.impl.portal.Secret$" keyseal.portal
echo "verify: the units pass systemd-analyze verify"
