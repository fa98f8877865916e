#!/usr/bin/env bash
# A first look at Keyseal on a fresh Debian machine: installs what it needs, builds, starts
# `keyseald --backend swtpm` (a private swtpm whose state lives in the store) in a temporary directory, and walks
# through the keyseal command line: set a passcode, add, lock, a refused find, unlock, a successful find, status;
# a P-256 key generated inside the TPM that signs only while its class is unlocked (checked with openssl), and curl
# using it for client-certificate TLS through the PKCS#11 module; then
# OpenSSH through keyseal ssh-agent: ssh-keygen -Y signs with a TPM key (what git's ssh commit signing calls); then
# the Secret Service: keyseal-secret-service on a private session bus, secret-tool storing and finding a password
# that is a sealed Keyseal item; the TPM's attestation key enrolled with a throwaway CA and an attestation of the
# hardware key verified. Then it stops everything. Each command is printed before it runs.
set -euo pipefail
cd "$(dirname "$0")/.."

bash Scripts/bootstrap.sh
export PATH="/opt/swift/usr/bin:$PATH"

echo "demo: building keyseald and keyseal"
swift build --product keyseald >/dev/null
swift build --product keyseal >/dev/null
swift build --product keyseal-attestation >/dev/null
swift build --product keyseal-secret-service >/dev/null
swift build --product keyseal-pkcs11 >/dev/null
bin=$(swift build --show-bin-path)

