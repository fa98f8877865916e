/*
 * The Secret Service benchmark's second floor: a keyseald that answers instantly. It listens on a unix socket and
 * answers each request frame with the response keyseald gave the same request when Scripts/keyseald_record.py
 * recorded them (TABLE: one line per request, the request's frame and the response's frame in hex, separated by a
 * space); a request recorded with other bytes (OnBehalf carries the caller's pid) gets the first response recorded
 * for its opcode. The bridge in front of it does all of its own work (D-Bus, the wire's encoding and decoding, the
 * DH session's AES) and keyseald none, so that a lookup through it is the least a lookup through the bridge can
 * cost: Scripts/bench-secret-service.sh measures it in the same run as the bridge before keyseald and the floor.
 *
 * Built by Scripts/bench-secret-service.sh with `cc -O2 … -lpthread`; not part of the product. Usage:
 * keyseald-replay SOCKET TABLE
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct entry {
    unsigned char *request, *response;
    size_t request_length, response_length;
};
static struct entry table[256];
static int entries;

static unsigned char *unhex(const char *text, size_t length, size_t *out) {
    unsigned char *bytes = malloc(length / 2 + 1);
    if (!bytes) exit(1);
    for (size_t i = 0; i < length / 2; i++) sscanf(text + 2 * i, "%2hhx", &bytes[i]);
    *out = length / 2;
    return bytes;
}

static int read_all(int fd, unsigned char *buffer, size_t length) {
    for (size_t done = 0; done < length;) {
        ssize_t got = read(fd, buffer + done, length - done);
        if (got <= 0) return -1;
        done += (size_t)got;
    }
    return 0;
}

static int write_all(int fd, const unsigned char *buffer, size_t length) {
    for (size_t done = 0; done < length;) {
        ssize_t put = write(fd, buffer + done, length - done);
        if (put <= 0) return -1;
        done += (size_t)put;
    }
    return 0;
}

/* One connection: a frame is a 4-byte big-endian length, then that many bytes (the version, the opcode, ...). */
static void *serve(void *argument) {
    int fd = (int)(long)argument;
    static __thread unsigned char frame[1 << 16];
    for (;;) {
        if (read_all(fd, frame, 4)) break;
        size_t length = ((size_t)frame[0] << 24) | ((size_t)frame[1] << 16) | ((size_t)frame[2] << 8) | frame[3];
        if (length < 2 || length + 4 > sizeof frame || read_all(fd, frame + 4, length)) break;
        const struct entry *answer = NULL;
        for (int i = 0; i < entries && !answer; i++)
            if (table[i].request_length == length + 4 && memcmp(table[i].request, frame, length + 4) == 0)
                answer = &table[i];
        for (int i = 0; i < entries && !answer; i++)
            if (table[i].request_length > 5 && table[i].request[5] == frame[5]) answer = &table[i];
        if (!answer || write_all(fd, answer->response, answer->response_length)) break;
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: keyseald-replay SOCKET TABLE\n");
        return 2;
    }
    FILE *file = fopen(argv[2], "r");
    if (!file) {
        perror(argv[2]);
        return 1;
    }
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    while ((length = getline(&line, &capacity, file)) > 0 && entries < 256) {
        if (line[length - 1] == '\n') line[--length] = 0;
        char *space = strchr(line, ' ');
        if (!space) continue;
        table[entries].request = unhex(line, (size_t)(space - line), &table[entries].request_length);
        table[entries].response = unhex(space + 1, strlen(space + 1), &table[entries].response_length);
        entries++;
    }
    fclose(file);
    int server = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
    if (server < 0 || bind(server, (struct sockaddr *)&address, sizeof address) || listen(server, 16)) {
        perror("keyseald-replay");
        return 1;
    }
    for (;;) {
        int client = accept(server, NULL, NULL);
        if (client < 0) continue;
        pthread_t thread;
        if (pthread_create(&thread, NULL, serve, (void *)(long)client) == 0) pthread_detach(thread);
        else close(client);
    }
}
