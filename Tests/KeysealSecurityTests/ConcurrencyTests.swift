import Dispatch
import Foundation
import Keyseal
import KeysealSecurity
import KeysealTestSupport
import Testing

/// The SecItem functions are callable from many threads at once on one store.
@Suite("Concurrent SecItem calls")
struct ConcurrencyTests {
    static let threads = 8
    static let callsPerThread = 50
    static let service = "concurrency"

    /// What the threads report back, under a lock.
    final class Report: @unchecked Sendable {
        private let lock = NSLock()
        private var _unexpected: [String] = []
        private var _models: [Int: [String: Data]] = [:]

        func unexpected(_ message: String) { lock.withLock { _unexpected.append(message) } }
        func model(_ thread: Int, _ model: [String: Data]) { lock.withLock { _models[thread] = model } }
        var unexpectedMessages: [String] { lock.withLock { _unexpected } }
        var models: [Int: [String: Data]] { lock.withLock { _models } }
    }

    enum Operation: Int, CaseIterable { case add, find, update, delete }

    /// One thread's calls: its own accounts, whose statuses its model predicts exactly, and every fifth call on
    /// an account all threads share, whose status may be either of the two an interleaving allows.
    static func run(thread: Int, report: Report) {
        var model: [String: Data] = [:]
        var seed = UInt64(thread + 1) &* 0x9E37_79B9_7F4A_7C15
        func next() -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(truncatingIfNeeded: seed >> 33)
        }
        for step in 0..<callsPerThread {
            let shared = step % 5 == 4
            let account = shared ? "shared" : "t\(thread)-\(next() % 3)"
            let value = Data("t\(thread)-s\(step)".utf8)
            let operation = Operation(rawValue: next() % Operation.allCases.count)!
            let query = genericQuery(account: account, service: service)
            var found: Data?
            let status: OSStatus
            switch operation {
            case .add: status = add(genericPassword(account: account, service: service, data: value))
            case .find:
                let outcome = copyMatching(
                    genericQuery(account: account, service: service, [kSecReturnData as String: true])
                )
                status = outcome.status
                found = outcome.result as? Data
            case .update:
                status = SecItemUpdate(query as CFDictionary, [kSecValueData: value] as CFDictionary)
            case .delete: status = SecItemDelete(query as CFDictionary)
            }
            let context = "thread \(thread) step \(step) \(operation) \(account)"
            if shared {
                let allowed =
                    operation == .add ? [errSecSuccess, errSecDuplicateItem] : [errSecSuccess, errSecItemNotFound]
                if !allowed.contains(status) { report.unexpected("\(context): \(status)") }
                continue
            }
            let exists = model[account] != nil
            let expected: OSStatus
            switch operation {
            case .add:
                expected = exists ? errSecDuplicateItem : errSecSuccess
                if !exists { model[account] = value }
            case .find:
                expected = exists ? errSecSuccess : errSecItemNotFound
                if exists && found != model[account] { report.unexpected("\(context): wrong data") }
            case .update:
                expected = exists ? errSecSuccess : errSecItemNotFound
                if exists { model[account] = value }
            case .delete:
                expected = exists ? errSecSuccess : errSecItemNotFound
                model[account] = nil
            }
            if status != expected { report.unexpected("\(context): \(status), expected \(expected)") }
        }
        report.model(thread, model)
    }

    @Test func mixedCallsFromEightThreadsGiveOnlyExpectedStatuses() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let report = Report()
        try KeychainStore.withDefault(fixture.store) {
            let store = fixture.store
            DispatchQueue.concurrentPerform(iterations: Self.threads) { thread in
                // Task-local defaults do not cross threads: each worker scopes the store itself.
                KeychainStore.withDefault(store) { Self.run(thread: thread, report: report) }
            }
            #expect(report.unexpectedMessages == [])
            #expect(report.models.count == Self.threads)
            // Final state: exactly the threads' models, plus at most one shared item.
            var expected: [String: Data] = [:]
            for model in report.models.values { expected.merge(model) { first, _ in first } }
            let items = findAll(genericQuery(account: nil, service: Self.service))
            var stored: [String: Data] = [:]
            var sharedCount = 0
            for item in items {
                let account = try #require(item[kSecAttrAccount] as? String)
                if account == "shared" {
                    sharedCount += 1
                    continue
                }
                #expect(stored[account] == nil, "\(account) is stored twice")
                stored[account] = item[kSecValueData] as? Data
            }
            #expect(stored == expected)
            #expect(sharedCount <= 1)
        }
    }
}
