import FoundationEssentials
import Glibc
import KeysealCore

/// One stored item: the plaintext columns, the digests and the three ciphertexts.
public struct ItemRow: Sendable {
    /// Insertion order; never reused.
    public var id: Int64
    public var itemID: [UInt8]
    public var itemClass: String
    public var accessGroup: String
    public var accessibility: String
    public var generation: Int64
    public var primaryKeyDigest: Data
    /// In ``AttributeKey/digested`` order.
    public var digests: [Data?]
    public var sealed: SealedItem
    /// The generation the ledger records for this item id (nil when the ledger has no entry).
    public var ledgerGeneration: Int64?
    /// The digests of the item's string attribute pairs (``StringAttributes``) for the pair index; nil on a row
    /// read from the store, whose update then leaves its index entries as they are.
    public var pairDigests: [Data]?

    public init(
        id: Int64 = 0,
        itemID: [UInt8],
        itemClass: String,
        accessGroup: String,
        accessibility: String,
        generation: Int64,
        primaryKeyDigest: Data,
        digests: [Data?],
        sealed: SealedItem,
        ledgerGeneration: Int64? = nil
    ) {
        self.id = id
        self.itemID = itemID
        self.itemClass = itemClass
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.generation = generation
        self.primaryKeyDigest = primaryKeyDigest
        self.digests = digests
        self.sealed = sealed
        self.ledgerGeneration = ledgerGeneration
        self.pairDigests = nil
    }

    public func header(storeID: [UInt8]) -> ItemHeader {
        ItemHeader(
            storeID: storeID,
            itemID: itemID,
            itemClass: itemClass,
            accessGroup: accessGroup,
            accessibility: accessibility,
            primaryKeyDigest: primaryKeyDigest,
            digests: digests,
            generation: generation
        )
    }
}

/// Which rows a lookup wants: per access group, the digests that must match.
public struct RowFilter: Sendable {
    public struct GroupTerm: Sendable {
        public var group: String
        public var primaryKeyDigest: Data?
        /// (attribute key, digest) pairs, keys from ``AttributeKey/digested``.
        public var digests: [(String, Data)]
        /// String attribute pair digests that must all be in the row's pair index.
        public var pairDigests: [Data]
        public init(
            group: String,
            primaryKeyDigest: Data? = nil,
            digests: [(String, Data)] = [],
            pairDigests: [Data] = []
        ) {
            self.group = group
            self.primaryKeyDigest = primaryKeyDigest
            self.digests = digests
            self.pairDigests = pairDigests
        }
    }

    public var itemClass: String
    /// nil: every group, with no digest condition.
    public var groups: [GroupTerm]?
    public var accessibility: String?
    public var itemID: [UInt8]?

    public init(itemClass: String, groups: [GroupTerm]?, accessibility: String? = nil, itemID: [UInt8]? = nil) {
        self.itemClass = itemClass
        self.groups = groups
        self.accessibility = accessibility
        self.itemID = itemID
    }

    /// The digest when this filter is one primary-key digest in one group and nothing else: the lookup most calls
    /// make, which ``ItemStore/forEachRowInPlace(primaryKeyDigest:_:)`` serves.
    public var primaryKeyDigest: Data? {
        guard accessibility == nil, itemID == nil, let groups, groups.count == 1, groups[0].digests.isEmpty,
            groups[0].pairDigests.isEmpty
        else {
            return nil
        }
        return groups[0].primaryKeyDigest
    }
}

enum BindValue {
    case text(String)
    case blob(Data)
    case integer(Int64)
}

/// The SQLite store of a keychain: schema, migrations, keybag and item rows. Not thread-safe.
public final class ItemStore {
    public static let schemaVersion = 5
    public static let databaseName = "keyseal.db"

    public let database: Database
    public let path: String
    /// Row ids by primary-key digest (see ``RowIDHints``), loaded at open and kept up to date by this store's writes.
    var hints = RowIDHints()
    /// Rows read through a hint (for tests: the hinted path is taken).
    public private(set) var hintedReads = 0

    static let digestColumns = AttributeKey.digested.map { "d_" + $0 }
    static let rowColumns =
        "i.id, i.item_id, i.class, i.agrp, i.pdmn, i.generation, i.pk, "
        + digestColumns.map { "i." + $0 }.joined(separator: ", ") + ", i.attrs, i.wkey, i.value, l.generation"

    /// Opens or creates the store file in `directory` (exclusive locking, WAL, synchronous=FULL, secure_delete=ON)
    /// and migrates it.
    public init(directory: URL) throws(KeychainError) {
        path = directory.appendingPathComponent(Self.databaseName).path
        let path = self.path
        database = try sqlite { try Database(path: path) }
        do {
            // One process owns a store (the engine holds `.lock`), so the connection keeps its file locks for its
            // lifetime: no fcntl lock round trips per statement, the WAL index lives in heap memory (no -shm file),
            // and the page cache survives from one transaction to the next. Set before WAL is first used.
            try database.execute("PRAGMA locking_mode=EXCLUSIVE")
            try database.execute("PRAGMA journal_mode=WAL")
            try database.execute("PRAGMA synchronous=FULL")
            try database.execute("PRAGMA secure_delete=ON")
            try database.execute("PRAGMA busy_timeout=0")
            try migrate()
            try loadHints()
        } catch {
            database.close()
            throw keychainError(error)
        }
    }

    /// Moves with every row this store writes (items, keybag, ledger), committed or rolled back. The store's
    /// connection is the file's only writer (exclusive locking, and the engine holds `.lock`), so an unchanged value
    /// means an unchanged file.
    public var changeCount: Int64 { database.totalChanges }

