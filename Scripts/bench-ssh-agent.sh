#!/usr/bin/env bash
# The ssh-agent benchmark (release build): the sign round trip through `keyseal ssh-agent` next to Keyseal's own
# wire sign of the same hardware P-256 key (same algorithm, same 150 bytes, one connection each, interleaved rounds),
# on keyseald with swtpm (--backend swtpm) and with SoftHSM2 (--backend pkcs11). Target: the agent's throughput at
# least 70 % of the wire's (median against median). Writes the figures to bench-results/ssh-agent.json (or $1).
#   Scripts/bench-ssh-agent.sh [OUTPUT-FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
output=${1:-bench-results/ssh-agent.json}
mkdir -p "$(dirname "$output")"

for product in keyseald keyseal keyseal-ssh-agent-bench; do
  swift build -c release --product "$product" >/dev/null
done
bin=$(swift build -c release --show-bin-path)

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

wait_for() { for _ in $(seq 1 600); do [ -S "$1" ] && return 0; sleep 0.05; done; echo "no socket $1" >&2; exit 1; }

# SoftHSM2: a token of its own.
export SOFTHSM2_CONF="$work/softhsm2.conf"
mkdir -p "$work/tokens"
printf 'directories.tokendir = %s\nobjectstore.backend = file\n' "$work/tokens" >"$SOFTHSM2_CONF"
softhsm2-util --init-token --free --label bench --pin 1234 --so-pin 5678 >/dev/null
printf '1234\n' >"$work/pin" && chmod 600 "$work/pin"

results=()
for backend in swtpm pkcs11; do
  store="$work/$backend/store" socket="$work/$backend/keyseald.sock" agent="$work/$backend/agent/agent.sock"
  mkdir -p "$work/$backend"
  args=(--store "$store" --socket "$socket" --log-level error)
  if [ "$backend" = swtpm ]; then
    args+=(--backend swtpm)
  else
    args+=(--backend pkcs11 --pkcs11-module /usr/lib/softhsm/libsofthsm2.so --pkcs11-token bench
      --pkcs11-pin-file "$work/pin")
  fi
  "$bin/keyseald" "${args[@]}" & pids+=($!)
  wait_for "$socket"
  "$bin/keyseal" --socket "$socket" create-key --tag bench --hardware --ssh >/dev/null
  "$bin/keyseal" --socket "$socket" ssh-agent -a "$agent" 2>/dev/null & pids+=($!)
  wait_for "$agent"
  figures=$("$bin/keyseal-ssh-agent-bench" "$socket" "$agent" bench 20 50)
  echo "ssh-agent on $backend: $figures"
  results+=("\"$backend\": $figures")
done

{
  printf '{"date": "%s", "target": 0.70, ' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  (IFS=,; printf '%s' "${results[*]}")
  printf '}\n'
} >"$output"
python3 - "$output" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
for backend in ("swtpm", "pkcs11"):
    ratio = data[backend]["agentThroughputOfWire"]
    print(f"{backend}: agent sign {data[backend]['agentSignMedianMicroseconds']:.0f} µs, wire sign "
          f"{data[backend]['wireSignMedianMicroseconds']:.0f} µs: {ratio:.0%} of the wire (target ≥ 70 %: "
          f"{'met' if ratio >= 0.70 else 'MISSED'})")
PY
echo "bench-ssh-agent: written to $output"
