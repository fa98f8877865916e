import KeysealClient
import KeysealCore
import NIOCore

/// Splits the byte stream into frames: a 4-byte big-endian length and that many bytes. A length over the frame
/// limit (or too short to hold a version and an opcode) is an error that closes the connection. A frame left
/// incomplete for `timeout` (a client that stalls mid-frame) is an error too, so that a half-sent frame never
/// holds its connection and buffer forever (a connection with no partial frame is left to the idle timeout).
/// The bytes of a partial frame are charged to the peer's uid (``ConnectionAccount``): over its limit, the
/// connection is closed with errSecAllocate.
struct FrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    let timeout: TimeAmount
    let account: ConnectionAccount

    init(timeout: TimeAmount, account: ConnectionAccount) {
        self.timeout = timeout
        self.account = account
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        // The handler has enough frames waiting: the rest stays in the buffer (nothing more is read meanwhile), so
        // that decoding a burst costs no more than the turns that answer it. Held bytes count as pending: whatever
        // keeps them there, they stay within the uid's limit.
        guard !account.holdFrames else {
            try account.setPending(buffer.readableBytes)
            return .needMoreData
        }
        let state = try decodeFrame(context: context, buffer: &buffer)
        try account.setPending(state == .needMoreData ? buffer.readableBytes : 0)
        return state
    }

    private mutating func decodeFrame(
        context: ChannelHandlerContext,
        buffer: inout ByteBuffer
    ) throws
        -> DecodingState
    {
        guard let header = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else {
            if buffer.readableBytes > 0 { arm(context) } else { disarm() }
            return .needMoreData
        }
        let length = Int(header)
        guard length <= Wire.maxFrame else {
            throw KeychainError(
                status: KeychainStatus.dataTooLarge,
                message: "frame of \(length) bytes exceeds the limit of \(Wire.maxFrame)"
            )
        }
        guard length >= 2 else {
            throw KeychainError(status: KeychainStatus.decode, message: "malformed frame: too short")
        }
        guard buffer.readableBytes >= 4 + length else {
            arm(context)
            return .needMoreData
        }
        buffer.moveReaderIndex(forwardBy: 4)
        guard let frame = buffer.readSlice(length: length) else { return .needMoreData }
        disarm()
        context.fireChannelRead(wrapInboundOut(frame))
        return .continue
    }

    mutating func decodeLast(
        context: ChannelHandlerContext,
        buffer: inout ByteBuffer,
        seenEOF: Bool
    ) throws
        -> DecodingState
    {
        // The peer has gone (keyseald does not keep half-closed connections): no reply could reach it, so what it
        // sent and was not yet decoded is dropped unread, as is a truncated last frame.
        buffer.moveReaderIndex(to: buffer.writerIndex)
        disarm()
        try? account.setPending(0)
        return .needMoreData
    }

    mutating func decoderRemoved(context: ChannelHandlerContext) {
        disarm()
        try? account.setPending(0)
    }

    /// Starts the stall timer once the buffer ends in part of a frame.
    private func arm(_ context: ChannelHandlerContext) {
        guard account.stall == nil else { return }
        Self.schedule(in: timeout, timeout: timeout, account: account, context: context)
    }

    /// The stall timer counts only time keyseald spent reading this connection: while it reads nothing from it
    /// (its requests ahead are on the pool, its turn is over, its frames are held, its replies wait to be read), the
    /// rest of the frame may be waiting in the socket, and that wait is keyseald's, not the client's. The frame has
    /// stalled once the connection has been read from for `timeout` without it completing.
    private static func schedule(
        in delay: TimeAmount,
        timeout: TimeAmount,
        account: ConnectionAccount,
        context: ChannelHandlerContext
    ) {
        account.stall = context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
            account.stall = nil
            let readFor = account.readingSince.map { NIODeadline.now() - $0 } ?? .zero
            guard readFor >= timeout else {
                schedule(in: timeout - readFor, timeout: timeout, account: account, context: context)
                return
            }
            let seconds = Double(timeout.nanoseconds) / 1e9
            context.fireErrorCaught(
                KeychainError(
                    status: KeychainStatus.io,
                    message: "an incomplete frame waited \(seconds) s for the rest of its bytes"
                )
            )
        }
    }

    private func disarm() {
        account.stall?.cancel()
        account.stall = nil
    }
}
