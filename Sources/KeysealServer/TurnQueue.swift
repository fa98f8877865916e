import NIOCore

/// The connections of one event loop that gave up their turn (``ConnectionHandler/turnBudget`` of answers, or a key
/// operation), served one turn at a time in the order they gave it up, with a poll of every socket between two
/// turns. SwiftNIO runs every task that is due before it polls again, so a task per waiting connection would let
/// connections that pipeline on several sockets pass the turn among themselves while the others' requests wait
/// unread; one task at a time, each scheduled a moment after the previous turn ended, lets the loop poll first.
/// Used only on its event loop.
final class TurnQueue: @unchecked Sendable {
    private let eventLoop: any EventLoop
    private var waiting = CircularBuffer<() -> Void>()
    private var scheduled = false

    init(eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    /// Runs `turn` after the turns already waiting, each after the loop has polled its sockets again.
    func enqueue(_ turn: @escaping () -> Void) {
        eventLoop.preconditionInEventLoop()
        waiting.append(turn)
        scheduleNext()
    }

    private func scheduleNext() {
        guard !scheduled, !waiting.isEmpty else { return }
        scheduled = true
        // Due a moment after now, which is after the turn that just ended: not due when the loop next looks for due
        // tasks, so it polls its sockets first.
        eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: .microseconds(50)) {
            self.scheduled = false
            self.waiting.popFirst()?()
            self.scheduleNext()
        }
    }
}
