"""A lock between a search and the read of its secret: SearchItems finds the item unlocked, then another keyseald
client locks the keychain (COMMAND..., run here between the two calls), and GetSecrets and Item.GetSecret, sent at
once on the wire (no client-side check), answer IsLocked: the bridge hands out a secret only as keyseald gives it
at the time of the read, never one it kept from the search."""
import subprocess
import sys

from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
from jeepney.wrappers import unwrap_msg, DBusErrorResponse

SERVICE = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                      interface="org.freedesktop.Secret.Service")
connection = open_dbus_connection(bus="SESSION")


def call(address, method, signature=None, body=()):
    return unwrap_msg(connection.send_and_get_reply(new_method_call(address, method, signature, body)))


_, session = call(SERVICE, "OpenSession", "sv", ("plain", ("s", "")))
unlocked, locked = call(SERVICE, "SearchItems", "a{ss}", ({"app": "before"},))
assert len(unlocked) == 1 and locked == [], (unlocked, locked)
# Read once while unlocked: the item and the session are good.
(secrets,) = call(SERVICE, "GetSecrets", "aoo", (unlocked, session))
assert bytes(secrets[unlocked[0]][2]) == b"kept", secrets
unlocked, _ = call(SERVICE, "SearchItems", "a{ss}", ({"app": "before"},))
subprocess.run(sys.argv[1:], check=True, capture_output=True)
item = DBusAddress(unlocked[0], bus_name="org.freedesktop.secrets", interface="org.freedesktop.Secret.Item")
for address, method, signature, body in [
    (SERVICE, "GetSecrets", "aoo", (unlocked, session)),
    (item, "GetSecret", "o", (session,)),
]:
    try:
        answer = call(address, method, signature, body)
        raise SystemExit(f"{method} answered while locked: {answer!r}")
    except DBusErrorResponse as error:
        assert error.name == "org.freedesktop.Secret.Error.IsLocked", (method, error.name)
print("ok")
sys.exit(0)
