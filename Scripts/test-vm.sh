#!/usr/bin/env bash
# keyseald on the kernel's TPM resource manager: a qemu guest (software emulation, Debian's kernel unpacked from its
# package, a busybox initramfs carrying keyseald, keyseal and the libraries they load) whose TPM is swtpm. First
# boot: the command-line scenario over device:/dev/tpmrm0 (passcode, classes, lock, refusal, wrong passcode,
# unlock), a store bound to signed PCR policies (keyseald --tpm-pcr-public-key; `keyseal tpm sign-policy --current`
# signs the boot state and, after tpm2 pcrextend, a second one: both open without a reseal, the passcode set in the
# first unlocks in the second; in a third state nobody signed, tpm2 unseal of the device object taken from a copy of
# the store's files fails (live USB), signatures by another key — under its own fingerprint or the bound key's — leave
# it recovery required, and its recovery key and passcode open it), a second store bound to PCR 7 (extended with
# tpm2 pcrextend: recovery required, exit 156; `keyseal recover` with its recovery key), then a check through
# /dev/tpm0 that no transient object or session is left on the TPM, then a power cut.
# Second boot, on the same TPM state and disk image: after-first-unlock items refused until the first unlock,
# then every item back; the signed store opens and unlocks in the first boot state again (its signature, no reseal).
# A missing package or a step that fails is a failure, never a skip.
#
# Needs the debug build of keyseald, keyseal and keyseal-tpm-policy (Scripts/test.sh builds them first). Budget: about
# a minute and a half a boot on a quiet machine; each boot may take 300 s on a loaded one.
set -euo pipefail
cd "$(dirname "$0")/.."

bash Scripts/bootstrap.sh
export PATH="/opt/swift/usr/bin:$PATH"
bin=$(swift build --show-bin-path)
for program in keyseald keyseal keyseal-tpm-policy; do
  [[ -x $bin/$program ]] || { echo "test-vm: $bin/$program is missing; build first" >&2; exit 1; }
done

