#!/usr/bin/env bash
# Checks the shipped units: `systemd-analyze verify` of each (with /usr/bin pointed at built binaries, default the
# debug build; or give the directory holding keyseal, keyseald and keyseal-secret-service), and the system
# keyseald's exposure under `systemd-analyze security --offline=true`, which must stay at most 2.0 ("OK" or better).
set -euo pipefail
cd "$(dirname "$0")"
command -v systemd-analyze >/dev/null || { echo "verify: systemd-analyze is not installed" >&2; exit 1; }
bin=${1:-$(cd ../.. && swift build --show-bin-path)}
for program in keyseald keyseal keyseal-secret-service; do
  [ -x "$bin/$program" ] || { echo "verify: no $program in $bin: build it first" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/system" "$tmp/user" "$tmp/runtime" && chmod 0700 "$tmp/runtime"
for unit in keyseald.service; do
  sed "s|/usr/bin/|$bin/|" "$unit" >"$tmp/system/$unit"
done
sed "s|/usr/bin/|$bin/|" keyseald-user.service >"$tmp/user/keyseald.service"
for unit in keyseal-secret-service.service keyseal-ssh-agent.service keyseal-ssh-agent.socket; do
  sed "s|/usr/bin/|$bin/|" "$unit" >"$tmp/user/$unit"
done
systemd-analyze verify --man=no "$tmp/system/keyseald.service"
XDG_RUNTIME_DIR="$tmp/runtime" systemd-analyze --user verify --man=no "$tmp/user/keyseald.service" \
  "$tmp/user/keyseal-secret-service.service" "$tmp/user/keyseal-ssh-agent.socket" "$tmp/user/keyseal-ssh-agent.service"
grep -q "^SystemdService=keyseal-secret-service.service$" org.freedesktop.secrets.service
grep -q "^Exec=/usr/bin/keyseal-secret-service$" org.freedesktop.secrets.service
grep -q "^DBusName=org.freedesktop.secrets$" keyseal.portal
grep -q "^Interfaces=org.freedesktop.impl.portal.Secret$" keyseal.portal
if grep -n "%h/\|/usr/local/" keyseald.service keyseald-user.service keyseal-secret-service.service \
  keyseal-ssh-agent.service org.freedesktop.secrets.service; then
  echo "verify: a unit names a path outside /usr" >&2
  exit 1
fi
exposure=$(cd "$tmp/system" && systemd-analyze security --offline=true --no-pager keyseald.service 2>&1 \
  | sed -n 's/^→ Overall exposure level for keyseald.service: \([0-9.]*\) .*/\1/p')
[ -n "$exposure" ] || { echo "verify: systemd-analyze security printed no exposure" >&2; exit 1; }
awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }' || {
  echo "verify: keyseald.service's exposure is $exposure, above 2.0" >&2
  exit 1
}
echo "verify: the units pass systemd-analyze verify; keyseald.service's exposure is $exposure (at most 2.0)"
