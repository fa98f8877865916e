"""Records keyseald's answers for Benchmarks/Floors/keyseald-replay.c: listens on LISTEN, passes each connection's
frames to keyseald at TARGET and its responses back, and writes each request not seen before with its response to
TABLE (one line: both frames in hex, a space between). A lock-state subscription's later frames are passed on and
not recorded. Run by Scripts/bench-secret-service.sh; not part of the product."""
import os
import socket
import struct
import sys
import threading

listen, target, table = sys.argv[1:4]
seen = set()
lock = threading.Lock()
SUBSCRIBE_LOCK_STATE = 11


def frame(connection):
    data = b""
    while len(data) < 4:
        chunk = connection.recv(4 - len(data))
        if not chunk:
            return None
        data += chunk
    length = struct.unpack(">I", data)[0]
    while len(data) < 4 + length:
        chunk = connection.recv(4 + length - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def serve(client):
    upstream = socket.socket(socket.AF_UNIX)
    upstream.connect(target)
    while (request := frame(client)) is not None:
        upstream.sendall(request)
        response = frame(upstream)
        if response is None:
            return
        with lock:
            if request not in seen:
                seen.add(request)
                with open(table, "a") as out:
                    out.write(request.hex() + " " + response.hex() + "\n")
        client.sendall(response)
        if len(request) > 5 and request[5] == SUBSCRIBE_LOCK_STATE:
            while (change := frame(upstream)) is not None:
                client.sendall(change)
            return


server = socket.socket(socket.AF_UNIX)
server.bind(listen)
os.chmod(listen, 0o600)
server.listen(16)
print("recording", flush=True)
while True:
    connection, _ = server.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
