import Crypto
import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

// The one mapping between the library's item model and the wire model (KeysealClient cannot import
// KeysealCore). The daemon mode of KeychainStore and the server both use it.

extension AttributeValue {
    package var wire: WireValue {
        switch self {
        case .string(let text): .string(text)
        case .data(let data): .data(data)
        case .bool(let flag): .bool(flag)
        case .int(let number): .int(number)
        case .date(let date): .date(date.timeIntervalSinceReferenceDate)
        }
    }

    package init(wire: WireValue) {
        switch wire {
        case .string(let text): self = .string(text)
        case .data(let data): self = .data(data)
        case .bool(let flag): self = .bool(flag)
        case .int(let number): self = .int(number)
        case .date(let seconds): self = .date(Date(timeIntervalSinceReferenceDate: seconds))
        }
    }
}

package enum WireMapping {
    static func attributes(_ map: [String: AttributeValue]) -> [String: WireValue] { map.mapValues(\.wire) }

    static func attributes(_ map: [String: WireValue]) -> [String: AttributeValue] {
        map.mapValues(AttributeValue.init(wire:))
    }

    static func itemClass(_ code: String) throws(KeychainError) -> ItemClass {
        guard let itemClass = ItemClass(rawValue: code) else {
            throw KeychainError(KeychainStatus.noSuchClass, "unknown item class \(code)")
        }
        return itemClass
    }

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

    // MARK: Queries, items, changes

    package static func wire(_ query: ItemQuery) -> WireQuery {
        let limit: WireQuery.Limit =
            switch query.limit {
            case .one: .one
            case .all: .all
            case .count(let n): .count(n)
            }
        let sync: UInt8 =
            switch query.synchronizable {
            case .no: 0
            case .yes: 1
            case .any: 2
            }
        return WireQuery(
            itemClass: query.itemClass.rawValue, attributes: attributes(query.attributes), accessGroup: query.accessGroup,
            accessibility: query.accessibility?.rawValue, synchronizable: sync, persistentRef: query.persistentRef,
            limit: limit, limitGiven: query.limitGiven, returns: query.returns.rawValue)
    }

    package static func query(_ wire: WireQuery) throws(KeychainError) -> ItemQuery {
        let limit: MatchLimit
        switch wire.limit {
        case .one: limit = .one
        case .all: limit = .all
        case .count(let n):
            guard n >= 1 else { throw KeychainError(KeychainStatus.param, "the match limit must be positive") }
            limit = .count(n)
        }
        let sync: SyncMatch
        switch wire.synchronizable {
        case 0: sync = .no
        case 1: sync = .yes
        case 2: sync = .any
        default: throw KeychainError(KeychainStatus.param, "unknown synchronizable match \(wire.synchronizable)")
        }
        return ItemQuery(
            itemClass: try itemClass(wire.itemClass), attributes: attributes(wire.attributes),
            accessGroup: wire.accessGroup, accessibility: try wire.accessibility.map { code throws(KeychainError) in try accessibility(code) },
            synchronizable: sync, persistentRef: wire.persistentRef, limit: limit, limitGiven: wire.limitGiven,
            returns: ReturnOptions(rawValue: wire.returns))
    }

    package static func wire(_ item: NewItem) -> WireNewItem {
        WireNewItem(
            itemClass: item.itemClass.rawValue, attributes: attributes(item.attributes), accessGroup: item.accessGroup,
            accessibility: item.accessibility.rawValue, accessControlFlags: item.accessControlFlags.map(UInt64.init),
            synchronizable: item.synchronizable, data: item.data, returns: item.returns.rawValue)
    }

    package static func item(_ wire: WireNewItem) throws(KeychainError) -> NewItem {
        NewItem(
            itemClass: try itemClass(wire.itemClass), attributes: attributes(wire.attributes),
            accessGroup: wire.accessGroup, accessibility: try accessibility(wire.accessibility),
            accessControlFlags: try flags(wire.accessControlFlags), synchronizable: wire.synchronizable,
            data: wire.data, returns: ReturnOptions(rawValue: wire.returns))
    }

    package static func wire(_ changes: ItemChanges) -> WireChanges {
        WireChanges(
            attributes: attributes(changes.attributes), accessGroup: changes.accessGroup,
            accessibility: changes.accessibility?.rawValue, accessControlFlags: changes.accessControlFlags.map(UInt64.init),
            synchronizable: changes.synchronizable, data: changes.data)
    }

    package static func changes(_ wire: WireChanges) throws(KeychainError) -> ItemChanges {
        ItemChanges(
            attributes: attributes(wire.attributes), accessGroup: wire.accessGroup,
            accessibility: try wire.accessibility.map { code throws(KeychainError) in try accessibility(code) },
            accessControlFlags: try flags(wire.accessControlFlags), synchronizable: wire.synchronizable,
            data: wire.data)
    }

    package static func wire(_ record: ItemRecord) -> WireRecord {
        WireRecord(
            itemClass: record.itemClass.rawValue, attributes: attributes(record.attributes), data: record.data,
            persistentRef: record.persistentRef)
    }

    package static func record(_ wire: WireRecord) throws(KeychainError) -> ItemRecord {
        ItemRecord(
            itemClass: try itemClass(wire.itemClass), attributes: attributes(wire.attributes), data: wire.data,
            persistentRef: wire.persistentRef)
    }

    // MARK: Lock state, status, errors

    package static func wire(_ state: LockState) -> WireLockState {
        switch state {
        case .beforeFirstUnlock: .beforeFirstUnlock
        case .unlocked: .unlocked
        case .locked: .locked
        }
    }

    package static func lockState(_ wire: WireLockState) -> LockState {
        switch wire {
        case .beforeFirstUnlock: .beforeFirstUnlock
        case .unlocked: .unlocked
        case .locked: .locked
        }
    }

    package static func wire(_ status: StoreStatus, includeCounts: Bool) -> WireStoreStatus {
        var counts: [String: Int] = [:]
        if includeCounts {
            for (accessibility, count) in status.itemCounts { counts[accessibility.rawValue] = count }
        }
        return WireStoreStatus(
            lockState: wire(status.lockState), passcodeSet: status.passcodeSet, backend: status.device.backend,
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
            lockState: lockState(wire.lockState), passcodeSet: wire.passcodeSet,
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

    package static func wire(_ error: KeychainError) -> WireError {
        WireError(
            status: error.status, message: error.message, retryAfterSeconds: error.retryAfterSeconds,
            triesLeft: error.triesLeft)
    }

    package static func error(_ wire: WireError) -> KeychainError {
        KeychainError(wire.status, wire.message, retryAfterSeconds: wire.retryAfterSeconds, triesLeft: wire.triesLeft)
    }
}

extension WireMapping {
    package static func wire(_ request: KeyGenerationRequest) -> WireKeyGeneration {
        WireKeyGeneration(
            keyType: request.keyType.typeCode, bits: request.keyType.bits, inHardware: request.inHardware,
            attributes: attributes(request.attributes), accessGroup: request.accessGroup,
            accessibility: request.accessibility.rawValue, accessControlFlags: request.accessControlFlags.map(UInt64.init),
            synchronizable: request.synchronizable, extractable: request.isExtractable)
    }

    package static func keyGeneration(_ wire: WireKeyGeneration) throws(KeychainError) -> KeyGenerationRequest {
        KeyGenerationRequest(
            keyType: try KeyType(typeCode: wire.keyType, bits: wire.bits), inHardware: wire.inHardware,
            isPermanent: true, attributes: attributes(wire.attributes), accessGroup: wire.accessGroup,
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
            extractable: key.isExtractable, attributes: attributes(key.attributes),
            subjectPublicKeyInfo: key.publicKey.subjectPublicKeyInfo)
    }

    package static func key(_ wire: WireKey) throws(KeychainError) -> KeyDescription {
        KeyDescription(
            reference: .item(wire.reference),
            publicKey: try PublicKeyMaterial(keyType: KeyType(typeCode: wire.keyType, bits: wire.bits), bytes: wire.publicKey),
            isPrivate: wire.isPrivate, inHardware: wire.inHardware, isExtractable: wire.extractable,
            attributes: attributes(wire.attributes))
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
            attributes: attributes(record.attributes))
    }
}
