import Foundation
import KeysealCore
import Testing

@testable import KeysealPKCS11

@Suite("p11-kit module names")
struct ModuleLocatorTests {
    @Test("the module: line of a p11-kit config is read, comments and other keys ignored")
    func moduleLine() {
        let config = """
            # module: /commented/out.so
            priority: 1
            module:   p11-kit-trust.so  
            trust-policy: yes
            """
        #expect(ModuleLocator.moduleLine(config) == "p11-kit-trust.so")
    }

    @Test("a relative module: path resolves against p11-kit's module directory")
    func relativeModulePath() throws {
        // p11-kit-trust.module (package p11-kit) says `module: p11-kit-trust.so`.
        let path = try ModuleLocator.resolve("p11-kit-trust")
        #expect(path.hasPrefix("/"))
        #expect(path.hasSuffix("/pkcs11/p11-kit-trust.so"))
        #expect(FileManager.default.fileExists(atPath: path))
    }

    @Test("the name softhsm2 resolves to the library its p11-kit config names")
    func softhsmName() throws {
        let path = try ModuleLocator.resolve("softhsm2")
        #expect(path.hasSuffix("libsofthsm2.so"))
    }
}
