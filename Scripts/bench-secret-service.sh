#!/usr/bin/env bash
# The Secret Service bridge next to gnome-keyring, in one run, each alone on a private session bus with the same
# client code (libsecret through PyGObject, and whole `secret-tool lookup` processes): stores of 1,000 items,
# in-process lookups, secret-tool lookups. gnome-keyring runs headless (--foreground --components=secrets, its login
# keyring created and unlocked from standard input) in a HOME of its own; keyseal-secret-service in front of a
# keyseald on the host-key backend. Also, on a third bus, the floor: Benchmarks/Floors/secret-service-floor.c, a
# provider that answers a lookup from memory with no work (built here with the C compiler), so that the lookups' client and bus
# cost is measured too: no provider can be faster than it, and "best possible" says how far above gnome-keyring
# that is. Usage: bench-secret-service.sh BIN_DIR OUTPUT_DIR [ITEMS LOOKUPS PROCESSES]
set -euo pipefail
bin=$1
output=$2
items=${3:-1000}
lookups=${4:-2000}
processes=${5:-100}
python=/opt/keyseal-python/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -m 0700 "$tmp/keyseal" "$tmp/gnome" "$tmp/gnome/home" "$tmp/floor"

wait_for() { for _ in $(seq 500); do [ -S "$1" ] && return 0; sleep 0.02; done; echo "bench: $1 did not appear" >&2; exit 1; }
start_bus() {
  dbus-daemon --session --nofork --nopidfile --address="unix:path=$1" >/dev/null 2>&1 &
  pids+=($!)
  wait_for "$1"
}

# Keyseal: keyseald, the bridge.
start_bus "$tmp/keyseal/bus"
"$bin/keyseald" --store "$tmp/keyseal/store" --socket "$tmp/keyseal/keyseal.sock" --backend host-key \
  --host-key "$tmp/keyseal/host.key" >"$tmp/keyseal/keyseald.log" 2>&1 &
pids+=($!)
wait_for "$tmp/keyseal/keyseal.sock"
DBUS_SESSION_BUS_ADDRESS="unix:path=$tmp/keyseal/bus" "$bin/keyseal-secret-service" \
  --socket "$tmp/keyseal/keyseal.sock" >"$tmp/keyseal/bridge.log" 2>&1 &
pids+=($!)
for _ in $(seq 500); do grep -q serving "$tmp/keyseal/bridge.log" && break; sleep 0.02; done

# gnome-keyring, headless.
start_bus "$tmp/gnome/bus"
(printf 'bench-password' | env HOME="$tmp/gnome/home" XDG_DATA_HOME="$tmp/gnome/home/.local/share" \
  XDG_RUNTIME_DIR="$tmp/gnome" DBUS_SESSION_BUS_ADDRESS="unix:path=$tmp/gnome/bus" \
  gnome-keyring-daemon --foreground --components=secrets --unlock >"$tmp/gnome/daemon.log" 2>&1) &
pids+=($!)
for _ in $(seq 500); do
  DBUS_SESSION_BUS_ADDRESS="unix:path=$tmp/gnome/bus" dbus-send --session --print-reply --dest=org.freedesktop.DBus \
    /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null \
    | grep -q "boolean true" && break
  sleep 0.02
done

# The floor provider.
compiler=$(command -v cc || command -v clang || echo /opt/swift/usr/bin/clang)
"$compiler" -O2 -o "$tmp/floor/secret-service-floor" "$here/../Benchmarks/Floors/secret-service-floor.c" -lsystemd -lcrypto
start_bus "$tmp/floor/bus"
DBUS_SESSION_BUS_ADDRESS="unix:path=$tmp/floor/bus" "$tmp/floor/secret-service-floor" >"$tmp/floor/floor.log" 2>&1 &
pids+=($!)
for _ in $(seq 500); do grep -q serving "$tmp/floor/floor.log" && break; sleep 0.02; done

measure() {
  env DBUS_SESSION_BUS_ADDRESS="unix:path=$1" HOME="$2" NO_AT_BRIDGE=1 GSETTINGS_BACKEND=memory \
    "$python" "$here/bench_secret_service.py" "$items" "$lookups" "$processes" ${3:-}
}
keyseal=$(measure "$tmp/keyseal/bus" "$tmp/keyseal")
gnome=$(measure "$tmp/gnome/bus" "$tmp/gnome/home")
floor=$(measure "$tmp/floor/bus" "$tmp/floor" floor)
mkdir -p "$output"
"$python" - "$keyseal" "$gnome" "$floor" "$output/secret-service.json" <<'PY'
import json, sys
keyseal, gnome, floor, path = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
rows = [
    ("store (1,000 items), ms per item", "store_ms_per_item", 20),
    ("in-process libsecret lookup, ms", "lookup_ms", 5),
    ("secret-tool lookup, ms per process", "secret_tool_lookup_ms", 2),
    ("D-Bus floor: Peer.Ping, ms", "dbus_ping_ms", None),
]
result = {"keyseal": keyseal, "gnome_keyring": gnome, "floor": floor, "speedup": {}, "best_possible": {}}
print(f"secret service: {'':34} {'keyseal':>10} {'gnome-keyring':>14} {'speed-up':>9} {'target':>7}"
      f" {'floor':>8} {'best possible':>14}")
for label, key, target in rows:
    speedup = gnome[key] / keyseal[key]
    result["speedup"][key] = speedup
    goal = f"{target:6}x" if target else f"{'-':>7}"
    # The floor provider stores nothing: a store has no floor.
    if key == "store_ms_per_item":
        best = f"{'-':>8} {'-':>14}"
    else:
        result["best_possible"][key] = gnome[key] / floor[key]
        best = f"{floor[key]:8.3f} {gnome[key] / floor[key]:13.1f}x"
    print(f"secret service: {label:34} {keyseal[key]:10.3f} {gnome[key]:14.3f} {speedup:8.1f}x {goal} {best}")
json.dump(result, open(path, "w"), indent=2)
PY
