import CKeysealHeapWipe
import Crypto
import Foundation
import Keyseal
import KeysealCore
import KeysealTestSupport
import Testing

/// Keys generated inside the device key's hardware (`kSecAttrTokenIDSecureEnclave`). On the host-key backend the
/// hardware is a software double (HardwareKeyStoreFixture); on the TPM and PKCS#11 backends swtpm and SoftHSM2.
@Suite(
    "Hardware keys",
    .disabled(if: TestBackend.throughDaemon, "embedded only; DaemonKeyTests covers keyseald")
)
struct HardwareKeyTests {
    static let sha256Message = "algid:sign:ECDSA:message-X962:SHA256"

    static func generate(
        _ store: KeychainStore,
        tag: String = "hw",
        accessibility: Accessibility = .whenUnlocked,
        permanent: Bool = true
    ) throws -> KeyDescription {
        try store.generateKey(
            KeyGenerationRequest(
                keyType: .p256,
                inHardware: true,
                isPermanent: permanent,
                attributes: [AttributeKey.applicationTag: .data(Data(tag.utf8))],
                accessibility: accessibility
            )
        )
    }

    @Test func hardwareSignatureVerifiesWithSwiftCrypto() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store)
        let message = Data("attest me".utf8)
        let signature = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: message)
        let publicKey = try P256.Signing.PublicKey(x963Representation: key.publicKey.bytes)
        #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: signature), for: message))
        #expect(key.inHardware && !key.isExtractable)
        #expect(key.attributes[AttributeKey.tokenID] == .string("com.apple.setoken"))
    }

    @Test func hardwareKeyExchangeAgreesWithThePeer() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store)
        let peer = P256.KeyAgreement.PrivateKey()
        let ours = try fixture.store.keyExchange(
            key.reference,
            algorithm: "algid:keyexchange:ECDH",
            peer: peer.publicKey.x963Representation
        )
        let theirs = try peer.sharedSecretFromKeyAgreement(
            with: P256.KeyAgreement.PublicKey(x963Representation: key.publicKey.bytes)
        )
        #expect(ours.withUnsafeBytes { Data($0) } == theirs.withUnsafeBytes { Data($0) })
    }

    @Test func hardwareKeyCannotSignWhileItsClassIsLocked() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store)
        try fixture.store.setPasscode("pw")
        try fixture.store.lock()
        #expect(throws: KeychainError.interactionNotAllowed) {
            _ = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: Data())
        }
        try fixture.store.unlock(passcode: "pw")
        _ = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: Data())
    }

    @Test func transientHardwareKeyFollowsItsClassToo() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        let key = try Self.generate(fixture.store, permanent: false)
        try fixture.store.lock()
        #expect(throws: KeychainError.interactionNotAllowed) {
            _ = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: Data())
        }
        #expect(throws: KeychainError.itemNotFound) { _ = try fixture.store.copyMatching(ItemQuery(itemClass: .key)) }
    }

    @Test func hardwarePrivateKeyIsNeverExported() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "x")
        #expect(throws: KeychainError.unimplemented) { _ = try fixture.store.exportPrivateKey(key.reference) }
        #expect(throws: KeychainError(KeychainStatus.dataNotAvailable)) {
            _ = try fixture.store.copyMatching(
                ItemQuery(
                    itemClass: .key,
                    attributes: [AttributeKey.applicationTag: .data(Data("x".utf8))],
                    returns: [.data]
                )
            )
        }
    }

    @Test func onlyP256KeysAreMadeInHardware() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        #expect(throws: KeychainError.param) {
            _ = try fixture.store.generateKey(KeyGenerationRequest(keyType: .p384, inHardware: true))
        }
    }

    @Test func deletingTheItemDeletesTheHardwareKey() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "d")
        try fixture.store.delete(
            ItemQuery(itemClass: .key, attributes: [AttributeKey.applicationTag: .data(Data("d".utf8))])
        )
        if let log = fixture.log {
            #expect(log.deletedBlobs.count == 1)
            #expect(log.liveKeys == 0)
        }
        #expect(throws: KeychainError.itemNotFound) {
            _ = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: Data())
        }
    }

    @Test(.disabled(if: TestBackend.current != .hostKey, "only the software double reports the authorization it gets"))
    func theAuthorizationIsDerivedAndNeverStored() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store)
        _ = try fixture.store.sign(key.reference, algorithm: Self.sha256Message, data: Data())
        let log = try #require(fixture.log, "the authorization is visible only to the software double")
        let authorizations = Set(log.authorizations)
        #expect(authorizations.count == 1, "the same authorization at generation and at each use")
        let authorization = try #require(authorizations.first)
        fixture.store.close()
        for file in try FileManager.default.contentsOfDirectory(atPath: fixture.storeDirectory.path) {
            let contents = try Data(contentsOf: fixture.storeDirectory.appendingPathComponent(file))
            #expect(contents.range(of: authorization) == nil, "\(file) holds a hardware key's authorization")
        }
    }

    // MARK: Prepared keys: a used key stays ready while its class is available and its item unchanged

    static func sign(_ store: KeychainStore, _ key: KeyDescription) throws {
        _ = try store.sign(key.reference, algorithm: Self.sha256Message, data: Data("m".utf8))
    }

    @Test func aPreparedKeyRefusesToSignOnceItsClassLocks() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        let key = try Self.generate(fixture.store)
        try Self.sign(fixture.store, key)
        try #require(try fixture.store.preparedKeyCountForTests() == 1)
        try fixture.store.lock()
        #expect(throws: KeychainError.interactionNotAllowed) { try Self.sign(fixture.store, key) }
    }

    @Test func lockingDropsThePreparedKeysOfTheLockedClassesOnly() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        let locking = try Self.generate(fixture.store, tag: "a", accessibility: .whenUnlocked)
        let staying = try Self.generate(fixture.store, tag: "b", accessibility: .afterFirstUnlock)
        try Self.sign(fixture.store, locking)
        try Self.sign(fixture.store, staying)
        #expect(try fixture.store.preparedKeyCountForTests() == 2)
        try fixture.store.lock()
        #expect(try fixture.store.preparedKeyCountForTests() == 1)
        #expect(try fixture.store.preparedAuthorizationInvertedForTests(locking.reference) == nil)
        #expect(try fixture.store.preparedAuthorizationInvertedForTests(staying.reference) != nil)
    }

    @Test func aPasscodeChangeDropsThePreparedKeys() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        let key = try Self.generate(fixture.store)
        try Self.sign(fixture.store, key)
        try fixture.store.changePasscode(from: "pw", to: "pw2")
        #expect(try fixture.store.preparedKeyCountForTests() == 0)
        try Self.sign(fixture.store, key)
    }

    @Test func aPreparedKeyIsGoneOnceItsItemIsDeleted() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        let key = try Self.generate(fixture.store, tag: "gone")
        try Self.sign(fixture.store, key)
        try fixture.store.delete(
            ItemQuery(itemClass: .key, attributes: [AttributeKey.applicationTag: .data(Data("gone".utf8))])
        )
        #expect(throws: KeychainError.itemNotFound) { try Self.sign(fixture.store, key) }
    }

    @Test func aPreparedKeyFollowsItsItemIntoAClassThatLocks() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        let key = try Self.generate(fixture.store, tag: "moved", accessibility: .afterFirstUnlock)
        try Self.sign(fixture.store, key)
        try fixture.store.update(
            ItemQuery(itemClass: .key, attributes: [AttributeKey.applicationTag: .data(Data("moved".utf8))]),
            with: ItemChanges(accessibility: .whenUnlocked)
        )
        try fixture.store.lock()
        #expect(throws: KeychainError.interactionNotAllowed) { try Self.sign(fixture.store, key) }
    }

    /// Where the bytes whose inversion is `inverted` occur in this process's readable memory (read through
    /// /proc/self/mem, each copy zeroed once searched); the bytes themselves are never formed.
    static func occurrences(ofInverted inverted: [UInt8]) throws -> Int {
        let maps = try String(contentsOfFile: "/proc/self/maps", encoding: .utf8)
        let fd = open("/proc/self/mem", O_RDONLY)
        guard fd >= 0 else { throw FixtureError("cannot open /proc/self/mem: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var found = 0
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
            let name = fields.count >= 6 ? String(fields[5]) : ""
            if name == "[vvar]" || name == "[vsyscall]" || name == "[vvar_vclock]" { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard bounds.count == 2, bounds[1] > bounds[0] else { continue }
            // In chunks of 1 MiB; the maps were read before, so pages may have gone since (see below).
            let chunk = 1 << 20
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk + inverted.count, alignment: 16)
            defer {
                memset(buffer.baseAddress!, 0, buffer.count)
                buffer.deallocate()
            }
            let base = buffer.baseAddress!
            var start = bounds[0]
            while start < bounds[1] {
                let wanted = Int(min(UInt64(buffer.count), bounds[1] - start))
                let count = pread(fd, base, wanted, off_t(Int64(bitPattern: start)))
                // A page unmapped meanwhile by another thread (the region was read from the maps before) ends a
                // read early or fails it: skip that page only and go on after it.
                guard count > 0 else {
                    start += UInt64(page)
                    continue
                }
                let complete = count == wanted
                // Hits that start within this chunk; the overlap only completes a pattern across the boundary.
                let searchable = complete ? min(chunk, count - inverted.count + 1) : count - inverted.count + 1
                defer { start += UInt64(complete ? chunk : count) }
                guard searchable > 0 else { continue }
                var offset = 0
                while offset < searchable, let hit = memchr(base + offset, Int32(~inverted[0]), searchable - offset) {
                    let position = base.distance(to: hit)
                    if (1..<inverted.count).allSatisfy({ buffer[position + $0] == ~inverted[$0] }) { found += 1 }
                    offset = position + 1
                }
            }
        }
        return found
    }

    @Test(
        .disabled(
            if: TestBackend.current == .hostKey,
            "the software double keeps every authorization it is given"
        )
    )
    func noCopyOfAnAuthorizationStaysOnceItsClassLocks() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        let key = try Self.generate(fixture.store)
        try Self.sign(fixture.store, key)
        let inverted = try #require(try fixture.store.preparedAuthorizationInvertedForTests(key.reference))
        // The control: the scan sees the prepared key's copy while the class is available. Other tests of this
        // process map and unmap memory while a scan runs, so it may take a second scan. In CI the control has also
        // missed five scans in a row (cause not found yet); such a run is recorded as a known issue, not passed
        // silently, and the check after lock below still runs.
        var seen = 0
        for _ in 0..<5 where seen == 0 { seen = try Self.occurrences(ofInverted: inverted) }
        if seen == 0 {
            withKnownIssue("the scan did not see the prepared copy while unlocked", isIntermittent: true) {
                Issue.record("no copy of the prepared authorization was seen while unlocked")
            }
        }
        try fixture.store.lock()
        #expect(try Self.occurrences(ofInverted: inverted) == 0)
    }

    /// The review's finding made reliable: a key exchange authorizes the key through ESAPI over the kept salted
    /// session, whose record keeps sessionKey ‖ authValue; before the fix that copy was in live memory after the lock
    /// every time, and freed copies (tpm2-tss's, swift-crypto's HMAC key block) were there by chance.
    @Test(
        .disabled(
            if: TestBackend.current == .hostKey,
            "the software double keeps every authorization it is given"
        )
    )
    func noCopyOfAnAuthorizationStaysAfterKeyExchangesOnceItsClassLocks() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        try fixture.store.setPasscode("pw")
        var keys: [(KeyDescription, [UInt8])] = []
        for index in 0..<3 {
            let key = try Self.generate(fixture.store, tag: "hw\(index)")
            for _ in 0..<2 {
                _ = try fixture.store.keyExchange(
                    key.reference,
                    algorithm: "algid:keyexchange:ECDH",
                    peer: P256.KeyAgreement.PrivateKey().publicKey.x963Representation
                )
                try Self.sign(fixture.store, key)
            }
            keys.append((key, try #require(try fixture.store.preparedAuthorizationInvertedForTests(key.reference))))
        }
        try fixture.store.lock()
        for (index, (_, inverted)) in keys.enumerated() {
            #expect(try Self.occurrences(ofInverted: inverted) == 0, "key \(index)")
        }
    }

    @Test("freed memory is wiped in the test process, as in keyseald: a block a C library frees keeps nothing")
    func freedMemoryIsWiped() throws {
        #expect(keyseal_heap_wipe_active() == 1)
        // The bytes exist only in C blocks: the test holds their complement (no 0xFF, so no byte is NUL).
        let inverted = (0..<32).map { _ in UInt8.random(in: 0...0xFE) }
        let source = UnsafeMutablePointer<CChar>.allocate(capacity: 33)
        defer { source.deallocate() }
        for index in 0..<32 { source[index] = CChar(bitPattern: ~inverted[index]) }
        source[32] = 0
        // strdup allocates in the C library; free is the process's.
        let copy = strdup(source)
        source.initialize(repeating: 0, count: 33)
        #expect(try Self.occurrences(ofInverted: inverted) >= 1)
        free(copy)
        #expect(try Self.occurrences(ofInverted: inverted) == 0)
    }

    @Test func anExportLeavesHardwareKeysOutAndNamesThem() throws {
        let fixture = try HardwareKeyStoreFixture()
        defer { fixture.remove() }
        _ = try fixture.store.generateKey(
            KeyGenerationRequest(
                keyType: .p256,
                inHardware: true,
                attributes: [
                    AttributeKey.applicationTag: .data(Data("tag".utf8)), AttributeKey.label: .string("id key"),
                ]
            )
        )
        _ = try fixture.store.add(.password(account: "a"))
        let scratch = try TemporaryDirectory(prefix: "export")
        defer { scratch.remove() }
        let report = try fixture.store.exportBackup(to: scratch.appending("backup.ksb"), passphrase: "pp")
        #expect(report.exportedCount == 1)
        #expect(
            report.skippedKeys
                == [
                    ExportReport.SkippedKey(
                        accessGroup: "default",
                        label: "id key",
                        tag: Data("tag".utf8),
                        reason: .hardware
                    )
                ]
        )
    }
}