    public func close() {
        cachedPrimaryKeyStatements = nil
        database.close()
    }

    // MARK: Schema

    static let migrations: [String] = [
        """
        CREATE TABLE keybag(id INTEGER PRIMARY KEY CHECK (id = 1), body BLOB NOT NULL, mac BLOB NOT NULL);
        CREATE TABLE items(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            item_id BLOB NOT NULL UNIQUE,
            class TEXT NOT NULL,
            agrp TEXT NOT NULL,
            pdmn TEXT NOT NULL,
            generation INTEGER NOT NULL,
            pk BLOB NOT NULL,
            \(digestColumns.map { "\($0) BLOB" }.joined(separator: ", ")),
            attrs BLOB NOT NULL,
            wkey BLOB NOT NULL,
            value BLOB NOT NULL,
            UNIQUE(pk, class, agrp)
        );
        CREATE INDEX items_acct ON items(d_acct) WHERE d_acct IS NOT NULL;
        CREATE INDEX items_svce ON items(d_svce) WHERE d_svce IS NOT NULL;
        CREATE INDEX items_srvr ON items(d_srvr) WHERE d_srvr IS NOT NULL;
        CREATE TABLE ledger(item_id BLOB PRIMARY KEY, generation INTEGER NOT NULL) WITHOUT ROWID;
        """,
        // 2: the ledger keyed by the row's id (never reused: AUTOINCREMENT). A lookup then joins on an integer in a
        // table of a few bytes a row, which stays in SQLite's cache, instead of on a random 16-byte key.
        """
        CREATE TABLE ledger_by_row(id INTEGER PRIMARY KEY, generation INTEGER NOT NULL);
        INSERT INTO ledger_by_row(id, generation)
            SELECT i.id, l.generation FROM items i JOIN ledger l ON l.item_id = i.item_id;
        DROP TABLE ledger;
        ALTER TABLE ledger_by_row RENAME TO ledger;
        """,
        // 3: the ledger's authenticated record (LedgerDigest), written by the engine at the first open that has DS.
        """
        CREATE TABLE ledger_record(id INTEGER PRIMARY KEY CHECK (id = 1), body BLOB NOT NULL, mac BLOB NOT NULL);
        """,
        // 4: the pair index of string attributes (StringAttributes): one keyed digest per (name, value) pair of an
        // item. An index only: every match is checked against the item's sealed attributes.
        """
        CREATE TABLE item_pairs(digest BLOB NOT NULL, row_id INTEGER NOT NULL, PRIMARY KEY(digest, row_id)) WITHOUT ROWID;
        CREATE INDEX item_pairs_row ON item_pairs(row_id);
        """,
        // 5: each access group's item count and stored bytes (sealed attributes and values), for the daemon's
        // quotas: one lookup instead of a scan of `items`. Triggers on `items` keep it exact through every write;
        // a group's row goes with its last item, so that the table names only the groups `items` names.
        """
        CREATE TABLE group_usage(agrp TEXT PRIMARY KEY, items INTEGER NOT NULL, bytes INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO group_usage(agrp, items, bytes)
            SELECT agrp, count(*), sum(length(attrs) + length(value)) FROM items GROUP BY agrp;
        CREATE TRIGGER group_usage_insert AFTER INSERT ON items BEGIN
            INSERT INTO group_usage(agrp, items, bytes) VALUES (NEW.agrp, 1, length(NEW.attrs) + length(NEW.value))
                ON CONFLICT(agrp) DO UPDATE SET items = items + 1, bytes = bytes + excluded.bytes;
        END;
        CREATE TRIGGER group_usage_delete AFTER DELETE ON items BEGIN
            UPDATE group_usage SET items = items - 1, bytes = bytes - length(OLD.attrs) - length(OLD.value)
                WHERE agrp = OLD.agrp;
            DELETE FROM group_usage WHERE agrp = OLD.agrp AND items <= 0;
        END;
        CREATE TRIGGER group_usage_update AFTER UPDATE OF agrp, attrs, value ON items WHEN NEW.agrp = OLD.agrp BEGIN
            UPDATE group_usage
                SET bytes = bytes + length(NEW.attrs) + length(NEW.value) - length(OLD.attrs) - length(OLD.value)
                WHERE agrp = NEW.agrp;
        END;
        CREATE TRIGGER group_usage_move AFTER UPDATE OF agrp, attrs, value ON items WHEN NEW.agrp <> OLD.agrp BEGIN
            UPDATE group_usage SET items = items - 1, bytes = bytes - length(OLD.attrs) - length(OLD.value)
                WHERE agrp = OLD.agrp;
            DELETE FROM group_usage WHERE agrp = OLD.agrp AND items <= 0;
            INSERT INTO group_usage(agrp, items, bytes) VALUES (NEW.agrp, 1, length(NEW.attrs) + length(NEW.value))
                ON CONFLICT(agrp) DO UPDATE SET items = items + 1, bytes = bytes + excluded.bytes;
        END;
        """,
    ]

    func migrate() throws {
        try database.execute("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL)")
        let current = Int(try database.scalarText("SELECT max(version) FROM schema_version") ?? "0") ?? 0
        guard current <= Self.migrations.count else {
            throw KeychainError(
                KeychainStatus.decode,
                "the store was written by a newer Keyseal (schema \(current); this version reads up to \(Self.migrations.count))"
            )
        }
        for version in current..<Self.migrations.count {
            try database.transaction {
                try database.execute(Self.migrations[version])
                try database.execute("INSERT INTO schema_version(version) VALUES (\(version + 1))")
            }
        }
    }

