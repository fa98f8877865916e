import Foundation
import Keyseal
import KeysealTestSupport
import Testing

/// docs/ARCHITECTURE.md, "Accessibility classes and the lock-state manager": 7 classes × 4 states × 6 operations give
/// success or errSecInteractionNotAllowed exactly as the table says, and a refused call changes nothing.
@Suite("Lock matrix")
struct LockMatrixTests {
    enum State: String, CaseIterable, CustomTestStringConvertible {
        case noPasscode = "no passcode"
        case unlocked
        case locked
        case beforeFirstUnlock = "before first unlock"
        var testDescription: String { rawValue }
    }

    enum Operation: String, CaseIterable, CustomTestStringConvertible {
        case add
        case findData = "find with data"
        case findAttributes = "find attributes"
        case findNoReturn = "find with no return key"
        case update
        case delete
        var testDescription: String { rawValue }
    }

    static let passcode = "1234-correct"

    /// The status the table of docs/ARCHITECTURE.md ("Accessibility classes") gives.
    static func expected(_ accessibility: Accessibility, _ state: State, _ operation: Operation) -> OSStatus {
        if accessibility == .whenPasscodeSetThisDeviceOnly && state == .noPasscode {
            // akpu cannot exist without a passcode: adds fail with auth failed, nothing else can match.
            return operation == .add ? KeychainStatus.authFailed : KeychainStatus.itemNotFound
        }
        let usable: Bool
        switch state {
        case .noPasscode, .unlocked: usable = true
        case .locked: usable = accessibility.isAvailableWhenLocked
        case .beforeFirstUnlock: usable = accessibility.isAvailableBeforeFirstUnlock
        }
        return usable ? 0 : KeychainStatus.interactionNotAllowed
    }

    @Test(arguments: Accessibility.allCases, State.allCases)
    func matrix(accessibility: Accessibility, state: State) throws {
        for operation in Operation.allCases {
            let fixture = try StoreFixture()
            defer { fixture.remove() }
            try check(fixture, accessibility, state, operation)
        }
    }

    func check(_ fixture: StoreFixture, _ accessibility: Accessibility, _ state: State, _ operation: Operation) throws {
        let seeded = !(accessibility == .whenPasscodeSetThisDeviceOnly && state == .noPasscode)
        if state != .noPasscode { try fixture.store.setPasscode(Self.passcode) }
        if seeded {
            _ = try fixture.store.add(.password(account: "seed", secret: "seed-secret", accessibility: accessibility))
        }
        switch state {
        case .noPasscode, .unlocked: break
        case .locked: try fixture.store.lock()
        case .beforeFirstUnlock: try fixture.reopen()
        }
        #expect(
            fixture.store.lockState
                == (state == .locked ? .locked : state == .beforeFirstUnlock ? .beforeFirstUnlock : .unlocked)
        )

        let store = fixture.store
        var records: [ItemRecord] = []
        let result = status {
            switch operation {
            case .add:
                _ = try store.add(.password(account: "new", secret: "new-secret", accessibility: accessibility))
            case .findData:
                records = try store.copyMatching(.password(account: "seed", returns: .data))
            case .findAttributes:
                records = try store.copyMatching(.password(account: "seed", returns: .attributes))
            case .findNoReturn:
                records = try store.copyMatching(.password(account: "seed"))
            case .update:
                try store.update(.password(account: "seed"), with: ItemChanges(data: Data("changed".utf8)))
            case .delete:
                try store.delete(.password(account: "seed"))
            }
        }
        let expected = Self.expected(accessibility, state, operation)
        #expect(
            result == expected,
            "\(accessibility.name) / \(state.rawValue) / \(operation.rawValue): got \(result), expected \(expected)"
        )

        if result == 0 {
            switch operation {
            case .findData: #expect(records.first?.data == Data("seed-secret".utf8))
            case .findAttributes:
                #expect(records.first?.string(AttributeKey.account) == "seed")
                #expect(records.first?.data == nil)
            default: break
            }
            return
        }
        guard seeded, result == KeychainStatus.interactionNotAllowed else { return }
        // A refused call changed nothing: unlock and look.
        try fixture.store.unlock(passcode: Self.passcode)
        let after = try fixture.store.copyMatching(
            ItemQuery(
                itemClass: .genericPassword,
                attributes: [AttributeKey.service: .string("svc")],
                limit: .all,
                returns: [.data, .attributes]
            )
        )
        #expect(after.count == 1)
        #expect(after.first?.data == Data("seed-secret".utf8))
        #expect(after.first?.string(AttributeKey.account) == "seed")
    }
}
