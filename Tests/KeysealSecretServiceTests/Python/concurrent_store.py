"""Two libsecret clients, each on its own session bus (each bus with its own bridge in front of one keyseald), store
the same attributes at the same moment, round after round; then every round holds exactly one item.

Usage: concurrent_store.py FIRST_BUS_ADDRESS SECOND_BUS_ADDRESS [ROUNDS]"""
import multiprocessing
import os
import sys


def secret_module():
    import gi

    gi.require_version("Secret", "1")
    from gi.repository import Secret  # noqa: E402

    return Secret


def schema(secret):
    return secret.Schema.new(
        "org.keyseal.Race", secret.SchemaFlags.NONE, {"round": secret.SchemaAttributeType.STRING}
    )


def store(address, writer, rounds, barrier, errors):
    os.environ["DBUS_SESSION_BUS_ADDRESS"] = address
    secret = secret_module()
    race = schema(secret)
    # The session and the default collection, opened before the rounds start.
    secret.password_store_sync(race, {"round": "warm-up-%d" % writer}, secret.COLLECTION_DEFAULT, "warm", "w", None)
    for index in range(rounds):
        barrier.wait()
        if not secret.password_store_sync(
            race, {"round": str(index)}, secret.COLLECTION_DEFAULT, "race", "writer %d" % writer, None
        ):
            errors.put("round %d, writer %d: the store failed" % (index, writer))


def main():
    first, second = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    errors = context.Queue()
    writers = [
        context.Process(target=store, args=(address, writer, rounds, barrier, errors))
        for writer, address in enumerate([first, second])
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
    problems = []
    while not errors.empty():
        problems.append(errors.get())
    problems += ["a writer exited with %s" % writer.exitcode for writer in writers if writer.exitcode != 0]
    os.environ["DBUS_SESSION_BUS_ADDRESS"] = first
    secret = secret_module()
    service = secret.Service.get_sync(secret.ServiceFlags.OPEN_SESSION | secret.ServiceFlags.LOAD_COLLECTIONS, None)
    race = schema(secret)
    for index in range(rounds):
        found = service.search_sync(race, {"round": str(index)}, secret.SearchFlags.ALL, None)
        if len(found) != 1:
            problems.append("round %d holds %d items" % (index, len(found)))
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