    // MARK: Keybag

    public func loadKeybag() throws(KeychainError) -> (body: Data, mac: Data)? { try loadSingleRow("keybag") }

    /// The body and MAC of the one row of `table` (the keybag, the ledger record); nil when it has none.
    private func loadSingleRow(_ table: String) throws(KeychainError) -> (body: Data, mac: Data)? {
        try sqlite {
            let statement = try database.statement("SELECT body, mac FROM \(table) WHERE id = 1")
            defer { statement.reset() }
            guard try statement.step() else { return nil }
            return (statement.blob(0) ?? Data(), statement.blob(1) ?? Data())
        }
    }

    /// Writes the keybag; call inside a transaction for atomicity with item changes.
    public func saveKeybag(body: Data, mac: Data) throws(KeychainError) {
        try sqlite {
            let statement = try database.statement(
                "INSERT INTO keybag(id, body, mac) VALUES (1, ?1, ?2) ON CONFLICT(id) DO UPDATE SET body = ?1, mac = ?2"
            )
            try statement.bind(1, body)
            try statement.bind(2, mac)
            try statement.run()
        }
    }

    // MARK: Items

    /// Rows matching `filter`, in insertion order.
    public func rows(_ filter: RowFilter) throws(KeychainError) -> [ItemRow] {
        var rows: [ItemRow] = []
        try forEachRow(filter) {
            rows.append($0)
            return true
        }
        return rows
    }

    /// Calls `body` for each row matching `filter` in insertion order until it returns false.
    public func forEachRow(_ filter: RowFilter, _ body: (ItemRow) throws(KeychainError) -> Bool) throws(KeychainError) {
        if let digest = filter.primaryKeyDigest {
            try forEachStatementRow(primaryKeyDigest: digest) { statement throws(KeychainError) in
                try body(Self.row(statement))
            }
            return
        }
        let byDigest =
            filter.groups?.contains { $0.primaryKeyDigest != nil || !$0.digests.isEmpty || !$0.pairDigests.isEmpty }
            ?? false
        var values: [BindValue] = []
        // The statement's shape; the SQL text is built only the first time a shape is seen.
        var shape = byDigest ? "D" : "C"
        if !byDigest { values.append(.text(filter.itemClass)) }
        if let accessibility = filter.accessibility {
            shape += "a"
            values.append(.text(accessibility))
        }
        if let itemID = filter.itemID {
            shape += "i"
            values.append(.blob(Data(itemID)))
        }
        if var groups = filter.groups {
            if groups.isEmpty { return }
            for index in groups.indices where groups[index].pairDigests.count > 1 {
                groups[index].pairDigests = try rarestFirst(groups[index].pairDigests)
            }
            for term in groups {
                shape += "|"
                // Digests bind the group and the class themselves; a row whose plaintext group or class was
                // edited is still found through them and then fails authentication.
                if !byDigest {
                    shape += "g"
                    values.append(.text(term.group))
                }
                if let pk = term.primaryKeyDigest {
                    shape += "p"
                    values.append(.blob(pk))
                }
                for (key, digest) in term.digests {
                    shape += "," + key
                    values.append(.blob(digest))
                }
                for digest in term.pairDigests {
                    shape += ",+"
                    values.append(.blob(digest))
                }
            }
        }
        let sql = { (hinted: Bool) -> String in
            var sql = "SELECT \(Self.rowColumns) FROM items i LEFT JOIN ledger l ON l.id = i.id WHERE "
            if hinted { sql += "i.id = ? AND " }
            sql += byDigest ? "1" : "i.class = ?"
            if filter.accessibility != nil { sql += " AND i.pdmn = ?" }
            if filter.itemID != nil { sql += " AND i.item_id = ?" }
            if let groups = filter.groups {
                let terms = groups.map { term -> String in
                    var parts: [String] = byDigest ? [] : ["i.agrp = ?"]
                    if term.primaryKeyDigest != nil { parts.append("i.pk = ?") }
                    parts += Self.digestTerms(term.digests.map(\.0))
                    // The rarest pair (first, ``rarestFirst(_:)``) lists the candidate rows; each other pair is one
                    // probe of the index per candidate. An IN list per pair would copy every row of a common pair
                    // (a schema name every item holds) into a temporary B-tree on each search.
                    parts += term.pairDigests.indices.map { index in
                        index == 0
                            ? "i.id IN (SELECT row_id FROM item_pairs WHERE digest = ?)"
                            : "EXISTS (SELECT 1 FROM item_pairs p WHERE p.digest = ? AND p.row_id = i.id)"
                    }
                    return "(" + parts.joined(separator: " AND ") + ")"
                }
                sql += " AND (" + terms.joined(separator: " OR ") + ")"
            }
            // One primary-key digest finds at most one row (it binds group and class): no sort is needed, and
            // ordering by id would make SQLite copy the row into a temporary B-tree.
            if let groups = filter.groups, groups.count == 1, groups[0].primaryKeyDigest != nil { return sql }
            return sql + " ORDER BY i.id"
        }
        // One primary-key digest: read the hinted row by id first; without a hint, or when the hinted row does not
        // match (the hint is stale), through the index, and remember where the row was.
        guard let groups = filter.groups, groups.allSatisfy({ $0.primaryKeyDigest != nil }) else {
            try runRows(key: "rows:" + shape, sql: { sql(false) }, values: values, body)
            return
        }
        if groups.count > 1 {
            // A primary key in each of several groups: each finds at most one row, so the union of the one-group
            // lookups, in id order, is what the OR of the terms returns.
            var found: [ItemRow] = []
            for term in groups {
                var single = filter
                single.groups = [term]
                try forEachRow(single) {
                    found.append($0)
                    return true
                }
            }
            found.sort { $0.id < $1.id }
            var previous: Int64?
            for row in found where row.id != previous {
                previous = row.id
                if try !body(row) { break }
            }
            return
        }
        let statements: (hinted: Statement, direct: Statement) = try sqlite {
            (
                try database.statement(key: "rows:h" + shape, sql: { sql(true) }),
                try database.statement(key: "rows:" + shape, sql: { sql(false) })
            )
        }
        try forEachStatementRow(
            primaryKeyDigest: groups[0].primaryKeyDigest!,
            statements,
            bind: { statement, first throws(SQLiteError) in try Self.bind(values, to: statement, from: first) }
        ) { statement throws(KeychainError) in try body(Self.row(statement)) }
    }

