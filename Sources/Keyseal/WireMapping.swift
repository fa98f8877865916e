import Crypto
import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

// The one mapping between the library's item model and the wire model (KeysealClient cannot import
// KeysealCore). The daemon mode of KeychainStore and the server both use it.

package enum WireMapping {
    static func accessibility(_ code: String) throws(KeychainError) -> Accessibility {
        guard let accessibility = Accessibility(rawValue: code) else {
            throw KeychainError(KeychainStatus.param, "unknown accessibility \(code)")
        }
        return accessibility
    }

    static func flags(_ value: UInt64?) throws(KeychainError) -> UInt? {
        guard let value else { return nil }
        guard let flags = UInt(exactly: value) else { throw KeychainError(KeychainStatus.param, "bad access control flags") }
        return flags
    }

    // MARK: Lock state, status, errors

    package static func wire(_ status: StoreStatus, includeCounts: Bool) -> WireStoreStatus {
        var counts: [String: Int] = [:]
        if includeCounts {
            for (accessibility, count) in status.itemCounts { counts[accessibility.rawValue] = count }
        }
        return WireStoreStatus(
            lockState: status.lockState, passcodeSet: status.passcodeSet, backend: status.device.backend,
            hardwareBacked: status.device.hardwareBacked, guessingHardwareLimited: status.device.guessingHardwareLimited,
            detail: status.device.detail, hardwareTriesLeft: status.device.hardwareTriesLeft,
            lockoutRetrySeconds: status.device.lockoutRetrySeconds, failedAttempts: status.failedAttempts,
            triesLeft: status.triesLeft, nextTryAt: status.nextTryAt?.timeIntervalSince1970,
            autoLockSeconds: status.autoLockSeconds, itemCounts: counts,
            ledger: includeCounts && !status.ledger.verified
                ? WireLedgerStatus(
                    refusedBuckets: status.ledger.refusedBuckets, missingEntries: status.ledger.missingEntries,
                    unexpectedEntries: status.ledger.unexpectedEntries, recordProblem: status.ledger.recordProblem,
                    summary: status.ledger.summary)
                : nil,
            boot: status.boot.map {
                WireBootStatus(
                    pcrs: $0.pcrs, pcrsMatch: $0.pcrsMatch, recoveryRequired: $0.recoveryRequired,
                    recoveryKeySet: $0.recoveryKeySet, rolledBack: $0.rolledBack, counterIndex: $0.counterIndex,
                    counterValue: $0.counterValue, detail: $0.detail)
            })
    }

    package static func status(_ wire: WireStoreStatus) -> StoreStatus {
        var counts: [Accessibility: Int] = [:]
        for (code, count) in wire.itemCounts {
            if let accessibility = Accessibility(rawValue: code) { counts[accessibility] = count }
        }
        return StoreStatus(
            lockState: wire.lockState, passcodeSet: wire.passcodeSet,
            device: DeviceKeyStatus(
                backend: wire.backend, hardwareBacked: wire.hardwareBacked,
                guessingHardwareLimited: wire.guessingHardwareLimited, detail: wire.detail,
                hardwareTriesLeft: wire.hardwareTriesLeft, lockoutRetrySeconds: wire.lockoutRetrySeconds),
            failedAttempts: wire.failedAttempts, triesLeft: wire.triesLeft,
            nextTryAt: wire.nextTryAt.map { Date(timeIntervalSince1970: $0) }, autoLockSeconds: wire.autoLockSeconds,
            itemCounts: counts,
            ledger: wire.ledger.map {
                LedgerStatus(
                    refusedBuckets: $0.refusedBuckets, missingEntries: $0.missingEntries,
                    unexpectedEntries: $0.unexpectedEntries, recordProblem: $0.recordProblem)
            } ?? LedgerStatus(),
            boot: wire.boot.map {
                BootStatus(
                    pcrs: $0.pcrs, pcrsMatch: $0.pcrsMatch, recoveryRequired: $0.recoveryRequired,
                    recoveryKeySet: $0.recoveryKeySet, rolledBack: $0.rolledBack, counterIndex: $0.counterIndex,
                    counterValue: $0.counterValue, detail: $0.detail)
            })
    }

}

extension WireMapping {
    package static func wire(_ request: KeyGenerationRequest) -> WireKeyGeneration {
        WireKeyGeneration(
            keyType: request.keyType.typeCode, bits: request.keyType.bits, inHardware: request.inHardware,
            attributes: request.attributes, accessGroup: request.accessGroup,
            accessibility: request.accessibility.rawValue, accessControlFlags: request.accessControlFlags.map(UInt64.init),
            synchronizable: request.synchronizable, extractable: request.isExtractable)
    }

    package static func keyGeneration(_ wire: WireKeyGeneration) throws(KeychainError) -> KeyGenerationRequest {
        KeyGenerationRequest(
            keyType: try KeyType(typeCode: wire.keyType, bits: wire.bits), inHardware: wire.inHardware,
            isPermanent: true, attributes: wire.attributes, accessGroup: wire.accessGroup,
            accessibility: try accessibility(wire.accessibility), accessControlFlags: try flags(wire.accessControlFlags),
            synchronizable: wire.synchronizable, isExtractable: wire.extractable)
    }

    package static func wire(_ key: KeyDescription) throws(KeychainError) -> WireKey {
        guard case .item(let reference) = key.reference else {
            throw KeychainError(KeychainStatus.param, "a transient key lives in the process that made it")
        }
        return WireKey(
            reference: reference, keyType: key.publicKey.keyType.typeCode, bits: key.publicKey.keyType.bits,
            publicKey: key.publicKey.bytes, isPrivate: key.isPrivate, inHardware: key.inHardware,
            extractable: key.isExtractable, attributes: key.attributes,
            subjectPublicKeyInfo: key.publicKey.subjectPublicKeyInfo)
    }

    package static func key(_ wire: WireKey) throws(KeychainError) -> KeyDescription {
        KeyDescription(
            reference: .item(wire.reference),
            publicKey: try PublicKeyMaterial(keyType: KeyType(typeCode: wire.keyType, bits: wire.bits), bytes: wire.publicKey),
            isPrivate: wire.isPrivate, inHardware: wire.inHardware, isExtractable: wire.extractable,
            attributes: wire.attributes)
    }
}

extension WireMapping {
    /// A found certificate or identity (returned with its data, attributes and references) described for printing.
    package static func certificate(_ record: ItemRecord) throws(KeychainError) -> WireCertificate {
        guard let der = record.data, let reference = record.persistentRef else {
            throw KeychainError(KeychainStatus.internalComponent, "a certificate record without its data")
        }
        let fields = try CertificateFields(der: der)
        return WireCertificate(
            reference: reference, keyReference: record.keyPersistentRef, der: der,
            sha1: Data(Insecure.SHA1.hash(data: der)), sha256: Data(SHA256.hash(data: der)),
            subjectSummary: fields.subjectSummary, commonNames: fields.commonNames,
            emailAddresses: fields.emailAddresses, notBefore: fields.notBefore, notAfter: fields.notAfter,
            attributes: record.attributes)
    }
}
