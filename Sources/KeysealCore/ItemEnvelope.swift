import Crypto
import FoundationEssentials
import Glibc

/// Length-prefixed encoding: tag, 32-bit big-endian length, bytes. No two field lists collide.
@inlinable
func appendField(_ buffer: inout [UInt8], tag: UInt8, _ bytes: some Collection<UInt8>) {
    buffer.append(tag)
    let length = UInt32(bytes.count)
    buffer.append(UInt8(truncatingIfNeeded: length >> 24))
    buffer.append(UInt8(truncatingIfNeeded: length >> 16))
    buffer.append(UInt8(truncatingIfNeeded: length >> 8))
    buffer.append(UInt8(truncatingIfNeeded: length))
    buffer.append(contentsOf: bytes)
}

/// `Data` copied through its contiguous storage (its generic iterator costs a call per byte).
@inlinable
func appendField(_ buffer: inout [UInt8], tag: UInt8, _ bytes: Data) {
    bytes.withUnsafeBytes { raw in appendField(&buffer, tag: tag, raw) }
}

/// A string's UTF-8 copied through its contiguous storage where it has one (native strings do), not byte by byte.
@inlinable
func appendField(_ buffer: inout [UInt8], tag: UInt8, _ text: String.UTF8View) {
    let copied: Void? = text.withContiguousStorageIfAvailable { utf8 in
        appendField(&buffer, tag: tag, UnsafeRawBufferPointer(utf8))
    }
    if copied == nil { appendField(&buffer, tag: tag, Array(text)) }
}

/// The search digests (docs/ARCHITECTURE.md, "Store and search digests"): HMAC-SHA256(IX, group ‖ class ‖ attribute ‖
/// value) per primary-key attribute, and one digest of the whole primary-key tuple.
public struct IndexKey: @unchecked Sendable {
    // The keyed HMAC state, prepared once; copied per digest. Immutable.
    private let keyed: PreparedHMAC

    public init(_ secret: SecretBytes) { keyed = PreparedHMAC(key: secret) }

    private func mac(_ message: [UInt8]) -> Data {
        message.withUnsafeBytes { keyed.authenticateData($0) }
    }

    /// F(tag, value bytes) without building an intermediate array for strings and data (the same bytes as
    /// ``AttributeValue/matchBytes``).
    private static func appendValue(_ buffer: inout [UInt8], _ value: AttributeValue) {
        switch value {
        case .string(let text): appendField(&buffer, tag: valueTag(value), text.utf8)
        case .data(let data): appendField(&buffer, tag: valueTag(value), data)
        default: appendField(&buffer, tag: valueTag(value), value.matchBytes)
        }
    }

    private static func valueTag(_ value: AttributeValue) -> UInt8 {
        switch value {
        case .string, .data: 4
        case .bool: 5
        case .int: 6
        case .date: 7
        }
    }

    private static func prefix(group: String, itemClass: ItemClass) -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(96)
        appendField(&buffer, tag: 1, group.utf8)
        appendField(&buffer, tag: 2, itemClass.rawValue.utf8)
        return buffer
    }

    /// The digest of one attribute's value.
    public func attributeDigest(group: String, itemClass: ItemClass, key: String, value: AttributeValue) -> Data {
        var buffer = Self.prefix(group: group, itemClass: itemClass)
        appendField(&buffer, tag: 3, key.utf8)
        Self.appendValue(&buffer, value)
        return mac(buffer)
    }

    /// The digest of the whole primary-key tuple: every primary-key attribute (defaults filled) and `sync`.
    public func primaryKeyDigest(
        group: String,
        itemClass: ItemClass,
        attributes: [String: AttributeValue],
        synchronizable: Bool
    ) -> Data {
        var buffer = Self.prefix(group: group, itemClass: itemClass)
        for key in AttributeKey.primaryKey(for: itemClass) {
            let value = attributes[key] ?? AttributeKey.defaultValue(key)
            appendField(&buffer, tag: 3, key.utf8)
            Self.appendValue(&buffer, value)
        }
        appendField(&buffer, tag: 3, AttributeKey.synchronizable.utf8)
        appendField(&buffer, tag: 5, [synchronizable ? 1 : 0])
        return mac(buffer)
    }
}

/// The plaintext columns of an item row that the envelope authenticates.
public struct ItemHeader: Sendable, Equatable {
    public static let formatVersion: UInt8 = 1