    /// The rows of one primary-key digest: the hinted row by id first; without a hint, or when the hinted row does
    /// not match (the hint is stale), through the index, remembering where the row was. `statements.hinted` takes
    /// the hinted id as parameter 1 and the rest from 2; `statements.direct` takes the rest from 1; `bind` binds
    /// the rest from the index it is given.
    private func forEachStatementRow(
        primaryKeyDigest digest: Data,
        _ statements: (hinted: Statement, direct: Statement),
        bind: (Statement, _ first: Int32) throws(SQLiteError) -> Void,
        _ body: (Statement) throws(KeychainError) -> Bool
    ) throws(KeychainError) {
        if let hinted = hints.rowID(for: digest) {
            var found = false
            try runRows(
                statements.hinted,
                bind: { statement throws(SQLiteError) in
                    try statement.bind(1, hinted)
                    try bind(statement, 2)
                }
            ) { statement throws(KeychainError) in
                found = true
                return try body(statement)
            }
            if found {
                hintedReads += 1
                return
            }
        }
        var foundID: Int64?
        try runRows(statements.direct, bind: { statement throws(SQLiteError) in try bind(statement, 1) }) {
            statement throws(KeychainError) in
            foundID = statement.int64(0)
            return try body(statement)
        }
        if let foundID { hints.set(digest, rowID: foundID) }
    }

    /// The lookup most calls make, one primary-key digest in one group and no other condition: what the general
    /// path does for this filter, on two statements kept at hand, without building a statement shape or a list of
    /// bound values.
    private func forEachStatementRow(
        primaryKeyDigest digest: Data,
        _ body: (Statement) throws(KeychainError) -> Bool
    )
        throws(KeychainError)
    {
        try forEachStatementRow(
            primaryKeyDigest: digest,
            try primaryKeyStatements(),
            bind: { statement, first throws(SQLiteError) in try statement.bind(first, digest) },
            body
        )
    }

    /// The rows a filter of one primary-key digest in one group finds (``RowFilter/primaryKeyDigest``), as
    /// ``forEachRow(_:_:)`` finds them, each read in place: `body` sees SQLite's own column bytes, with no row
    /// copied. Each view is valid only during the call that receives it.
    package func forEachRowInPlace(
        primaryKeyDigest digest: Data,
        _ body: (ItemRowInPlace) throws(KeychainError) -> Bool
    )
        throws(KeychainError)
    {
        try forEachStatementRow(primaryKeyDigest: digest) { statement throws(KeychainError) in
            try body(ItemRowInPlace(statement.pointer))
        }
    }

    /// The statements of ``forEachStatementRow(primaryKeyDigest:_:)``: by hinted id and digest, and by digest alone.
    /// One digest binds group and class and finds at most one row: no other condition, no order.
    private var cachedPrimaryKeyStatements: (hinted: Statement, direct: Statement)?

    private func primaryKeyStatements() throws(KeychainError) -> (hinted: Statement, direct: Statement) {
        if let cachedPrimaryKeyStatements { return cachedPrimaryKeyStatements }
        let select = "SELECT \(Self.rowColumns) FROM items i LEFT JOIN ledger l ON l.id = i.id WHERE "
        return try sqlite {
            let statements = (
                hinted: try database.statement(key: "rows:pk-hinted", sql: { select + "i.id = ?1 AND i.pk = ?2" }),
                direct: try database.statement(key: "rows:pk", sql: { select + "i.pk = ?1" })
            )
            cachedPrimaryKeyStatements = statements
            return statements
        }
    }

    /// Runs the cached statement `key` (built by `sql` the first time) with `values` and calls `body` per row until
    /// it returns false.
    private func runRows(
        key: String,
        sql: () -> String,
        values: [BindValue],
        _ body: (ItemRow) throws(KeychainError) -> Bool
    ) throws(KeychainError) {
        let statement = try sqlite { try database.statement(key: key, sql: sql) }
        try runRows(statement, bind: { statement throws(SQLiteError) in try Self.bind(values, to: statement, from: 1) })
        {
            statement throws(KeychainError) in try body(Self.row(statement))
        }
    }

    /// How many rows a pair digest lists, counted up to this bound: enough to tell a pair that names one item from
    /// one that every item holds, at a bounded cost per search.
    static let pairCountBound = 32

    /// `digests` ordered by how many rows each lists (counted up to ``pairCountBound``), fewest first.
    private func rarestFirst(_ digests: [Data]) throws(KeychainError) -> [Data] {
        try sqlite {
            let statement = try database.statement(
                key: "pairs:count",
                sql: {
                    "SELECT count(*) FROM (SELECT 1 FROM item_pairs WHERE digest = ?1 LIMIT \(Self.pairCountBound))"
                }
            )
            var counted: [(count: Int64, digest: Data)] = []
            counted.reserveCapacity(digests.count)
            for digest in digests {
                defer { statement.reset() }
                try statement.bind(1, digest)
                counted.append((try statement.step() ? statement.int64(0) : 0, digest))
            }
            return counted.enumerated().sorted { ($0.element.count, $0.offset) < ($1.element.count, $1.offset) }
                .map(\.element.digest)
        }
    }

