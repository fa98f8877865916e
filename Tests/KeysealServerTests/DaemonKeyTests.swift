import Crypto
import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// Keys through keyseald: generated and used in the daemon; clients get public keys and results only, and the
/// caller's access groups and the lock state apply as for items.
@Suite("Keys through keyseald")
struct DaemonKeyTests {
    static let algorithm = "algid:sign:ECDSA:message-X962:SHA256"

    /// The X9.63 KDF hashes its shared info once for each block of output: both are bounded, and a request over
    /// either is errSecParam before the key is used, embedded and through keyseald alike.
    @Test("a KDF key exchange over 4 KiB of shared info or 64 KiB of output is errSecParam, embedded and in keyseald")
    func kdfSizesAreBoundedAlikeEmbeddedAndThroughKeyseald() throws {
        let algorithm = "algid:keyexchange:ECDH:KDFX963:SHA256"
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let embedded = try StoreFixture(.hostKey)
        defer { embedded.remove() }
        let cases: [(info: Int, size: Int, status: OSStatus)] = [
            (4 << 10, 64 << 10, 0), (4 << 10 + 1, 32, KeychainStatus.param), (16, 64 << 10 + 1, KeychainStatus.param),
            (2 << 20, 64 << 10, KeychainStatus.param),
        ]
        for store in [try daemon.client(), embedded.store] {
            let key = try store.generateKey(KeyGenerationRequest(keyType: .p256))
            for (info, size, expected) in cases {
                let outcome = status {
                    let result = try store.keyExchange(
                        key.reference,
                        algorithm: algorithm,
                        peer: key.publicKey.bytes,
                        requestedSize: size,
                        sharedInfo: Data(repeating: 1, count: info)
                    )
                    #expect(result.count == size)
                }
                #expect(outcome == expected, "shared info \(info), size \(size)")
            }
        }
        let software = try SoftwareKey.generate(.p256)
        let peer = try software.publicKey().bytes
        #expect(
            status {
                _ = try software.keyExchange(
                    algorithm: algorithm,
                    peer: peer,
                    requestedSize: 32,
                    sharedInfo: Data(count: 4 << 10 + 1)
                )
            } == KeychainStatus.param
        )
    }

    @Test func aSoftwareKeySignsInKeysealdAndNeverLeavesIt() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let store = try daemon.client()
        let key = try store.generateKey(
            KeyGenerationRequest(keyType: .p256, attributes: [AttributeKey.applicationTag: .data(Data("d".utf8))])
        )
        let message = Data("through the socket".utf8)
        let signature = try store.sign(key.reference, algorithm: Self.algorithm, data: message)
        let publicKey = try P256.Signing.PublicKey(x963Representation: key.publicKey.bytes)
        #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: signature), for: message))
        #expect(try store.describeKey(key.reference).publicKey == key.publicKey)
        #expect(throws: KeychainError.unimplemented) { _ = try store.exportPrivateKey(key.reference) }
    }

    /// The review's flip over the wire: an update setting `extr` of a non-extractable software key to true is
    /// errSecReadOnlyAttr in keyseald (which validates every wire update), and the key stays non-extractable.
    @Test func keysealdRefusesToMakeANonExtractableKeyExtractable() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let store = try daemon.client()
        let tag = AttributeKey.applicationTag
        _ = try store.generateKey(
            KeyGenerationRequest(keyType: .p256, attributes: [tag: .data(Data("ne".utf8))], isExtractable: false)
        )
        let query = ItemQuery(itemClass: .key, attributes: [tag: .data(Data("ne".utf8))], returns: .attributes)
        #expect(throws: KeychainError.readOnlyAttr) {
            try store.update(query, with: ItemChanges(attributes: [AttributeKey.isExtractable: .bool(true)]))
        }
        let record = try #require(try store.copyMatching(query).first)
        #expect(record.attributes[AttributeKey.isExtractable] == .bool(false))
        var withData = query
        withData.returns = .data
        #expect(throws: KeychainError(KeychainStatus.dataNotAvailable)) { _ = try store.copyMatching(withData) }
    }

    @Test func aHardwareKeyInKeysealdSignsOnlyWhileItsClassIsUnlocked() throws {
        let daemon = try DaemonFixture(.tpm)
        defer { daemon.remove() }
        let store = try daemon.client()
        let key = try store.generateHardwareP256Key(tag: Data("device".utf8), accessibility: .whenUnlocked)
        let signature = try key.signature(for: Data("m".utf8))
        #expect(key.publicKey.isValidSignature(signature, for: Data("m".utf8)))
        try store.setPasscode("pw")
        _ = try store.lock()
        #expect(throws: KeychainError.interactionNotAllowed) { _ = try key.signature(for: Data("m".utf8)) }
        try store.unlock(passcode: "pw")
        _ = try key.signature(for: Data("m".utf8))
    }

    @Test(arguments: [DaemonFixture.Backend.tpm, .pkcs11])
    func aHardwareKeyKeysealdHasUsedRefusesToSignOnceLocked(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let store = try daemon.client()
        try store.setPasscode("pw")
        let key = try store.generateHardwareP256Key(tag: Data("used".utf8), accessibility: .whenUnlocked)
        _ = try key.signature(for: Data("m".utf8))
        _ = try key.signature(for: Data("m".utf8))
        _ = try store.lock()
        #expect(throws: KeychainError.interactionNotAllowed) { _ = try key.signature(for: Data("m".utf8)) }
    }

    @Test(arguments: [DaemonFixture.Backend.tpm, .pkcs11])
    func aKeyDeletedByAnotherClientIsGoneForEveryClient(backend: DaemonFixture.Backend) throws {
        let daemon = try DaemonFixture(backend)
        defer { daemon.remove() }
        let first = try daemon.client()
        let second = try daemon.client()
        let key = try first.generateHardwareP256Key(tag: Data("shared".utf8))
        _ = try key.signature(for: Data("m".utf8))
        try second.delete(
            ItemQuery(itemClass: .key, attributes: [AttributeKey.applicationTag: .data(Data("shared".utf8))])
        )
        #expect(throws: KeychainError.itemNotFound) { _ = try key.signature(for: Data("m".utf8)) }
    }

    @Test func anotherUserCannotUseAKeyOutsideItsGroups() throws {
        guard getuid() == 0 else {
            Issue.record("needs root to run the probe as uid 65534")
            return
        }
        let daemon = try DaemonFixture.sharedWithNobody()
        defer { daemon.remove() }
        let key = try daemon.client().generateKey(KeyGenerationRequest(keyType: .p256))
        guard case .item(let reference) = key.reference else {
            Issue.record("a stored key has an item reference")
            return
        }
        let hex = reference.map { String(format: "%02x", $0) }.joined()
        #expect(try daemon.probeAsNobody(["sign", hex]).hasPrefix("error -25300"))
        // Once the owner has used the key, the daemon keeps it prepared: the group is still checked at each use.
        _ = try daemon.client().sign(key.reference, algorithm: Self.algorithm, data: Data("m".utf8))
        #expect(try daemon.probeAsNobody(["sign", hex]).hasPrefix("error -25300"))
    }
}
