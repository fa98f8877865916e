"""One client opening 1,100 sessions closes none of another client's: the bridge keeps a limit per client (per D-Bus
unique name), and a client over it loses its own oldest sessions only (issue 30: a single list of 1,024 for all
clients let one client close the others' sessions)."""
import sys

import secretstorage
from jeepney import DBusAddress, new_method_call
from jeepney.wrappers import unwrap_msg
from session_probe import has_session

SERVICE = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                      interface="org.freedesktop.Secret.Service")
PER_CLIENT = 64
OPENED = 1100


def open_plain(connection):
    _, path = unwrap_msg(connection.send_and_get_reply(new_method_call(SERVICE, "OpenSession", "sv", ("plain", ("s", "")))))
    return path


victim = secretstorage.dbus_init()
attacker = secretstorage.dbus_init()
kept = open_plain(victim)
dh = secretstorage.util.open_session(victim)
opened = [open_plain(attacker) for _ in range(OPENED)]
assert has_session(victim, kept), "another client's plain session was closed"
assert has_session(victim, dh.object_path), "another client's DH session was closed"
# The victim's DH session still encrypts: a secret stored through it reads back.
collection = secretstorage.get_default_collection(victim, session=dh)
item = collection.create_item("per-client", {"test": "sessions-per-client"}, b"still mine", replace=True)
assert item.get_secret() == b"still mine"
item.delete()
# The attacker keeps its newest sessions only.
alive = [path for path in opened if has_session(attacker, path)]
assert alive == opened[-PER_CLIENT:], f"{len(alive)} of the attacker's sessions open, expected its last {PER_CLIENT}"
print("ok")
sys.exit(0)
