import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// Every entry point checks a request whole before the engine acts (RequestValidation): runs on every backend,
/// embedded and through keyseald (Scripts/test.sh), which must answer alike.
@Suite("Request validation")
struct RequestValidationTests {
    @Test(arguments: BadRequest.allCases)
    func aBadRequestGetsItsStatusAndChangesNothing(request: BadRequest) throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.add(.password(account: "anyone"))
        #expect(request.status(on: fixture.store) == request.expected)
        #expect(try fixture.store.status().itemCounts.values.reduce(0, +) == 1)
        #expect(try fixture.store.undecryptableItems().isEmpty)
    }

    @Test func attributesAndGroupsAtTheLimitsAreAccepted() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let label = String(repeating: "l", count: RequestValidation.attributeLimit)
        let group = String(repeating: "g", count: RequestValidation.groupLimit)
        _ = try fixture.store.add(
            NewItem(
                itemClass: .genericPassword,
                attributes: [AttributeKey.account: .string("edge"), AttributeKey.label: .string(label)],
                accessGroup: group,
                data: Data("s".utf8)
            )
        )
        var query = ItemQuery.password(account: "edge", returns: .attributes)
        query.accessGroup = group
        query.attributes[AttributeKey.service] = nil
        #expect(try fixture.store.copyMatching(query).first?.string(AttributeKey.label) == label)
    }
}
