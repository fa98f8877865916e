import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Synchronization
import Testing

@testable import KeysealClient
@testable import KeysealServer

/// keyseald answers a copy-matching of many results on its thread pool, so that other clients on the same event loop
/// are not held up, unless the store's indexes bound it to a few small rows (KeychainService.answerOnEventLoop):
/// then it is answered on the event loop like a single lookup. keyseald's trace log says where each request ran.
@Suite("Small queries on the event loop")
struct DaemonSmallQueryTests {
    static func query(service: String, account: String? = nil) -> ItemQuery {
        var attributes: [String: AttributeValue] = [AttributeKey.service: .string(service)]
        if let account { attributes[AttributeKey.account] = .string(account) }
        return ItemQuery(itemClass: .genericPassword, attributes: attributes, limit: .all, returns: .data)
    }

    static func add(_ connection: KeysealConnection, service: String, account: String, bytes: Int = 8) throws {
        let item = NewItem(
            itemClass: .genericPassword,
            attributes: [AttributeKey.service: .string(service), AttributeKey.account: .string(account)],
            data: Data(repeating: 7, count: bytes)
        )
        _ = try connection.send(.add(item))
    }

    /// The placement keyseald logged for each request named `name`, in order.
    static func placements(_ daemon: DaemonFixture, of name: String = "copy-matching") throws -> [String] {
        let log = try String(contentsOfFile: daemon.logPath, encoding: .utf8)
        return log.split(separator: "\n").filter {
            $0.contains("request.name=\(name) ") || $0.hasSuffix("request.name=\(name)")
        }.compactMap { line in
            line.contains("answered on the event loop")
                ? "loop" : line.contains("answered on the thread pool") ? "pool" : nil
        }
    }

    @Test func fewRowsRunOnTheEventLoopAndManyOnThePool() throws {
        let daemon = try DaemonFixture(.hostKey, arguments: ["--log-level", "trace"])
        defer { daemon.remove() }
        let connection = KeysealConnection(socketPath: daemon.socketPath)
        defer { connection.disconnect() }
        for index in 0..<3 { try Self.add(connection, service: "few", account: "f\(index)") }
        for index in 0..<(KeychainService.smallQuery.rows + 4) {
            try Self.add(connection, service: "many", account: "m\(index)")
        }
        try Self.add(connection, service: "large", account: "l", bytes: 200_000)
        // The results are whole wherever they ran.
        guard case .records(let few) = try connection.send(.copyMatching(Self.query(service: "few"))),
            case .records(let many) = try connection.send(.copyMatching(Self.query(service: "many"))),
            case .records(let large) = try connection.send(.copyMatching(Self.query(service: "large")))
        else {
            Issue.record("no records")
            return
        }
        #expect(few.count == 3)
        #expect(many.count == KeychainService.smallQuery.rows + 4)
        #expect(large.first?.data?.count == 200_000)
        _ = daemon.stop()
        #expect(try Self.placements(daemon) == ["loop", "pool", "pool"])
    }

