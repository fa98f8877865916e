"""Collections are access groups: CreateCollection with the label com.example.work makes a collection whose items
keyseald keeps in that group; a search on a collection finds only its own items, the service's search both."""
import sys

import secretstorage

connection = secretstorage.dbus_init()
default = secretstorage.get_default_collection(connection)
work = secretstorage.create_collection(connection, "com.example.work")
assert work.collection_path == "/org/freedesktop/secrets/collection/com_example_work", work.collection_path
assert work.get_label() == "com.example.work"
# Asking again for the same group answers the same collection.
again = secretstorage.create_collection(connection, "com.example.work")
assert again.collection_path == work.collection_path
default.create_item("default item", {"app": "groups", "which": "default"}, b"in-default")
work.create_item("work item", {"app": "groups", "which": "work"}, b"in-work")
in_default = list(default.search_items({"app": "groups"}))
in_work = list(work.search_items({"app": "groups"}))
assert [item.get_attributes()["which"] for item in in_default] == ["default"], in_default
assert [item.get_attributes()["which"] for item in in_work] == ["work"], in_work
assert in_work[0].get_secret() == b"in-work"
assert [item.item_path for item in work.get_all_items()] == [in_work[0].item_path]
everywhere = sorted(item.get_attributes()["which"] for item in secretstorage.search_items(connection, {"app": "groups"}))
assert everywhere == ["default", "work"], everywhere
paths = [c.collection_path for c in secretstorage.get_all_collections(connection)]
assert work.collection_path in paths, paths
print("ok")
sys.exit(0)
