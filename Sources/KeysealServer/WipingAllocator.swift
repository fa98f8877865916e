import CKeysealSys
import KeysealClient
@_spi(CustomByteBufferAllocator) import NIOCore

/// The allocator of every buffer keyseald's connections read into and write from. Requests carry passcodes and
/// values, responses carry values: each buffer is zeroed before its memory goes back to the heap, and a buffer that
/// grows leaves no copy behind (see `keyseal_wiping_free` and `keyseal_wiping_realloc`).
enum WipingAllocator {
    static let allocator = ByteBufferAllocator(
        allocate: { size in keyseal_wiping_malloc(size) },
        reallocate: { block, oldSize, newSize in keyseal_wiping_realloc(block, oldSize, newSize) },
        deallocate: { block in keyseal_wiping_free(block) },
        copy: { destination, source, count in destination.copyMemory(from: source, byteCount: count) }
    )

    /// A buffer from the wiping allocator holding `frame`, which is zeroed afterwards.
    static func buffer(consuming frame: inout [UInt8]) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: frame.count)
        buffer.writeBytes(frame)
        zeroize(&frame)
        return buffer
    }
}

/// First in each connection's pipeline. NIO reads into a receive buffer it reuses for the connection's whole life,
/// so a passcode read into it would stay there until later reads happened to overwrite it. This handler moves
/// each read into a buffer of the wiping allocator (zeroed when the frames in it are done with) and zeroes the
/// bytes it read from the reused one.
final class ReceiveScrubber: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let received = unwrapInboundIn(data)
        var moved = WipingAllocator.allocator.buffer(capacity: received.readableBytes)
        moved.writeImmutableBuffer(received)
        // The mutable accessors would copy the shared storage and zero the copy; the bytes are zeroed where they
        // are. Nothing reads them again: the pool rewrites the buffer from its start on the next read.
        received.withUnsafeReadableBytes { raw in
            if let base = raw.baseAddress, raw.count > 0 { zeroize(UnsafeMutableRawPointer(mutating: base), raw.count) }
        }
        context.fireChannelRead(wrapInboundOut(moved))
    }
}
