"""Helpers shared by the session scripts: whether an object path is an open Secret Service session."""
from jeepney import DBusAddress, new_method_call
from jeepney.wrappers import DBusErrorResponse, unwrap_msg


def has_session(connection, path):
    """Whether `path` serves org.freedesktop.Secret.Session (Properties.GetAll answers for it)."""
    address = DBusAddress(path, bus_name="org.freedesktop.secrets", interface="org.freedesktop.DBus.Properties")
    try:
        unwrap_msg(connection.send_and_get_reply(
            new_method_call(address, "GetAll", "s", ("org.freedesktop.Secret.Session",))))
        return True
    except DBusErrorResponse:
        return False
