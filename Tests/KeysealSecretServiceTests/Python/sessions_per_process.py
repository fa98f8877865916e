"""One process holding many bus connections, each with its 64 sessions, does not keep another process from the
Secret Service: the bridge counts sessions per process as well as per connection (a review opened 257 connections x
64 sessions from one program, 16,448 sessions, past the bridge's 16,384 in all, and `secret-tool lookup` on the
host failed while it held them). Stores an item with secret-tool, opens the sessions (the answers are not checked:
some may be refused), then looks the item up with secret-tool, another process, while every connection is open."""
import os
import subprocess
import sys

from jeepney import DBusAddress, MessageType, new_method_call
from jeepney.io.blocking import open_dbus_connection

SERVICE = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                      interface="org.freedesktop.Secret.Service")
CONNECTIONS = 257
SESSIONS = 64

store = subprocess.run(["secret-tool", "store", "--label=Per process", "test", "sessions-per-process"],
                       input=b"still served", capture_output=True)
assert store.returncode == 0, store.stderr

held = []
for _ in range(CONNECTIONS):
    connection = open_dbus_connection(bus=os.environ["DBUS_SESSION_BUS_ADDRESS"])
    held.append(connection)
    # Sent all at once and answered in order: 64 round trips would take the bridge's time, not the test's.
    for _ in range(SESSIONS):
        connection.send(new_method_call(SERVICE, "OpenSession", "sv", ("plain", ("s", ""))))
    answered = 0
    while answered < SESSIONS:
        kind = connection.receive(timeout=60).header.message_type
        answered += kind in (MessageType.method_return, MessageType.error)

lookup = subprocess.run(["secret-tool", "lookup", "test", "sessions-per-process"], capture_output=True)
assert lookup.returncode == 0 and lookup.stdout == b"still served", (lookup.returncode, lookup.stderr)
for connection in held:
    connection.close()
print("ok")
sys.exit(0)
