#!/usr/bin/env bash
# Installs what the tests need, builds with zero warnings, and runs every test: the engine's semantic,
# lock-matrix and tamper suites on swtpm, on SoftHSM2 and on a TPM behind tpm2-abrmd; the semantic and lock-matrix suites again through a
# real keyseald process (host key, swtpm, SoftHSM2); then the whole suite (engine on the host key, TPM and
# PKCS#11 backends on their own swtpm and SoftHSM2 fixtures; tpm2-abrmd and tpm2-pkcs11), after the scenario in a qemu
# guest on the kernel's resource manager (Scripts/test-vm.sh); last, the Debian package in a clean root
# (Scripts/test-package.sh). Each run prints its duration.
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

# Every test process runs under a time limit (watched). One that outlives it has hung: the stacks of all its threads
# (gdb) go to the output, it is killed, and the step runs once more; a second hang fails the run. A hang is never
# passed over in silence: the output says "test: HUNG" with the stacks.
descendants() {
  local child
  for child in $(pgrep -P "$1" || true); do
    echo "$child"
    descendants "$child"
  done
}
watched_once() {
  local limit=$1
  shift
  "$@" &
  local pid=$! started=$SECONDS process
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS - started >= limit)); then
      echo "test: HUNG: '$*' did not finish within $limit s; the stacks of its test processes follow" >&2
      for process in $(descendants "$pid"); do
        if grep -q "xctest" "/proc/$process/cmdline" 2>/dev/null; then
          echo "test: stacks of process $process ($(tr '\0' ' ' <"/proc/$process/cmdline"))" >&2
          timeout 120 gdb -p "$process" -batch -ex "thread apply all bt 25" 2>/dev/null | grep -E "^(Thread|#)" >&2 || true
        fi
      done
      for process in $(descendants "$pid") "$pid"; do kill -KILL "$process" 2>/dev/null || true; done
      wait "$pid" 2>/dev/null || true
      return 124
    fi
    sleep 1
  done
  wait "$pid"
}
watched() {
  local status=0
  watched_once "$@" || status=$?
  if ((status == 124)); then
    echo "test: HUNG once; running '${*:2}' again" >&2
    status=0
    watched_once "$@" || status=$?
  fi
  return "$status"
}

