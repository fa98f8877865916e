import Glibc
import Synchronization

/// Whether the engine calls of the current thread wait for the engine's lock. keyseald's event loops must not: while a
/// long request holds the engine on the thread pool (an update of thousands of items, a slow device's sign), an event
/// loop waiting for it would hold up every connection it serves, pings included. A request answered through
/// ``withoutWaiting(_:)`` gives up instead where the lock is held, having done nothing, and keyseald hands it to
/// the pool.
package enum EngineWait {
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

    /// `body`'s result, or nil when an engine call in it gave up because the engine's lock (or a lock taken with
    /// ``lock(_:_:)``) was held.
    package static func withoutWaiting<T>(_ body: () -> T) -> T? {
        state = 1
        defer { state = 0 }
        let result = body()
        return state == 2 ? nil : result
    }

    /// Runs `body` under `mutex`: at once where this thread waits, else only if `mutex` is free (otherwise it gives
    /// up: errSecNotAvailable, and ``withoutWaiting(_:)`` returns nil).
    package static func lock<Value: ~Copyable, T>(
        _ mutex: borrowing Mutex<Value>, _ body: (inout sending Value) throws -> sending T
    ) throws -> T {
        guard state != 0 else { return try mutex.withLock(body) }
        guard let result = try mutex.withLockIfAvailable(body) else {
            state = 2
            throw KeychainError(KeychainStatus.notAvailable, "the keychain engine is busy with another request")
        }
        return result
    }
}
