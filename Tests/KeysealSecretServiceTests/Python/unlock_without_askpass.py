"""Locked, and the bridge has no askpass program: Unlock returns a Prompt that completes dismissed (as a headless
gnome-keyring's does), so SecretStorage reports the prompt dismissed and python-keyring raises KeyringLocked,
never a raw D-Bus error."""
import sys

import secretstorage
from keyring.backends import SecretService
from keyring.errors import KeyringLocked

connection = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(connection)
assert collection.is_locked()
assert collection.unlock() is True, "the prompt must complete dismissed"
assert collection.is_locked()
try:
    SecretService.Keyring().get_password("app", "before")
    raise SystemExit("python-keyring read a locked keychain")
except KeyringLocked:
    pass
print("ok")
sys.exit(0)
