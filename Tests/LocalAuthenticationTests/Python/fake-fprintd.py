#!/usr/bin/python3
"""A stand-in for fprintd on a private bus, for LocalAuthenticationTests: the fprintd D-Bus API that fprintd's own
clients (fprintd-list, fprintd-verify) use, with a reader and enrolled fingers given on the command line.

usage: fake-fprintd.py BUS_ADDRESS LOG [--no-device] [--fingers a,b] [--no-match] [--hang]

Each method call is appended to LOG (one line: the method and its arguments), so a test can see what was asked.
"""
import sys

from gi.repository import Gio, GLib

INTERFACES = """
<node>
  <interface name="net.reactivated.Fprint.Manager">
    <method name="GetDevices"><arg type="ao" direction="out"/></method>
    <method name="GetDefaultDevice"><arg type="o" direction="out"/></method>
  </interface>
  <interface name="net.reactivated.Fprint.Device">
    <method name="ListEnrolledFingers"><arg type="s" direction="in"/><arg type="as" direction="out"/></method>
    <method name="Claim"><arg type="s" direction="in"/></method>
    <method name="Release"/>
    <method name="VerifyStart"><arg type="s" direction="in"/></method>
    <method name="VerifyStop"/>
    <signal name="VerifyFingerSelected"><arg type="s"/></signal>
    <signal name="VerifyStatus"><arg type="s"/><arg type="b"/></signal>
    <property name="name" type="s" access="read"/>
    <property name="num-enroll-stages" type="i" access="read"/>
    <property name="scan-type" type="s" access="read"/>
    <property name="finger-present" type="b" access="read"/>
    <property name="finger-needed" type="b" access="read"/>
  </interface>
</node>
"""
MANAGER = "/net/reactivated/Fprint/Manager"
DEVICE = "/net/reactivated/Fprint/Device/0"

address, log_path = sys.argv[1], sys.argv[2]
options = sys.argv[3:]
has_device = "--no-device" not in options
fingers = []
if "--fingers" in options:
    fingers = [f for f in options[options.index("--fingers") + 1].split(",") if f]
matches = "--no-match" not in options
hangs = "--hang" in options
hung = []
node = Gio.DBusNodeInfo.new_for_xml(INTERFACES)
loop = GLib.MainLoop()


def log(line):
    with open(log_path, "a") as handle:
        handle.write(line + "\n")


def error(invocation, name, message):
    invocation.return_dbus_error("net.reactivated.Fprint.Error." + name, message)


def manager_call(connection, sender, path, interface, method, parameters, invocation):
    log(method)
    if hangs:
        # A hung fprintd: the call is never answered (the invocation is kept so that no error reply is sent).
        hung.append(invocation)
        return
    if not has_device:
        if method == "GetDevices":
            invocation.return_value(GLib.Variant("(ao)", ([],)))
        else:
            error(invocation, "NoSuchDevice", "No devices available")
        return
    if method == "GetDevices":
        invocation.return_value(GLib.Variant("(ao)", ([DEVICE],)))
    else:
        invocation.return_value(GLib.Variant("(o)", (DEVICE,)))


def device_call(connection, sender, path, interface, method, parameters, invocation):
    arguments = parameters.unpack()
    log(" ".join([method] + [str(a) for a in arguments]))
    if method == "ListEnrolledFingers":
        if not fingers:
            error(invocation, "NoEnrolledPrints", "Failed to discover prints")
        else:
            invocation.return_value(GLib.Variant("(as)", (fingers,)))
    elif method == "VerifyStart":
        if not fingers:
            error(invocation, "NoEnrolledPrints", "No fingerprints enrolled")
            return
        invocation.return_value(None)
        finger = arguments[0] if arguments[0] != "any" else fingers[0]

        def report():
            connection.emit_signal(None, DEVICE, interface, "VerifyFingerSelected", GLib.Variant("(s)", (finger,)))
            result = "verify-match" if matches else "verify-no-match"
            connection.emit_signal(None, DEVICE, interface, "VerifyStatus", GLib.Variant("(sb)", (result, True)))
            return False

        GLib.timeout_add(50, report)
    else:
        invocation.return_value(None)


def device_property(connection, sender, path, interface, name):
    return {
        "name": GLib.Variant("s", "Fake reader"),
        "num-enroll-stages": GLib.Variant("i", 5),
        "scan-type": GLib.Variant("s", "press"),
        "finger-present": GLib.Variant("b", False),
        "finger-needed": GLib.Variant("b", False),
    }[name]


connection = Gio.DBusConnection.new_for_address_sync(
    address,
    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
    None,
    None,
)
connection.register_object(MANAGER, node.lookup_interface("net.reactivated.Fprint.Manager"), manager_call, None, None)
if has_device:
    connection.register_object(
        DEVICE, node.lookup_interface("net.reactivated.Fprint.Device"), device_call, device_property, None
    )


def owned(*_):
    log("serving")


def lost(*_):
    loop.quit()


Gio.bus_own_name_on_connection(connection, "net.reactivated.Fprint", Gio.BusNameOwnerFlags.NONE, owned, lost)
loop.run()
