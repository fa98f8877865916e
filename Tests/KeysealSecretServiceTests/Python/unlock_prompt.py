"""A locked keychain: a search names the items the bridge knows as locked (their secrets stay out of reach), a
store is refused, then Unlock through the bridge's prompt (an askpass program) opens them."""
import sys

import secretstorage
from secretstorage.exceptions import LockedException
from jeepney.wrappers import DBusErrorResponse

connection = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(connection)
assert collection.is_locked(), "the keychain should be locked"
found = list(collection.search_items({"app": "before"}))
assert len(found) == 1, found
assert found[0].is_locked()
try:
    found[0].get_secret()
    raise SystemExit("a secret was read while locked")
except (DBusErrorResponse, LockedException) as error:
    if isinstance(error, DBusErrorResponse):
        assert error.name == "org.freedesktop.Secret.Error.IsLocked", error.name
assert list(collection.search_items({"app": "nothing-like-it"})) == []
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
