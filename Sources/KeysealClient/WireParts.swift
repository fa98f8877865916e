import FoundationEssentials

// A response payload over the frame limit travels in pieces: `part` frames and a closing `lastPart` frame, each
// within the limit; the receiver joins them and decodes the whole.

extension WireResponse {
    /// The frames that carry this response: one frame, or, when the payload is over the frame limit (many or large
    /// records), its bytes cut into `part` frames and a closing `lastPart` frame, each within the limit. The client
    /// joins the pieces and decodes the whole (``readResponse(limit:_:)``).
    public func encodedFrames() -> [[UInt8]] {
        var frame = encodedFrame()
        guard frame.count - 4 > Wire.maxFrame else { return [frame] }
        defer { zeroize(&frame) }
        let pieceSize = Wire.maxFrame - 2
        var frames: [[UInt8]] = []
        var offset = 4
        while offset < frame.count {
            let end = min(offset + pieceSize, frame.count)
            var writer = WireWriter(capacity: end - offset + 6)
            writer.u8(end == frame.count ? ResponseKind.lastPart.rawValue : ResponseKind.part.rawValue)
            writer.bytes.append(contentsOf: frame[offset..<end])
            frames.append(writer.finish())
            offset = end
        }
        return frames
    }
}

/// Encodes a `.records` response one record at a time into the frames ``WireResponse/encodedFrames()`` would send
/// (a single frame when the whole fits, else `part` frames and a closing `lastPart`), so that a sender never holds
/// more than about one frame of encoded records: the daemon streams a large lookup with it.
public struct WireRecordsEncoder {
    /// Payload bytes not yet cut into a frame.
    private var pending: [UInt8]
    /// Whether a `part` frame went out (then the end is a `lastPart`, never a whole frame).
    private var cut = false
    private static let pieceSize = Wire.maxFrame - 2

    public init(count: Int) {
        var writer = WireWriter(capacity: 16)
        writer.u8(ResponseKind.records.rawValue)
        writer.u32(UInt32(clamping: count))
        pending = Array(writer.bytes[4...])
        zeroize(&writer.bytes)
    }

    /// Appends one record's encoding.
    public mutating func append(_ record: ItemRecord) {
        var writer = WireWriter(capacity: WireResponse.records([record]).sizeBound)
        writer.record(record)
        if pending.capacity < pending.count + writer.bytes.count - 5 {
            // Grow by hand so that no reallocation leaves record bytes behind unzeroed.
            var larger: [UInt8] = []
            larger.reserveCapacity(max(2 * pending.capacity, pending.count + writer.bytes.count))
            larger.append(contentsOf: pending)
            zeroize(&pending)
            pending = larger
        }
        pending.append(contentsOf: writer.bytes[5...])
        zeroize(&writer.bytes)
    }

    /// A `part` frame when a whole piece is ready, else nil.
    public mutating func nextPart() -> [UInt8]? {
        guard pending.count > Self.pieceSize + 6 else { return nil }
        cut = true
        return take(Self.pieceSize, kind: .part)
    }

    /// The last frames: the whole response when nothing was cut yet and it fits one frame, else what is left as
    /// `part` frames and a closing `lastPart`. Call after ``nextPart()`` returned nil.
    public mutating func finish() -> [[UInt8]] {
        if !cut && pending.count <= Wire.maxFrame {
            var frame = [UInt8](repeating: 0, count: 4)
            frame.reserveCapacity(4 + pending.count)
            let length = UInt32(pending.count)
            for index in 0..<4 { frame[index] = UInt8(truncatingIfNeeded: length >> (24 - 8 * index)) }
            frame.append(contentsOf: pending)
            zeroize(&pending)
            pending = []
            return [frame]
        }
        var frames: [[UInt8]] = []
        while pending.count > Self.pieceSize { frames.append(take(Self.pieceSize, kind: .part)) }
        frames.append(take(pending.count, kind: .lastPart))
        cut = true
        return frames
    }

    private mutating func take(_ count: Int, kind: ResponseKind) -> [UInt8] {
        var writer = WireWriter(capacity: count + 6)
        writer.u8(kind.rawValue)
        writer.bytes.append(contentsOf: pending[..<count])
        var rest: [UInt8] = []
        if pending.count > count { rest.reserveCapacity(max(pending.count - count, Self.pieceSize + 6)) }
        rest.append(contentsOf: pending[count...])
        zeroize(&pending)
        pending = rest
        return writer.finish()
    }
}

extension WireResponse {
    /// Reads one response payload with `readPayload` (which reads one frame's payload), joining the pieces of a
    /// response sent in parts. Every buffer that held response bytes is zeroed before it is released.
    public static func readResponse(
        limit: Int = Wire.maxResponse,
        _ readPayload: () throws(KeychainError) -> [UInt8]
    ) throws(KeychainError) -> WireResponse {
        var payload = try readPayload()
        defer { zeroize(&payload) }
        guard isPiece(payload) else { return try decode(payload: payload) }
        var joined: [UInt8] = []
        defer { zeroize(&joined) }
        while true {
            guard isPiece(payload) else {
                throw WireReader.malformed("a response sent in parts was interrupted by another response")
            }
            guard joined.count + payload.count - 2 <= limit else {
                throw KeychainError(status: KeychainStatus.dataTooLarge, message: "the response is over \(limit) bytes")
            }
            if joined.capacity < joined.count + payload.count {
                // Grow by hand so that no reallocation leaves a copy of response bytes behind unzeroed.
                var larger: [UInt8] = []
                larger.reserveCapacity(max(2 * joined.capacity, joined.count + payload.count))
                larger.append(contentsOf: joined)
                zeroize(&joined)
                joined = larger
            }
            joined.append(contentsOf: payload[2...])
            let last = payload[1] == ResponseKind.lastPart.rawValue
            zeroize(&payload)
            if last { break }
            payload = try readPayload()
        }
        return try decode(payload: joined)
    }

    /// Whether a payload is a piece of a response sent in parts.
    static func isPiece(_ payload: [UInt8]) -> Bool {
        payload.withUnsafeBytes { isPiece($0) }
    }

    static func isPiece(_ payload: UnsafeRawBufferPointer) -> Bool {
        payload.count >= 2 && payload[0] == Wire.version
            && (payload[1] == ResponseKind.part.rawValue || payload[1] == ResponseKind.lastPart.rawValue)
    }
}