    /// A Secret Service store (an add that replaces by string attributes) searches under the same bound: one whose
    /// pairs many items hold is done on the pool, having written nothing on the loop.
    @Test func aReplacingAddOverTheBoundRunsOnThePool() throws {
        let daemon = try DaemonFixture(.hostKey, arguments: ["--log-level", "trace"])
        defer { daemon.remove() }
        let connection = KeysealConnection(socketPath: daemon.socketPath)
        defer { connection.disconnect() }
        func storing(_ account: String, _ pairs: [String: String]) -> NewItem {
            NewItem(
                itemClass: .genericPassword,
                attributes: [
                    AttributeKey.service: .string("ss"), AttributeKey.account: .string(account),
                    AttributeKey.stringAttributes: .data(StringAttributes.encode(pairs)),
                ],
                data: Data("v".utf8)
            )
        }
        for index in 0..<(KeychainService.smallQuery.rows + 4) {
            #expect(
                try connection.send(
                    .addReplacingAttributes(storing("m\(index)", ["xdg:schema": "s", "n": "\(index)"]))
                ) == .records([])
            )
        }
        #expect(try connection.send(.addReplacingAttributes(storing("schema", ["xdg:schema": "s"]))) == .records([]))
        guard case .records(let all) = try connection.send(.copyMatching(Self.query(service: "ss"))) else {
            Issue.record("no records")
            return
        }
        #expect(all.count == KeychainService.smallQuery.rows + 5)
        _ = daemon.stop()
        let placements = try Self.placements(daemon, of: WireRequest.addReplacingAttributes(storing("x", [:])).name)
        #expect(placements.count == KeychainService.smallQuery.rows + 5)
        #expect(placements.last == "pool")
        #expect(placements.dropLast().allSatisfy { $0 == "loop" })
    }

    /// Requests answered on the event loop, pipelined on one connection or on several, are answered a turn at a
    /// time: the loop polls every other socket between two turns, so a client's bursts do not hold up another's
    /// request for long. With a task per waiting connection, connections pipelining on several sockets passed the turn
    /// among themselves and a ping waited seconds.
    @Test(arguments: [1, 4])
    func pipelinedQueriesOnTheLoopLetOtherClientsIn(connections: Int) throws {
        let daemon = try DaemonFixture(.hostKey)
        defer { daemon.remove() }
        let connection = KeysealConnection(socketPath: daemon.socketPath)
        defer { connection.disconnect() }
        for index in 0..<KeychainService.smallQuery.rows {
            try Self.add(connection, service: "s", account: "a\(index)")
        }
        // Each request decrypts the attributes of every candidate row, and none matches: the answer is small.
        var attributes: [String: AttributeValue] = [AttributeKey.service: .string("s")]
        attributes[AttributeKey.label] = .string("none of them")
        let frame = try WireRequest.copyMatching(
            ItemQuery(itemClass: .genericPassword, attributes: attributes, limit: .all, returns: .attributes)
        ).encodedFrame()
        let burst = 20_000 / connections
        let descriptors = try (0..<connections).map { _ in try KeysealConnection.open(daemon.socketPath) }
        let answered = Mutex(0)
        let stopped = DispatchGroup()
        for fd in descriptors {
            for work in [
                { try? KeysealConnection.writeAll(fd, Array(repeating: frame, count: burst).flatMap { $0 }) },
                { while DaemonIsolationTests.readPayload(fd) != nil { answered.withLock { $0 += 1 } } },
            ] as [@Sendable () -> Void] {
                stopped.enter()
                Thread {
                    work()
                    stopped.leave()
                }.start()
            }
        }
        defer {
            // Every thread stops before the descriptors are closed (and their numbers reused).
            for fd in descriptors { shutdown(fd, Int32(SHUT_RDWR)) }
            stopped.wait()
            for fd in descriptors { close(fd) }
        }
        Thread.sleep(forTimeInterval: 0.2)
        var pings: [Duration] = []
        while answered.withLock({ $0 }) < burst * connections * 3 / 4, pings.count < 200 {
            let start = ContinuousClock.now
            #expect(try connection.send(.ping) == .ok)
            pings.append(ContinuousClock.now - start)
        }
        let sorted = pings.sorted()
        guard sorted.count > 10 else {
            Issue.record("only \(sorted.count) pings were answered while the bursts lasted: \(sorted)")
            return
        }
        // Each ping waits for at most one turn of each other connection. Without turns, or with a task per waiting
        // connection, the pings waited for whole reads of the bursts (seconds); the slowest bound leaves room for a
        // busy machine's scheduling (the slowest ping reached 0.44 s once while every other suite ran beside it).
        #expect(
            sorted[sorted.count / 2] < .milliseconds(5),
            "pings waited behind other connections' queries: \(sorted)"
        )
        #expect(sorted.last! < .milliseconds(1_000), "a ping waited behind other connections' queries: \(sorted.last!)")
    }
}
