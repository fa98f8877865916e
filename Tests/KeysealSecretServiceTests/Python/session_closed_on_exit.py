"""A session is closed when the client that opened it leaves the bus: a child process opens a DH session, prints
its object path and exits; the path is then gone (no Session interface there), while a session of a client still
connected stays."""
import subprocess
import sys
import time

import secretstorage
from session_probe import has_session

CHILD = """
import secretstorage
from secretstorage.util import open_session
connection = secretstorage.dbus_init()
session = open_session(connection)
assert session.encrypted, "no DH session"
print(session.object_path, flush=True)
"""


connection = secretstorage.dbus_init()
mine = secretstorage.util.open_session(connection)
child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
path = child.stdout.strip()
assert path.startswith("/org/freedesktop/secrets/session/"), child.stdout + child.stderr
deadline = time.monotonic() + 10
while has_session(connection, path) and time.monotonic() < deadline:
    time.sleep(0.02)
assert not has_session(connection, path), f"{path} is still open after its client exited"
assert has_session(connection, mine.object_path), "a connected client's session was closed"
print("ok")
sys.exit(0)
