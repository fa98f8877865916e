import Crypto
import Foundation
import KeysealCore
import KeysealTPM
import KeysealTestSupport
import Testing

/// The parts of a TPM key blob ("KSTP" ‖ version ‖ kind ‖ TPM2B_NAME ‖ TPM2B_PUBLIC ‖ TPM2B_PRIVATE).
func blobParts(_ blob: Data) -> (name: [UInt8], public: [UInt8], private: [UInt8]) {
    let bytes = [UInt8](blob)
    func sized(at offset: Int) -> Int { 2 + Int(bytes[offset]) << 8 + Int(bytes[offset + 1]) }
    let nameEnd = 6 + sized(at: 6)
    let publicEnd = nameEnd + sized(at: nameEnd)
    return (Array(bytes[8..<nameEnd]), Array(bytes[nameEnd..<publicEnd]), Array(bytes[publicEnd...]))
}

@Suite("TPM hardware keys on swtpm")
struct TPMHardwareKeyTests {
    @Test("a signature verifies with swift-crypto's P-256 public key")
    func signatureVerifies() throws {
        try withTPM { _, key in
            let made = try key.generateP256Key(authorization: secret(1))
            let message = Data("attest this".utf8)
            let der = try key.sign(
                digest: Array(SHA256.hash(data: message)),
                keyBlob: made.blob,
                authorization: secret(1)
            )
            let publicKey = try P256.Signing.PublicKey(x963Representation: made.publicKey)
            let signature = try P256.Signing.ECDSASignature(derRepresentation: der)
            #expect(publicKey.isValidSignature(signature, for: message))
        }
    }

