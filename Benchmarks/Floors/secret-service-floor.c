/*
 * The Secret Service benchmark's floor: a provider that does no work. It owns org.freedesktop.secrets on
 * $DBUS_SESSION_BUS_ADDRESS and answers what a libsecret lookup asks (the Service's properties, OpenSession,
 * SearchItems, GetSecrets, Unlock, ReadAlias) with one fixed item whose secret is "floor", from memory, through
 * sd-bus. It accepts the dh-ietf1024-sha256-aes128-cbc-pkcs7 session as the client asks, so that the client does
 * its own share of the exchange as with a real provider, but does none of its own: its "public value" is the
 * generator itself (private exponent 1, so the shared secret is the client's public value; no security at all,
 * which a floor does not need), and the key is HKDF-SHA256 of that, as the algorithm defines. A lookup against it costs the client (libsecret, PyGObject, secret-tool's process) and the bus
 * alone, so no provider can make the same lookup faster: Scripts/bench-secret-service.sh measures it in the same run
 * as Keyseal's bridge and gnome-keyring, and prints how fast a lookup could be at best.
 *
 * Built by Scripts/bench-secret-service.sh with `cc -O2 … -lsystemd -lcrypto`; not part of the product.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

static const char *dh_algorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7";
/* The AES key of the last DH session (the benchmark's clients use one session at a time); 0 bytes for plain. */
static unsigned char session_key[16];
static int session_encrypted;

/* HKDF-SHA256 with 32 zero bytes of salt and no info, 16 bytes out, of the shared secret left-padded to 128 bytes. */
static int derive_key(const unsigned char *peer, size_t length) {
    unsigned char shared[128] = {0}, salt[32] = {0}, prk[32], block[33];
    size_t out = 0;
    if (length > sizeof shared) return -1;
    memcpy(shared + sizeof shared - length, peer, length);
    if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, salt, sizeof salt, shared, sizeof shared, prk, sizeof prk, &out))
        return -1;
    block[0] = 1;
    if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, prk, sizeof prk, block, 1, block + 1, 32, &out)) return -1;
    memcpy(session_key, block + 1, sizeof session_key);
    return 0;
}

static const char *service_path = "/org/freedesktop/secrets";
static const char *collection_path = "/org/freedesktop/secrets/collection/login";
static const char *item_path = "/org/freedesktop/secrets/collection/login/1";
static const char *session_path = "/org/freedesktop/secrets/session/1";
static const char secret[] = "floor";

static int open_session(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    const char *algorithm = NULL;
    int r = sd_bus_message_read(m, "s", &algorithm);
    if (r < 0) return r;
    if (strcmp(algorithm, "plain") == 0) {
        session_encrypted = 0;
        return sd_bus_reply_method_return(m, "vo", "s", "", session_path);
    }
    if (strcmp(algorithm, dh_algorithm) != 0)
        return sd_bus_error_set(error, "org.freedesktop.DBus.Error.NotSupported", "no such algorithm");
    const void *peer = NULL;
    size_t length = 0;
    r = sd_bus_message_enter_container(m, 'v', "ay");
    if (r >= 0) r = sd_bus_message_read_array(m, 'y', &peer, &length);
    if (r < 0) return r;
    if (derive_key(peer, length) < 0)
        return sd_bus_error_set(error, "org.freedesktop.DBus.Error.InvalidArgs", "bad public value");
    session_encrypted = 1;
    const unsigned char generator = 2;
    sd_bus_message *reply = NULL;
    r = sd_bus_message_new_method_return(m, &reply);
    if (r >= 0) r = sd_bus_message_open_container(reply, 'v', "ay");
    if (r >= 0) r = sd_bus_message_append_array(reply, 'y', &generator, 1);
    if (r >= 0) r = sd_bus_message_close_container(reply);
    if (r >= 0) r = sd_bus_message_append(reply, "o", session_path);
    if (r >= 0) r = sd_bus_send(NULL, reply, NULL);
    sd_bus_message_unref(reply);
    return r;
}

static int search_items(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    sd_bus_message *reply = NULL;
    int r = sd_bus_message_new_method_return(m, &reply);
    if (r >= 0) r = sd_bus_message_append(reply, "ao", 1, item_path);
    if (r >= 0) r = sd_bus_message_append(reply, "ao", 0);
    if (r >= 0) r = sd_bus_send(NULL, reply, NULL);
    sd_bus_message_unref(reply);
    return r;
}

