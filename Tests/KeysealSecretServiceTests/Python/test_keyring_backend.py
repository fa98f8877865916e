"""python-keyring's own backend test class (keyring.testing.backend.BackendBasicTests) against the bridge, set up
the way keyring's tests/backends/test_SecretService.py sets up its SecretService backend."""
import pytest
from keyring.backends import SecretService
from keyring.testing.backend import BackendBasicTests


@pytest.mark.skipif(not SecretService.Keyring.viable, reason="the Secret Service is not reachable")
class TestSecretServiceKeyring(BackendBasicTests):
    __test__ = True

    def init_keyring(self):
        keyring = SecretService.Keyring()
        keyring.preferred_collection = "/org/freedesktop/secrets/collection/session"
        return keyring


def test_viable():
    # A skip above would hide a bridge that keyring cannot use: it must be viable here.
    assert SecretService.Keyring.viable
