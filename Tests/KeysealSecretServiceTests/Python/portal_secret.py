"""The Secret portal backend called as xdg-desktop-portal calls it: RetrieveSecret(handle, app_id, fd, options) on
org.freedesktop.secrets at /org/freedesktop/portal/desktop, with the write end of a pipe the secret is read from.

`unlocked`: each of two application ids gets 64 bytes, the same on each call and different from the other's; a
malformed id is refused (response 2) and nothing is written. Prints each id with the SHA-256 of its secret (never
the secret), for the test to compare across bridge restarts. `cancelled`: the keychain is locked and stays so:
response 1, nothing written. `sandboxed`: the caller runs in a sandbox (with /.flatpak-info, or in a namespace
and root of its own made inside one, without it): response 2, nothing written."""
import hashlib
import os
import sys

from jeepney import DBusAddress, MessageType, new_method_call
from jeepney.io.blocking import open_dbus_connection

connection = open_dbus_connection(bus=os.environ["DBUS_SESSION_BUS_ADDRESS"], enable_fds=True)
backend = DBusAddress(
    "/org/freedesktop/portal/desktop", bus_name="org.freedesktop.secrets",
    interface="org.freedesktop.impl.portal.Secret")


def retrieve(application):
    read_end, write_end = os.pipe()
    handle = "/org/freedesktop/portal/desktop/request/1_42/t" + str(os.getpid())
    message = new_method_call(backend, "RetrieveSecret", "osha{sv}", (handle, application, write_end, {}))
    reply = connection.send_and_get_reply(message, timeout=60)
    os.close(write_end)
    secret = b""
    while chunk := os.read(read_end, 4096):
        secret += chunk
    os.close(read_end)
    assert reply.header.message_type == MessageType.method_return, reply.body
    response, results = reply.body
    return response, secret


mode = sys.argv[1]
if mode == "unlocked":
    secrets = {}
    for application in ("org.example.First", "org.example.Second"):
        response, secret = retrieve(application)
        assert response == 0 and len(secret) == 64, (response, len(secret))
        again = retrieve(application)
        assert again == (0, secret), "a second call gave another secret"
        secrets[application] = secret
        print(application, hashlib.sha256(secret).hexdigest())
    assert secrets["org.example.First"] != secrets["org.example.Second"]
    for malformed in ("", "nodots", "org.example.", "org.1example.App", "org.example/../x.App"):
        assert retrieve(malformed) == (2, b""), malformed
elif mode == "cancelled":
    assert retrieve("org.example.First") == (1, b"")
elif mode == "sandboxed":
    # Run inside a Flatpak-like sandbox: the call is refused and nothing is written, for every application id.
    for application in ("org.example.First", "org.example.Second"):
        assert retrieve(application) == (2, b""), application
else:
    raise SystemExit("usage: portal_secret.py unlocked|cancelled")
sys.exit(0)