    /// Binds `values` to consecutive parameters of `statement`, the first at index `first`.
    private static func bind(_ values: [BindValue], to statement: Statement, from first: Int32) throws(SQLiteError) {
        for (offset, value) in values.enumerated() {
            let index = first + Int32(offset)
            switch value {
            case .text(let text): try statement.bind(index, text)
            case .blob(let blob): try statement.bind(index, blob)
            case .integer(let integer): try statement.bind(index, integer)
            }
        }
    }

    /// Binds `statement` with `bind`, then calls `body` per row until it returns false; the statement is reset on
    /// the way out.
    private func runRows(
        _ statement: Statement,
        bind: (Statement) throws(SQLiteError) -> Void,
        _ body: (Statement) throws(KeychainError) -> Bool
    ) throws(KeychainError) {
        defer { statement.reset() }
        try sqlite {
            try bind(statement)
            while try statement.step() {
                if try !body(statement) { break }
            }
        }
    }

    /// Reads every row's primary-key digest and id into the hints (a scan of the primary-key index alone).
    func loadHints() throws {
        let statement = try database.statement("SELECT count(*) FROM items")
        let rows = try statement.step() ? Int(statement.int64(0)) : 0
        statement.reset()
        hints = RowIDHints(expected: rows)
        let scan = try database.statement("SELECT id, pk FROM items")
        defer { scan.reset() }
        while try scan.step() {
            if let digest = scan.blob(1) { hints.set(digest, rowID: scan.int64(0)) }
        }
    }

    /// Equality terms for digest columns. Only the most selective column present may drive an index (accounts
    /// before servers before services: many items share one service); the others are checked on the row (`+`
    /// keeps SQLite from choosing their index, which it otherwise does arbitrarily, without statistics).
    static func digestTerms(_ keys: [String]) -> [String] {
        let driver = Self.indexPreference.first { keys.contains($0) }
        return keys.map { key in key == driver || driver == nil ? "i.d_\(key) = ?" : "+i.d_\(key) = ?" }
    }

    static let indexPreference = [AttributeKey.account, AttributeKey.server, AttributeKey.service]

    /// Calls `body` for every row of every class, in insertion order, until it returns false (export).
    public func forEachItem(_ body: (ItemRow) throws(KeychainError) -> Bool) throws(KeychainError) {
        try sqlite {
            let statement = try database.statement(
                key: "rows:all",
                sql: {
                    "SELECT \(Self.rowColumns) FROM items i LEFT JOIN ledger l ON l.id = i.id ORDER BY i.id"
                }
            )
            defer { statement.reset() }
            while try statement.step() {
                if try !body(Self.row(statement)) { break }
            }
        }
    }

    static func row(_ statement: Statement) -> ItemRow {
        // pk, the digest columns and the three ciphertexts are consecutive columns: one copy, sliced.
        // The array left after taking the first and the last three is the digests, in place.
        var digests = statement.blobs(from: 6, count: 1 + digestColumns.count + 3)
        let value = digests.removeLast() ?? Data()
        let wrappedKey = digests.removeLast() ?? Data()
        let attributes = digests.removeLast() ?? Data()
        let primaryKeyDigest = digests.removeFirst() ?? Data()
        let ledger = Int32(7 + digestColumns.count + 3)
        return ItemRow(
            id: statement.int64(0),
            itemID: statement.bytes(1),
            itemClass: statement.text(2) ?? "",
            accessGroup: statement.text(3) ?? "",
            accessibility: statement.text(4) ?? "",
            generation: statement.int64(5),
            primaryKeyDigest: primaryKeyDigest,
            digests: digests,
            sealed: SealedItem(attributes: attributes, wrappedKey: wrappedKey, value: value),
            ledgerGeneration: statement.isNull(ledger) ? nil : statement.int64(ledger)
        )
    }

    /// Inserts a new item and its ledger entry; a primary-key collision is `errSecDuplicateItem`.
    static let insertSQL: String = {
        let columns =
            ["item_id", "class", "agrp", "pdmn", "generation", "pk"] + digestColumns + ["attrs", "wkey", "value"]
        return "INSERT INTO items(\(columns.joined(separator: ", "))) VALUES ("
            + columns.indices.map { "?\($0 + 1)" }.joined(separator: ", ") + ")"
    }()

    /// ``insertSQL`` with the row's id given (the last parameter): an insert placed past the refused buckets.
    static let insertWithIDSQL: String = {
        let columns =
            ["item_id", "class", "agrp", "pdmn", "generation", "pk"] + digestColumns + ["attrs", "wkey", "value"]
        return "INSERT INTO items(\((columns + ["id"]).joined(separator: ", "))) VALUES ("
            + (columns + ["id"]).indices.map { "?\($0 + 1)" }.joined(separator: ", ") + ")"
    }()

    /// The ledger buckets that failed verification at open (set by the engine): a new row is never placed in one,
    /// since its items are refused whatever they hold.
    public var refusedBuckets: Set<Int> = []

