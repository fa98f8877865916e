import Foundation
import Testing

@testable import KeysealClient

#if canImport(Glibc)
import Glibc
#endif

/// The client's receive buffer reads as much as the socket holds at once (a response usually in one system call):
/// frames that arrive together, split, or in parts still come out one response at a time, in order, and nothing
/// received on a connection that is gone is taken for the next one's.
@Suite("Receive buffer")
struct ReceiveBufferTests {
    /// Runs `body` with a connected pair of unix stream sockets (the client's end, the daemon's end) and a receive
    /// buffer, then closes both ends (`body` may close the daemon's end itself: -1 marks it closed).
    static func withPair(_ body: (Int32, inout Int32, ReceiveBuffer) throws -> Void) throws {
        var fds: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer {
            close(fds[0])
            if fds[1] >= 0 { close(fds[1]) }
        }
        try body(fds[0], &fds[1], ReceiveBuffer())
    }

    static func write(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            #expect(written > 0)
            guard written > 0 else { return }
            offset += written
        }
    }

    static func record(_ account: String, value count: Int) -> WireResponse {
        .records([
            ItemRecord(
                itemClass: .genericPassword,
                attributes: ["acct": .string(account)],
                data: Data(repeating: UInt8(count & 0xff), count: count)
            )
        ])
    }

    static func account(_ response: WireResponse) -> String? {
        guard case .records(let records) = response, case .string(let account)? = records.first?.attributes["acct"]
        else { return nil }
        return account
    }

    @Test func responsesSentTogetherComeOutOneAtATime() throws {
        try Self.withPair { client, daemon, buffer throws in
            Self.write(
                daemon,
                Self.record("one", value: 10).encodedFrame() + Self.record("two", value: 20).encodedFrame()
            )
            #expect(Self.account(try buffer.readResponse(client, path: "test")) == "one")
            // The second response was received with the first: it is answered without another byte from the socket.
            #expect(Self.account(try buffer.readResponse(client, path: "test")) == "two")
        }
    }

    @Test func aResponseSplitIntoSmallWritesIsJoined() throws {
        try Self.withPair { client, daemon, buffer throws in
            let end = daemon
            let frame = Self.record("split", value: 9_000).encodedFrame()
            let writer = Thread {
                for offset in stride(from: 0, to: frame.count, by: 3) {
                    Self.write(end, Array(frame[offset..<min(offset + 3, frame.count)]))
                    if offset < 12 { usleep(2_000) }
                }
            }
            writer.start()
            #expect(Self.account(try buffer.readResponse(client, path: "test")) == "split")
        }
    }

    @Test func aResponseInPartsFollowedByAnotherIsJoined() throws {
        try Self.withPair { client, daemon, buffer throws in
            // Three values of 1 MiB: more than one frame (Wire.maxFrame), so the response comes in parts.
            let large = WireResponse.records(
                (0..<3).map { index in
                    ItemRecord(
                        itemClass: .genericPassword,
                        attributes: ["acct": .string("large\(index)")],
                        data: Data(repeating: 7, count: 1 << 20)
                    )
                }
            )
            let end = daemon
            let frames = large.encodedFrames()
            #expect(frames.count > 1)
            let writer = Thread {
                Self.write(end, frames.flatMap { $0 } + Self.record("after", value: 1).encodedFrame())
            }
            writer.start()
            guard case .records(let records) = try buffer.readResponse(client, path: "test") else {
                Issue.record("not records")
                return
            }
            #expect(records.map { $0.data?.count } == [1 << 20, 1 << 20, 1 << 20])
            #expect(Self.account(try buffer.readResponse(client, path: "test")) == "after")
        }
    }

    @Test func whatWasReceivedOnAClosedConnectionIsDropped() throws {
        try Self.withPair { client, daemon, buffer throws in
            Self.write(
                daemon,
                Self.record("old", value: 1).encodedFrame() + Self.record("stale", value: 1).encodedFrame()
            )
            #expect(Self.account(try buffer.readResponse(client, path: "test")) == "old")
            buffer.dropPending()
            Self.write(daemon, Self.record("new", value: 1).encodedFrame())
            #expect(Self.account(try buffer.readResponse(client, path: "test")) == "new")
        }
    }

    @Test func aClosedSocketMidFrameIsAnError() throws {
        try Self.withPair { client, daemon, buffer throws in
            Self.write(daemon, Array(Self.record("cut", value: 100).encodedFrame().prefix(20)))
            close(daemon)
            daemon = -1
            #expect(throws: KeychainError.self) { _ = try buffer.readResponse(client, path: "test") }
        }
    }
}
