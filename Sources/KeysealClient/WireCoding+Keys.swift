import FoundationEssentials

// The key family: key generation, key operations, certificate signing requests, the attestation key's enrollment,
// and the key descriptions, results and certificates they are answered with. Each payload's encoding (a `WireWriter`
// method) stands beside its decoding (the `WireReader` method of the same name).

// MARK: - generateKey

extension WireWriter {
    mutating func keyGeneration(_ generation: KeyGenerationRequest) {
        shortString(generation.keyType.typeCode)
        int(generation.keyType.bits)
        bool(generation.inHardware)
        attributes(generation.attributes)
        optional(generation.accessGroup) { $0.string($1) }
        shortString(generation.accessibility.rawValue)
        optional(generation.accessControlFlags) { $0.u64(UInt64($1)) }
        bool(generation.synchronizable)
        bool(generation.isExtractable)
        // A key that is not stored (a PKCS#11 session key, held by keyseald for the connection that made it): one
        // trailing byte, absent for a stored key, so that earlier clients' requests read as they always did.
        if !generation.isPermanent { u8(1) }
    }
}

extension WireReader {
    mutating func keyGeneration() throws(KeychainError) -> KeyGenerationRequest {
        let typeCode = try shortString()
        let keyType = try KeyType(typeCode: typeCode, bits: try int())
        let inHardware = try bool()
        let attributes = try self.attributes()
        let group = try optional { r throws(KeychainError) in try r.string() }
        let accessibility = try self.accessibility()
        let flags = try accessControlFlags()
        let synchronizable = try bool()
        let isExtractable = try bool()
        // A stored key, unless a trailing byte 1 asks for a key held for the connection (any other byte is malformed,
        // so that a request encodes back to its bytes).
        var isPermanent = true
        if remaining > 0 {
            guard try u8() == 1 else { throw Self.malformed("unknown key generation flag") }
            isPermanent = false
        }
        return KeyGenerationRequest(
            keyType: keyType,
            inHardware: inHardware,
            isPermanent: isPermanent,
            attributes: attributes,
            accessGroup: group,
            accessibility: accessibility,
            accessControlFlags: flags,
            synchronizable: synchronizable,
            isExtractable: isExtractable
        )
    }
}

// MARK: - keyOperation

extension WireWriter {
    mutating func keyOperation(_ operation: WireKeyOperation) {
        blob(operation.reference)
        u8(operation.kind.rawValue)
        string(operation.algorithm)
        blob(operation.data)
        optional(operation.requestedSize) { $0.int($1) }
        optional(operation.sharedInfo) { $0.blob($1) }
    }
}

extension WireReader {
    mutating func keyOperation() throws(KeychainError) -> WireKeyOperation {
        let reference = try data()
        guard let kind = WireKeyOperation.Kind(rawValue: try u8()) else {
            throw Self.malformed("unknown key operation")
        }
        let algorithm = try string()
        let data = try self.data()
        let size = try optional { r throws(KeychainError) in try r.int() }
        return WireKeyOperation(
            reference: reference,
            kind: kind,
            algorithm: algorithm,
            data: data,
            requestedSize: size,
            sharedInfo: try optional { r throws(KeychainError) in try r.data() }
        )
    }
}

// MARK: - createCSR: the key's reference, then the subject

extension WireWriter {
    mutating func createCSR(reference: Data, subject: String) {
        blob(reference)
        string(subject)
    }
}

extension WireReader {
    mutating func createCSR() throws(KeychainError) -> WireRequest {
        let reference = try data()
        return .createCSR(reference: reference, subject: try string())
    }
}

// MARK: - attestation: the step (0 enrollment request, 1 activate, 2 install) and its data

extension WireWriter {
    mutating func attestation(_ step: WireAttestationStep) {
        switch step {
        case .enrollmentRequest: u8(0)
        case .activate(let blob, let secret):
            u8(1)
            self.blob(blob)
            self.blob(secret)
        case .install(let certificates):
            u8(2)
            u16(UInt16(clamping: certificates.count))
            for certificate in certificates.prefix(Int(UInt16.max)) { self.blob(certificate) }
        }
    }
}

extension WireReader {
    mutating func attestation() throws(KeychainError) -> WireAttestationStep {
        switch try u8() {
        case 0: return .enrollmentRequest
        case 1:
            let blob = try data()
            return .activate(credentialBlob: blob, secret: try data())
        case 2:
            let count = Int(try u16())
            var certificates: [Data] = []
            for _ in 0..<count { certificates.append(try data()) }
            return .install(certificates: certificates)
        default: throw Self.malformed("unknown attestation step")
        }
    }
}

// MARK: - key: a stored key's description

extension WireWriter {
    mutating func key(_ key: WireKey) {
        blob(key.reference)
        shortString(key.keyType)
        int(key.bits)
        blob(key.publicKey)
        bool(key.isPrivate)
        bool(key.inHardware)
        bool(key.extractable)
        attributes(key.attributes)
        blob(key.subjectPublicKeyInfo)
    }
}

extension WireReader {
    mutating func key() throws(KeychainError) -> WireKey {
        let reference = try data()
        let keyType = try shortString()
        let bits = try int()
        let publicKey = try data()
        let isPrivate = try bool()
        let inHardware = try bool()
        let extractable = try bool()
        return WireKey(
            reference: reference,
            keyType: keyType,
            bits: bits,
            publicKey: publicKey,
            isPrivate: isPrivate,
            inHardware: inHardware,
            extractable: extractable,
            attributes: try attributes(),
            subjectPublicKeyInfo: try data()
        )
    }
}

// MARK: - certificates: a u32 count and the certificates

extension WireWriter {
    mutating func certificates(_ certificates: [WireCertificate]) {
        u32(UInt32(certificates.count))
        for certificate in certificates {
            blob(certificate.reference)
            optional(certificate.keyReference) { $0.blob($1) }
            blob(certificate.der)
            blob(certificate.sha1)
            blob(certificate.sha256)
            optional(certificate.subjectSummary) { $0.string($1) }
            strings(certificate.commonNames)
            strings(certificate.emailAddresses)
            double(certificate.notBefore)
            double(certificate.notAfter)
            attributes(certificate.attributes)
        }
    }
}

extension WireReader {
    mutating func certificates() throws(KeychainError) -> [WireCertificate] {
        let count = Int(try u32())
        // A certificate takes well over 16 bytes: a count the payload cannot hold is refused before allocating.
        guard count <= remaining / 16 else { throw Self.malformed("certificate count over the payload") }
        var certificates: [WireCertificate] = []
        certificates.reserveCapacity(count)
        for _ in 0..<count {
            let reference = try data()
            let keyReference = try optional { r throws(KeychainError) in try r.data() }
            let der = try data()
            let sha1 = try data()
            let sha256 = try data()
            let summary = try optional { r throws(KeychainError) in try r.string() }
            let commonNames = try strings()
            let emailAddresses = try strings()
            let notBefore = try time()
            let notAfter = try time()
            certificates.append(
                WireCertificate(
                    reference: reference,
                    keyReference: keyReference,
                    der: der,
                    sha1: sha1,
                    sha256: sha256,
                    subjectSummary: summary,
                    commonNames: commonNames,
                    emailAddresses: emailAddresses,
                    notBefore: notBefore,
                    notAfter: notAfter,
                    attributes: try attributes()
                )
            )
        }
        return certificates
    }
}
