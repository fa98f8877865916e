import FoundationEssentials
import KeysealCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a token PIN from a file that only the daemon's user can read.
enum PINFile {
    /// PINs longer than this are refused (PKCS#11 tokens allow far less).
    static let maximumLength = 1024

    /// The file's contents without one trailing newline (`\n` or `\r\n`), in ``SecretBytes``.
    ///
    /// The file must be a regular file owned by this user (or root) with no permission bits for group or others;
    /// the checks run on the opened descriptor, so the file checked is the file read.
    static func read(_ url: URL) throws(KeychainError) -> SecretBytes {
        let path = url.path
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { throw failure("the PIN file \(path) does not exist") }
            throw failure("the PIN file \(path) cannot be opened: \(String(cString: strerror(code)))")
        }
        defer { _ = close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw failure("the PIN file \(path) cannot be examined: \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw failure("the PIN file \(path) is not a regular file") }
        let permissions = info.st_mode & 0o777
        guard permissions & 0o077 == 0 else {
            throw failure(
                "the PIN file \(path) is too permissive (mode 0\(String(permissions, radix: 8))): it must not be "
                    + "readable or writable by group or others; chmod 600 it"
            )
        }
        guard info.st_uid == geteuid() || info.st_uid == 0 else {
            throw failure(
                "the PIN file \(path) is owned by uid \(info.st_uid), not by this user (uid \(geteuid())) or root"
            )
        }
        let size = Int(info.st_size)
        guard size > 0 else { throw failure("the PIN file \(path) is empty") }
        guard size <= maximumLength else { throw failure("the PIN file \(path) is larger than \(maximumLength) bytes") }

        var complete = true
        let raw = SecretBytes(count: size) { buffer in
            var offset = 0
            while offset < size {
                let got = Posix.read(fd, buffer.baseAddress! + offset, size - offset)
                guard got > 0 else { break }
                offset += got
            }
            complete = offset == size
        }
        guard complete else { throw failure("the PIN file \(path) changed or could not be read completely") }
        let length = raw.withUnsafeBytes { bytes in
            var end = bytes.count
            if end > 0 && bytes[end - 1] == UInt8(ascii: "\n") { end -= 1 }
            if end > 0 && bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            return end
        }
        guard length > 0 else { throw failure("the PIN file \(path) holds an empty PIN") }
        return raw.withUnsafeBytes { SecretBytes(copying: $0.prefix(length)) }
    }

    private static func failure(_ message: String) -> KeychainError {
        KeychainError(KeychainStatus.notAvailable, message)
    }
}