work=$(mktemp -d /tmp/keyseal-demo.XXXXXX)
chmod 700 "$work"
export KEYSEAL_SOCKET="$work/run/keyseal.sock"
daemon_pid=
bus_pid=
bridge_pid=
agent_pid=
server_pid=
cleanup() {
  for pid in $agent_pid $bridge_pid $bus_pid $server_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# Prints a command, then runs it; "expect N" runs one that must exit N.
show() { printf '\n$ %s\n' "$*"; }
run() { show "$@"; "$@"; }
expect() {
  local want=$1
  shift
  show "$@"
  local rc=0
  "$@" || rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "demo: expected exit $want, got $rc" >&2
    exit 1
  fi
  echo "(exit $rc, as expected)"
}
keyseal() { "$bin/keyseal" "$@"; }

# The swtpm keyseald starts keeps its state in the store's swtpm/ folder: made here first, as a TPM maker would, with
# an EK certificate signed by swtpm_localca's CA (for the attestation below).
mkdir -m 700 "$work/store" "$work/store/swtpm" "$work/ekca"
printf 'statedir = %s\nsigningkey = %s/signkey.pem\nissuercert = %s/issuercert.pem\ncertserial = %s/certserial\n' \
  "$work/ekca" "$work/ekca" "$work/ekca" "$work/ekca" >"$work/localca.conf"
printf 'create_certs_tool = %s\ncreate_certs_tool_config = %s\ncreate_certs_tool_options = /etc/swtpm-localca.options\n' \
  "$(command -v swtpm_localca)" "$work/localca.conf" >"$work/swtpm_setup.conf"
swtpm_setup --tpm2 --tpmstate "$work/store/swtpm" --create-ek-cert --config "$work/swtpm_setup.conf" \
  --logfile "$work/swtpm_setup.log" >/dev/null
cat "$work/ekca/issuercert.pem" "$work/ekca/swtpm-localca-rootca-cert.pem" >"$work/ek-ca.pem"

show keyseald --backend swtpm --store "$work/store" "&"
"$bin/keyseald" --backend swtpm --store "$work/store" --log-level warning 2>"$work/keyseald.log" &
daemon_pid=$!
for _ in $(seq 1 300); do
  [ -S "$KEYSEAL_SOCKET" ] && break
  if ! kill -0 "$daemon_pid" 2>/dev/null; then
    cat "$work/keyseald.log" >&2
    echo "demo: keyseald did not start" >&2
    exit 1
  fi
  sleep 0.1
done
[ -S "$KEYSEAL_SOCKET" ] || { cat "$work/keyseald.log" >&2; echo "demo: keyseald did not listen" >&2; exit 1; }
echo "(keyseald listens on \$KEYSEAL_SOCKET=$KEYSEAL_SOCKET)"

run keyseal status
show "printf 'demo passcode\n' | keyseal passcode set --passcode-stdin"
printf 'demo passcode\n' | keyseal passcode set --passcode-stdin
run keyseal add-generic-password -a alice -s mail.example.com -l "Mail" -w "s3cr3t-mail"
run keyseal add-generic-password -a ci -s deploy-token --accessible after-first-unlock -w "t0ken"
run keyseal lock
expect 36 keyseal find-generic-password -a alice -s mail.example.com -w
run keyseal find-generic-password -a ci -s deploy-token -w
show "printf 'demo passcode\n' | keyseal unlock --passcode-stdin"
printf 'demo passcode\n' | keyseal unlock --passcode-stdin
run keyseal find-generic-password -a alice -s mail.example.com -w
run keyseal find-generic-password -a alice -s mail.example.com
run keyseal status

# A key pair generated inside the TPM: only the TPM's wrapped blob is stored; it signs while its class is unlocked.
show keyseal create-key --tag com.example.device-identity --hardware --accessible when-unlocked "| tee device.pem"
keyseal create-key --tag com.example.device-identity --hardware --accessible when-unlocked | tee "$work/device.pem"
printf 'firmware image 1.2.3\n' >"$work/message"
tag=com.example.device-identity
show keyseal sign --tag "$tag" --input message ">" signature.der
keyseal sign --tag "$tag" --input "$work/message" >"$work/signature.der"
run openssl dgst -sha256 -verify "$work/device.pem" -signature "$work/signature.der" "$work/message"
# A certificate for that key: a CSR signed inside the TPM, issued by a throwaway CA, stored; key + certificate = identity.
show keyseal create-csr --tag "$tag" --subject "CN=device-0001,O=Example" ">" device.csr
keyseal create-csr --tag "$tag" --subject "CN=device-0001,O=Example" >"$work/device.csr"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/ca.key" -subj "/CN=Demo CA" \
  -days 1 -out "$work/ca.pem" 2>/dev/null
openssl x509 -req -in "$work/device.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -days 30 -set_serial 1 \
  -out "$work/device.crt" 2>/dev/null
echo "(a throwaway CA issued device.crt for the CSR)"
# Key attestation: the CA enrolls the TPM's attestation key (TPM2_MakeCredential / ActivateCredential), then a
# verifier with a fresh challenge checks that the key was generated in that TPM (TPM2_Certify, WebAuthn "tpm").
run keyseal attestation enroll-request --output "$work/ak-request.json"
run keyseal attestation ca-challenge --request "$work/ak-request.json" --ca-key "$work/ca.key" --ca-cert "$work/ca.pem" \
  --ek-ca "$work/ek-ca.pem" --output "$work/ak-challenge.json"
run keyseal attestation activate --challenge "$work/ak-challenge.json" --output "$work/ak-proof.json"
run keyseal attestation ca-issue --state "$work/ak-challenge.json.state" --proof "$work/ak-proof.json" --output "$work/ak.pem"
run keyseal attestation install --certificate "$work/ak.pem" --chain "$work/ca.pem"
challenge=$(openssl rand -hex 32)
run keyseal attest --tag "$tag" --challenge "$challenge" --output "$work/attestation.cbor"
run keyseal verify-attestation --input "$work/attestation.cbor" --challenge "$challenge" --ca "$work/ca.pem" \
  --public-key "$work/device.pem"
expect 93 keyseal verify-attestation --input "$work/attestation.cbor" --challenge "$(openssl rand -hex 32)" --ca "$work/ca.pem"
run keyseal add-certificates "$work/device.crt"
run keyseal find-identity -v
run keyseal lock
expect 36 keyseal sign --tag "$tag" --input "$work/message" >/dev/null
show "printf 'demo passcode\n' | keyseal unlock --passcode-stdin"
printf 'demo passcode\n' | keyseal unlock --passcode-stdin

# Any program's keys: curl authenticates with that TPM key through the PKCS#11 module (client-certificate TLS to a
# local openssl s_server that demands one); the PIN is the store's passcode.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/server.key" -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -CA "$work/ca.pem" -CAkey "$work/ca.key" -days 1 -out "$work/server.pem" 2>/dev/null
printf 'openssl_conf = init\n[init]\nengines = engines\n[engines]\npkcs11 = pkcs11\n[pkcs11]\nengine_id = pkcs11\nMODULE_PATH = %s\n' \
  "$bin/libkeyseal-pkcs11.so" >"$work/openssl.cnf"
show openssl s_server -accept 127.0.0.1:8443 -cert server.pem -key server.key -CAfile ca.pem -Verify 1 -www "&"
openssl s_server -accept 127.0.0.1:8443 -cert "$work/server.pem" -key "$work/server.key" -CAfile "$work/ca.pem" \
  -Verify 1 -verify_return_error -www >/dev/null 2>&1 &
server_pid=$!
sleep 0.5
uri="pkcs11:token=Keyseal;object=$tag;type=private;pin-value=demo%20passcode"
show OPENSSL_CONF=openssl.cnf curl --engine pkcs11 --key-type ENG --key "\"$uri\"" --cert device.crt \
  --cacert ca.pem https://127.0.0.1:8443/ "| grep 'Client certificate'"
OPENSSL_CONF="$work/openssl.cnf" curl -sS --engine pkcs11 --key-type ENG --key "$uri" --cert "$work/device.crt" \
  --cacert "$work/ca.pem" https://127.0.0.1:8443/ | grep -A2 'Client certificate' | head -3
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=
# ssh and git: keys marked --ssh are offered by keyseal ssh-agent; the TPM signs, the key never leaves it.
run keyseal create-key --tag laptop --hardware --ssh
show keyseal ssh-agent -D -a "$work/agent/ssh-agent.sock" "&"
"$bin/keyseal" ssh-agent -D -a "$work/agent/ssh-agent.sock" >"$work/agent.env" 2>"$work/agent.log" &
agent_pid=$!
for _ in $(seq 1 100); do [ -s "$work/agent.env" ] && break; sleep 0.1; done
cat "$work/agent.env"
. "$work/agent.env"
show "ssh-add -L | tee laptop.pub"
ssh-add -L | tee "$work/laptop.pub"
run ssh-keygen -Y sign -f "$work/laptop.pub" -n file "$work/message"
echo "demo@example.com $(cat "$work/laptop.pub")" >"$work/allowed_signers"
show "ssh-keygen -Y verify -f allowed_signers -I demo@example.com -n file -s message.sig < message"
ssh-keygen -Y verify -f "$work/allowed_signers" -I demo@example.com -n file -s "$work/message.sig" <"$work/message"
run keyseal lock
rm -f "$work/message.sig"
expect 255 ssh-keygen -Y sign -f "$work/laptop.pub" -n file "$work/message"
run tail -1 "$work/agent.log"
show "printf 'demo passcode\n' | keyseal unlock --passcode-stdin"
printf 'demo passcode\n' | keyseal unlock --passcode-stdin
kill -TERM "$agent_pid"
wait "$agent_pid" || true
agent_pid=

# The freedesktop Secret Service: programs that speak it (secret-tool, libsecret, python-keyring) store Keyseal items.
show dbus-daemon --session "&" "# a private session bus"
dbus-daemon --session --nofork --nopidfile --address="unix:path=$work/bus" </dev/null >/dev/null 2>&1 &
bus_pid=$!
export DBUS_SESSION_BUS_ADDRESS="unix:path=$work/bus"
for _ in $(seq 1 100); do [ -S "$work/bus" ] && break; sleep 0.1; done
show keyseal-secret-service "&"
"$bin/keyseal-secret-service" >"$work/bridge.log" 2>&1 &
bridge_pid=$!
for _ in $(seq 1 200); do grep -q "serving org.freedesktop.secrets" "$work/bridge.log" && break; sleep 0.1; done
grep -q "serving org.freedesktop.secrets" "$work/bridge.log" || { cat "$work/bridge.log" >&2; echo "demo: the bridge did not start" >&2; exit 1; }
show "printf 'hunter2' | secret-tool store --label='Git' service git.example.com user alice"
printf 'hunter2' | secret-tool store --label='Git' service git.example.com user alice
run secret-tool lookup service git.example.com user alice
echo
run keyseal lock
expect 1 secret-tool lookup service git.example.com user alice

show kill -TERM "$daemon_pid" "# keyseald finishes, zeroizes its keys, removes the socket, exits 0"
kill -TERM "$daemon_pid"
rc=0
wait "$daemon_pid" || rc=$?
daemon_pid=
[ "$rc" -eq 0 ] || { cat "$work/keyseald.log" >&2; echo "demo: keyseald exited $rc" >&2; exit 1; }
[ ! -e "$KEYSEAL_SOCKET" ] || { echo "demo: the socket was left behind" >&2; exit 1; }
echo "(keyseald exited 0 and removed its socket)"
echo
echo "demo: done (the store and its swtpm state are removed)"
