import NIOCore
import Synchronization

/// Open connections, so that shutdown can close the idle ones at once and the busy ones after their reply.
final class ConnectionRegistry: Sendable {
    private struct Entry {
        var channel: any Channel
        var busy = false
    }

    private struct State {
        var shuttingDown = false
        /// The listening socket is closed: a connection it accepted before is not served.
        var listenerClosed = false
        var next = 0
        var entries: [Int: Entry] = [:]
        /// Waiting for the last connection to close.
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Registers a connection; nil when the server is shutting down or no longer listening.
    func register(_ channel: any Channel) -> Int? {
        state.withLock { state in
            guard !state.shuttingDown && !state.listenerClosed else { return nil }
            state.next += 1
            state.entries[state.next] = Entry(channel: channel)
            return state.next
        }
    }

    /// Refuses the connections the listening socket accepted but that are not registered yet.
    func listenerDidClose() { state.withLock { $0.listenerClosed = true } }

    /// Returns once no connection is registered.
    func allClosed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let closed = state.withLock { state -> Bool in
                guard !state.entries.isEmpty else { return true }
                state.waiters.append(continuation)
                return false
            }
            if closed { continuation.resume() }
        }
    }

    /// Marks a request as in flight; false when shutting down (the request is not started).
    func begin(_ id: Int) -> Bool {
        state.withLock { state in
            guard !state.shuttingDown else { return false }
            state.entries[id]?.busy = true
            return true
        }
    }

    /// Marks the request done; false when shutting down (the connection should close now).
    func end(_ id: Int) -> Bool {
        state.withLock { state in
            state.entries[id]?.busy = false
            return !state.shuttingDown
        }
    }

    func remove(_ id: Int) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.entries.removeValue(forKey: id)
            guard state.entries.isEmpty else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Stops new requests and closes every idle connection.
    func shutDown() {
        let idle = state.withLock { state -> [any Channel] in
            state.shuttingDown = true
            return state.entries.values.filter { !$0.busy }.map(\.channel)
        }
        for channel in idle { channel.close(promise: nil) }
    }

    /// Closes every connection, busy or not: the end of a shutdown whose busy connections did not finish in time.
    func closeAll() {
        let all = state.withLock { state -> [any Channel] in
            state.shuttingDown = true
            return state.entries.values.map(\.channel)
        }
        for channel in all { channel.close(promise: nil) }
    }

    var count: Int { state.withLock { $0.entries.count } }
}
