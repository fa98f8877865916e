import Foundation
import Keyseal
import KeysealTestSupport
import Testing

/// The anti-rollback counter of an embedded TPM store on swtpm (docs/TPM.md "Anti-rollback counter").
@Suite("anti-rollback counter, embedded on swtpm")
struct AntiRollbackTests {
    @Test("a TPM store from before the counter gets one at its next open")
    func upgradeDefinesCounter() throws {
        let swtpm = try SwtpmFixture(maxTries: 32)
        defer { swtpm.stop() }
        let directory = try TemporaryDirectory(prefix: "keyseal-counter")
        defer { directory.remove() }
        var store = try KeychainStore.embedded(directory: directory.url, device: .tpm(tcti: swtpm.tcti))
        #expect(try store.status().boot?.counterIndex != nil)
        try store.unsetCounterForTests()
        #expect(try store.status().boot?.counterIndex == nil)
        store.close()
        store = try KeychainStore.embedded(directory: directory.url, device: .tpm(tcti: swtpm.tcti))
        defer { store.close() }
        let boot = try #require(try store.status().boot)
        #expect(boot.counterIndex != nil && boot.counterValue != nil && !boot.rolledBack)
    }
}
