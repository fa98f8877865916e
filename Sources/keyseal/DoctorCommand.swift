import ArgumentParser
import FoundationEssentials
import KeysealClient

struct DoctorCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "List, or delete, the items no keychain call can reach (administrators only).",
        discussion: """
            Lists every row of the store that cannot be decrypted (edited, rolled back, or sealed under a key the \
            store no longer has) or is of an item class Keyseal does not implement (keys, cert, idnt): its id, \
            class, access group, accessibility and why. Such rows are left out of exports (and named in the \
            export's report) and block passcode changes until they are deleted. Every class that holds rows must \
            be unlocked (locked: exit 36). Exits 0 whether or not any are found.

            --delete-undecryptable ID… deletes those rows by id, without decrypting them, in one transaction; \
            --delete-undecryptable --all deletes every row the listing shows. An id of a row that can be served \
            is refused (exit 206; delete it with delete-generic-password or delete-internet-password), an unknown \
            id is not found (exit 44); either way nothing is deleted.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(name: .long, help: "Delete the rows named by ID (or every such row with --all), without decrypting them.")
    var deleteUndecryptable = false
    @Flag(name: .long, help: "With --delete-undecryptable: every row the listing shows.")
    var all = false
    @Argument(help: ArgumentHelp("Item ids (32 hex digits) from the listing.", valueName: "id"))
    var ids: [String] = []

    func validate() throws {
        if !deleteUndecryptable && (all || !ids.isEmpty) {
            throw ValidationError("item ids and --all go with --delete-undecryptable")
        }
        if deleteUndecryptable && all == !ids.isEmpty {
            throw ValidationError("name the items to delete (ids from `keyseal doctor`), or give --all")
        }
    }

    func execute(_ client: DaemonClient) throws {
        let request: WireRequest =
            deleteUndecryptable ? .deleteUndecryptable(ids: all ? nil : ids) : .undecryptableItems
        guard case .undecryptable(let items) = try client.send(request) else { throw unexpected }
        if global.json {
            let entries = items.map { item -> JSON in
                .object([
                    ("id", .string(item.id)), ("class", .string(item.itemClass)),
                    ("accessible", .string(AccessibleName.name(item.accessibility))),
                    ("accessGroup", .string(item.accessGroup)), ("reason", .string(item.reason.rawValue)),
                    ("detail", .string(item.detail)),
                ])
            }
            Console.out(JSON.object([(deleteUndecryptable ? "deleted" : "undecryptable", .array(entries))]).rendered)
            return
        }
        let noun = "item\(items.count == 1 ? "" : "s")"
        if deleteUndecryptable {
            Console.out("deleted \(items.count) undecryptable \(noun)")
        } else if items.isEmpty {
            Console.out("no undecryptable items")
        } else {
            Console.out("\(items.count) undecryptable \(noun):")
        }
        for item in items {
            Console.out(
                "  \(item.id)  \(item.itemClass)  \(AccessibleName.name(item.accessibility))  group \(item.accessGroup)"
                    + "  \(item.reason.rawValue): \(item.detail)"
            )
        }
    }
}
