import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// The add that replaces the item carrying exactly the same string attributes (the Secret Service's `CreateItem`
/// with `replace`), one step under the engine's lock. Part of the string-attribute suite, so it runs on every
/// backend, embedded and through keyseald (Scripts/test.sh).
extension StringAttributeTests {
    static func storing(
        _ account: String,
        _ pairs: [String: String]?,
        secret: String,
        label: String = "label",
        service: String = "ss",
        group: String? = nil,
        accessibility: Accessibility = .whenUnlocked
    ) -> NewItem {
        var attributes: [String: AttributeValue] = [
            AttributeKey.service: .string(service), AttributeKey.account: .string(account),
            AttributeKey.label: .string(label), AttributeKey.description: .string("text/plain"),
        ]
        if let pairs { attributes[AttributeKey.stringAttributes] = .data(StringAttributes.encode(pairs)) }
        return NewItem(
            itemClass: .genericPassword,
            attributes: attributes,
            accessGroup: group,
            accessibility: accessibility,
            data: Data(secret.utf8)
        )
    }

    /// Every generic password of the store: account → (value, label).
    static func everyItem(_ store: KeychainStore) throws -> [String: (value: String, label: String?)] {
        let records: [ItemRecord]
        do {
            records = try store.copyMatching(
                ItemQuery(itemClass: .genericPassword, limit: .all, returns: [.attributes, .data])
            )
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
            return [:]
        }
        var items: [String: (value: String, label: String?)] = [:]
        for record in records {
            items[record.string(AttributeKey.account) ?? "?"] = (
                String(decoding: record.data ?? Data(), as: UTF8.self), record.string(AttributeKey.label)
            )
        }
        return items
    }

