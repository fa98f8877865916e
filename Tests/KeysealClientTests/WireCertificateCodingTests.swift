import Foundation
import KeysealClient
import Testing

@Suite("Wire coding of certificate requests")
struct WireCertificateCodingTests {
    static let certificate = WireCertificate(
        reference: Data("cert-ref".utf8),
        keyReference: Data("key-ref".utf8),
        der: Data(repeating: 0x30, count: 40),
        sha1: Data(repeating: 1, count: 20),
        sha256: Data(repeating: 2, count: 32),
        subjectSummary: "device-7",
        commonNames: ["device-7", "second"],
        emailAddresses: ["ops@example.com"],
        notBefore: 1_800_000_000,
        notAfter: 1_900_000_000,
        attributes: ["pkhh": .data(Data([7])), "labl": .string("device-7")]
    )

    static func payload(_ frame: [UInt8]) -> [UInt8] { Array(frame.dropFirst(4)) }

    @Test func certificateRequestsRoundTrip() throws {
        let query = ItemQuery(itemClass: .identity, synchronizable: .any, limit: .all, limitGiven: true)
        guard
            case .certificates(let decoded) = try WireRequest.decode(
                payload: Self.payload(try WireRequest.certificates(query).encodedFrame())
            )
        else {
            Issue.record("not a certificates request")
            return
        }
        #expect(decoded == query)
        guard
            case .createCSR(let reference, let subject) = try WireRequest.decode(
                payload: Self.payload(
                    try WireRequest.createCSR(reference: Data([1, 2]), subject: "CN=a,O=b").encodedFrame()
                )
            )
        else {
            Issue.record("not a create-csr request")
            return
        }
        #expect(reference == Data([1, 2]) && subject == "CN=a,O=b")
    }

    @Test func certificatesResponseRoundTrips() throws {
        var plain = Self.certificate
        plain.keyReference = nil
        plain.subjectSummary = nil
        let response = WireResponse.certificates([Self.certificate, plain])
        #expect(try WireResponse.decode(payload: Self.payload(response.encodedFrame())) == response)
    }

    @Test("a time that is not finite or is past the year 9999 is a decode error, not a trap in the code that prints it")
    func timesOutOfRangeAreRefused() throws {
        // Found by the wire-response fuzz target: a certificate whose notAfter is a NaN (the command line's
        // `time_t(…)` of it traps).
        let found: [UInt8] = [
            0x02, 0x12, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0x01, 0xff, 0xff, 0x9d, 0x33, 0x00, 0x00, 0x00,
        ]
        #expect(throws: KeychainError.self) { try WireResponse.decode(payload: found) }
        let device = DeviceKeyStatus(backend: "tpm", hardwareBacked: true, guessingHardwareLimited: true, detail: "")
        for time in [Double.nan, .infinity, -.infinity, 1e300, 253_402_300_800, -253_402_300_800] {
            var before = Self.certificate
            before.notBefore = time
            var after = Self.certificate
            after.notAfter = time
            let status = StoreStatus(
                lockState: .locked,
                passcodeSet: true,
                device: device,
                nextTryAt: Date(timeIntervalSince1970: time)
            )
            for response: WireResponse in [.certificates([before]), .certificates([after]), .status(status)] {
                #expect(throws: KeychainError.self) {
                    try WireResponse.decode(payload: Self.payload(response.encodedFrame()))
                }
            }
        }
        // The ends of the range decode.
        var ends = Self.certificate
        ends.notBefore = -62_167_219_200  // 0000-01-01T00:00:00Z
        ends.notAfter = 253_402_300_799  // 9999-12-31T23:59:59Z
        let response = WireResponse.certificates([ends])
        #expect(try WireResponse.decode(payload: Self.payload(response.encodedFrame())) == response)
    }

    @Test func everyTruncationOfACertificatesResponseIsAnError() throws {
        let full = Self.payload(WireResponse.certificates([Self.certificate]).encodedFrame())
        for cut in 0..<full.count {
            #expect(throws: KeychainError.self) { try WireResponse.decode(payload: Array(full.prefix(cut))) }
        }
    }
}
