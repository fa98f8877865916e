#!/usr/bin/env bash
# The PKCS#11 module's signing cost (release build, medians): C_SignInit + C_Sign (CKM_ECDSA, 32-byte digest) on a
# loaded session by a C program through libkeyseal-pkcs11.so, next to Keyseal's own wire sign of the same digest
# (keyseal-wire-probe sign-bench: one connection, the request the module sends), in the same run, alternating, on
# keyseald with swtpm (`--backend swtpm`) and with SoftHSM2. Target: the module at least 80 % of the wire's rate.
# Writes bench-results/pkcs11-DATE.txt (or --output DIR). Options: --count N (signatures per round, default 300),
# --rounds N (default 3), --scratch-path DIR (SwiftPM's build directory, default .build).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

output="bench-results"
count=300
rounds=3
scratch=()
while [ $# -gt 0 ]; do
  case "$1" in
    --output) output="$2"; shift 2 ;;
    --count) count="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --scratch-path) scratch=(--scratch-path "$2"); shift 2 ;;
    *) echo "bench-pkcs11: unknown option $1" >&2; exit 64 ;;
  esac
done
mkdir -p "$output"
output=$(cd "$output" && pwd)

for product in keyseald keyseal keyseal-wire-probe keyseal-pkcs11-probe keyseal-pkcs11; do
  swift build -c release "${scratch[@]}" --product "$product" >/dev/null
done
bin=$(swift build -c release "${scratch[@]}" --show-bin-path)
work=$(mktemp -d)
daemon_pid=""
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

start_daemon() { # BACKEND-ARGUMENTS…
  local socket="$work/run/keyseal.sock"
  rm -rf "$work/store" "$work/run"
  "$bin/keyseald" --store "$work/store" --socket "$socket" --log-level error "$@" >"$work/keyseald.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 1 600); do
    "$bin/keyseal" --socket "$socket" status >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  cat "$work/keyseald.log" >&2
  echo "bench-pkcs11: keyseald did not start" >&2
  exit 1
}

stop_daemon() {
  kill "$daemon_pid"
  wait "$daemon_pid" 2>/dev/null || true
  daemon_pid=""
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

report="$output/pkcs11-$(date -u +%Y%m%dT%H%M%SZ).txt"
{
  echo "PKCS#11 module C_Sign vs Keyseal's wire sign (CKM_ECDSA, P-256 hardware key, 32-byte digest)"
  echo "release build; $rounds rounds of $count signatures each, alternating; medians of the rounds' medians"
  echo "host: $(nproc) CPUs, $(uname -r); $(date -u)"
} >"$report"

run_backend() { # NAME
  local name=$1 socket="$work/run/keyseal.sock" module=() wire=()
  "$bin/keyseal" --socket "$socket" create-key --tag bench -l bench --hardware >/dev/null
  for _ in $(seq 1 "$rounds"); do
    module+=("$(KEYSEAL_SOCKET=$socket "$bin/keyseal-pkcs11-probe" "$bin/libkeyseal-pkcs11.so" bench bench "$count" | sed -n 's/^median_us=//p')")
    wire+=("$("$bin/keyseal-wire-probe" "$socket" sign-bench bench "$count" | sed -n 's/^median_us=//p')")
  done
  local m w
  m=$(printf '%s\n' "${module[@]}" | median)
  w=$(printf '%s\n' "${wire[@]}" | median)
  local ratio
  ratio=$(awk -v m="$m" -v w="$w" 'BEGIN { printf "%.0f", 100 * w / m }')
  local verdict="met"
  [ "$ratio" -lt 80 ] && verdict="MISSED"
  echo "$name: module C_Sign median ${m} µs, wire sign median ${w} µs: module at ${ratio} % of the wire's rate (target >= 80 %: $verdict)" | tee -a "$report"
}

start_daemon --backend swtpm
run_backend swtpm
stop_daemon

export SOFTHSM2_CONF="$work/softhsm2.conf"
mkdir -p "$work/tokens"
printf 'directories.tokendir = %s\nobjectstore.backend = file\n' "$work/tokens" >"$SOFTHSM2_CONF"
softhsm2-util --init-token --free --label bench --so-pin 12345678 --pin 87654321 >/dev/null
printf '87654321' >"$work/pin"
chmod 600 "$work/pin"
softhsm=$(ls /usr/lib/softhsm/libsofthsm2.so /usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so 2>/dev/null | head -1)
start_daemon --backend pkcs11 --pkcs11-module "$softhsm" --pkcs11-token bench --pkcs11-pin-file "$work/pin"
run_backend softhsm2
stop_daemon
echo "written to $report"
