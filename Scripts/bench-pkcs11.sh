#!/usr/bin/env bash
# The PKCS#11 module's signing cost (release build, medians): C_SignInit + C_Sign (CKM_ECDSA, 32-byte digest) on a
# loaded session by a C program through libkeyseal-pkcs11.so, next to Keyseal's own wire sign of the same digest
# (keyseal-wire-probe sign-bench: one connection, the request the module sends), in the same run, alternating, on
# keyseald with swtpm (`--backend swtpm`) and with SoftHSM2. Target: the module at least 80 % of the wire's rate.
# Then beside the peer: one swtpm behind tpm2-abrmd on a private D-Bus session bus, keyseald on it
# (`--tcti tabrmd:bus_type=session`) with a hardware P-256 key, and a tpm2-pkcs11 token in the same TPM with a P-256
# key of its own (tpm2_ptool addkey --algorithm=ecc256); the same C loop, logged in, through libkeyseal-pkcs11.so
# and through libtpm2_pkcs11.so, alternating, next to the TPM's own sign time (bench-tpm-sign: ESAPI TPM2_Sign over a
# password session through the same tpm2-abrmd, Scripts/bench_tpm_sign.c), the floor of both.
# Target: the module at least 1.5x tpm2-pkcs11's rate.
# Writes bench-results/pkcs11-DATE.txt (or --output DIR). Options: --count N (signatures per round, default 300),
# --rounds N (default 3), --only module|peer (one of the two parts), --scratch-path DIR (SwiftPM's build directory,
# default .build).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

output="bench-results"
count=300
rounds=3
only=""
scratch=()
while [ $# -gt 0 ]; do
  case "$1" in
    --output) output="$2"; shift 2 ;;
    --count) count="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --scratch-path) scratch=(--scratch-path "$2"); shift 2 ;;
    *) echo "bench-pkcs11: unknown option $1" >&2; exit 64 ;;
  esac
done
case "$only" in "" | module | peer) ;; *) echo "bench-pkcs11: --only module or --only peer" >&2; exit 64 ;; esac
mkdir -p "$output"
output=$(cd "$output" && pwd)

for product in keyseald keyseal keyseal-wire-probe keyseal-pkcs11-probe keyseal-pkcs11; do
  swift build -c release "${scratch[@]}" --product "$product" >/dev/null
