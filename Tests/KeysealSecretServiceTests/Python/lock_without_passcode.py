"""A keychain without a passcode cannot lock: Lock through the bridge must not leave the collections showing a lock
state keyseald does not have. python-keyring (which raised KeyringLocked) and SecretStorage go on working."""
import sys

import keyring
import secretstorage
from keyring.backends import SecretService

backend = SecretService.Keyring()
backend.set_password("lock-test", "alice", "still-here")
connection = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(connection)
collection.lock()
assert not collection.is_locked(), "the collection shows locked while keyseald is not"
item = next(iter(collection.search_items({"service": "lock-test"})))
assert not item.is_locked()
assert not collection.unlock(), "Unlock must answer unlocked, not dismissed"
assert not collection.is_locked()
assert backend.get_password("lock-test", "alice") == "still-here"
print("ok")
sys.exit(0)
