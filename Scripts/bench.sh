#!/usr/bin/env bash
# Benchmarks (release build), each figure next to its floor or target, measured in the same run:
#   engine  engine lookups and durable adds next to their SQLite floors; AES-256-GCM opens, swift-crypto next to libcrypto
#   daemon  lookups through a keyseald process (1 and 8 clients) next to a two-process unix-socket ping-pong, and
#           the daemon's resident memory
#   unlock  unlock and store open per stack (host key, swtpm socket, tpm2-abrmd, tpm2-pkcs11, SoftHSM2), Argon2id
#           shown apart, next to a raw ESAPI Esys_Unseal floor on each TPM stack
#   keys    hardware key signing (swtpm, SoftHSM2) next to raw TPM2_Sign and C_Sign loops written in C
#   cli     whole-process `keyseal find-generic-password -w` next to a minimal Swift program (keyseal-cli-bench)
#   backup  export and import of 100,000 items, Argon2id shown apart (keyseal-backup-bench)
#   secrets the Secret Service bridge next to a headless gnome-keyring: stores of 1,000 items, in-process libsecret
#           lookups, whole `secret-tool lookup` processes (Scripts/bench-secret-service.sh)
# Figures are printed and written as JSON into bench-results/.
# Options: --quick (shorter), --only engine,daemon,unlock,keys,cli,backup,secrets (some sections), --output DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
bash Scripts/bootstrap.sh
export PATH="/opt/swift/usr/bin:$PATH"

only="engine,daemon,unlock,keys,cli,backup,secrets"
output="bench-results"
quick=()
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only="$2"; shift 2 ;;
    --output) output="$2"; shift 2 ;;
    --quick) quick=(--quick); shift ;;
    *) echo "bench: unknown option $1" >&2; exit 64 ;;
  esac
done
has() { [[ ",$only," == *",$1,"* ]]; }

for product in keyseald keyseal keyseal-bench keyseal-cli-bench keyseal-bench-minimal keyseal-backup-bench \
  keyseal-secret-service; do
  swift build -c release --product "$product" >/dev/null
done
bin=$(swift build -c release --show-bin-path)

engine_sections=()
for section in engine daemon unlock keys; do has "$section" && engine_sections+=("$section"); done
if [ ${#engine_sections[@]} -gt 0 ]; then
  sections=$(IFS=,; echo "${engine_sections[*]}")
  "$bin/keyseal-bench" --output "$output" --only "$sections" "${quick[@]}"
fi
if has cli; then
  "$bin/keyseal-cli-bench" --output "$output" --runs 200
fi
if has backup; then
  items=100000
  [ ${#quick[@]} -gt 0 ] && items=20000
  "$bin/keyseal-backup-bench" --output "$output" --items "$items"
fi
if has secrets; then
  if [ ${#quick[@]} -gt 0 ]; then
    bash Scripts/bench-secret-service.sh "$bin" "$output" 1000 500 30
  else
    bash Scripts/bench-secret-service.sh "$bin" "$output" 1000 2000 100
  fi
fi
