import Testing

@testable import KeysealServer

/// The connection state machine alone: each event's transition and the action the handler takes on it.
@Suite("Connection state machine")
struct ConnectionStateMachineTests {
    @Test("a connection answers nothing until its peer is identified, then answers and may go idle")
    func identifying() {
        var machine = ConnectionStateMachine()
        #expect(!machine.mayAnswer)
        #expect(!machine.isIdle)
        #expect(machine.identified() == .serve)
        #expect(machine.mayAnswer)
        #expect(machine.isIdle)
        #expect(machine.identified() == .none)
    }

    @Test("a request on the pool stops reading until it ends, and the connection is not idle meanwhile")
    func work() {
        var machine = ConnectionStateMachine()
        _ = machine.identified()
        #expect(machine.workStarted() == .stopReading)
        #expect(!machine.mayAnswer)
        #expect(!machine.isIdle)
        #expect(machine.workFinished() == .startReading)
        #expect(machine.mayAnswer)
    }

    @Test("replies waiting for their reader and an ended turn both hold the connection until each is over")
    func readerAndTurn() {
        var machine = ConnectionStateMachine()
        _ = machine.identified()
        #expect(machine.replied(writable: true) == .none)
        #expect(machine.replied(writable: false) == .stopReading)
        #expect(machine.turnEnded() == .stopReading)
        // The next turn begins while the replies still wait: nothing is read yet.
        #expect(machine.turnBegan() == .none)
        #expect(!machine.mayAnswer)
        #expect(!machine.isIdle)
        #expect(machine.writabilityChanged(writable: false) == .none)
        #expect(machine.writabilityChanged(writable: true) == .startReading)
        #expect(machine.mayAnswer)
    }

    @Test("a closing connection stays closing: no event resumes reading or answering")
    func closing() {
        var machine = ConnectionStateMachine()
        _ = machine.identified()
        #expect(machine.workStarted() == .stopReading)
        let closed = machine.close()
        let closedAgain = machine.close()
        #expect(closed)
        #expect(!closedAgain)
        #expect(machine.workFinished() == .none)
        #expect(machine.identified() == .none)
        #expect(machine.writabilityChanged(writable: true) == .none)
        #expect(machine.turnEnded() == .none)
        #expect(machine.turnBegan() == .none)
        #expect(!machine.mayAnswer)
        #expect(!machine.isIdle)
        #expect(machine.isClosing)
    }
}
