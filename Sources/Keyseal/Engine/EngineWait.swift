import Glibc
import Synchronization

/// Whether the engine calls of the current thread wait for the engine's lock. keyseald's event loops must not wait
/// for a long request: while one holds the engine on the thread pool (an update of thousands of items, a slow
/// device's sign), an event loop waiting for it would hold up every connection it serves, pings included. A request
/// answered through ``withoutWaiting(_:)`` gives up instead, having done nothing, and keyseald hands it to the pool.
/// A lock held by another event loop's request (a lookup: tens of microseconds) is waited for, by trying it again,
/// for up to ``spinLimit``: handing every contended lookup to the pool would cost each a thread hop.
package enum EngineWait {
    /// How long an event loop tries a lock that another event loop's request holds before it gives up.
    static let spinLimit = Duration.milliseconds(2)

    /// 0: the thread waits; 1: it gives up; 2: it gave up during the current ``withoutWaiting(_:)``.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    private static var state: Int {
        get { Int(bitPattern: pthread_getspecific(key)) }
        set { _ = pthread_setspecific(key, UnsafeRawPointer(bitPattern: newValue)) }
    }

    /// `body`'s result, or nil when a lock taken in it with ``lock(_:heldByWaiter:_:)`` was held by a thread that
    /// waits (the pool), or by another event loop for longer than ``spinLimit``.
    package static func withoutWaiting<T>(_ body: () -> T) -> T? {
        state = 1
        defer { state = 0 }
        let result = body()
        return state == 2 ? nil : result
    }

    /// Runs `body` under `mutex`. A thread that waits takes it as `Mutex.withLock` does, flagging `heldByWaiter`
    /// meanwhile; inside ``withoutWaiting(_:)`` the lock is only tried, again while another event loop holds it,
    /// and given up (errSecNotAvailable, and ``withoutWaiting(_:)`` returns nil) once `heldByWaiter` says a thread
    /// that waits holds it, or after ``spinLimit``.
    package static func lock<Value: ~Copyable, T>(
        _ mutex: borrowing Mutex<Value>,
        heldByWaiter: borrowing Atomic<Bool>,
        _ body: (inout sending Value) throws -> sending T
    ) throws -> T {
        guard state != 0 else {
            return try mutex.withLock { value throws -> sending T in
                heldByWaiter.store(true, ordering: .relaxed)
                defer { heldByWaiter.store(false, ordering: .relaxed) }
                return try body(&value)
            }
        }
        let clock = ContinuousClock()
        let deadline = clock.now + spinLimit
        while true {
            if let result = try mutex.withLockIfAvailable(body) { return result }
            if heldByWaiter.load(ordering: .relaxed) || clock.now > deadline {
                state = 2
                throw KeychainError(KeychainStatus.notAvailable, "the keychain engine is busy with another request")
            }
            sched_yield()
        }
    }
}