    @Test("digests of 20, 32, 48 and 64 bytes sign as ECDSA on P-256 defines it")
    func everyDigestSizeSigns() throws {
        try withTPM { _, key in
            let made = try key.generateP256Key(authorization: secret(1))
            let publicKey = try P256.Signing.PublicKey(x963Representation: made.publicKey)
            let message = Data("digest sizes".utf8)
            func signature(_ digest: some Digest) throws -> P256.Signing.ECDSASignature {
                let der = try key.sign(digest: Array(digest), keyBlob: made.blob, authorization: secret(1))
                return try P256.Signing.ECDSASignature(derRepresentation: der)
            }
            let sha1 = Insecure.SHA1.hash(data: message)
            let sha384 = SHA384.hash(data: message)
            let sha512 = SHA512.hash(data: message)
            #expect(publicKey.isValidSignature(try signature(sha1), for: sha1))
            #expect(publicKey.isValidSignature(try signature(sha384), for: sha384))
            #expect(publicKey.isValidSignature(try signature(sha512), for: sha512))
            #expect(throws: KeychainError.param) {
                try key.sign(digest: [UInt8](repeating: 1, count: 19), keyBlob: made.blob, authorization: secret(1))
            }
        }
    }

    @Test("ECDH gives what swift-crypto computes with the key's public half")
    func keyExchangeMatchesSwiftCrypto() throws {
        try withTPM { _, key in
            let made = try key.generateP256Key(authorization: secret(2))
            let peer = P256.KeyAgreement.PrivateKey()
            let z = try key.keyExchange(
                peerPublicKey: peer.publicKey.x963Representation,
                keyBlob: made.blob,
                authorization: secret(2)
            )
            let expected = try peer.sharedSecretFromKeyAgreement(
                with: P256.KeyAgreement.PublicKey(x963Representation: made.publicKey)
            )
            #expect(bytes(z) == expected.withUnsafeBytes { Array($0) })
        }
    }

    @Test("a peer key that is not a P-256 point is errSecParam")
    func keyExchangeRefusesBadPoint() throws {
        try withTPM { _, key in
            let made = try key.generateP256Key(authorization: secret(2))
            var offCurve = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
            offCurve[64] ^= 0x01
            #expect(throws: KeychainError.param) {
                try key.keyExchange(peerPublicKey: offCurve, keyBlob: made.blob, authorization: secret(2))
            }
            #expect(throws: KeychainError.param) {
                try key.keyExchange(
                    peerPublicKey: Data(offCurve.prefix(33)),
                    keyBlob: made.blob,
                    authorization: secret(2)
                )
            }
        }
    }

    @Test("a wrong authorization is errSecAuthFailed and never moves the TPM's dictionary-attack counter")
    func wrongAuthorizationIsNotCounted() throws {
        try withTPM(maxTries: 3) { fixture, key in
            let made = try key.generateP256Key(authorization: secret(3))
            let digest = Array(SHA256.hash(data: Data("x".utf8)))
            let peer = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
            for _ in 0..<4 {
                #expect(throws: KeychainError.authFailed) {
                    try key.sign(digest: digest, keyBlob: made.blob, authorization: secret(4))
                }
                #expect(throws: KeychainError.authFailed) {
                    try key.keyExchange(peerPublicKey: peer, keyBlob: made.blob, authorization: secret(4))
                }
            }
            #expect(try fixture.lockoutCounter() == 0)
            _ = try key.sign(digest: digest, keyBlob: made.blob, authorization: secret(3))
        }
    }

    @Test(
        "the TPM reports the key's attributes: fixedTPM|fixedParent|sensitiveDataOrigin|userWithAuth|noDA|decrypt|sign, ECC P-256"
    )
    func attributesReadBackFromTheTPM() throws {
        try withTPM { fixture, key in
            let made = try key.generateP256Key(authorization: secret(5))
            key.close()  // frees the slots for tpm2-tools
            let parts = blobParts(made.blob)
            let dir = fixture.stateDirectory
            try Data(parts.public).write(to: URL(fileURLWithPath: "\(dir)/key.pub"))
            try Data(parts.private).write(to: URL(fileURLWithPath: "\(dir)/key.priv"))
            // The storage primary from the same template as Keyseal's (the TCG ECC storage key).
            try fixture.tool(
                "tpm2_createprimary",
                [
                    "-Q", "-C", "o", "-g", "sha256", "-G", "ecc256:null:aes128cfb", "-a",
                    "restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda", "-c",
                    "\(dir)/primary.ctx",
                ]
            )
            // Without a resource manager every tool leaves its objects loaded: flush between the steps.
            try fixture.tool("tpm2_flushcontext", ["-t"])
            try fixture.tool(
                "tpm2_load",
                [
                    "-Q", "-C", "\(dir)/primary.ctx", "-u", "\(dir)/key.pub", "-r", "\(dir)/key.priv", "-c",
                    "\(dir)/key.ctx",
                ]
            )
            try fixture.tool("tpm2_flushcontext", ["-t"])
            let printed = try fixture.tool("tpm2_readpublic", ["-c", "\(dir)/key.ctx"]).stdoutText
            try fixture.tool("tpm2_flushcontext", ["-t"])
            // fixedTPM 0x2, fixedParent 0x10, sensitiveDataOrigin 0x20, userWithAuth 0x40, noDA 0x400,
            // decrypt 0x20000, sign 0x40000.
            #expect(printed.contains("raw: 0x60472"), "\(printed)")
            #expect(printed.contains("value: NIST p256"), "\(printed)")
            #expect(Array(parts.name) == Array(try withKey(fixture) { try $0.deviceIdentity() }))
        }
    }

    @Test("a key blob from another TPM is errSecDecode")
    func blobFromAnotherTPMIsRefused() throws {
        let made = try withTPM { _, key in try key.generateP256Key(authorization: secret(6)) }
        try withTPM { _, key in
            let digest = Array(SHA256.hash(data: Data("x".utf8)))
            let error = #expect(throws: KeychainError.decode) {
                try key.sign(digest: digest, keyBlob: made.blob, authorization: secret(6))
            }
            #expect(error?.message == "this key was created by another device")
        }
    }

    @Test("a key blob from another primary of the same TPM (after TPM2_Clear) is errSecDecode")
    func blobFromAnotherPrimaryIsRefused() throws {
        try withTPM { fixture, key in
            let made = try key.generateP256Key(authorization: secret(6))
            let peer = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
            try fixture.tool("tpm2_clear", ["-c", "l"])
            #expect(throws: KeychainError.decode) {
                try key.sign(digest: [UInt8](repeating: 7, count: 32), keyBlob: made.blob, authorization: secret(6))
            }
            #expect(throws: KeychainError.decode) {
                try key.keyExchange(peerPublicKey: peer, keyBlob: made.blob, authorization: secret(6))
            }
        }
    }

    @Test("an edited key blob, or a sealed-secret blob, is errSecDecode")
    func editedKeyBlobIsRefused() throws {
        try withTPM { _, key in
            let made = try key.generateP256Key(authorization: secret(6))
            let digest = [UInt8](repeating: 7, count: 32)
            for offset in [5, 20, 70, made.blob.count - 1] {
                #expect(throws: KeychainError.decode) {
                    try key.sign(digest: digest, keyBlob: edited(made.blob, at: offset), authorization: secret(6))
                }
            }
            let sealed = try key.seal(secret(1))
            #expect(throws: KeychainError.decode) {
                try key.sign(digest: digest, keyBlob: sealed, authorization: secret(6))
            }
            #expect(throws: KeychainError.decode) { try key.unseal(made.blob) }
        }
    }

    @Test("no 32-byte window of what is stored for a key is its private scalar")
    func privateScalarIsNeverReturned() throws {
        try withTPM { _, key in
            let made = try key.generateP256Key(authorization: secret(7))
            let stored = [UInt8](made.blob) + [UInt8](made.publicKey)
            var tried = 0
            for start in 0...(stored.count - 32) {
                guard let candidate = try? P256.Signing.PrivateKey(rawRepresentation: stored[start..<(start + 32)])
                else { continue }
                tried += 1
                #expect(candidate.publicKey.x963Representation != made.publicKey, "scalar at offset \(start)")
            }
            #expect(tried > 100)
        }
    }

    @Test("recently used keys stay loaded within the TPM's slots; close leaves nothing")
    func recentKeysStayLoadedWithinSlots() throws {
        try withTPM { fixture, key in
            let made = try (0..<4).map { _ in try key.generateP256Key(authorization: secret(8)) }
            let message = Data("kept keys".utf8)
            let digest = Array(SHA256.hash(data: message))
            for round in 0..<3 {
                for blob in made {
                    let der = try key.sign(digest: digest, keyBlob: blob.blob, authorization: secret(8))
                    let publicKey = try P256.Signing.PublicKey(x963Representation: blob.publicKey)
                    #expect(
                        publicKey.isValidSignature(
                            try P256.Signing.ECDSASignature(derRepresentation: der),
                            for: message
                        ),
                        "round \(round)"
                    )
                }
                let transient = try fixture.handlesInUse().filter { $0.hasPrefix("- 0x80") }
                #expect(transient.count == 3)  // the primary and the two most recently used keys
            }
            // A sealed secret still unseals with the slots full of kept keys.
            let sealed = try key.seal(secret(3))
            #expect(bytes(try key.unseal(sealed)) == bytes(secret(3)))
            for blob in made { try key.deleteKey(keyBlob: blob.blob) }
            #expect(try fixture.handlesInUse().filter { $0.hasPrefix("- 0x80") }.count == 1)
            key.close()
            #expect(try fixture.handlesInUse() == [])
        }
    }

    @Test("an authorization ending in zero bytes signs (the TPM keeps authValues without trailing zeros)")
    func authorizationWithTrailingZeros() throws {
        try withTPM { _, key in
            let authorization = SecretBytes(copying: [UInt8](repeating: 5, count: 30) + [0, 0])
            let made = try key.generateP256Key(authorization: authorization)
            let message = Data("zeros".utf8)
            let der = try key.sign(
                digest: Array(SHA256.hash(data: message)),
                keyBlob: made.blob,
                authorization: authorization
            )
            let publicKey = try P256.Signing.PublicKey(x963Representation: made.publicKey)
            #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: der), for: message))
        }
    }

    @Test("over tpm2-abrmd: keys are made, kept within three slots, sign and do ECDH as on the bare TPM")
    func throughResourceManager() throws {
        let broker = try ResourceManagerFixture.shared()
        let key = TPMDeviceKey(tcti: broker.tcti)
        defer { key.close() }
        try key.open(provisioning: true)
        let made = try (0..<3).map { _ in try key.generateP256Key(authorization: secret(12)) }
        let message = Data("through the broker".utf8)
        for _ in 0..<2 {
            for blob in made {
                let der = try key.sign(
                    digest: Array(SHA256.hash(data: message)),
                    keyBlob: blob.blob,
                    authorization: secret(12)
                )
                let publicKey = try P256.Signing.PublicKey(x963Representation: blob.publicKey)
                #expect(
                    publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: der), for: message)
                )
            }
        }
        let peer = P256.KeyAgreement.PrivateKey()
        let z = try key.keyExchange(
            peerPublicKey: peer.publicKey.x963Representation,
            keyBlob: made[0].blob,
            authorization: secret(12)
        )
        let expected = try peer.sharedSecretFromKeyAgreement(
            with: P256.KeyAgreement.PublicKey(x963Representation: made[0].publicKey)
        )
        #expect(bytes(z) == expected.withUnsafeBytes { Array($0) })
        #expect(throws: KeychainError.authFailed) {
            try key.sign(digest: Array(SHA256.hash(data: message)), keyBlob: made[1].blob, authorization: secret(13))
        }
        // The broker shows each connection its own handles: the primary and the two most recently used keys.
        #expect(try key.handlesInUse().filter { $0 >> 24 == 0x80 }.count == 3)
    }

    @Test("a kept key's authorization is checked on every use")
    func keptKeyChecksAuthorizationEachTime() throws {
        try withTPM { _, key in
            let made = try key.generateP256Key(authorization: secret(10))
            let digest = [UInt8](repeating: 9, count: 32)
            _ = try key.sign(digest: digest, keyBlob: made.blob, authorization: secret(10))
            #expect(throws: KeychainError.authFailed) {
                try key.sign(digest: digest, keyBlob: made.blob, authorization: secret(11))
            }
            _ = try key.sign(digest: digest, keyBlob: made.blob, authorization: secret(10))
        }
    }
}
