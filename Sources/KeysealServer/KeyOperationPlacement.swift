import FoundationEssentials
import Synchronization

/// Where a private-key operation (sign, decrypt, key exchange) runs: on the connection's event loop while it has been
/// measured fast, else on the thread pool.
///
/// A key operation on the pool costs two thread wake-ups (a pool thread, then the event loop), 100–270 µs on a loaded
/// machine: more than a swtpm or SoftHSM2 sign itself. A real TPM or smart card takes tens of milliseconds, and on the
/// event loop that would stall every other client. So each key's operations run on the pool until its last
/// ``fastRun`` operations each succeeded within ``bound``; every operation is measured wherever it runs, and one that
/// takes longer sends every key back to the pool (the device is shared), each until it has again ``fastRun`` fast ones
/// in a row. A provider that turns slow therefore stalls the event loop for one operation at most.
final class KeyOperationPlacement: Sendable {
    /// Fast operations in a row before a key's operations run on the event loop.
    static let fastRun = 8
    /// 2 ms: four times a swtpm sign, a tenth of a real TPM's.
    static let defaultBound: Duration = .milliseconds(2)
    /// Keys remembered; past it every key starts again on the pool.
    static let capacity = 1024

    let bound: Duration
    /// Each key's fast operations in a row (at most ``fastRun``), by its item's persistent reference.
    private let runs = Mutex([Data: Int]())

    init(bound: Duration = KeyOperationPlacement.defaultBound) {
        self.bound = bound
    }

    /// Whether the key's next operation runs on the event loop.
    func runsOnEventLoop(_ reference: Data) -> Bool {
        runs.withLock { $0[reference] ?? 0 } >= Self.fastRun
    }

    /// Records one operation of the key: its time on the device (with the wait for the store's lock) and whether it
    /// succeeded. A failure within the bound (a locked class, a missing item) says nothing of the device's speed.
    func record(_ reference: Data, elapsed: Duration, succeeded: Bool) {
        runs.withLock { runs in
            guard elapsed <= bound else {
                runs.removeAll(keepingCapacity: true)
                return
            }
            guard succeeded else { return }
            if runs[reference] == nil && runs.count >= Self.capacity { runs.removeAll(keepingCapacity: true) }
            runs[reference] = min((runs[reference] ?? 0) + 1, Self.fastRun)
        }
    }
}