work=$(mktemp -d /tmp/keyseal-vm.XXXXXX)
swtpm_pid=""
cleanup() {
  [[ -n $swtpm_pid ]] && kill "$swtpm_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The kernel: the package the linux-image-amd64 metapackage names, downloaded once into the build folder.
kernel_package=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
[[ -n $kernel_package ]] || { echo "test-vm: no linux-image package found (apt-get update?)" >&2; exit 1; }
version=${kernel_package#linux-image-}
cache=.build/vm
kernel_root=$cache/$kernel_package
if [[ ! -f $kernel_root/boot/vmlinuz-$version ]]; then
  mkdir -p "$cache"
  (cd "$cache" && apt-get download -q "$kernel_package" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
  deb=$(ls "$cache"/"${kernel_package}"_*.deb | head -1)
  rm -rf "$kernel_root"
  dpkg-deb -x "$deb" "$kernel_root"
  rm -f "$deb"
fi
depmod -b "$PWD/$kernel_root" "$version"
modules_dir=$kernel_root/lib/modules/$version

# Modules the disk needs (virtio block device, ext4), dependencies first.
declare -A loaded=()
order=()
add_module() {
  local name=$1 line path dep
  line=$(grep -E "/$name\.ko(\.[a-z]+)?:" "$modules_dir/modules.dep" | head -1)
  [[ -n $line ]] || { echo "test-vm: module $name not found in $kernel_package" >&2; exit 1; }
  path=${line%%:*}
  [[ -n ${loaded[$path]:-} ]] && return
  for dep in ${line#*:}; do
    add_module "$(basename "$dep" | sed -E 's/\.ko(\.[a-z]+)?$//')"
  done
  loaded[$path]=1
  order+=("$path")
}
# crc32c_generic: ext4 asks for a crc32c driver at mount, a dependency modules.dep does not list.
for module in virtio_pci virtio_blk crc32c_generic ext4; do add_module "$module"; done

# The initramfs.
root=$work/root
mkdir -p "$root"/{bin,dev,proc,sys,tmp,mnt,run,modules,etc}
cp /bin/busybox "$root/bin/busybox"
for applet in $(busybox --list); do [[ $applet == busybox ]] || ln -sf busybox "$root/bin/$applet"; done
cp "$bin/keyseald" "$bin/keyseal" "$bin/keyseal-tpm-policy" "$root/bin/"
tpm2=$(command -v tpm2)
cp "$tpm2" "$root/bin/tpm2"
device_tcti=$(ls /usr/lib/x86_64-linux-gnu/libtss2-tcti-device.so.0)
for file in "$bin/keyseald" "$bin/keyseal" "$bin/keyseal-tpm-policy" "$tpm2" "$device_tcti"; do
  ldd "$file" | awk '$3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
done | sort -u | while read -r library; do
  mkdir -p "$root$(dirname "$library")"
  cp -L "$library" "$root$library"
done
mkdir -p "$root$(dirname "$device_tcti")"
cp -L "$device_tcti" "$root$device_tcti"
# The build system's PCR policy key (test only: the guest signs its own boot states with it).
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$root/etc/pcr.key" 2>/dev/null
openssl pkey -in "$root/etc/pcr.key" -pubout -out "$root/etc/pcr.pub"
# Another key (a foreign build system's, or an attacker's): its signatures must never open the store.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$root/etc/foreign.key" 2>/dev/null
: >"$root/modules/order"
for path in "${order[@]}"; do
  cp "$modules_dir/$path" "$root/modules/"
  basename "$path" >>"$root/modules/order"
done
cat >"$root/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for module in $(cat /modules/order); do
  case $module in
    *.xz) xz -dc /modules/$module >/tmp/m.ko ;;
    *) cp /modules/$module /tmp/m.ko ;;
  esac
  insmod /tmp/m.ko 2>/tmp/insmod.err || echo "KEYSEAL-VM: insmod $module: $(cat /tmp/insmod.err)"
done
phase=$(sed -n 's/.*keyseal\.phase=\([0-9]*\).*/\1/p' /proc/cmdline)
report() { echo "KEYSEAL-VM: $*"; }
mount -t ext4 /dev/vda /mnt || report "FAIL mount"
export TSS2_LOG=all+NONE KEYSEAL_TESTING_ARGON2=minimal HOME=/tmp
[ -e /dev/tpmrm0 ] && report "ok /dev/tpmrm0" || report "FAIL no /dev/tpmrm0"
keyseald --store /mnt/store --socket /run/k.sock --backend tpm --tcti device:/dev/tpmrm0 >/tmp/keyseald.log 2>&1 &
for i in $(seq 1 200); do keyseal --socket /run/k.sock status >/dev/null 2>&1 && break; sleep 0.1; done
k() { keyseal --socket /run/k.sock "$@"; }
expect() {  # expect NAME EXIT [STDOUT] -- command
  name=$1 want=$2 out=$3; shift 4
  got_out=$("$@" 2>/tmp/err); got=$?
  if [ "$got" = "$want" ] && { [ -z "$out" ] || [ "$got_out" = "$out" ]; }; then report "ok $name"
  else report "FAIL $name (exit $got, wanted $want; $(cat /tmp/err))"; fi
}
s() { keyseal --socket /run/s.sock "$@"; }
start_signed() {
  keyseald --store /mnt/signed --socket /run/s.sock --backend tpm --tcti device:/dev/tpmrm0 --tpm-pcrs 7 \
    --tpm-pcr-public-key /etc/pcr.pub --tpm-pcr-signatures /mnt/pcr-signatures >>/tmp/signed.log 2>&1 &
  signed_pid=$!
  for i in $(seq 1 200); do s status >/dev/null 2>&1 && break; sleep 0.1; done
}
if [ "$phase" = 1 ]; then
  expect passcode-set 0 "" -- sh -c 'echo "correct horse battery" | keyseal --socket /run/k.sock passcode set --passcode-stdin'
  expect add-when-unlocked 0 "" -- k add-generic-password -a alice -s mail -w wu-secret
  expect add-after-first-unlock 0 "" -- k add-generic-password -a bob -s mail -w afu-secret --accessible after-first-unlock
  expect lock 0 "" -- k lock
  expect locked-refused 36 "" -- k find-generic-password -a alice -s mail -w
  expect locked-afu-readable 0 afu-secret -- k find-generic-password -a bob -s mail -w
  expect wrong-passcode 51 "" -- sh -c 'echo "wrong passcode here" | keyseal --socket /run/k.sock unlock --passcode-stdin'
  expect unlock 0 "" -- sh -c 'echo "correct horse battery" | keyseal --socket /run/k.sock unlock --passcode-stdin'
  expect unlocked-readable 0 wu-secret -- k find-generic-password -a alice -s mail -w
  # Signed PCR policies on /dev/tpmrm0: the boot state (A) is signed, the store enrolled with a passcode; after an
  # extend (B, signed too) it opens and unlocks without a reseal; after another (C, nobody signed) a copy of its
  # keybag does not unseal (live USB), signatures by another key are refused, and the recovery key opens it.
  mkdir -p /mnt/pcr-signatures
  sign() { k tpm sign-policy --pcrs 7 --current --tcti device:/dev/tpmrm0 --private-key "$2" --output "$1"; }
  signed_unlock() { echo "signed store passcode" | keyseal --socket /run/s.sock unlock --passcode-stdin; }
  expect sign-state-a 0 "" -- sign /mnt/pcr-signatures/a.json /etc/pcr.key
  start_signed
  expect signed-add 0 "" -- s add-generic-password -a dave -s sso -w signed-secret --accessible always
  expect signed-passcode-set 0 "" -- sh -c 'echo "signed store passcode" | keyseal --socket /run/s.sock passcode set --passcode-stdin'
  expect signed-add-when-unlocked 0 "" -- s add-generic-password -a erin -s sso -w signed-wu-secret
  expect signed-recovery-key 0 "" -- sh -c 'echo "signed store passcode" | keyseal --socket /run/s.sock recovery-key create --file /tmp/signed-recovery-key --passcode-stdin'
  kill $signed_pid; wait $signed_pid
  expect pcr-extend-b 0 "" -- tpm2 pcrextend -T device:/dev/tpmrm0 7:sha256=1111111111111111111111111111111111111111111111111111111111111111
  expect sign-state-b 0 "" -- sign /mnt/pcr-signatures/b.json /etc/pcr.key
  start_signed
  expect signed-state-b 0 signed-secret -- s find-generic-password -a dave -s sso -w
  expect signed-state-b-locked 36 "" -- s find-generic-password -a erin -s sso -w
  expect signed-state-b-unlock 0 "" -- signed_unlock
  expect signed-state-b-unlocked 0 signed-wu-secret -- s find-generic-password -a erin -s sso -w
  kill $signed_pid; wait $signed_pid
  expect pcr-extend-c 0 "" -- tpm2 pcrextend -T device:/dev/tpmrm0 7:sha256=2222222222222222222222222222222222222222222222222222222222222222
  # Live USB in state C: the device object from a copy of a store's files (the newest sealedDeviceSecret of the
  # keybag's JSON in keyseal.db and its WAL), loaded under Keyseal's primary template with tpm2 tools. The same steps
  # on the unbound first store must give its device secret (so they can fail); on the signed store tpm2 unseal gets
  # nothing, with or without a PCR policy session.
  refused() {  # refused NAME -- command: fails and prints nothing
    name=$1; shift 2
    got_out=$("$@" 2>/tmp/err); got=$?
    if [ "$got" != 0 ] && [ -z "$got_out" ]; then report "ok $name"
    else report "FAIL $name (exit $got, printed ${#got_out} characters; $(cat /tmp/err))"; fi
  }
  steal() {  # steal STORE NAME: loads the copied device object as /tmp/usb/NAME.ctx; prints the blob's version
    mkdir -p /tmp/usb && cat "$1/keyseal.db" "$1/keyseal.db-wal" >/tmp/usb/copy 2>/dev/null
    strings -n 8 /tmp/usb/copy | grep -o '"sealedDeviceSecret":"[^"]*"' | tail -1 \
      | sed 's/^"sealedDeviceSecret":"//; s/"$//; s#\\/#/#g' | base64 -d >/tmp/usb/$2.blob
    u16() { set -- $(od -An -tu1 -j"$1" -N2 /tmp/usb/$2.blob); echo $(($1 * 256 + $2)); }
    blob_version=$(od -An -tu1 -j4 -N1 /tmp/usb/$2.blob | tr -d " ")
    offset=6
    [ "$blob_version" = 1 ] || offset=10                  # the PCR mask
    [ "$blob_version" = 3 ] && offset=$((offset + 2 + $(u16 $offset $2)))  # the policy key's TPM2B_PUBLIC
    offset=$((offset + 2 + $(u16 $offset $2)))           # the primary's TPM2B_NAME
    size=$((2 + $(u16 $offset $2)))
    dd if=/tmp/usb/$2.blob of=/tmp/usb/$2.pub bs=1 skip=$offset count=$size 2>/dev/null
    dd if=/tmp/usb/$2.blob of=/tmp/usb/$2.priv bs=1 skip=$((offset + size)) 2>/dev/null
    tpm2 createprimary -Q -T device:/dev/tpmrm0 -C o -G ecc256:aes128cfb \
      -a 'restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda' -c /tmp/usb/p.ctx \
      && tpm2 load -Q -T device:/dev/tpmrm0 -C /tmp/usb/p.ctx -u /tmp/usb/$2.pub -r /tmp/usb/$2.priv \
        -c /tmp/usb/$2.ctx && echo "$blob_version"
  }
  expect usb-steal-unbound 0 1 -- steal /mnt/store unbound
  expect usb-unseal-unbound 0 32 -- sh -c 'tpm2 unseal -T device:/dev/tpmrm0 -c /tmp/usb/unbound.ctx -o /tmp/usb/ds && wc -c </tmp/usb/ds | tr -d " "'
  rm -f /tmp/usb/ds
  expect usb-steal-signed 0 3 -- steal /mnt/signed signed
  refused usb-unseal -- tpm2 unseal -T device:/dev/tpmrm0 -c /tmp/usb/signed.ctx
  refused usb-unseal-pcr-policy -- tpm2 unseal -T device:/dev/tpmrm0 -c /tmp/usb/signed.ctx -p pcr:sha256:7
  # State C signed by the foreign key, once under its own fingerprint and once relabelled with the bound key's
  # (which the TPM's TPM2_VerifySignature refuses): still recovery required.
  expect sign-state-c-foreign 0 "" -- sign /mnt/pcr-signatures/c-foreign.json /etc/foreign.key
  bound_pkfp=$(sed 's/.*"pkfp":"\([0-9a-f]*\)".*/\1/' /mnt/pcr-signatures/a.json)
  sed "s/\"pkfp\":\"[0-9a-f]*\"/\"pkfp\":\"$bound_pkfp\"/" /mnt/pcr-signatures/c-foreign.json \
    >/mnt/pcr-signatures/c-relabelled.json
  start_signed
  expect signed-foreign-signatures 156 "" -- s find-generic-password -a dave -s sso -w
  expect signed-foreign-not-verified 0 "" -- sh -c 'keyseal --socket /run/s.sock --json status | grep -q "1 signature for them did not verify"'
  expect signed-recover 0 "" -- sh -c 'printf "%s\n%s\n" "$(cat /tmp/signed-recovery-key)" "signed store passcode" | keyseal --socket /run/s.sock recover --recovery-key-stdin'
  expect signed-recovered 0 signed-secret -- s find-generic-password -a dave -s sso -w
  expect signed-recovered-unlocked 0 signed-wu-secret -- s find-generic-password -a erin -s sso -w
  kill $signed_pid; wait $signed_pid
  # Boot binding on /dev/tpmrm0: a second store bound to PCR 7; an extend makes it recovery required (exit 156),
  # the recovery key brings it back.
  b() { keyseal --socket /run/b.sock "$@"; }
  start_bound() {
    keyseald --store /mnt/bound --socket /run/b.sock --backend tpm --tcti device:/dev/tpmrm0 --tpm-pcrs 7 \
      >>/tmp/bound.log 2>&1 &
    bound_pid=$!
    for i in $(seq 1 200); do b status >/dev/null 2>&1 && break; sleep 0.1; done
  }
  start_bound
  expect bound-add 0 "" -- b add-generic-password -a carol -s vpn -w dk-secret --accessible always
  expect bound-recovery-key 0 "" -- b recovery-key create --file /tmp/recovery-key
  kill $bound_pid; wait $bound_pid
  expect pcr-extend 0 "" -- tpm2 pcrextend -T device:/dev/tpmrm0 7:sha256=abababababababababababababababababababababababababababababababab
  start_bound
  expect bound-recovery-required 156 "" -- b find-generic-password -a carol -s vpn -w
  expect bound-recover 0 "" -- sh -c 'keyseal --socket /run/b.sock recover --recovery-key-stdin </tmp/recovery-key'
  expect bound-back 0 dk-secret -- b find-generic-password -a carol -s vpn -w
  kill $bound_pid; wait $bound_pid
else
  expect before-first-unlock-refused 36 "" -- k find-generic-password -a bob -s mail -w
  expect unlock-after-power-cycle 0 "" -- sh -c 'echo "correct horse battery" | keyseal --socket /run/k.sock unlock --passcode-stdin'
  expect afu-back 0 afu-secret -- k find-generic-password -a bob -s mail -w
  expect wu-back 0 wu-secret -- k find-generic-password -a alice -s mail -w
  start_signed
  expect signed-state-a-again 0 signed-secret -- s find-generic-password -a dave -s sso -w
  expect signed-state-a-unlock 0 "" -- sh -c 'echo "signed store passcode" | keyseal --socket /run/s.sock unlock --passcode-stdin'
  expect signed-state-a-unlocked 0 signed-wu-secret -- s find-generic-password -a erin -s sso -w
  kill $signed_pid; wait $signed_pid
fi
# The TPM itself, through the raw device while keyseald still runs: no transient object or loaded session on it (the
# resource manager swaps a client's objects out between its commands; the swtpm suites check keyseald's flushes).
transient=$(tpm2 getcap -T device:/dev/tpm0 handles-transient 2>&1)
sessions=$(tpm2 getcap -T device:/dev/tpm0 handles-loaded-session 2>&1)
[ -z "$transient" ] && report "ok no-transient-objects" || report "FAIL transient objects: $transient"
[ -z "$sessions" ] && report "ok no-loaded-sessions" || report "FAIL loaded sessions: $sessions"
report "done $phase"
sync
echo o >/proc/sysrq-trigger  # a power cut, not a shutdown
sleep 10
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet) >"$work/initrd"

truncate -s 64M "$work/disk.img"
mkfs.ext4 -q -F "$work/disk.img"

boot() {
  local phase=$1 log=$work/boot-$1.log
  mkdir -p "$work/tpm"
  swtpm socket --tpm2 --tpmstate dir="$work/tpm" --ctrl type=unixio,path="$work/tpm/ctrl" \
    --log file="$work/tpm/swtpm.log" --terminate &
  swtpm_pid=$!
  for _ in $(seq 1 100); do [[ -S $work/tpm/ctrl ]] && break; sleep 0.05; done
  local started=$SECONDS
  timeout 300 qemu-system-x86_64 -accel tcg -m 1024 -nographic -no-reboot \
    -kernel "$kernel_root/boot/vmlinuz-$version" -initrd "$work/initrd" \
    -append "console=ttyS0 panic=-1 quiet keyseal.phase=$phase" \
    -drive file="$work/disk.img",format=raw,if=virtio,cache=directsync \
    -chardev socket,id=chrtpm,path="$work/tpm/ctrl" -tpmdev emulator,id=tpm0,chardev=chrtpm \
    -device tpm-tis,tpmdev=tpm0 >"$log" 2>&1 || true
  wait "$swtpm_pid" 2>/dev/null || true
  swtpm_pid=""
  tr -d '\r' <"$log" | grep "KEYSEAL-VM:" || true
  echo "test-vm: boot $phase took $((SECONDS - started)) s"
  if grep -q "KEYSEAL-VM: FAIL" "$log" || ! grep -q "KEYSEAL-VM: done $phase" "$log"; then
    tail -30 "$log" >&2
    echo "test-vm: boot $phase failed" >&2
    exit 1
  fi
}

boot 1
boot 2
echo "test-vm: the scenario passed on /dev/tpmrm0 in a qemu guest, across a power cut"
