"""libsecret through PyGObject (in-process lookups, the way GNOME applications call it)."""
import sys

import gi

gi.require_version("Secret", "1")
from gi.repository import Secret  # noqa: E402

schema = Secret.Schema.new(
    "org.keyseal.Test", Secret.SchemaFlags.NONE,
    {"service": Secret.SchemaAttributeType.STRING, "number": Secret.SchemaAttributeType.INTEGER},
)
attributes = {"service": "gi-test", "number": "7"}
assert Secret.password_store_sync(schema, attributes, Secret.COLLECTION_DEFAULT, "gi item", "pässword", None)
assert Secret.password_lookup_sync(schema, attributes, None) == "pässword"
assert Secret.password_lookup_sync(schema, {"service": "gi-test", "number": "8"}, None) is None
# libsecret stores the schema's name as the attribute xdg:schema and matches on it.
service = Secret.Service.get_sync(Secret.ServiceFlags.LOAD_COLLECTIONS, None)
items = service.search_sync(schema, attributes, Secret.SearchFlags.ALL, None)
assert len(items) == 1 and items[0].get_attributes().get("xdg:schema") == "org.keyseal.Test", items
other = Secret.Schema.new("org.keyseal.Other", Secret.SchemaFlags.NONE, {"service": Secret.SchemaAttributeType.STRING})
assert Secret.password_lookup_sync(other, {"service": "gi-test"}, None) is None
assert Secret.password_clear_sync(schema, attributes, None)
assert Secret.password_lookup_sync(schema, attributes, None) is None
print("ok")
sys.exit(0)
