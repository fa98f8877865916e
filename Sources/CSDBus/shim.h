// sd-bus (libsystemd) for the Secret Service bridge (KeysealSecretService). The vtable macros are initializers, which
// Swift cannot call: each is wrapped in a function that returns the entry it builds.
#ifndef KEYSEAL_SDBUS_SHIM_H
#define KEYSEAL_SDBUS_SHIM_H

#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

static inline sd_bus_vtable keyseal_vtable_start(void) {
    sd_bus_vtable entry = SD_BUS_VTABLE_START(0);
    return entry;
}

static inline sd_bus_vtable keyseal_vtable_end(void) {
    sd_bus_vtable entry = SD_BUS_VTABLE_END;
    return entry;
}

static inline sd_bus_vtable keyseal_vtable_method(
    const char *member, const char *signature, const char *result, sd_bus_message_handler_t handler) {
    sd_bus_vtable entry = SD_BUS_METHOD(member, signature, result, handler, SD_BUS_VTABLE_UNPRIVILEGED);
    return entry;
}

/// A read-only property whose changes are announced with PropertiesChanged (with the new value).
static inline sd_bus_vtable keyseal_vtable_property(
    const char *member, const char *signature, sd_bus_property_get_t getter) {
    sd_bus_vtable entry = SD_BUS_PROPERTY(member, signature, getter, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE);
    return entry;
}

/// A read-only property whose changes are announced with PropertiesChanged as invalidated (without the value: a
/// list that costs a lookup to build).
static inline sd_bus_vtable keyseal_vtable_invalidating_property(
    const char *member, const char *signature, sd_bus_property_get_t getter) {
    sd_bus_vtable entry = SD_BUS_PROPERTY(member, signature, getter, 0, SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION);
    return entry;
}

/// The cookie of the message the bus is dispatching now (0 when none).
static inline uint64_t keyseal_current_cookie(sd_bus *bus) {
    uint64_t cookie = 0;
    sd_bus_message *current = sd_bus_get_current_message(bus);
    if (current != NULL) sd_bus_message_get_cookie(current, &cookie);
    return cookie;
}

static inline sd_bus_vtable keyseal_vtable_writable_property(
    const char *member, const char *signature, sd_bus_property_get_t getter, sd_bus_property_set_t setter) {
    sd_bus_vtable entry = SD_BUS_WRITABLE_PROPERTY(
        member, signature, getter, setter, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE | SD_BUS_VTABLE_UNPRIVILEGED);
    return entry;
}

static inline sd_bus_vtable keyseal_vtable_signal(const char *member, const char *signature) {
    sd_bus_vtable entry = SD_BUS_SIGNAL(member, signature, 0);
    return entry;
}

/// The creds mask the bridge asks of each caller: uid, pid (with its pidfd where the bus gives one), executable
/// and systemd unit.
static inline uint64_t keyseal_creds_mask(void) {
    return SD_BUS_CREDS_UID | SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID | SD_BUS_CREDS_EXE | SD_BUS_CREDS_UNIT
        | SD_BUS_CREDS_USER_UNIT | SD_BUS_CREDS_AUGMENT;
}

/// The creds mask of a pid alone, asked of the bus daemon (not read from /proc).
static inline uint64_t keyseal_creds_pid_mask(void) { return SD_BUS_CREDS_PID; }

#endif
