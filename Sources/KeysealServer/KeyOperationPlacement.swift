import FoundationEssentials
import KeysealClient
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
///
/// What an operation costs beyond its key's device time depends on its input (a message hashed, a KDF's output): an
/// operation whose input work is over ``loopWork`` runs on the pool whatever its key's record, and is not measured
/// (its time says more of its input than of the device).
final class KeyOperationPlacement: Sendable {
    /// Fast operations in a row before a key's operations run on the event loop.
    static let fastRun = 8
    /// 2 ms: four times a swtpm sign, a tenth of a real TPM's.
    static let defaultBound: Duration = .milliseconds(2)
    /// Keys remembered; past it every key starts again on the pool.
    static let capacity = 1024
    /// Bytes of input work (``work(_:)``) within which an operation may run on the event loop: 64 KiB hashed is about
    /// 0.2 ms.
    static let loopWork = 64 << 10

    /// The bytes a key operation hashes or processes whatever its key: its data (a message signed, a ciphertext
    /// opened) and, for a key exchange through an X9.63 KDF, the shared secret (at most 66 bytes), counter and shared
    /// info hashed once for each block of output (counted at SHA-1's 20 bytes, the smallest block); 0 for any other
    /// request.
    static func work(_ request: WireRequest) -> Int {
        guard case .keyOperation(let operation) = request else { return 0 }
        guard operation.kind == .keyExchange, let size = operation.requestedSize, size > 0 else {
            return operation.data.count
        }
        let blocks = (min(size, Int(UInt32.max)) + 19) / 20
        let hashed = 66 + 4 + (operation.sharedInfo?.count ?? 0)
        return operation.data.count + blocks.multipliedReportingOverflow(by: hashed).partialValue
    }

    /// Whether the request's own work lets it run on the event loop (``loopWork``).
    static func isLight(_ request: WireRequest) -> Bool { work(request) <= loopWork }

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
