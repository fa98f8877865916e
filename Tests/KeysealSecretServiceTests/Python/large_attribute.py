"""An attribute value of 64 KiB is stored, read back and found, as gnome-keyring stores it; an item too large is
refused with a message in the client's words (never a keyseald attribute name such as ksat or labl)."""
import re
import sys

import secretstorage
from jeepney.wrappers import DBusErrorResponse

connection = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(connection)
large = "v" * 65536
item = collection.create_item("large attribute", {"app": "large", "blob": large}, b"s3cret")
assert item.get_attributes()["blob"] == large
found = list(collection.search_items({"app": "large", "blob": large}))
assert [entry.get_secret() for entry in found] == [b"s3cret"], found
internal = ("ksat", "labl", "desc", "svce", "acct", "agrp")
for attributes, label in (({"app": "huge", "blob": "v" * (600 << 10)}, "huge"), ({"app": "long-label"}, "l" * 70000)):
    try:
        collection.create_item(label, attributes, b"x")
        raise SystemExit("an item over the limits was stored")
    except DBusErrorResponse as error:
        message = " ".join(str(part) for part in error.data)
        assert error.name == "org.freedesktop.DBus.Error.InvalidArgs", (error.name, message)
        assert not re.search(r"\b(%s)\b" % "|".join(internal), message), message
        assert "bytes" in message, message
        print(message)
print("ok")
sys.exit(0)
