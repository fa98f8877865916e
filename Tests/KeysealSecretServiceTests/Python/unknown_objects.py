"""Paths that name no object, as clients meet them: prints each call's D-Bus error name (one line each, compared
by the test with gnome-keyring's). `service` (the default): paths below /org/freedesktop/secrets, and checks that
SecretStorage raises ItemNotFoundException and python-keyring InitError for them. `outside`: paths outside the
service's tree (`/`, `/not/existing/path`…). `missing-item`: the properties and methods of another interface than
the item's on an item that does not exist."""
import os
import sys

import secretstorage
from jeepney import DBusAddress, MessageType, new_method_call
from jeepney.io.blocking import open_dbus_connection
from keyring.backends import SecretService
from keyring.errors import InitError
from secretstorage.exceptions import ItemNotFoundException

ROOT = "/org/freedesktop/secrets"
MISSING_ITEM = ROOT + "/collection/login/0123456789abcdef0123456789abcdef"
connection = open_dbus_connection(bus=os.environ["DBUS_SESSION_BUS_ADDRESS"])


def call(path, interface, member, signature="", body=()):
    address = DBusAddress(path, bus_name="org.freedesktop.secrets", interface=interface)
    reply = connection.send_and_get_reply(new_method_call(address, member, signature, body))
    assert reply.header.message_type == MessageType.error, (path, member, reply.body)
    print(path.replace(ROOT, ""), interface.rsplit(".", 1)[-1], member, reply.header.fields[4])  # 4: error name


properties = "org.freedesktop.DBus.Properties"
mode = sys.argv[1] if len(sys.argv) > 1 else "service"
if mode == "outside":
    for path in ("/", "/not/existing/path", "/org", "/org/freedesktop", "/org/freedesktop/secret"):
        call(path, properties, "Get", "ss", ("org.freedesktop.Secret.Item", "Label"))
        call(path, properties, "GetAll", "s", ("org.freedesktop.Secret.Collection",))
        call(path, "org.freedesktop.Secret.Item", "Delete")
    sys.exit(0)
if mode == "missing-item":
    collection = "org.freedesktop.Secret.Collection"
    for name in ("Label", "Items", "Locked"):
        call(MISSING_ITEM, properties, "Get", "ss", (collection, name))
    call(MISSING_ITEM, properties, "GetAll", "s", (collection,))
    call(MISSING_ITEM, properties, "Set", "ssv", (collection, "Label", ("s", "renamed")))
    call(MISSING_ITEM, properties, "Get", "ss", ("org.freedesktop.Secret.Session", "Label"))
    call(MISSING_ITEM, collection, "SearchItems", "a{ss}", ({},))
    sys.exit(0)
assert mode == "service", mode
call(ROOT + "/collection/nosuch", properties, "Get", "ss", ("org.freedesktop.Secret.Collection", "Label"))
call(ROOT + "/collection/nosuch", "org.freedesktop.Secret.Collection", "SearchItems", "a{ss}", ({},))
call(ROOT + "/aliases/nosuch", "org.freedesktop.Secret.Collection", "Delete")
call(ROOT + "/nosuch", properties, "GetAll", "s", ("org.freedesktop.Secret.Collection",))
call(MISSING_ITEM, properties, "Get", "ss", ("org.freedesktop.Secret.Item", "Label"))
call(MISSING_ITEM, "org.freedesktop.Secret.Item", "Delete")
call(ROOT + "/session/nosuch", "org.freedesktop.Secret.Session", "Close")
call(ROOT + "/prompt/nosuch", "org.freedesktop.Secret.Prompt", "Prompt", "s", ("",))

bus = secretstorage.dbus_init()
for attempt in (
    lambda: secretstorage.Collection(bus, ROOT + "/collection/nosuch"),
    lambda: secretstorage.Item(bus, MISSING_ITEM).get_label(),
):
    try:
        attempt()
        raise SystemExit("SecretStorage found an object that does not exist")
    except ItemNotFoundException:
        pass
backend = SecretService.Keyring()
backend.preferred_collection = ROOT + "/collection/nosuch"
try:
    backend.get_password("app", "user")
    raise SystemExit("python-keyring used a collection that does not exist")
except InitError:
    pass
sys.exit(0)
