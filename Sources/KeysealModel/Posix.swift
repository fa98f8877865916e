import Glibc

/// The package's system calls that may be interrupted, in one place (as swift-nio's System.swift): each is retried
/// while a signal interrupts it before it did anything (EINTR), and returns what the call returns, -1 with errno set
/// on any other failure. The calls that must not be retried (connect, close) are here too, so that no file keeps an
/// alias of its own for a name that its types shadow (`read`, `write`, `connect`, `close`). Every module reaches it:
/// KeysealModel is under all of them.
package enum Posix {
    package static func read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
        retryingInterrupted { Glibc.read(fd, buffer, count) }
    }

    package static func write(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
        retryingInterrupted { Glibc.write(fd, buffer, count) }
    }

    /// `send` with MSG_NOSIGNAL: a peer that has gone is EPIPE, not SIGPIPE.
    package static func send(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
        retryingInterrupted { Glibc.send(fd, buffer, count, Int32(MSG_NOSIGNAL)) }
    }

    package static func recv(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
        retryingInterrupted { Glibc.recv(fd, buffer, count, 0) }
    }

    package static func waitpid(_ pid: pid_t, _ status: UnsafeMutablePointer<Int32>?, _ options: Int32) -> pid_t {
        retryingInterrupted { Glibc.waitpid(pid, status, options) }
    }

    /// Not retried: an interrupted connect goes on in the background.
    package static func connect(_ fd: Int32, _ address: UnsafePointer<sockaddr>?, _ length: socklen_t) -> Int32 {
        Glibc.connect(fd, address, length)
    }

    /// Not retried: Linux releases the descriptor even when close is interrupted.
    package static func close(_ fd: Int32) -> Int32 { Glibc.close(fd) }

    /// Calls `call` again while it fails with EINTR; returns its last result.
    @inline(__always)
    private static func retryingInterrupted<Result: BinaryInteger>(_ call: () -> Result) -> Result {
        while true {
            let result = call()
            guard result < 0, errno == EINTR else { return result }
        }
    }
}
