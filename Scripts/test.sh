#!/usr/bin/env bash
# Installs what the tests need, builds with zero warnings, and runs every test: the engine's semantic,
# lock-matrix and tamper suites on swtpm and on SoftHSM2, then the whole suite (engine on the host key, TPM and
# PKCS#11 backends on their own swtpm and SoftHSM2 fixtures).
set -euo pipefail
cd "$(dirname "$0")/.."

bash Scripts/bootstrap.sh
export PATH="/opt/swift/usr/bin:$PATH"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "test: building (debug, with tests)"
if ! swift build --build-tests >"$log" 2>&1; then
  cat "$log"
  echo "test: the build failed" >&2
  exit 1
fi
if grep -E "^$(pwd)/(Sources|Tests)/.*warning:" "$log"; then
  echo "test: the build has warnings" >&2
  exit 1
fi

# Hardware fixtures fail (never skip) when swtpm or SoftHSM2 is missing.
export CI="${CI:-true}"
engine_suites="KeysealSecurityTests|LockMatrix|Tamper|KeychainTests"
for backend in tpm pkcs11; do
  echo "test: engine suites on $backend"
  if ! KEYSEAL_TEST_BACKEND=$backend swift test --skip-build --filter "$engine_suites" >"$log" 2>&1; then
    grep -E "✘|error:" "$log" | head -50
    echo "test: engine suites failed on $backend" >&2
    exit 1
  fi
  grep -E "Test run with" "$log"
done

echo "test: every suite"
swift test --skip-build