done
bin=$(swift build -c release "${scratch[@]}" --show-bin-path)
work=$(mktemp -d)
daemon_pid=""
peer_pids=()
cleanup() {
  set +e # a killed process's status must not end the cleanup
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  # tpm2-abrmd first (SIGKILL: it may sit in a D-Bus call and not act on SIGTERM), then the bus, then swtpm.
  local pid
  for pid in "${peer_pids[@]}"; do kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
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
  echo "PKCS#11 module C_Sign vs Keyseal's wire sign, and vs tpm2-pkcs11 on one TPM (CKM_ECDSA, P-256 hardware key,"
  echo "32-byte digest); release build; $rounds rounds of $count signatures each after a warm-up, alternating; medians"
  echo "of the rounds' medians"
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

if [ "$only" != peer ]; then
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
fi

# Beside the peer: keyseald and tpm2-pkcs11 on one swtpm behind one tpm2-abrmd.
run_peer() {
  local peer="$work/peer" tcti="tabrmd:bus_type=session"
  local tpm2pkcs11=/usr/lib/x86_64-linux-gnu/pkcs11/libtpm2_pkcs11.so
  [ -f "$tpm2pkcs11" ] || { echo "bench-pkcs11: $tpm2pkcs11 missing (Scripts/bootstrap.sh)" >&2; exit 1; }
  mkdir -p "$peer/tpm" "$peer/tpm2-pkcs11"
  chmod 700 "$peer" "$peer/tpm2-pkcs11"
  cc -O2 -o "$work/bench-tpm-sign" Scripts/bench_tpm_sign.c -ltss2-esys -ltss2-tctildr
  swtpm socket --tpm2 --tpmstate "dir=$peer/tpm" --server "type=unixio,path=$peer/swtpm.sock" \
    --ctrl "type=unixio,path=$peer/swtpm.sock.ctrl" --flags not-need-init,startup-clear >"$peer/swtpm.log" 2>&1 &
  peer_pids=($! "${peer_pids[@]}")
  dbus-daemon --session --nofork --nopidfile --address="unix:path=$peer/bus" >/dev/null 2>&1 &
  peer_pids=($! "${peer_pids[@]}")
  for _ in $(seq 1 200); do [ -S "$peer/bus" ] && [ -S "$peer/swtpm.sock" ] && break; sleep 0.05; done
  export DBUS_SESSION_BUS_ADDRESS="unix:path=$peer/bus" TSS2_LOG=all+NONE TPM2TOOLS_TCTI=$tcti
  export TPM2_PKCS11_TCTI=$tcti TPM2_PKCS11_STORE="$peer/tpm2-pkcs11" TPM2_PKCS11_LOG_LEVEL=0
  # --allow-root: refused otherwise when the benchmark runs as root.
  tpm2-abrmd --session --allow-root --tcti="swtpm:path=$peer/swtpm.sock" >"$peer/abrmd.log" 2>&1 &
  peer_pids=($! "${peer_pids[@]}")
  local up=""
  for _ in $(seq 1 300); do
    tpm2_getrandom -T "$tcti" 4 >/dev/null 2>&1 && { up=1; break; }
    sleep 0.05
  done
  [ -n "$up" ] || { cat "$peer/abrmd.log" >&2; echo "bench-pkcs11: tpm2-abrmd did not answer" >&2; exit 1; }

  local pin=user-pin-1234
  tpm2_ptool init >/dev/null
  tpm2_ptool addtoken --pid=1 --sopin=so-pin-5678 --userpin="$pin" --label=peer >/dev/null
  tpm2_ptool addkey --algorithm=ecc256 --label=peer --userpin="$pin" --key-label=bench >/dev/null

  start_daemon --backend tpm --tcti "$tcti"
  local socket="$work/run/keyseal.sock" module=() peer_sign=() floor=()
  "$bin/keyseal" --socket "$socket" create-key --tag bench -l bench --hardware >/dev/null
  for _ in $(seq 1 "$rounds"); do
    # Keyseal's PIN is the store's passcode; this store has none, and the module takes any PIN then.
    module+=("$(KEYSEAL_SOCKET=$socket "$bin/keyseal-pkcs11-probe" "$bin/libkeyseal-pkcs11.so" bench bench "$count" \
      unused | sed -n 's/^median_us=//p')")
    peer_sign+=("$(KEYSEAL_PROBE_TOKEN=peer "$bin/keyseal-pkcs11-probe" "$tpm2pkcs11" bench bench "$count" "$pin" \
      | sed -n 's/^median_us=//p')")
    floor+=("$("$work/bench-tpm-sign" "$tcti" "$count" | sed -n 's/^median_us=//p')")
  done
  stop_daemon
  local m p f
  m=$(printf '%s\n' "${module[@]}" | median)
  p=$(printf '%s\n' "${peer_sign[@]}" | median)
  f=$(printf '%s\n' "${floor[@]}" | median)
  if [ -z "$m" ] || [ -z "$p" ] || [ -z "$f" ]; then
    echo "bench-pkcs11: a peer measurement failed (module: ${module[*]}; tpm2-pkcs11: ${peer_sign[*]}; floor: ${floor[*]})" >&2
    exit 1
  fi
  local ratio verdict="met"
  ratio=$(awk -v m="$m" -v p="$p" 'BEGIN { printf "%.2f", p / m }')
  awk -v r="$ratio" 'BEGIN { exit !(r < 1.5) }' && verdict="MISSED"
  {
    echo "swtpm behind tpm2-abrmd: module C_Sign median ${m} µs, tpm2-pkcs11 C_Sign median ${p} µs: module at ${ratio}x tpm2-pkcs11's rate (target >= 1.5x: $verdict)"
    echo "  floor (the TPM's own ECDSA sign, ESAPI TPM2_Sign over a password session through the same tpm2-abrmd): median ${f} µs; module $(awk -v m="$m" -v f="$f" 'BEGIN { printf "%.2f", m / f }')x the floor, tpm2-pkcs11 $(awk -v p="$p" -v f="$f" 'BEGIN { printf "%.2f", p / f }')x"
    echo "  rounds (µs): module ${module[*]}; tpm2-pkcs11 ${peer_sign[*]}; floor ${floor[*]}"
  } | tee -a "$report"
}

[ "$only" != module ] && run_peer
echo "written to $report"
