import Glibc

/// A mutex with a condition variable (POSIX), for threads that wait for work or results. Full Foundation's
/// `NSCondition` and `NSLock` would pull that whole library into keyseald.
package final class ConditionLock: @unchecked Sendable {
    // Allocated once, never moved (POSIX objects must not be copied); guarded by themselves.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    package init() {
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        precondition(pthread_mutex_init(mutex, nil) == 0 && pthread_cond_init(condition, nil) == 0)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }

    /// Waits for a broadcast; call with the lock held (it is released while waiting and held again on return).
    package func wait() { pthread_cond_wait(condition, mutex) }
    package func broadcast() { pthread_cond_broadcast(condition) }

    package func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A new thread's work, handed through `pthread_create`'s argument.
private final class ThreadStart: Sendable {
    let body: @Sendable () -> Void
    init(body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Starts a detached POSIX thread that runs `body`.
package func startThread(_ body: @escaping @Sendable () -> Void) {
    let box = Unmanaged.passRetained(ThreadStart(body: body)).toOpaque()
    var thread = pthread_t()
    let created = pthread_create(
        &thread,
        nil,
        { raw in
            let box = Unmanaged<ThreadStart>.fromOpaque(raw!).takeRetainedValue()
            box.body()
            return nil
        },
        box
    )
    precondition(created == 0, "cannot start a thread: \(created)")
    pthread_detach(thread)
}
