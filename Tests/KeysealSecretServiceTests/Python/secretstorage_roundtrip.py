"""SecretStorage (PyPI) against the bridge: a DH-encrypted session, the default alias, create/search/get/delete."""
import sys

import secretstorage
from secretstorage.dhcrypto import Session  # noqa: F401  (the DH session class SecretStorage negotiates)

connection = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(connection)
assert collection.collection_path in (
    "/org/freedesktop/secrets/aliases/default",
    "/org/freedesktop/secrets/collection/login",
), collection.collection_path
if collection.is_locked():
    collection.unlock()
assert not collection.is_locked()
item = collection.create_item("SecretStorage item", {"app": "ss-test", "user": "alice"}, b"s3cr\xc3\xa9t", replace=True)
# SecretStorage opens a dh-ietf1024-sha256-aes128-cbc-pkcs7 session unless the service refuses it.
assert item.session is not None and item.session.encrypted, "SecretStorage fell back to a plain session"
found = list(collection.search_items({"app": "ss-test"}))
assert len(found) == 1, found
assert found[0].get_secret() == b"s3cr\xc3\xa9t"
# Created without a schema: stamped generic, as gnome-keyring stamps it.
assert found[0].get_attributes() == {"app": "ss-test", "user": "alice", "xdg:schema": "org.freedesktop.Secret.Generic"}
assert found[0].get_label() == "SecretStorage item"
found[0].set_label("renamed")
assert found[0].get_label() == "renamed"
# replace=True with the same attributes rewrites the one item
collection.create_item("again", {"app": "ss-test", "user": "alice"}, b"second", replace=True)
found = list(collection.search_items({"app": "ss-test"}))
assert len(found) == 1 and found[0].get_secret() == b"second", found
found[0].delete()
assert list(collection.search_items({"app": "ss-test"})) == []
print("ok")
sys.exit(0)
