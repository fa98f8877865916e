internal import CP11Kit
import FoundationEssentials
import Glibc
import KeysealCore
import Synchronization

/// Where a `module` argument points: a library path, or the name of a module registered with p11-kit.
enum ModuleLocator {
    /// p11-kit's module config folders, lowest precedence first (pkcs11.conf(5)): package configs, system
    /// configs, then the user's own.
    static var configFolders: [String] {
        var folders = ["/usr/share/p11-kit/modules", "/etc/pkcs11/modules"]
        let home =
            ProcessInfo.processInfo.environment["HOME"] ?? getpwuid(getuid()).map { String(cString: $0.pointee.pw_dir) }
            ?? "/"
        folders.append(home + "/.config/pkcs11/modules")
        return folders
    }

    /// p11-kit resolves a relative `module:` path against its module directory (`p11_module_path` in
    /// p11-kit-1.pc), which depends on the distribution's multiarch triple.
    static var moduleDirectories: [String] {
        #if arch(x86_64)
        let triple = "x86_64-linux-gnu"
        #elseif arch(arm64)
        let triple = "aarch64-linux-gnu"
        #elseif arch(arm)
        let triple = "arm-linux-gnueabihf"
        #else
        let triple = "unknown"
        #endif
        return ["/usr/lib/\(triple)/pkcs11", "/usr/lib64/pkcs11", "/usr/lib/pkcs11"]
    }

    /// The library path for `module`: itself when it contains a `/`, else the `module:` line of the p11-kit
    /// config `<module>.module` (the last folder that has one wins), else a bare library file name in p11-kit's
    /// module directory.
    static func resolve(_ module: String) throws(KeychainError) -> String {
        if module.contains("/") {
            guard FileManager.default.fileExists(atPath: module) else {
                throw KeychainError(KeychainStatus.notAvailable, "PKCS#11 module not found: \(module)")
            }
            return module
        }
        var configured: (path: String, config: String)?
        for folder in configFolders {
            let config = folder + "/" + module + ".module"
            guard let text = try? String(contentsOfFile: config, encoding: .utf8) else { continue }
            if let path = moduleLine(text) { configured = (path, config) }
        }
        if let configured {
            let path = absolute(configured.path)
            guard let path else {
                throw KeychainError(
                    KeychainStatus.notAvailable,
                    "PKCS#11 module \(module) (\(configured.config)) names \(configured.path), which is not in "
                        + moduleDirectories.joined(separator: ", ")
                )
            }
            guard FileManager.default.fileExists(atPath: path) else {
                throw KeychainError(
                    KeychainStatus.notAvailable,
                    "PKCS#11 module \(module) (\(configured.config)) names \(path), which does not exist"
                )
            }
            return path
        }
        if module.hasSuffix(".so"), let path = absolute(module) { return path }
        throw KeychainError(
            KeychainStatus.notAvailable,
            "PKCS#11 module not found: \(module) is neither a path nor a p11-kit module name (no \(module).module in "
                + configFolders.joined(separator: ", ") + ")"
        )
    }

    /// The value of the `module:` line of a p11-kit module config.
    static func moduleLine(_ text: String) -> String? {
        for line in text.split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmed()
            guard !trimmed.hasPrefix("#"), let colon = trimmed.firstIndex(of: ":") else { continue }
            guard trimmed[..<colon].trimmed() == "module" else { continue }
            let value = trimmed[trimmed.index(after: colon)...].trimmed()
            return value.isEmpty ? nil : value
        }
        return nil
    }

    private static func absolute(_ path: String) -> String? {
        if path.hasPrefix("/") { return path }
        for folder in moduleDirectories where FileManager.default.fileExists(atPath: folder + "/" + path) {
            return folder + "/" + path
        }
        return nil
    }
}

/// Serializes every load, initialization, finalization and release of a module in this process.
///
/// p11-kit (0.24 and later) counts the initializations of a module under its global lock but calls the module's own
/// `C_Finalize` after releasing it: a load initialized while the last other load of the module is being finalized
/// finds the library still marked initialized, skips `C_Initialize`, and is then finalized underneath
/// (`CKR_CRYPTOKI_NOT_INITIALIZED` on its next call; its handles used after the library freed them). Holding this
/// lock across both calls makes the count and the module's own state change together.
private let moduleLifecycle = Mutex<Void>(())

/// One PKCS#11 module loaded alone through p11-kit. Call through ``functions`` only (the global `C_*` symbols
/// do not link). Close with ``finalize()``.
final class PKCS11Module {
    let path: String
    let functions: UnsafeMutablePointer<CK_FUNCTION_LIST>
    private var finalized = false

    /// Loads and initializes the module. p11-kit manages it: several loads of one module in a process share
    /// one initialization of the library, and each load sees only its own sessions.
    init(path: String) throws(KeychainError) {
        self.path = path
        functions = try moduleLifecycle.withLock { _ throws(KeychainError) in
            guard let functions = p11_kit_module_load(path, 0) else {
                throw KeychainError(
                    KeychainStatus.notAvailable,
                    "PKCS#11 module \(path) could not be loaded: \(Self.lastMessage())"
                )
            }
            let rv = p11_kit_module_initialize(functions)
            guard rv == CK_RV(CKR_OK) else {
                let message = Self.lastMessage()
                p11_kit_module_release(functions)
                throw KeychainError(
                    KeychainStatus.notAvailable,
                    "PKCS#11 module \(path) failed to initialize: \(CKResult(rawValue: UInt(rv)))"
                        + (message == "no details" ? "" : ": \(message)")
                )
            }
            return functions
        }
    }

    /// Finalizes and releases the module. Idempotent.
    func finalize() {
        guard !finalized else { return }
        finalized = true
        moduleLifecycle.withLock { _ in
            _ = p11_kit_module_finalize(functions)
            p11_kit_module_release(functions)
        }
    }

    deinit { assert(finalized, "PKCS11Module released without finalize()") }

    private static func lastMessage() -> String {
        guard let message = p11_kit_message() else { return "no details" }
        return String(cString: message)
    }
}
