import CKeysealSys
import Glibc
import KeysealClient
import KeysealCore

/// The socket file and its directory.
enum SocketFiles {
    /// Creates the socket's directory if missing (0700, or 0750 owned by GROUP) and returns the group's gid.
    static func prepareDirectory(for socket: SocketConfiguration) throws -> gid_t? {
        var gid: gid_t?
        if let name = socket.group {
            guard let found = AccessPolicy.systemGroupID(name) ?? UInt32(name) else {
                throw KeychainError(KeychainStatus.param, "unknown socket group \(name)")
            }
            gid = found
        }
        // The path's directory part ("/" for a socket at the root, "" for a bare name).
        let directory =
            socket.path.lastIndex(of: "/").map { $0 == socket.path.startIndex ? "/" : String(socket.path[..<$0]) } ?? ""
        guard !directory.isEmpty else { return gid }
        var mode: UInt32 = 0
        if keyseal_file_mode(directory, 1, &mode) != 0 {
            guard mkdir(directory, gid == nil ? 0o700 : 0o750) == 0 || errno == EEXIST else {
                throw KeychainError(
                    KeychainStatus.io,
                    "cannot create the socket directory \(directory): \(String(cString: strerror(errno)))"
                )
            }
            if let gid {
                guard chown(directory, getuid(), gid) == 0, chmod(directory, 0o750) == 0 else {
                    throw KeychainError(
                        KeychainStatus.io,
                        "cannot give \(directory) to group \(socket.group ?? ""): \(String(cString: strerror(errno)))"
                    )
                }
            } else {
                _ = chmod(directory, 0o700)
            }
        }
        return gid
    }

    /// Removes a socket file left by a daemon that is gone; refuses when a daemon still answers on it.
    static func removeStaleSocket(_ path: String) throws {
        var mode: UInt32 = 0
        guard keyseal_file_mode(path, 0, &mode) == 0 else { return }
        guard mode & S_IFMT == S_IFSOCK else {
            throw KeychainError(KeychainStatus.param, "\(path) exists and is not a socket")
        }
        let probe = KeysealConnection(socketPath: path)
        if (try? probe.connect()) != nil {
            probe.disconnect()
            throw KeychainError(KeychainStatus.notAvailable, "another keyseald is already listening on \(path)")
        }
        unlink(path)
    }

    static func setPermissions(_ path: String, gid: gid_t?) throws {
        if let gid {
            guard chown(path, getuid(), gid) == 0, chmod(path, 0o660) == 0 else {
                throw KeychainError(
                    KeychainStatus.io,
                    "cannot set the socket's group: \(String(cString: strerror(errno)))"
                )
            }
        } else {
            guard chmod(path, 0o600) == 0 else {
                throw KeychainError(
                    KeychainStatus.io,
                    "cannot set the socket's mode: \(String(cString: strerror(errno)))"
                )
            }
        }
    }

    static func remove(_ path: String) { unlink(path) }
}
