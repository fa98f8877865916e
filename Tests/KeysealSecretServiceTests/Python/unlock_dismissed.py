"""A prompt whose askpass answer is wrong completes as dismissed (no loop, no hang); the collection stays locked."""
import sys

import secretstorage

connection = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(connection)
assert collection.is_locked()
dismissed = collection.unlock()
assert dismissed, "a wrong passcode must dismiss the prompt"
assert collection.is_locked()
print("ok")
sys.exit(0)
