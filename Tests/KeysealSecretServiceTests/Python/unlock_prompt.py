"""A locked keychain: IsLocked from searches, then Unlock through the bridge's prompt (an askpass program)."""
import sys

import secretstorage
from secretstorage.exceptions import LockedException
from jeepney.wrappers import DBusErrorResponse

connection = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(connection)
assert collection.is_locked(), "the keychain should be locked"
try:
    list(collection.search_items({"app": "before"}))
    raise SystemExit("a search while locked answered")
except DBusErrorResponse as error:
    assert error.name == "org.freedesktop.Secret.Error.IsLocked", error.name
    assert error.data and error.data[0], "IsLocked without a message"
try:
    collection.create_item("while locked", {"app": "locked"}, b"x")
    raise SystemExit("a store while locked answered")
except (DBusErrorResponse, LockedException) as error:
    pass
dismissed = collection.unlock()
assert not dismissed, "the prompt was dismissed"
assert not collection.is_locked()
assert [item.get_secret() for item in collection.search_items({"app": "before"})] == [b"kept"]
print("ok")
sys.exit(0)
