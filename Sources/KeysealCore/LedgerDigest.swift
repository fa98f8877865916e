import FoundationEssentials

/// K_L = HKDF(DS, "keyseal/ledger" ‖ store id), prepared: the leaves of the generation ledger and the MAC of its
/// record (docs/STORE-FORMAT.md, "Ledger record").
public struct LedgerKey: Sendable {
    private let keyed: PreparedHMAC

    public init(_ secret: SecretBytes) { keyed = PreparedHMAC(key: secret) }

    /// XORs leaf(row id, item id, generation) = HMAC(K_L, 0x01 ‖ row id ‖ item id ‖ generation)[0..<16] (row id and
    /// generation 8 bytes big-endian; the item id is whatever the row holds, empty when the row is missing) into
    /// `digest`.
    func xorLeaf(
        rowID: Int64,
        itemID: UnsafeRawBufferPointer,
        generation: Int64,
        into digest: UnsafeMutableRawBufferPointer
    ) {
        withUnsafeTemporaryAllocation(byteCount: 17 + PreparedHMAC.byteCount, alignment: 8) { buffer in
            let prefix = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<9])
            let suffix = UnsafeMutableRawBufferPointer(rebasing: buffer[9..<17])
            let out = UnsafeMutableRawBufferPointer(rebasing: buffer[17..<17 + PreparedHMAC.byteCount])
            prefix[0] = 0x01
            withUnsafeBytes(of: UInt64(bitPattern: rowID).bigEndian) {
                UnsafeMutableRawBufferPointer(rebasing: prefix[1..<9]).copyMemory(from: $0)
            }
            withUnsafeBytes(of: UInt64(bitPattern: generation).bigEndian) { suffix.copyMemory(from: $0) }
            keyed.authenticate(UnsafeRawBufferPointer(prefix), itemID, UnsafeRawBufferPointer(suffix), into: out)
            for index in 0..<LedgerDigest.leafBytes { digest[index] ^= out[index] }
            out.initializeMemory(as: UInt8.self, repeating: 0)
        }
    }

    /// The record's MAC: HMAC(K_L, 0x02 ‖ "keyseal/ledger-record" ‖ body).
    func mac(_ body: [UInt8]) -> Data {
        body.withUnsafeBytes { body in
            Array("\u{02}keyseal/ledger-record".utf8).withUnsafeBytes { label in
                var result = Data(count: PreparedHMAC.byteCount)
                result.withUnsafeMutableBytes { keyed.authenticate(label, body, into: $0) }
                return result
            }
        }
    }
}

/// The authenticated generation ledger's set digest: the ledger entries fall into ``bucketCount`` buckets by row
/// id; per bucket, the number of entries and the XOR of their leaves (``LedgerKey``). Adding, updating or removing
/// one entry is O(1): its old leaf is XORed out and its new one in. The stored record (``encoded(key:)``) is MACed
/// under K_L, so without DS it can be neither forged nor changed — only replaced by an older copy as a whole.
/// On a store with an anti-rollback counter the record also carries the counter value of the last checkpoint
/// (``checkpoint``), which must equal the keybag's (docs/TPM.md "Item-level freshness").
public struct LedgerDigest: Sendable, Equatable {
    public static let bucketCount = LedgerStatus.bucketCount
    public static let leafBytes = 16
    /// Version 1: the buckets; version 2: the buckets and the checkpoint's counter value.
    static let version: UInt8 = 1
    static let checkpointVersion: UInt8 = 2
    static let bodyCount = 3 + bucketCount * (4 + leafBytes)

    /// Entries per bucket.
    public private(set) var counts: [UInt32]
    /// `leafBytes` per bucket.
    private var digests: [UInt8]
    /// The anti-rollback counter value c of the last checkpoint, written with the keybag's in one transaction;
    /// nil on stores without a counter and in records written before checkpoints.
    public var checkpoint: UInt64?

    public init() {
        counts = Array(repeating: 0, count: Self.bucketCount)
        digests = Array(repeating: 0, count: Self.bucketCount * Self.leafBytes)
    }

    public static func bucket(rowID: Int64) -> Int { Int(UInt64(bitPattern: rowID) % UInt64(bucketCount)) }

    /// Adds the entry (row id, item id, generation) to its bucket.
    public mutating func add(rowID: Int64, itemID: UnsafeRawBufferPointer, generation: Int64, key: LedgerKey) {
        let bucket = Self.bucket(rowID: rowID)
        counts[bucket] &+= 1
        toggle(bucket: bucket, rowID: rowID, itemID: itemID, generation: generation, key: key)
    }

    /// Removes the entry (row id, item id, generation) from its bucket.
    public mutating func remove(rowID: Int64, itemID: UnsafeRawBufferPointer, generation: Int64, key: LedgerKey) {
        let bucket = Self.bucket(rowID: rowID)
        counts[bucket] &-= 1
        toggle(bucket: bucket, rowID: rowID, itemID: itemID, generation: generation, key: key)
    }