    public var storeID: [UInt8]
    public var itemID: [UInt8]
    public var itemClass: String
    public var accessGroup: String
    public var accessibility: String
    public var primaryKeyDigest: Data
    /// The digest columns, in ``AttributeKey/digested`` order; nil where the class has no such attribute.
    public var digests: [Data?]
    public var generation: Int64

    public init(
        storeID: [UInt8],
        itemID: [UInt8],
        itemClass: String,
        accessGroup: String,
        accessibility: String,
        primaryKeyDigest: Data,
        digests: [Data?],
        generation: Int64
    ) {
        self.storeID = storeID
        self.itemID = itemID
        self.itemClass = itemClass
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.primaryKeyDigest = primaryKeyDigest
        self.digests = digests
        self.generation = generation
    }

    /// version ‖ store id ‖ item id ‖ class ‖ group ‖ accessibility ‖ pk digest ‖ digests ‖ generation, written by
    /// ``HeaderColumns`` (the one encoder of this layout; a lookup that reads its row in place uses it directly).
    public func encoded() -> [UInt8] {
        // The digests side by side in one buffer, so that every column is a byte range for the encoder.
        var joined: [UInt8] = []
        joined.reserveCapacity(digests.count * 32)
        var ranges: [Range<Int>?] = []
        ranges.reserveCapacity(digests.count)
        for digest in digests {
            guard let digest else {
                ranges.append(nil)
                continue
            }
            ranges.append(joined.count..<joined.count + digest.count)
            joined.append(contentsOf: digest)
        }
        var (itemClass, accessGroup, accessibility) = (itemClass, accessGroup, accessibility)
        return itemID.withUnsafeBytes { itemID in
            primaryKeyDigest.withUnsafeBytes { primaryKeyDigest in
                itemClass.withUTF8 { itemClass in
                    accessGroup.withUTF8 { accessGroup in
                        accessibility.withUTF8 { accessibility in
                            joined.withUnsafeBytes { joined in
                                let pointers = ranges.map { range in
                                    range.map { UnsafeRawBufferPointer(rebasing: joined[$0]) }
                                }
                                return pointers.withUnsafeBufferPointer { digests in
                                    HeaderColumns(
                                        itemID: itemID,
                                        itemClass: UnsafeRawBufferPointer(itemClass),
                                        accessGroup: UnsafeRawBufferPointer(accessGroup),
                                        accessibility: UnsafeRawBufferPointer(accessibility),
                                        primaryKeyDigest: primaryKeyDigest,
                                        digests: digests,
                                        generation: generation
                                    ).encoded(storeID: storeID)
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The columns of an ``ItemHeader`` as bytes (valid only while their owner is: a row read in place, or the header
/// itself), and the header's encoding from them, so that a lookup encodes the header of a row read in place straight
/// into the envelope's associated data.
package struct HeaderColumns {
    package var itemID: UnsafeRawBufferPointer
    package var itemClass: UnsafeRawBufferPointer
    package var accessGroup: UnsafeRawBufferPointer
    package var accessibility: UnsafeRawBufferPointer
    package var primaryKeyDigest: UnsafeRawBufferPointer
    /// In ``AttributeKey/digested`` order; nil where the column is NULL.
    package var digests: UnsafeBufferPointer<UnsafeRawBufferPointer?>
    package var generation: Int64

    package init(
        itemID: UnsafeRawBufferPointer,
        itemClass: UnsafeRawBufferPointer,
        accessGroup: UnsafeRawBufferPointer,
        accessibility: UnsafeRawBufferPointer,
        primaryKeyDigest: UnsafeRawBufferPointer,
        digests: UnsafeBufferPointer<UnsafeRawBufferPointer?>,
        generation: Int64
    ) {
        self.itemID = itemID
        self.itemClass = itemClass
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.primaryKeyDigest = primaryKeyDigest
        self.digests = digests
        self.generation = generation
    }

    /// The encoded header's size in bytes, with `storeID`.
    func encodedCount(storeID: [UInt8]) -> Int {
        var count = 1 + FieldWriter.overhead * (7 + digests.count) + storeID.count + itemID.count + itemClass.count
        count += accessGroup.count + accessibility.count + primaryKeyDigest.count + 8
        for digest in digests { count += digest?.count ?? 0 }
        return count
    }

    /// Writes the encoded header (``ItemHeader/encoded()``'s bytes) with `storeID`.
    func write(storeID: [UInt8], into writer: inout FieldWriter) {
        writer.byte(ItemHeader.formatVersion)
        storeID.withUnsafeBytes { writer.field(1, $0) }
        writer.field(2, itemID)
        writer.field(3, itemClass)
        writer.field(4, accessGroup)
        writer.field(5, accessibility)
        writer.field(6, primaryKeyDigest)
        for digest in digests {
            if let digest {
                writer.field(7, digest)
            } else {
                writer.field(8, UnsafeRawBufferPointer(start: nil, count: 0))
            }
        }
        withUnsafeBytes(of: generation.bigEndian) { writer.field(9, $0) }
    }

    /// The encoded header as an array.
    package func encoded(storeID: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: encodedCount(storeID: storeID)) { buffer, initialized in
            var writer = FieldWriter(UnsafeMutableRawBufferPointer(buffer))
            write(storeID: storeID, into: &writer)
            initialized = writer.offset
        }
    }
}

/// Writes the length-prefixed fields of ``appendField(_:tag:_:)`` into memory sized for them in advance.
/// Writing past the end is a precondition failure, never a write out of bounds.
struct FieldWriter {
    /// Tag and 32-bit length.
    static let overhead = 5

    private let base: UnsafeMutableRawBufferPointer
    private(set) var offset = 0

    init(_ base: UnsafeMutableRawBufferPointer) { self.base = base }

    mutating func byte(_ value: UInt8) {
        precondition(offset < base.count, "field buffer too small")
        base[offset] = value
        offset += 1
    }

    mutating func field(_ tag: UInt8, _ bytes: UnsafeRawBufferPointer) {
        precondition(
            bytes.count <= Int(UInt32.max) && base.count - offset >= Self.overhead + bytes.count,
            "field buffer too small"
        )
        let length = UInt32(bytes.count)
        base[offset] = tag
        base[offset + 1] = UInt8(truncatingIfNeeded: length >> 24)
        base[offset + 2] = UInt8(truncatingIfNeeded: length >> 16)
        base[offset + 3] = UInt8(truncatingIfNeeded: length >> 8)
        base[offset + 4] = UInt8(truncatingIfNeeded: length)
        offset += Self.overhead
        if let source = bytes.baseAddress, !bytes.isEmpty {
            (base.baseAddress! + offset).copyMemory(from: source, byteCount: bytes.count)
            offset += bytes.count
        }
    }
}

/// The three ciphertexts of an item.
public struct SealedItem: Sendable, Equatable {
    /// AES-GCM(MK(c,i), attributes, aad = header).
    public var attributes: Data
    /// AES-GCM(CK(c), IK, aad = "keyseal/ik" ‖ header).
    public var wrappedKey: Data
    /// AES-GCM(IK, secret, aad = header ‖ SHA-256(attributes ciphertext)).
    public var value: Data

    public init(attributes: Data, wrappedKey: Data, value: Data) {
        self.attributes = attributes
        self.wrappedKey = wrappedKey
        self.value = value
    }
}

/// Item encryption (docs/ARCHITECTURE.md, "Key hierarchy"; docs/STORE-FORMAT.md, "Items"): two keys per item, every
/// plaintext column authenticated. `aad` is the item's encoded ``ItemHeader`` (encode it once per row).
public enum ItemEnvelope {
    static let wrapLabel = Array("keyseal/ik".utf8)

    /// Seals an item. `random` (bulk work) supplies the item key and the nonces; otherwise each comes from the
    /// system generator.
    ///
    /// Both plaintexts are padded to a size bucket (``Padding``) so that the ciphertexts do not give away the
    /// exact length of the secret or of the attributes. The value box is `0x02 ‖ nonce ‖ ciphertext ‖ tag` and its
    /// associated data is the whole "keyseal/ik" ‖ header ‖ SHA-256(attributes ciphertext), which no unpadded value
    /// (format 1: `nonce ‖ ciphertext ‖ tag` under header ‖ SHA-256(…)) ever had.
    public static func seal(
        attributes: [UInt8],
        secret: Data,
        aad: [UInt8],
        itemID: [UInt8],
        classKey: ClassKey,
        random: RandomPool? = nil
    ) throws(KeychainError) -> SealedItem {
        let attributesBox = try AEAD.seal(
            Padding.paddedAttributes(attributes),
            key: classKey.metadataKey(itemID: itemID),
            aad: aad,
            nonce: random?.nonce()
        )
        let itemKey = random?.symmetricKey() ?? SymmetricKey(size: .bits256)
        let associated = attributesBox.withUnsafeBytes { AssociatedData(header: aad, attributesBox: $0) }
        let wrappedKey: Data
        do {
            let nonce = random?.nonce()
            wrappedKey = try itemKey.withUnsafeBytes { bytes in
                try AES.GCM.seal(
                    bytes,
                    using: classKey.symmetricKey,
                    nonce: nonce,
                    authenticating: associated.wrappedKey
                )
                .combined!
            }
        } catch {
            throw KeychainError(KeychainStatus.internalComponent, "encryption failed")
        }
        var padded = Padding.paddedValue(secret)
        defer { padded.withUnsafeMutableBytes { zeroize($0.baseAddress!, $0.count) } }
        var valueBox = Data([Padding.paddedValueVersion])
        valueBox.append(try AEAD.seal(padded, key: itemKey, aad: associated.padded, nonce: random?.nonce()))
        return SealedItem(attributes: attributesBox, wrappedKey: wrappedKey, value: valueBox)
    }

    /// The decrypted attribute encoding; `errSecDecode` if anything was altered.
    public static func openAttributes(
        _ sealed: SealedItem,
        aad: [UInt8],
        itemID: [UInt8],
        classKey: ClassKey
    )
        throws(KeychainError) -> Data
    {
        let plain = try classKey.withMetadataKey(itemID: itemID) { key throws(KeychainError) in
            try aad.withBytes({ aadBytes throws(KeychainError) in
                try GCMContext.open(sealed.attributes, key: key, aad: aadBytes)
            })
        }
        return Padding.unpaddedAttributes(plain)
    }

    /// The decrypted secret; `errSecDecode` if anything was altered.
    public static func openValue(_ sealed: SealedItem, aad: [UInt8], classKey: ClassKey) throws(KeychainError) -> Data {
        let associated = sealed.attributes.withUnsafeBytes { AssociatedData(header: aad, attributesBox: $0) }
        return try sealed.wrappedKey.withBytes { wrappedKey throws(KeychainError) in
            try sealed.value.withBytes { value throws(KeychainError) in
                try openValue(associated, wrappedKey: wrappedKey, value: value, classKey: classKey)
            }
        }
    }

    /// ``openValue(_:aad:classKey:)`` of a row read in place: the header is encoded straight into the associated
    /// data, and the ciphertexts are read where they are.
    package static func openValue(
        storeID: [UInt8],
        header: HeaderColumns,
        attributesBox: UnsafeRawBufferPointer,
        wrappedKey: UnsafeRawBufferPointer,
        value: UnsafeRawBufferPointer,
        classKey: ClassKey
    ) throws(KeychainError) -> Data {
        try openValue(
            AssociatedData(storeID: storeID, header: header, attributesBox: attributesBox),
            wrappedKey: wrappedKey,
            value: value,
            classKey: classKey
        )
    }

    private static func openValue(
        _ associated: AssociatedData,
        wrappedKey: UnsafeRawBufferPointer,
        value: UnsafeRawBufferPointer,
        classKey: ClassKey
    ) throws(KeychainError) -> Data {
        // The item key lives in a stack buffer, zeroed on the way out; it never becomes a heap object.
        var itemKey = KeyBuffer()
        defer { itemKey.clear() }
        return try itemKey.withUnsafeMutableBytes { key throws(KeychainError) in
            try associated.withWrappedKey { aad throws(KeychainError) in
                try classKey.unwrapItemKey(wrappedKey, aad: aad, into: key)
            }
            let key = UnsafeRawBufferPointer(key)
            // Format 2 (padded) first; a format-1 box whose nonce happens to start with the same byte fails that tag
            // check and is opened as format 1.
            if value.first == Padding.paddedValueVersion, value.count > 1,
                let padded = try? associated.withPadded({ aad throws(KeychainError) in
                    try GCMContext.open(UnsafeRawBufferPointer(rebasing: value[1...]), key: key, aad: aad)
                })
            {
                return try Padding.unpaddedValue(padded)
            }
            return try associated.withValue { aad throws(KeychainError) in
                try GCMContext.open(value, key: key, aad: aad)
            }
        }
    }

    /// The associated data of an item's wrapped key and of its value, built in one buffer,
    /// "keyseal/ik" ‖ header ‖ SHA-256(attributes ciphertext), of which each is a slice.
    struct AssociatedData {
        private let buffer: [UInt8]
        private let headerEnd: Int

        init(header: [UInt8], attributesBox: UnsafeRawBufferPointer) {
            self.init(headerCount: header.count, attributesBox: attributesBox) { out in
                header.withUnsafeBytes { out.copyMemory(from: $0) }
            }
        }

        init(storeID: [UInt8], header: HeaderColumns, attributesBox: UnsafeRawBufferPointer) {
            self.init(headerCount: header.encodedCount(storeID: storeID), attributesBox: attributesBox) { out in
                var writer = FieldWriter(out)
                header.write(storeID: storeID, into: &writer)
                precondition(writer.offset == out.count, "header size mismatch")
            }
        }

        /// One allocation: the label, the header `writeHeader` writes into exactly `headerCount` bytes, the digest.
        private init(
            headerCount: Int,
            attributesBox: UnsafeRawBufferPointer,
            writeHeader: (UnsafeMutableRawBufferPointer) -> Void
        ) {
            let headerEnd = wrapLabel.count + headerCount
            buffer = [UInt8](unsafeUninitializedCapacity: headerEnd + SHA256.byteCount) { buffer, initialized in
                let raw = UnsafeMutableRawBufferPointer(buffer)
                wrapLabel.withUnsafeBytes { raw.copyMemory(from: $0) }
                writeHeader(UnsafeMutableRawBufferPointer(rebasing: raw[wrapLabel.count..<headerEnd]))
                sha256(attributesBox, into: UnsafeMutableRawBufferPointer(rebasing: raw[headerEnd...]))
                initialized = raw.count
            }
            self.headerEnd = headerEnd
        }

        /// "keyseal/ik" ‖ header.
        var wrappedKey: ArraySlice<UInt8> { buffer[..<headerEnd] }
        /// header ‖ SHA-256(attributes ciphertext): the associated data of a format-1 (unpadded) value.
        var value: ArraySlice<UInt8> { buffer[wrapLabel.count...] }
        /// "keyseal/ik" ‖ header ‖ SHA-256(attributes ciphertext): the associated data of a padded value.
        var padded: [UInt8] { buffer }

        func withPadded<R>(_ body: (UnsafeRawBufferPointer) throws(KeychainError) -> R) throws(KeychainError) -> R {
            try buffer.withBytes({ all throws(KeychainError) in try body(all) })
        }

        func withWrappedKey<R>(_ body: (UnsafeRawBufferPointer) throws(KeychainError) -> R) throws(KeychainError) -> R {
            try buffer.withBytes({ all throws(KeychainError) in
                try body(UnsafeRawBufferPointer(rebasing: all[..<headerEnd]))
            })
        }

        func withValue<R>(_ body: (UnsafeRawBufferPointer) throws(KeychainError) -> R) throws(KeychainError) -> R {
            try buffer.withBytes({ all throws(KeychainError) in
                try body(UnsafeRawBufferPointer(rebasing: all[wrapLabel.count...]))
            })
        }
    }
}

/// 32 bytes for a per-item key (an unwrapped item key, a derived metadata key), inline on the stack: no allocation,
/// and cleared by its user on the way out.
struct KeyBuffer {
    private var bytes: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    mutating func withUnsafeMutableBytes<R>(
        _ body: (UnsafeMutableRawBufferPointer) throws(KeychainError) -> R
    )
        throws(KeychainError) -> R
    {
        try Swift.withUnsafeMutableBytes(of: &bytes) { raw throws(KeychainError) in try body(raw) }
    }

    mutating func clear() {
        Swift.withUnsafeMutableBytes(of: &bytes) { zeroize($0.baseAddress!, $0.count) }
    }
}

/// Size buckets for item plaintexts, so that a ciphertext's length says little about the secret's.
///
/// Padmé (Nikitin et al., PETS 2019): a length L is rounded up so that only its top ⌊log₂ ⌊log₂ L⌋⌋ + 1 bits may be
/// non-zero — at most 12 % overhead, and about log log L bits of the length left to see — and never to finer steps
/// than 32 bytes, so that the short secrets and names most items hold share a few sizes (0–31 bytes: 32; 32–63: 64;
/// …; Padmé's own steps take over from 512 bytes). A value is `secret ‖ 0x80 ‖ 0x00…` (ISO/IEC 7816-4); the attributes get one more field of tag
/// ``attributePaddingTag`` whose bytes are zeros, which decoding skips.
public enum Padding {
    public static let minimum = 32
    static let paddedValueVersion: UInt8 = 2
    static let attributePaddingTag: UInt8 = 0xFF

    /// The bucket of a plaintext of `length` bytes.
    public static func bucket(_ length: Int) -> Int {
        guard length > minimum else { return minimum }
        let exponent = Int.bitWidth - 1 - length.leadingZeroBitCount  // ⌊log₂ L⌋
        let significant = Int.bitWidth - exponent.leadingZeroBitCount  // ⌊log₂ E⌋ + 1
        let mask = max((1 << (exponent - significant)) - 1, minimum - 1)
        return (length + mask) & ~mask
    }

    static func paddedValue(_ secret: Data) -> Data {
        var padded = Data(capacity: bucket(secret.count + 1))
        padded.append(secret)
        padded.append(0x80)
        padded.append(Data(count: bucket(secret.count + 1) - padded.count))
        return padded
    }

    static func unpaddedValue(_ padded: Data) throws(KeychainError) -> Data {
        // Backwards over contiguous bytes: the padding is at most an eighth of a large value.
        let marker: Int? = padded.withUnsafeBytes { bytes in
            var index = bytes.count - 1
            while index >= 0 && bytes[index] == 0 { index -= 1 }
            return index >= 0 && bytes[index] == 0x80 ? index : nil
        }
        guard let marker else { throw KeychainError(KeychainStatus.decode, "an item's value has malformed padding") }
        return padded.prefix(marker)
    }

    /// The attribute encoding without its padding field (the encoding of rows sealed before padding has none).
    static func unpaddedAttributes(_ plain: Data) -> Data {
        var index = plain.startIndex
        while index + 5 <= plain.endIndex {
            if plain[index] == attributePaddingTag { return plain[plain.startIndex..<index] }
            let length =
                Int(plain[index + 1]) << 24 | Int(plain[index + 2]) << 16 | Int(plain[index + 3]) << 8
                | Int(plain[index + 4])
            index += 5 + length
        }
        return plain
    }

    static func paddedAttributes(_ encoded: [UInt8]) -> [UInt8] {
        // One padding field: tag, 32-bit length, zeros; its 5-byte overhead is counted in the bucket.
        let target = bucket(encoded.count + 5)
        var padded = encoded
        padded.reserveCapacity(target)
        appendField(&padded, tag: attributePaddingTag, [UInt8](repeating: 0, count: target - encoded.count - 5))
        return padded
    }
}

/// The binary encoding of an item's attributes inside its attribute ciphertext.
public enum AttributeCodec {
    public static func encode(_ attributes: [String: AttributeValue]) -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(256)
        for key in attributes.keys.sorted() {
            let value = attributes[key]!
            let kind: UInt8
            switch value {
            case .string: kind = 1
            case .data: kind = 2
            case .bool: kind = 3
            case .int: kind = 4
            case .date: kind = 5
            }
            appendField(&buffer, tag: kind, key.utf8)
            appendField(&buffer, tag: kind, value.matchBytes)
        }
        return buffer
    }

    public static func decode(_ data: Data) throws(KeychainError) -> [String: AttributeValue] {
        // Sized for an item's usual attributes at once, so that decoding never rehashes.
        var result = [String: AttributeValue](minimumCapacity: 16)
        let bytes = [UInt8](data)
        var index = 0
        func field() throws(KeychainError) -> (UInt8, ArraySlice<UInt8>) {
            guard index + 5 <= bytes.count else { throw KeychainError(KeychainStatus.decode, "corrupt attributes") }
            let tag = bytes[index]
            let length =
                Int(bytes[index + 1]) << 24 | Int(bytes[index + 2]) << 16 | Int(bytes[index + 3]) << 8
                | Int(bytes[index + 4])
            index += 5
            guard length <= bytes.count - index else {
                throw KeychainError(KeychainStatus.decode, "corrupt attributes")
            }
            defer { index += length }
            return (tag, bytes[index..<index + length])
        }
        while index < bytes.count {
            let (kind, keyBytes) = try field()
            if kind == Padding.attributePaddingTag { continue }  // size padding (``Padding``), not an attribute
            let (_, valueBytes) = try field()
            let key = String(decoding: keyBytes, as: UTF8.self)
            func integer() throws(KeychainError) -> UInt64 {
                guard valueBytes.count == 8 else { throw KeychainError(KeychainStatus.decode, "corrupt attributes") }
                return valueBytes.reduce(0) { $0 << 8 | UInt64($1) }
            }
            switch kind {
            case 1: result[key] = .string(String(decoding: valueBytes, as: UTF8.self))
            case 2: result[key] = .data(Data(valueBytes))
            case 3: result[key] = .bool(valueBytes.first == 1)
            case 4: result[key] = .int(Int64(bitPattern: try integer()))
            case 5: result[key] = .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try integer())))
            default: throw KeychainError(KeychainStatus.decode, "corrupt attributes")
            }
        }
        return result
    }
}