    @Test func aReplacingAddReplacesTheItemWhosePairsAreEqualAndKeepsItsAccount() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let pairs = ["xdg:schema": "org.example", "user": "alice"]
        _ = try fixture.store.add(Self.storing("kept", pairs, secret: "old", label: "old label"))
        let created = try #require(
            try fixture.store.copyMatching(.password(service: "ss", account: "kept", returns: .attributes)).first?
                .attributes[AttributeKey.creationDate]
        )
        let replaced = try fixture.store.addReplacingAttributes(
            Self.storing("fresh", pairs, secret: "new", label: "new label"),
            caller: .owner
        )
        #expect(replaced == "kept")
        let items = try Self.everyItem(fixture.store)
        #expect(items.count == 1)
        #expect(items["kept"]?.value == "new")
        #expect(items["kept"]?.label == "new label")
        let after = try #require(
            try fixture.store.copyMatching(.password(service: "ss", account: "kept", returns: .attributes)).first
        )
        #expect(after.attributes[AttributeKey.creationDate] == created)
        #expect(after.accessibility == .whenUnlocked)
    }

    @Test func aReplacingAddWithoutAnEqualItemAdds() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        #expect(
            try fixture.store.addReplacingAttributes(Self.storing("first", ["k": "v"], secret: "s1"), caller: .owner)
                == nil
        )
        let items = try Self.everyItem(fixture.store)
        #expect(items.count == 1 && items["first"]?.value == "s1")
    }

    @Test func anItemWithMoreOrFewerPairsIsNotReplaced() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(Self.storing("superset", ["a": "1", "b": "2", "c": "3"], secret: "sup"))
        _ = try fixture.store.add(Self.storing("subset", ["a": "1"], secret: "sub"))
        let replaced = try fixture.store.addReplacingAttributes(
            Self.storing("exact", ["a": "1", "b": "2"], secret: "new"),
            caller: .owner
        )
        #expect(replaced == nil)
        let items = try Self.everyItem(fixture.store)
        #expect(items.count == 3)
        #expect(items["superset"]?.value == "sup" && items["subset"]?.value == "sub" && items["exact"]?.value == "new")
    }

    @Test func anItemOfAnotherServiceOrGroupIsUntouched() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let pairs = ["user": "alice"]
        _ = try fixture.store.add(Self.storing("other-service", pairs, secret: "s1", service: "elsewhere"))
        _ = try fixture.store.add(Self.storing("other-group", pairs, secret: "s2", group: "com.example.other"))
        let replaced = try fixture.store.addReplacingAttributes(
            Self.storing("new", pairs, secret: "s3", group: "com.example.mine"),
            caller: .owner
        )
        #expect(replaced == nil)
        let items = try Self.everyItem(fixture.store)
        #expect(items.count == 3)
        #expect(items["other-service"]?.value == "s1" && items["other-group"]?.value == "s2")
        #expect(items["new"]?.value == "s3")
    }

    @Test func ofSeveralEqualItemsTheFirstAddedIsReplaced() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        for account in ["first", "second", "third"] {
            _ = try fixture.store.add(Self.storing(account, ["k": "v"], secret: account))
        }
        let replaced = try fixture.store.addReplacingAttributes(
            Self.storing("new", ["k": "v"], secret: "new"),
            caller: .owner
        )
        #expect(replaced == "first")
        let items = try Self.everyItem(fixture.store)
        #expect(items.mapValues(\.value) == ["first": "new", "second": "second", "third": "third"])
    }

    @Test func aReplacingAddWithoutStringAttributesIsErrSecParam() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let result = status(of: {
            _ = try fixture.store.addReplacingAttributes(Self.storing("a", nil, secret: "s"), caller: .owner)
        })
        #expect(result == KeychainStatus.param)
        #expect(try Self.everyItem(fixture.store).isEmpty)
    }

    /// An item added without string attributes has no pairs to be equal to: a replacing add with an empty set adds.
    @Test func anItemWithoutStringAttributesIsNotReplacedByAnEmptySet() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(Self.storing("plain", nil, secret: "orig"))
        #expect(
            try fixture.store.addReplacingAttributes(Self.storing("new", [:], secret: "other"), caller: .owner) == nil
        )
        let items = try Self.everyItem(fixture.store)
        #expect(items["plain"]?.value == "orig")
        #expect(items["new"]?.value == "other")
        // Items that do carry an empty set are equal to it.
        #expect(
            try fixture.store.addReplacingAttributes(Self.storing("newer", [:], secret: "third"), caller: .owner)
                == "new"
        )
    }

    /// Locked: refused whether the new item's class key is missing or only the candidate's (the search cannot tell
    /// whether it is equal without opening it), and nothing is written.
    @Test(arguments: [Accessibility.whenUnlocked, .afterFirstUnlock])
    func aReplacingAddWhileLockedWritesNothing(newAccessibility: Accessibility) throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("1234")
        _ = try fixture.store.add(Self.storing("kept", ["k": "v"], secret: "old"))
        try fixture.store.lock()
        let result = status(of: {
            _ = try fixture.store.addReplacingAttributes(
                Self.storing("new", ["k": "v"], secret: "new", accessibility: newAccessibility),
                caller: .owner
            )
        })
        #expect(result == KeychainStatus.interactionNotAllowed)
        try fixture.store.unlock(passcode: "1234")
        let items = try Self.everyItem(fixture.store)
        #expect(items.count == 1 && items["kept"]?.value == "old")
    }

    /// Two threads store the same attributes at once, round after round: each round leaves one item. A search
    /// followed by a separate add lets both threads find nothing and both add.
    @Test func twoConcurrentReplacingAddsLeaveOneItem() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let store = fixture.store
        let rounds = 60
        let failures = Failures()
        for round in 0..<rounds {
            let start = DispatchSemaphore(value: 0)
            let group = DispatchGroup()
            for writer in 0..<2 {
                group.enter()
                Thread {
                    start.wait()
                    do {
                        _ = try store.addReplacingAttributes(
                            Self.storing("r\(round)w\(writer)", ["round": "\(round)"], secret: "w\(writer)"),
                            caller: .owner
                        )
                    } catch {
                        failures.record("round \(round), writer \(writer): \(error)")
                    }
                    group.leave()
                }.start()
            }
            start.signal()
            start.signal()
            group.wait()
        }
        #expect(failures.all.isEmpty, "\(failures.all)")
        for round in 0..<rounds {
            #expect(try Self.accounts(store, ["round": "\(round)"]).count == 1, "round \(round)")
        }
    }
}

final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [String] = []
    func record(_ message: String) { lock.withLock { messages.append(message) } }
    var all: [String] { lock.withLock { messages } }
}