    public mutating func add(rowID: Int64, itemID: [UInt8], generation: Int64, key: LedgerKey) {
        itemID.withUnsafeBytes { add(rowID: rowID, itemID: $0, generation: generation, key: key) }
    }

    public mutating func remove(rowID: Int64, itemID: [UInt8], generation: Int64, key: LedgerKey) {
        itemID.withUnsafeBytes { remove(rowID: rowID, itemID: $0, generation: generation, key: key) }
    }

    /// Empties `bucket`: no entry, the digest of the empty set. For a bucket whose entries are all gone from the file
    /// (`keyseal doctor --delete-undecryptable` deleted every row of a bucket that failed verification).
    public mutating func clear(bucket: Int) {
        counts[bucket] = 0
        digests.replaceSubrange(
            bucket * Self.leafBytes..<(bucket + 1) * Self.leafBytes,
            with: repeatElement(0, count: Self.leafBytes)
        )
    }

    private mutating func toggle(
        bucket: Int,
        rowID: Int64,
        itemID: UnsafeRawBufferPointer,
        generation: Int64,
        key: LedgerKey
    ) {
        digests.withUnsafeMutableBytes { all in
            let start = bucket * Self.leafBytes
            key.xorLeaf(
                rowID: rowID,
                itemID: itemID,
                generation: generation,
                into: UnsafeMutableRawBufferPointer(rebasing: all[start..<start + Self.leafBytes])
            )
        }
    }

    /// The buckets whose count or digest differ from `other`'s.
    public func differingBuckets(from other: LedgerDigest) -> [Int] {
        (0..<Self.bucketCount).filter { bucket in
            let range = bucket * Self.leafBytes..<(bucket + 1) * Self.leafBytes
            return counts[bucket] != other.counts[bucket] || digests[range] != other.digests[range]
        }
    }

    /// The stored record: body = version ‖ bucket count (16 bits BE) ‖ per bucket: count (32 bits BE) ‖ digest
    /// [‖ checkpoint (64 bits BE), version 2]; mac = HMAC(K_L, 0x02 ‖ "keyseal/ledger-record" ‖ body).
    public func encoded(key: LedgerKey) -> (body: Data, mac: Data) {
        var body: [UInt8] = []
        body.reserveCapacity(Self.bodyCount + 8)
        body.append(checkpoint == nil ? Self.version : Self.checkpointVersion)
        body.append(UInt8(Self.bucketCount >> 8))
        body.append(UInt8(Self.bucketCount & 0xFF))
        for bucket in 0..<Self.bucketCount {
            withUnsafeBytes(of: counts[bucket].bigEndian) { body.append(contentsOf: $0) }
            body.append(contentsOf: digests[bucket * Self.leafBytes..<(bucket + 1) * Self.leafBytes])
        }
        if let checkpoint { withUnsafeBytes(of: checkpoint.bigEndian) { body.append(contentsOf: $0) } }
        return (Data(body), key.mac(body))
    }

    /// Checks a stored record against its MAC and parses it; any failure is `errSecDecode`.
    public static func decode(body: Data, mac: Data, key: LedgerKey) throws(KeychainError) -> LedgerDigest {
        let bytes = [UInt8](body)
        let expected = key.mac(bytes)
        guard expected.count == mac.count, zip(expected, mac).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0 else {
            throw KeychainError(KeychainStatus.decode, "the ledger record failed authentication (edited or corrupt)")
        }
        guard
            (bytes.first == version && bytes.count == bodyCount)
                || (bytes.first == checkpointVersion && bytes.count == bodyCount + 8),
            Int(bytes[1]) << 8 | Int(bytes[2]) == bucketCount
        else {
            throw KeychainError(KeychainStatus.decode, "the ledger record has an unknown format")
        }
        var digest = LedgerDigest()
        var offset = 3
        for bucket in 0..<bucketCount {
            digest.counts[bucket] = bytes[offset..<offset + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            offset += 4
            digest.digests.replaceSubrange(
                bucket * leafBytes..<(bucket + 1) * leafBytes,
                with: bytes[offset..<offset + leafBytes]
            )
            offset += leafBytes
        }
        if bytes[0] == checkpointVersion {
            digest.checkpoint = bytes[offset..<offset + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
        return digest
    }
}

extension KeyDerivation {
    /// K_L = HKDF(DS, "keyseal/ledger" ‖ store id): keys the generation ledger's leaves and record.
    public static func ledgerKey(deviceSecret: SecretBytes, storeID: [UInt8]) -> SecretBytes {
        hkdf(deviceSecret, info: info("keyseal/ledger", storeID))
    }
}
