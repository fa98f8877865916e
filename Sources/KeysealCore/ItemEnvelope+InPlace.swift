import FoundationEssentials

extension ItemEnvelope {
    /// ``openAttributes(_:aad:itemID:classKey:)`` of a row read in place: the header is encoded from its columns, and
    /// the box is opened where it is. The lookup by primary key reads an item's access control this way.
    package static func openAttributes(
        storeID: [UInt8],
        header: HeaderColumns,
        attributesBox: UnsafeRawBufferPointer,
        classKey: ClassKey
    ) throws(KeychainError) -> Data {
        var aad = [UInt8](repeating: 0, count: header.encodedCount(storeID: storeID))
        aad.withUnsafeMutableBytes { out in
            var writer = FieldWriter(out)
            header.write(storeID: storeID, into: &writer)
            precondition(writer.offset == out.count, "header size mismatch")
        }
        let plain = try classKey.withMetadataKey(itemID: Array(header.itemID)) { key throws(KeychainError) in
            try aad.withBytes({ aadBytes throws(KeychainError) in
                try GCMContext.open(attributesBox, key: key, aad: aadBytes)
            })
        }
        return Padding.unpaddedAttributes(plain)
    }
}
