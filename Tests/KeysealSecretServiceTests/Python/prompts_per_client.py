"""Prompts a client asks for and never runs are capped per client: one client asking for 100 Unlock prompts keeps its
newest 16 and closes none of another client's; a client that leaves the bus takes its prompts with it."""
import sys

import secretstorage
from jeepney import DBusAddress, new_method_call
from jeepney.wrappers import unwrap_msg

SERVICE = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                      interface="org.freedesktop.Secret.Service")
PER_CLIENT = 16
ASKED = 100


def unlock_prompt(connection):
    unlocked, prompt = unwrap_msg(connection.send_and_get_reply(new_method_call(SERVICE, "Unlock", "ao", ([],))))
    assert prompt != "/", "the store must be locked: Unlock answered without a prompt"
    return prompt


def dismissible(connection, path):
    """Whether the bridge still holds the prompt (Dismiss answers instead of failing); dismisses it."""
    address = DBusAddress(path, bus_name="org.freedesktop.secrets", interface="org.freedesktop.Secret.Prompt")
    reply = connection.send_and_get_reply(new_method_call(address, "Dismiss"))
    return reply.header.message_type.name == "method_return"


victim = secretstorage.dbus_init()
attacker = secretstorage.dbus_init()
kept = unlock_prompt(victim)
asked = [unlock_prompt(attacker) for _ in range(ASKED)]
assert dismissible(victim, kept), "another client's prompt was closed"
alive = [path for path in asked if dismissible(attacker, path)]
assert alive == asked[-PER_CLIENT:], f"{len(alive)} of the client's prompts kept, expected its last {PER_CLIENT}"

leaving = secretstorage.dbus_init()
left = [unlock_prompt(leaving) for _ in range(3)]
leaving.close()
# The bridge hears of the departure through the bus; ask until it has (a second at most).
import time
deadline = time.monotonic() + 5
while time.monotonic() < deadline and any(dismissible(victim, path) for path in left[:1]):
    time.sleep(0.05)
assert not any(dismissible(victim, path) for path in left), "a departed client's prompts are still held"
print("ok")
sys.exit(0)