    /// The id SQLite would give the next row (AUTOINCREMENT: past every id ever used), moved on past the refused
    /// buckets; errSecDecode, nothing written, when every bucket is refused.
    private func nextRowID() throws(KeychainError) -> Int64 {
        let next: Int64 = try sqlite {
            let statement = try database.statement(
                key: "next-row-id",
                sql: {
                    "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'items'), 0), "
                        + "coalesce((SELECT max(id) FROM items), 0))"
                }
            )
            defer { statement.reset() }
            _ = try statement.step()
            return statement.int64(0)
        }
        for step in 1...Int64(LedgerDigest.bucketCount)
        where !refusedBuckets.contains(LedgerDigest.bucket(rowID: next + step)) {
            return next + step
        }
        throw KeychainError(
            KeychainStatus.decode,
            "every part of the generation ledger failed verification at open: nothing can be added until "
                + "`keyseal doctor --delete-undecryptable` has removed the items it refuses"
        )
    }

    @discardableResult
    public func insert(_ row: ItemRow) throws(KeychainError) -> Int64 {
        // A row placed in a refused bucket would be written and never served again: it goes past them instead.
        let placed = refusedBuckets.isEmpty ? nil : try nextRowID()
        return try sqlite {
            let statement = try database.statement(key: placed == nil ? "insert" : "insert-with-id") {
                placed == nil ? Self.insertSQL : Self.insertWithIDSQL
            }
            try bindRow(row, to: statement)
            if let placed { try statement.bind(Int32(Self.digestColumns.count + 10), placed) }
            try statement.run()
            let id = sqlite3LastInsertRowID()
            try writeLedger(id: id, generation: row.generation)
            try writePairs(id: id, row.pairDigests, replacing: false)
            if let ledgerKey {
                ledgerRecord.add(rowID: id, itemID: row.itemID, generation: row.generation, key: ledgerKey)
                ledgerDirty = true
            }
            hints.set(row.primaryKeyDigest, rowID: id)
            return id
        }
    }

    /// Rewrites an existing row (same id, so insertion order is kept) and its ledger entry.
    public func update(_ row: ItemRow) throws(KeychainError) {
        try sqlite {
            let columns =
                ["item_id", "class", "agrp", "pdmn", "generation", "pk"] + Self.digestColumns + [
                    "attrs", "wkey", "value",
                ]
            let assignments = columns.enumerated().map { "\($1) = ?\($0 + 1)" }.joined(separator: ", ")
            let statement = try database.statement(
                "UPDATE items SET \(assignments) WHERE id = ?\(columns.count + 1)"
            )
            try removeLedgerLeaf(id: row.id)
            try bindRow(row, to: statement)
            try statement.bind(Int32(columns.count + 1), row.id)
            try statement.run()
            try writeLedger(id: row.id, generation: row.generation)
            try writePairs(id: row.id, row.pairDigests, replacing: true)
            if let ledgerKey {
                ledgerRecord.add(rowID: row.id, itemID: row.itemID, generation: row.generation, key: ledgerKey)
                ledgerDirty = true
            }
            hints.set(row.primaryKeyDigest, rowID: row.id)
        }
    }

    public func delete(_ row: ItemRow) throws(KeychainError) {
        try sqlite {
            try removeLedgerLeaf(id: row.id)
            let statement = try database.statement("DELETE FROM items WHERE id = ?1")
            try statement.bind(1, row.id)
            try statement.run()
            let ledger = try database.statement("DELETE FROM ledger WHERE id = ?1")
            try ledger.bind(1, row.id)
            try ledger.run()
            try writePairs(id: row.id, [], replacing: true)
            hints.remove(row.primaryKeyDigest, rowID: row.id)
        }
    }

    private func bindRow(_ row: ItemRow, to statement: Statement) throws(SQLiteError) {
        try statement.bind(1, row.itemID)
        try statement.bind(2, row.itemClass)
        try statement.bind(3, row.accessGroup)
        try statement.bind(4, row.accessibility)
        try statement.bind(5, row.generation)
        try statement.bind(6, row.primaryKeyDigest)
        for (index, digest) in row.digests.enumerated() { try statement.bind(Int32(7 + index), digest) }
        let base = Int32(7 + row.digests.count)
        try statement.bind(base, row.sealed.attributes)
        try statement.bind(base + 1, row.sealed.wrappedKey)
        try statement.bind(base + 2, row.sealed.value)
    }

    /// Sets a row's entries in the pair index: nil leaves them as they are; `replacing` removes the old ones first.
    private func writePairs(id: Int64, _ digests: [Data]?, replacing: Bool) throws(SQLiteError) {
        guard let digests else { return }
        if replacing {
            let statement = try database.statement(
                key: "pairs:delete",
                sql: { "DELETE FROM item_pairs WHERE row_id = ?1" }
            )
            try statement.bind(1, id)
            try statement.run()
        }
        for digest in digests {
            let statement = try database.statement(
                key: "pairs:insert",
                sql: { "INSERT OR IGNORE INTO item_pairs(digest, row_id) VALUES (?1, ?2)" }
            )
            try statement.bind(1, digest)
            try statement.bind(2, id)
            try statement.run()
        }
    }

    private func writeLedger(id: Int64, generation: Int64) throws(SQLiteError) {
        let statement = try database.statement(
            "INSERT INTO ledger(id, generation) VALUES (?1, ?2) ON CONFLICT(id) DO UPDATE SET generation = ?2"
        )
        try statement.bind(1, id)
        try statement.bind(2, generation)
        try statement.run()
    }

    // MARK: Ledger record

    /// K_L once the engine has attached the ledger (``attachLedger(key:record:)``); nil before, or when the stored
    /// record could not be used (then nothing is maintained or written, so nothing is ever re-authenticated).
    private var ledgerKey: LedgerKey?
    /// The ledger record as this store keeps it current: every insert, update and delete XORs out the leaf the file
    /// held and XORs in the one it writes; ``transaction(_:)`` writes it before committing.
    public private(set) var ledgerRecord = LedgerDigest()
    private var ledgerDirty = false

