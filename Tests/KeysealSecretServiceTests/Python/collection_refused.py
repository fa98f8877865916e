"""CreateCollection for an access group keyseald's policy does not grant is refused (AccessDenied, with a message)
and makes no collection; a granted group becomes a collection that stores. Arguments: GRANTED REFUSED."""
import sys

import secretstorage
from jeepney.wrappers import DBusErrorResponse

granted, refused = sys.argv[1], sys.argv[2]
connection = secretstorage.dbus_init()
try:
    secretstorage.create_collection(connection, refused)
    raise SystemExit(f"a collection for {refused} was made")
except DBusErrorResponse as error:
    assert error.name == "org.freedesktop.DBus.Error.AccessDenied", error.name
    assert refused in error.data[0], error.data
paths = [c.collection_path for c in secretstorage.get_all_collections(connection)]
assert not any(refused.replace(".", "_") in path for path in paths), paths
collection = secretstorage.create_collection(connection, granted)
collection.create_item("granted", {"app": "granted"}, b"in-granted")
assert [item.get_secret() for item in collection.search_items({"app": "granted"})] == [b"in-granted"]
print("ok")
sys.exit(0)
