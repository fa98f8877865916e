import Foundation
import KeysealCore

/// Whether the tests run in CI, where a missing swtpm or SoftHSM2 is a failure and never a skip.
public var runningInCI: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

/// A fixture could not be set up.
public struct FixtureError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A private temporary directory (0700), removed by ``remove()``.
public final class TemporaryDirectory: @unchecked Sendable {
    public let url: URL
    public var path: String { url.path }

    public init(prefix: String = "keyseal-test") throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory())
        let url = base.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: url,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        self.url = url
    }

    public func appending(_ component: String) -> URL { url.appendingPathComponent(component) }

    public func remove() { try? FileManager.default.removeItem(at: url) }
}

/// The full path of `tool` on PATH (and the usual sbin folders), or nil.
public func findTool(_ tool: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    let folders = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/local/bin"]
    for folder in folders {
        let candidate = folder + "/" + tool
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

/// The outcome of a finished process.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: Data
    public var stderr: Data
    public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    public var stderrText: String { String(decoding: stderr, as: UTF8.self) }
}

/// Runs `executable` with `arguments` to completion, feeding `input` on standard input.
@discardableResult
public func runProcess(
    _ executable: String,
    _ arguments: [String],
    environment: [String: String]? = nil,
    input: Data? = nil
) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    }
    let stdout = Pipe()
    let stderr = Pipe()
    let stdin = Pipe()
    process.standardOutput = stdout
    process.standardError = stderr
    process.standardInput = stdin
    try process.run()
    if let input { stdin.fileHandleForWriting.write(input) }
    try? stdin.fileHandleForWriting.close()
    // Read both pipes concurrently so that neither can fill up and block the child.
    let errData = LockedBox(Data())
    let reader = Thread { errData.value = stderr.fileHandleForReading.readDataToEndOfFile() }
    reader.start()
    let outData = stdout.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    while !errData.done { usleep(1000) }
    return ProcessResult(status: process.terminationStatus, stdout: outData, stderr: errData.value)
}

/// A value written by one thread and read by another after `done` is set.
final class LockedBox: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: Data
    private var _done = false
    init(_ value: Data) { _value = value }
    var value: Data {
        get { lock.withLock { _value } }
        set {
            lock.withLock {
                _value = newValue
                _done = true
            }
        }
    }
    var done: Bool { lock.withLock { _done } }
}

/// Returns the path of `tool`, or throws a failure that names the missing Debian package. Hardware tests call
/// this: outside CI a missing tool is reported as an error too, so nothing is silently skipped.
public func requireTool(_ tool: String, package: String) throws -> String {
    if let found = findTool(tool) { return found }
    throw FixtureError("\(tool) is not installed (Debian package \(package)); run Scripts/bootstrap.sh")
}

/// Sets variables of this process's environment while other threads may be reading it.
///
/// Fixtures set variables (`SOFTHSM2_CONF`, `TPM2_PKCS11_STORE`, `DBUS_SESSION_BUS_ADDRESS` …) when first used, while
/// other tests of the process run: loading a PKCS#11 module (SoftHSM2 reads `SOFTHSM2_CONF` in `C_Initialize`),
/// starting a process (Foundation copies the environment) or `ProcessInfo.environment`. glibc's `setenv` grows the
/// environment array with `realloc`, which can free the array a reader is walking. This builds a new array and
/// publishes it in one store, never freeing the old one (the strings of replaced variables are kept too), so a reader
/// sees either the old or the new environment, whole.
public func publishEnvironment(_ variables: [String: String]) {
    environmentLock.withLock {
        var entries: [UnsafeMutablePointer<CChar>?] = []
        var index = 0
        // glibc's `environ`, read and replaced through its symbol (Foundation's `environ` is read-only).
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "environ") else {
            for (name, value) in variables { setenv(name, value, 1) }
            return
        }
        let slot = symbol.assumingMemoryBound(to: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?.self)
        if let current = slot.pointee {
            while let entry = current[index] {
                let name = String(cString: entry).split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
                if variables[name] == nil { entries.append(entry) }
                index += 1
            }
        }
        for (name, value) in variables.sorted(by: { $0.key < $1.key }) {
            entries.append(strdup("\(name)=\(value)"))
        }
        entries.append(nil)
        let published = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: entries.count)
        published.initialize(from: entries, count: entries.count)
        slot.pointee = published
    }
}

private let environmentLock = NSLock()
