"""One Secret Service provider's figures, measured through libsecret (PyGObject) on $DBUS_SESSION_BUS_ADDRESS:
stores of ITEMS items, in-process lookups, and whole `secret-tool lookup` processes. Prints one JSON object.
Run by Scripts/bench-secret-service.sh once per provider (keyseal-secret-service and gnome-keyring) in one run, and
with FLOOR (a fourth argument, `floor`) against Benchmarks/Floors/secret-service-floor.c, a provider that does no
work: no stores then, and every lookup answers "floor". With ITEMS 1 it stores and looks up one item, user0: so it
measures the bridge before Benchmarks/Floors/keyseald-replay.c, which answers every lookup with that item."""
import json
import random
import subprocess
import sys
import time

import gi

gi.require_version("Secret", "1")
from gi.repository import Gio, Secret  # noqa: E402

items = int(sys.argv[1])
lookups = int(sys.argv[2])
processes = int(sys.argv[3])
floor = len(sys.argv) > 4 and sys.argv[4] == "floor"
schema = Secret.Schema.new(
    "org.keyseal.Bench", Secret.SchemaFlags.NONE,
    {"service": Secret.SchemaAttributeType.STRING, "user": Secret.SchemaAttributeType.STRING},
)
# The connection and the session are set up once, as an application holds them.
Secret.Service.get_sync(Secret.ServiceFlags.OPEN_SESSION, None)

started = time.perf_counter()
for index in range(0 if floor else items):
    ok = Secret.password_store_sync(
        schema, {"service": "bench", "user": f"user{index}"}, Secret.COLLECTION_DEFAULT, f"item {index}",
        f"secret-{index}", None)
    assert ok
store_seconds = time.perf_counter() - started

rng = random.Random(7)
started = time.perf_counter()
for _ in range(lookups):
    index = rng.randrange(items)
    expected = "floor" if floor else f"secret-{index}"
    assert Secret.password_lookup_sync(schema, {"service": "bench", "user": f"user{index}"}, None) == expected
lookup_seconds = time.perf_counter() - started

# The bus itself: org.freedesktop.DBus.Peer.Ping to the provider on the same GDBus connection libsecret uses, a
# round trip through dbus-daemon that the provider answers without work of its own. A libsecret lookup is two
# calls (SearchItems, GetSecrets), so twice this is its floor.
bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
started = time.perf_counter()
for _ in range(lookups):
    bus.call_sync(
        "org.freedesktop.secrets", "/org/freedesktop/secrets", "org.freedesktop.DBus.Peer", "Ping", None, None,
        Gio.DBusCallFlags.NONE, -1, None)
ping_seconds = time.perf_counter() - started

started = time.perf_counter()
for _ in range(processes):
    index = rng.randrange(items)
    out = subprocess.run(
        ["secret-tool", "lookup", "service", "bench", "user", f"user{index}"], capture_output=True, check=True)
    assert out.stdout == (b"floor" if floor else f"secret-{index}".encode())
process_seconds = time.perf_counter() - started

print(json.dumps({
    "items": items,
    "store_ms_per_item": store_seconds * 1000 / items,
    "lookup_ms": lookup_seconds * 1000 / lookups,
    "dbus_ping_ms": ping_seconds * 1000 / lookups,
    "secret_tool_lookup_ms": process_seconds * 1000 / processes,
}))
