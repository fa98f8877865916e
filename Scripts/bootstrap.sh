#!/usr/bin/env bash
# Installs the Debian packages Keyseal builds and tests with (run as root, or with sudo available).
set -euo pipefail

packages=(
  pkg-config libsqlite3-dev sqlite3 libargon2-dev libssl-dev
  libtss2-dev tpm2-tools swtpm swtpm-tools
  softhsm2 p11-kit libp11-kit-dev gnutls-bin
  bsdutils util-linux mount strace
  tpm2-abrmd libtss2-tcti-tabrmd0 dbus libtpm2-pkcs11-1 libtpm2-pkcs11-tools
  qemu-system-x86 busybox-static cpio kmod e2fsprogs
  libsystemd-dev libsecret-tools gnome-keyring python3-gi gir1.2-secret-1 python3-venv python3-pip
  git libsecret-1-dev gcc bubblewrap
  openssh-server openssh-client systemd
  opensc libengine-pkcs11-openssl curl openssl binutils
  gdb fprintd
  debhelper lintian mmdebstrap dpkg-dev man-db bash-completion
)

# The Secret Service clients from PyPI (pinned), in a venv that also sees Debian's PyGObject (python3-gi): the
# bridge's tests run SecretStorage, python-keyring's own backend tests (pytest) and libsecret through it; the
# attestation tests check statements with python-fido2's WebAuthn TPM verifier; EveryAlgorithmTests opens Keyseal's
# RSA-OAEP AES-GCM ciphertexts with its dependency cryptography.
python_venv=/opt/keyseal-python
python_packages=(SecretStorage==3.3.3 keyring==25.6.0 pytest==8.3.5 fido2==2.2.1)
install_python() {
  if [ -x "$python_venv/bin/python3" ] && "$python_venv/bin/python3" -c "import secretstorage, keyring, pytest, fido2, cryptography" 2>/dev/null; then
    return
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "bootstrap: installing ${python_packages[*]} in $python_venv"
  $sudo /usr/bin/python3 -m venv --system-site-packages "$python_venv"
  $sudo "$python_venv/bin/pip" install -q "${python_packages[@]}"
}

# SecretStorage's own test suite (its sdist's tests/, which the wheel leaves out), run against the bridge by
# SecretServiceTests.secretStorageOwnSuite.
secretstorage_tests=$python_venv/share/secretstorage_tests
install_secretstorage_tests() {
  [ -f "$secretstorage_tests/test_exceptions.py" ] && return
  local sudo="" work
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "bootstrap: installing SecretStorage 3.3.3's tests in $secretstorage_tests"
  work=$(mktemp -d)
  "$python_venv/bin/pip" download -q --no-deps --no-binary :all: --no-build-isolation -d "$work" SecretStorage==3.3.3
  tar -xzf "$work/SecretStorage-3.3.3.tar.gz" -C "$work"
  $sudo mkdir -p "$secretstorage_tests"
  $sudo cp "$work"/SecretStorage-3.3.3/tests/*.py "$secretstorage_tests/"
  rm -rf "$work"
}

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all packages present"
  install_python
  install_secretstorage_tests
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "bootstrap: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "bootstrap: done"
install_python
install_secretstorage_tests
