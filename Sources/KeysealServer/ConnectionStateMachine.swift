/// What one connection is doing, and every change of it in one place: each event ``ConnectionHandler`` sees is a
/// mutating method that moves the state and returns what the handler does about it (the way swift-nio writes its
/// state machines). The handler keeps no flags of its own; it acts on the returned actions. Once closing, a
/// connection stays closing, and no event starts or resumes anything on it.
struct ConnectionStateMachine {
    enum State: Equatable {
        /// The peer's credentials and identity are being looked up: nothing is answered yet.
        case identifying
        /// Frames are answered in order as they arrive, within this connection's turn on the event loop.
        case answering
        /// A request is on the thread pool, a backup transfer step runs, or a large result is written frame by frame:
        /// nothing more is read from this client or answered until it ends.
        case busy
        /// Replies wait to be read (the channel is over its high water mark): nothing more is read or answered until
        /// the client has read enough. `yielding`: this connection's turn has ended meanwhile too.
        case waitingForReader(yielding: Bool)
        /// This connection has had its turn on the event loop (a key operation, or ``ConnectionHandler/turnBudget``
        /// of answers): its next frame waits for the loop's next turn (``TurnQueue``) and nothing more is read from it
        /// meanwhile, so that a client pipelining requests holds up the other connections for one turn at most.
        case yielding
        /// Closing or closed: nothing more is answered.
        case closing
    }

    /// Reading from the socket (`autoRead`), as an event leaves it.
    enum ReadingAction: Equatable {
        case startReading
        case stopReading
        case none
    }

    /// After the peer was identified, or the client read enough of its replies.
    enum ServeAction: Equatable {
        /// Read again, answer the pending frames and arm the idle timer.
        case startReading
        /// Answer the pending frames and arm the idle timer (reading is on already).
        case serve
        case none
    }

    private(set) var state = State.identifying

    /// A pending frame may be answered now.
    var mayAnswer: Bool { state == .answering }

    /// Nothing is in flight: the idle timeout runs.
    var isIdle: Bool { state == .answering || state == .yielding }

    var isClosing: Bool { state == .closing }

    /// The peer's identity is known: its frames are answered from now on.
    mutating func identified() -> ServeAction {
        guard state == .identifying else { return .none }
        state = .answering
        return .serve
    }

    /// A request went to the thread pool, a backup transfer step began or a large result is streamed.
    mutating func workStarted() -> ReadingAction {
        guard state != .closing else { return .none }
        state = .busy
        return .stopReading
    }

    /// The pool answered, the transfer step or the stream ended: this connection reads and answers again.
    mutating func workFinished() -> ReadingAction {
        guard state == .busy else { return .none }
        state = .answering
        return .startReading
    }

    /// A reply was written; `writable`: the channel is under its high water mark. A client that sends without reading
    /// its replies is not read from or answered until it has read enough, so queued replies cost about one reply.
    mutating func replied(writable: Bool) -> ReadingAction {
        guard !writable else { return .none }
        switch state {
        case .answering: state = .waitingForReader(yielding: false)
        case .yielding: state = .waitingForReader(yielding: true)
        case .identifying, .busy, .waitingForReader, .closing: return .none
        }
        return .stopReading
    }

    /// The channel's writability changed.
    mutating func writabilityChanged(writable: Bool) -> ServeAction {
        guard writable, case .waitingForReader(let yielding) = state else { return .none }
        state = yielding ? .yielding : .answering
        return .startReading
    }

    /// This connection's turn on the event loop is over.
    mutating func turnEnded() -> ReadingAction {
        switch state {
        case .answering: state = .yielding
        case .waitingForReader: state = .waitingForReader(yielding: true)
        case .identifying, .busy, .yielding, .closing: return .none
        }
        return .stopReading
    }

    /// This connection's next turn begins: it is read from again unless a request is in flight or its replies wait
    /// for the client to read them.
    mutating func turnBegan() -> ReadingAction {
        switch state {
        case .yielding:
            state = .answering
            return .startReading
        case .waitingForReader(yielding: true):
            state = .waitingForReader(yielding: false)
            return .none
        case .identifying, .answering, .busy, .waitingForReader, .closing:
            return .none
        }
    }

    /// The connection closes (shutdown, idle, a failure) or has closed. Returns false when it was closing already.
    @discardableResult
    mutating func close() -> Bool {
        guard state != .closing else { return false }
        state = .closing
        return true
    }
}
