import Foundation
import LocalAuthentication
import Testing

/// `LAError` made from an `NSError`, as code written for Apple's bridged errors makes it.
@Suite struct LAErrorBridgingTests {
    @Test func codeAndMessageComeFromTheNSError() {
        let error = LAError(
            _nsError: NSError(
                domain: LAErrorDomain,
                code: LAError.Code.userCancel.rawValue,
                userInfo: [NSLocalizedDescriptionKey: "dismissed"]
            )
        )
        #expect(error.code == .userCancel)
        #expect(error.errorDescription == "dismissed")
        #expect((error as NSError).domain == LAErrorDomain)
        #expect((error as NSError).code == -2)
    }

    @Test func unknownCodeOrDomainIsAFailure() {
        let unknown = LAError(_nsError: NSError(domain: LAErrorDomain, code: 12345))
        let foreign = LAError(_nsError: NSError(domain: NSCocoaErrorDomain, code: LAError.Code.userCancel.rawValue))
        #expect(unknown.code == .authenticationFailed)
        #expect(foreign.code == .authenticationFailed)
    }
}
