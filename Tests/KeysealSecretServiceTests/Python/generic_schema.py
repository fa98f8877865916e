"""An item stored without a schema (secret-tool store, before this script) is found by libsecret's lookup with the
generic schema, whose name libsecret searches as the pair xdg:schema=org.freedesktop.Secret.Generic."""
import sys

import gi

gi.require_version("Secret", "1")
from gi.repository import Secret  # noqa: E402

schema = Secret.Schema.new(
    "org.freedesktop.Secret.Generic", Secret.SchemaFlags.NONE, {"tool": Secret.SchemaAttributeType.STRING}
)
found = Secret.password_lookup_sync(schema, {"tool": "no-schema"}, None)
assert found == "generic-value", found
service = Secret.Service.get_sync(Secret.ServiceFlags.NONE, None)
items = service.search_sync(None, {"tool": "no-schema"}, Secret.SearchFlags.ALL, None)
assert [item.get_attributes().get("xdg:schema") for item in items] == ["org.freedesktop.Secret.Generic"], items
print("ok")
sys.exit(0)