    /// From now on keeps `record` current with every write, and writes it at the end of each transaction that
    /// changed it.
    public func attachLedger(key: LedgerKey, record: LedgerDigest) {
        ledgerKey = key
        ledgerRecord = record
        ledgerDirty = false
    }

    /// Stops keeping a record (an attach that its transaction did not commit).
    public func detachLedger() {
        ledgerKey = nil
        ledgerRecord = LedgerDigest()
        ledgerDirty = false
    }

    /// Empties, inside a transaction, each bucket of `buckets` that no longer holds an item row: its remaining
    /// ledger entries (of rows that are gone) are deleted and the record's bucket becomes the empty set's, so that
    /// it verifies again. A bucket that still holds a row is left as it is. Returns the buckets emptied.
    public func clearLedgerBuckets(_ buckets: Set<Int>) throws(KeychainError) -> Set<Int> {
        guard !buckets.isEmpty else { return [] }
        var occupied: Set<Int> = []
        var entries: [Int64] = []
        return try sqlite {
            let items = try database.statement("SELECT id FROM items NOT INDEXED")
            defer { items.reset() }
            while try items.step() { occupied.insert(LedgerDigest.bucket(rowID: items.int64(0))) }
            let cleared = buckets.subtracting(occupied)
            guard !cleared.isEmpty else { return [] }
            let ledger = try database.statement("SELECT id FROM ledger")
            defer { ledger.reset() }
            while try ledger.step() {
                let id = ledger.int64(0)
                if cleared.contains(LedgerDigest.bucket(rowID: id)) { entries.append(id) }
            }
            for id in entries {
                let delete = try database.statement(key: "ledger:delete", sql: { "DELETE FROM ledger WHERE id = ?1" })
                try delete.bind(1, id)
                try delete.run()
            }
            if ledgerKey != nil {
                for bucket in cleared { ledgerRecord.clear(bucket: bucket) }
                ledgerDirty = true
            }
            return cleared
        }
    }

    /// Sets the record's checkpoint (the keybag's anti-rollback counter value) for the transaction that writes the
    /// keybag; nothing when no ledger is attached.
    public func setLedgerCheckpoint(_ value: UInt64?) {
        guard ledgerKey != nil, ledgerRecord.checkpoint != value else { return }
        ledgerRecord.checkpoint = value
        ledgerDirty = true
    }

    /// The set digest of the ledger as the file holds it: one leaf per ledger entry (row id, the item id of the row
    /// with that id, or none, and the entry's generation). The ledger (a few bytes a row) is read in id order, then
    /// the item ids through their covering index, so that the rows themselves are not read.
    public func computeLedgerDigest(key: LedgerKey) throws(KeychainError) -> LedgerDigest {
        var digest = LedgerDigest()
        try sqlite {
            var ids: [Int64] = []
            var generations: [Int64] = []
            let ledger = try database.statement("SELECT id, generation FROM ledger ORDER BY id")
            defer { ledger.reset() }
            while try ledger.step() {
                ids.append(ledger.int64(0))
                generations.append(ledger.int64(1))
            }
            var matched = [Bool](repeating: false, count: ids.count)
            // From the table itself, not the item-id index: lookups read the table, and an edited index could
            // otherwise show this check other item ids than the rows hold.
            let items = try database.statement("SELECT id, item_id FROM items NOT INDEXED")
            defer { items.reset() }
            while try items.step() {
                // A row with no ledger entry is not in the ledger's set (it fails its own generation check).
                let id = items.int64(0)
                var low = 0
                var high = ids.count
                while low < high {
                    let middle = (low + high) / 2
                    if ids[middle] < id { low = middle + 1 } else { high = middle }
                }
                guard low < ids.count, ids[low] == id else { continue }
                matched[low] = true
                digest.add(rowID: id, itemID: items.bytes(1), generation: generations[low], key: key)
            }
            for index in ids.indices where !matched[index] {
                digest.add(rowID: ids[index], itemID: [], generation: generations[index], key: key)
            }
        }
        return digest
    }

    public func loadLedgerRecord() throws(KeychainError) -> (body: Data, mac: Data)? {
        try loadSingleRow("ledger_record")
    }

    /// Writes the ledger record now (inside a transaction); nothing when no ledger is attached.
    public func writeLedgerRecord() throws(KeychainError) {
        guard let ledgerKey else { return }
        let encoded = ledgerRecord.encoded(key: ledgerKey)
        try sqlite {
            let statement = try database.statement(
                key: "ledger-record",
                sql: {
                    "INSERT INTO ledger_record(id, body, mac) VALUES (1, ?1, ?2) "
                        + "ON CONFLICT(id) DO UPDATE SET body = ?1, mac = ?2"
                }
            )
            try statement.bind(1, encoded.body)
            try statement.bind(2, encoded.mac)
            try statement.run()
        }
        ledgerDirty = false
    }

    /// XORs out of the record the leaf the file holds for row `id` (its ledger entry and its row's item id), as
    /// ``computeLedgerDigest(key:)`` counts it.
    private func removeLedgerLeaf(id: Int64) throws(SQLiteError) {
        guard let ledgerKey else { return }
        let statement = try database.statement(
            key: "ledger-leaf",
            sql: { "SELECT l.generation, i.item_id FROM ledger l LEFT JOIN items i ON i.id = l.id WHERE l.id = ?1" }
        )
        defer { statement.reset() }
        try statement.bind(1, id)
        guard try statement.step() else { return }
        ledgerRecord.remove(
            rowID: id,
            itemID: statement.isNull(1) ? [] : statement.bytes(1),
            generation: statement.int64(0),
            key: ledgerKey
        )
        ledgerDirty = true
    }