# Hardware fixtures fail (never skip) when swtpm or SoftHSM2 is missing.
export CI="${CI:-true}"
engine_suites="KeysealSecurityTests|LockMatrix|Tamper|KeychainTests|RequestValidationTests|UndecryptableTests|StringAttributeTests|GroupUsageTests"
# Keys, certificates and identities: hardware keys in swtpm and SoftHSM2 (on the host key, a software double).
engine_suites+="|KeyItemTests|KeysealTests.HardwareKeyTests|KeysealX509Tests"
# Through the daemon (daemon-tabrmd: keyseald on a TPM behind tpm2-abrmd on a private session bus): the same suites
# except Tamper, which edits the store file under an embedded engine.
daemon_suites="KeysealSecurityTests|LockMatrix|KeychainTests|RequestValidationTests|UndecryptableTests|StringAttributeTests|GroupUsageTests"
# tabrmd: the engine embedded, every store of the test process on one TPM behind one tpm2-abrmd on a private session
# bus (ResourceManagerFixture.shared: tpm2-tss finds the bus only through the process's environment).
for backend in tpm pkcs11 tabrmd daemon-host-key daemon-tpm daemon-pkcs11 daemon-tabrmd; do
  suites=$engine_suites
  [[ $backend == daemon-* ]] && suites=$daemon_suites
  # UndecryptableTests plant rows through an embedded engine in the test process, which has no session bus for tabrmd.
  [[ $backend == daemon-tabrmd ]] && suites=${daemon_suites//|UndecryptableTests/}
  echo "test: engine suites on $backend"
  started=$SECONDS
  if ! KEYSEAL_TEST_BACKEND=$backend watched 900 swift test --skip-build --filter "$suites" >"$log" 2>&1; then
    grep -E "✘|error:|HUNG" "$log" | head -50
    grep -E "^(test: stacks|Thread|#)" "$log" | head -400
    echo "test: engine suites failed on $backend" >&2
    exit 1
  fi
  grep -E "Test run with" "$log"
  if grep -q "test: HUNG" "$log"; then grep -E "^(test: |Thread|#)" "$log" | head -400; fi
  grep -E "skipped" "$log" || true
  echo "test: $backend took $((SECONDS - started)) s"
done

# The kernel's resource manager: the command-line scenario in a qemu guest on /dev/tpmrm0, across a power cut.
echo "test: qemu guest on /dev/tpmrm0"
started=$SECONDS
watched 900 bash Scripts/test-vm.sh
echo "test: qemu guest took $((SECONDS - started)) s"

# Every suite, in two processes: SoftHSM2 sees only the tokens created before its first use in a process, and one
# pool stays under the 48 slots GnuTLS's p11tool lists (SoftHSMFixture), so the PKCS#11 device-key suites get a pool
# of their own. They run on SoftHSM2 and on tpm2-pkcs11 behind tpm2-abrmd (TPM2PKCS11Pool: one store of tokens made
# with tpm2_ptool per process).
# Every suite includes the signed PCR policy scenarios (KeysealServerTests.SignedPCRPolicyTests: keyseald, keyseal
# tpm sign-policy, openssl, tpm2-tools and systemd's systemd-measure on swtpm).
# Every suite includes the ssh-agent's (KeysealServerTests' SSHAgentTests: keyseal ssh-agent with ssh-add, ssh to a
# private sshd, ssh-keygen -Y and git commit signing, on swtpm and SoftHSM2).
# Every suite includes LocalAuthenticationTests: LAContext against askpass scripts, SecAccessControl's user presence on
# items and keys, embedded and through keyseald processes (a uid-65534 client through keyseal-wire-probe); its key
# suites pick their fixtures themselves: keys that are not stored on the host key, swtpm and SoftHSM2, and a Secure
# Enclave key through keyseald on swtpm; fprintd's clients (fprintd-list, fprintd-verify) against a stand-in for
# fprintd's D-Bus service on a private bus.
# Every suite includes the Secret Service bridge's (KeysealSecretServiceTests): secret-tool, libsecret through PyGObject,
# SecretStorage and python-keyring's backend tests, run as processes on private session buses.
# And key attestation's (AttestationTests, CLIAttestationTests): swtpm made with an EK certificate by swtpm_setup, the
# AK's enrollment, and attestations checked by Keyseal's verifier and by python-fido2's WebAuthn TPM verifier.
# And the PKCS#11 module's (PKCS11ModuleTests: p11-kit, p11tool, pkcs11-tool, OpenSSL's engine, curl and ssh-keygen
# through libkeyseal-pkcs11.so against keyseald on swtpm, SoftHSM2 and the host key).
# And EveryAlgorithmTests (KeysealSecurityTests, in this run only: software keys, no backend): every SecKeyAlgorithm
# Apple declares on RSA 2048 and P-256/384/521 keys, Apple's known ciphertexts, and RSA-OAEP AES-GCM opened by python's
# cryptography.
# And PKCS11PeerTests: the setup of bench-pkcs11.sh's comparison with tpm2-pkcs11 (keyseald and a tpm2-pkcs11 token
# on one swtpm behind tpm2-abrmd, both modules signing, openssl verifying; the TPM sign floor program).
echo "test: every suite"
started=$SECONDS
watched 1200 swift test --skip-build --skip KeysealPKCS11Tests
watched 600 swift test --skip-build --filter KeysealPKCS11Tests
echo "test: every suite took $((SECONDS - started)) s"

# The Debian package (Scripts/test-package.sh): a release build with the Swift runtime linked statically, lintian, the
# units under systemd-analyze, then install, upgrade, use and purge in a clean Debian 12 root made by mmdebstrap.
echo "test: the Debian package in a clean root"
started=$SECONDS
watched 3600 bash Scripts/test-package.sh
echo "test: the package took $((SECONDS - started)) s"