static int get_secrets(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    sd_bus_message *reply = NULL;
    int r = sd_bus_message_new_method_return(m, &reply);
    if (r >= 0) r = sd_bus_message_open_container(reply, 'a', "{o(oayays)}");
    if (r >= 0) r = sd_bus_message_open_container(reply, 'e', "o(oayays)");
    if (r >= 0) r = sd_bus_message_append(reply, "o", item_path);
    if (r >= 0) r = sd_bus_message_open_container(reply, 'r', "oayays");
    if (r >= 0) r = sd_bus_message_append(reply, "o", session_path);
    unsigned char iv[16] = {0}, sealed[32];
    int sealed_length = 0, last = 0;
    if (session_encrypted) {
        EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
        if (!context || !EVP_EncryptInit_ex2(context, EVP_aes_128_cbc(), session_key, iv, NULL)
            || !EVP_EncryptUpdate(context, sealed, &sealed_length, (const unsigned char *)secret, sizeof secret - 1)
            || !EVP_EncryptFinal_ex(context, sealed + sealed_length, &last))
            r = -EIO;
        EVP_CIPHER_CTX_free(context);
        sealed_length += last;
    }
    if (r >= 0) r = sd_bus_message_append_array(reply, 'y', iv, session_encrypted ? sizeof iv : 0);
    if (r >= 0)
        r = session_encrypted ? sd_bus_message_append_array(reply, 'y', sealed, (size_t)sealed_length)
                              : sd_bus_message_append_array(reply, 'y', secret, sizeof secret - 1);
    if (r >= 0) r = sd_bus_message_append(reply, "s", "text/plain");
    if (r >= 0) r = sd_bus_message_close_container(reply);
    if (r >= 0) r = sd_bus_message_close_container(reply);
    if (r >= 0) r = sd_bus_message_close_container(reply);
    if (r >= 0) r = sd_bus_send(NULL, reply, NULL);
    sd_bus_message_unref(reply);
    return r;
}

static int unlock(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    sd_bus_message *reply = NULL;
    int r = sd_bus_message_new_method_return(m, &reply);
    if (r >= 0) r = sd_bus_message_append(reply, "ao", 0);
    if (r >= 0) r = sd_bus_message_append(reply, "o", "/");
    if (r >= 0) r = sd_bus_send(NULL, reply, NULL);
    sd_bus_message_unref(reply);
    return r;
}

static int read_alias(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    return sd_bus_reply_method_return(m, "o", collection_path);
}

static int collections(sd_bus *bus, const char *path, const char *interface, const char *property,
                       sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)bus, (void)path, (void)interface, (void)property, (void)userdata, (void)error;
    return sd_bus_message_append(reply, "ao", 1, collection_path);
}

static const sd_bus_vtable service_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("OpenSession", "sv", "vo", open_session, 0),
    SD_BUS_METHOD("SearchItems", "a{ss}", "aoao", search_items, 0),
    SD_BUS_METHOD("GetSecrets", "aoo", "a{o(oayays)}", get_secrets, 0),
    SD_BUS_METHOD("Unlock", "ao", "aoo", unlock, 0),
    SD_BUS_METHOD("ReadAlias", "s", "o", read_alias, 0),
    SD_BUS_PROPERTY("Collections", "ao", collections, 0, 0),
    SD_BUS_VTABLE_END,
};

int main(void) {
    sd_bus *bus = NULL;
    int r = sd_bus_open_user(&bus);
    if (r >= 0) r = sd_bus_add_object_vtable(bus, NULL, service_path, "org.freedesktop.Secret.Service", service_vtable, NULL);
    if (r >= 0) r = sd_bus_request_name(bus, "org.freedesktop.secrets", 0);
    if (r < 0) {
        fprintf(stderr, "secret-service-floor: %s\n", strerror(-r));
        return 1;
    }
    printf("serving\n");
    fflush(stdout);
    for (;;) {
        r = sd_bus_process(bus, NULL);
        if (r < 0) break;
        if (r > 0) continue;
        r = sd_bus_wait(bus, (uint64_t)-1);
        if (r < 0) break;
    }
    sd_bus_flush_close_unref(bus);
    return r < 0 ? 1 : 0;
}