    private func sqlite3LastInsertRowID() -> Int64 { database.lastInsertRowID }

    /// Whether a row with this primary key exists in `group`, other than `excludingID`.
    public func primaryKeyExists(
        itemClass: String,
        group: String,
        digest: Data,
        excludingID: Int64?
    ) throws(KeychainError)
        -> Bool
    {
        try sqlite {
            let statement = try database.statement("SELECT id FROM items WHERE class = ?1 AND agrp = ?2 AND pk = ?3")
            defer { statement.reset() }
            try statement.bind(1, itemClass)
            try statement.bind(2, group)
            try statement.bind(3, digest)
            while try statement.step() {
                if statement.int64(0) != excludingID { return true }
            }
            return false
        }
    }

    /// The access groups that hold items of `itemClass`.
    public func accessGroups(itemClass: String) throws(KeychainError) -> [String] {
        try sqlite {
            let statement = try database.statement("SELECT DISTINCT agrp FROM items WHERE class = ?1 ORDER BY agrp")
            defer { statement.reset() }
            try statement.bind(1, itemClass)
            var groups: [String] = []
            while try statement.step() { groups.append(statement.text(0) ?? "") }
            return groups
        }
    }

    /// How many items `group` holds and their stored size (sealed attributes and values), for quotas: one lookup in
    /// `group_usage`, which the triggers on `items` keep exact (schema 5). The table is not authenticated: a row no
    /// write of the triggers can leave (a negative count, edited into the file) is not believed, and the group's
    /// items are counted instead.
    public func usage(accessGroup group: String) throws(KeychainError) -> (items: Int, bytes: Int) {
        try sqlite {
            let statement = try database.statement("SELECT items, bytes FROM group_usage WHERE agrp = ?1")
            defer { statement.reset() }
            try statement.bind(1, group)
            guard try statement.step() else { return (0, 0) }
            let usage = (items: Int(statement.int64(0)), bytes: Int(statement.int64(1)))
            guard usage.items < 0 || usage.bytes < 0 else { return usage }
            let count = try database.statement(
                "SELECT count(*), coalesce(sum(length(attrs) + length(value)), 0) FROM items WHERE agrp = ?1"
            )
            defer { count.reset() }
            try count.bind(1, group)
            _ = try count.step()
            return (Int(count.int64(0)), Int(count.int64(1)))
        }
    }

    /// Item counts per accessibility code.
    public func countsByAccessibility() throws(KeychainError) -> [String: Int] {
        try sqlite {
            let statement = try database.statement("SELECT pdmn, count(*) FROM items GROUP BY pdmn")
            defer { statement.reset() }
            var counts: [String: Int] = [:]
            while try statement.step() { counts[statement.text(0) ?? ""] = Int(statement.int64(1)) }
            return counts
        }
    }

    /// Every row of the given accessibility codes, of every item class (for re-encryption after a passcode
    /// change: a row left out would be stranded under keys that are gone).
    public func rows(accessibility codes: [String]) throws(KeychainError) -> [ItemRow] {
        let wanted = Set(codes)
        var result: [ItemRow] = []
        try forEachItem { row in
            if wanted.contains(row.accessibility) { result.append(row) }
            return true
        }
        return result
    }

    /// Runs `body` in one transaction; SQLite failures become keychain statuses.
    /// The ledger record, when a write changed it, is written in the same transaction; a transaction that rolls
    /// back restores it.
    public func transaction<T>(_ body: () throws(KeychainError) -> T) throws(KeychainError) -> T {
        let savedLedger = ledgerRecord
        do {
            return try database.transaction { () throws -> T in
                let result = try body()
                if ledgerDirty { try writeLedgerRecord() }
                return result
            }
        } catch {
            ledgerRecord = savedLedger
            ledgerDirty = false
            throw keychainError(error)
        }
    }

    /// Runs `body` with a page cache of `kibibytes` (for bulk work such as an import, whose random index inserts
    /// would otherwise spill pages to the WAL and read them back), then restores the previous size.
    public func withPageCache<T>(kibibytes: Int, _ body: () throws(KeychainError) -> T) throws(KeychainError) -> T {
        try sqlite {
            let previous = try database.scalarText("PRAGMA cache_size") ?? "-2000"
            try database.execute("PRAGMA cache_size=-\(max(kibibytes, 2000))")
            defer { try? database.execute("PRAGMA cache_size=\(Int(previous) ?? -2000)") }
            return try body()
        }
    }

    /// Moves the WAL into the database and truncates it, so that overwritten pages leave no copy behind.
    public func checkpoint() throws(KeychainError) {
        try sqlite {
            try database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }
}

/// Runs `body` (SQLite calls) and turns a failure into the keychain error it stands for (``keychainError(_:)``).
private func sqlite<Result>(_ body: () throws -> Result) throws(KeychainError) -> Result {
    do {
        return try body()
    } catch {
        throw keychainError(error)
    }
}

/// The store's one conversion of a failure: a keychain error stays as it is (a row handler's, a migration's), a
/// SQLite failure becomes the keychain error it stands for, anything else is errSecIO.
private func keychainError(_ error: any Error) -> KeychainError {
    if let error = error as? KeychainError { return error }
    if let error = error as? SQLiteError { return error.keychainError }
    return KeychainError(KeychainStatus.io, "\(error)")
}
