import KeysealClient
import KeysealCore

/// The frames of a `.records` response, encoded one at a time; each record is let go once it is encoded.
/// Used only on its connection's event loop.
final class RecordFrames {
    private var records: [ItemRecord]
    private var index = 0
    private var encoder: WireRecordsEncoder
    /// The last frames, in reverse order, once every record is encoded.
    private var tail: [[UInt8]]?

    init(_ records: [ItemRecord]) {
        self.records = records
        encoder = WireRecordsEncoder(count: records.count)
    }

    /// The next frame; nil after the last.
    func next() -> [UInt8]? {
        while true {
            if tail != nil { return tail?.popLast() }
            if let part = encoder.nextPart() { return part }
            if index < records.count {
                encoder.append(records[index])
                records[index] = ItemRecord(itemClass: .genericPassword, attributes: [:])
                index += 1
            } else {
                tail = encoder.finish().reversed()
            }
        }
    }
}
