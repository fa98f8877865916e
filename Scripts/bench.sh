#!/usr/bin/env bash
# Benchmarks (release build), each figure next to its floor or target, measured in the same run. The suites are
# the Benchmarks/ package on ordo-one's package-benchmark (p50/p99, allocations, throughput per benchmark):
#   engine  Benchmarks/Engine: embedded lookups at 1,000 and 100,000 items and durable adds next to their SQLite
#           floors; AES-256-GCM opens, swift-crypto next to libcrypto; the store open of 100,000 items
#   daemon  Benchmarks/Daemon: lookups through a keyseald process (1 and 8 clients, 1,000 and 100,000 items, a 1 MiB
#           value) next to a two-process unix-socket ping-pong of the same frames; one client's lookups on each
#           deployed stack (host key, swtpm, tpm2-abrmd, SoftHSM2) next to the embedded lookup on that stack; the
#           daemon's resident memory
#   unlock  Benchmarks/Unlock: unlock and store open per stack (host key, swtpm socket, tpm2-abrmd, tpm2-pkcs11,
#           SoftHSM2), Argon2id shown apart, next to raw ESAPI Esys_Unseal and Esys_CreatePrimary on each TPM stack
#   keys    Benchmarks/Keys: hardware key signing (swtpm, SoftHSM2) by the provider, the library and keyseald next
#           to raw TPM2_Sign and C_Sign in C; software P-256 sign next to swift-crypto's
#   cli     Benchmarks/CLI: whole-process `keyseal find-generic-password -w` next to a minimal Swift program
#   backup  Benchmarks/Backup: export and import of 100,000 items, Argon2id shown apart
#   secrets the Secret Service bridge next to a headless gnome-keyring: stores of 1,000 items, in-process libsecret
#           lookups, whole `secret-tool lookup` processes, and the same lookups against a provider that does no
#           work (Benchmarks/Floors/secret-service-floor.c): the best any provider could do, and the bridge before a
#           keyseald that answers instantly (Benchmarks/Floors/keyseald-replay.c); medians of interleaved rounds
#           against the targets (Scripts/bench-secret-service.sh)
# Each figure is printed with its p50, p99, throughput and allocations, then each same-run ratio (figure against
# floor, Benchmarks/ratios.json) with its target: met or MISSED. The run is written into bench-results/ (or
# --output DIR): package-benchmark's influx CSV export and bench-DATE.json (figures, ratios, threshold verdicts).
# Options: --quick (fewer samples, same sizes), --only engine,daemon,unlock,keys,cli,backup,secrets (some sections),
#   --output DIR, --check (exit 1 when a figure exceeds its threshold in Benchmarks/Thresholds/, naming it),
#   --update-thresholds (write the thresholds from this run; see Scripts/bench_check.py for the tolerances).
set -euo pipefail
cd "$(dirname "$0")/.."
bash Scripts/bootstrap.sh
export PATH="/opt/swift/usr/bin:$PATH"

only="engine,daemon,unlock,keys,cli,backup,secrets"
output="bench-results"
quick=0
checks=()
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only="$2"; shift 2 ;;
    --output) output="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --check) checks+=(--check); shift ;;
    --update-thresholds) checks+=(--update-thresholds); shift ;;
    *) echo "bench: unknown option $1" >&2; exit 64 ;;
  esac
done
has() { [[ ",$only," == *",$1,"* ]]; }
mkdir -p "$output"
output=$(cd "$output" && pwd)

# The products the suites start (keyseald, keyseal), the Secret Service bridge, built by the Benchmarks package
# from the root package (one release build of it serves both), the CLI suite's minimal program and the ping-pong floor's echo.
for product in keyseald keyseal keyseal-secret-service keyseal-bench-minimal keyseal-bench-echo; do
  (cd Benchmarks && swift build -c release --product "$product" >/dev/null)
done
bin=$(cd Benchmarks && swift build -c release --show-bin-path)

suites=()
for section in engine:Engine daemon:Daemon unlock:Unlock keys:Keys cli:CLI backup:Backup; do
  has "${section%%:*}" && suites+=("${section##*:}")
done
status=0
if [ ${#suites[@]} -gt 0 ]; then
  scratch=$(mktemp -d /dev/shm/keyseal-bench.XXXXXX)
  disk=$(mktemp -d /tmp/keyseal-bench-disk.XXXXXX)
  trap 'rm -rf "$scratch" "$disk"' EXIT
  stamp=$(date -u +%Y-%m-%dT%H-%M-%SZ)
  run="$output/run-$stamp"
  mkdir -p "$run"
  targets=$(IFS='|'; echo "^(${suites[*]})\$")
  (
    cd Benchmarks
    KEYSEAL_BENCH_BIN="$bin" KEYSEAL_BENCH_SCRATCH="$scratch" KEYSEAL_BENCH_DISK="$disk" KEYSEAL_BENCH_QUICK="$quick" \
      TSS2_LOG="all+NONE" swift package --allow-writing-to-directory "$run" benchmark --target "$targets" \
      --format influx --path "$run" --no-progress
  ) || { status=$?; echo "bench: a benchmark failed (exit $status); its figures are missing below" >&2; }
  python3 Scripts/bench_check.py "$run/Current_run.influx.csv" --output "$output/bench-$stamp.json" "${checks[@]}" \
    || status=$?
fi
if has secrets; then
  if [ "$quick" = 1 ]; then
    bash Scripts/bench-secret-service.sh "$bin" "$output" 1000 500 30 1
  else
    bash Scripts/bench-secret-service.sh "$bin" "$output" 1000 2000 100
  fi
fi
exit "$status"
