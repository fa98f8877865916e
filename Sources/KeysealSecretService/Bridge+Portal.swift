internal import CKeysealSys
import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

extension SecretServiceBridge {
    // MARK: Secret portal backend

    /// Where xdg-desktop-portal calls a backend (on the name its `.portal` file gives: org.freedesktop.secrets).
    static let portalPath = "/org/freedesktop/portal/desktop"
    static let portalInterface = "org.freedesktop.impl.portal.Secret"
    /// The service of every application's portal secret (its account is the application id); outside
    /// ``servicePrefix``, so no Secret Service collection shows it.
    static let portalService = "xdg-desktop-portal-secret"
    static let portalSecretSize = 64

    /// The portal's responses: the secret was written; the user cancelled (the keychain stays locked: the prompt
    /// was dismissed, or there is no askpass program); anything else (a bad application id, keyseald refused).
    enum PortalResponse: UInt32 {
        case success = 0
        case cancelled = 1
        case other = 2
    }

    func registerPortal(_ bus: BusConnection) throws {
        try bus.add(
            path: Self.portalPath,
            interface: Self.portalInterface,
            VTable([.method("RetrieveSecret", "osha{sv}", "ua{sv}"), .property("version", "u")])
        )
    }

    /// RetrieveSecret(handle, app_id, fd, options): writes the application's secret to `fd` and closes it. While
    /// keyseald is locked the Unlock prompt runs first (``askToUnlock(_:)``); the call is answered once it is done,
    /// cancelled if keyseald stays locked.
    func retrieveSecret(_ message: MessageReader) throws -> ReplyBuilder {
        _ = try message.objectPath()
        let application = try message.string()
        let descriptor = try message.fileDescriptor()
        // xdg-desktop-portal, outside every sandbox, names the application; an application in a sandbox that reached
        // this interface itself could name another's, so its call is refused, as is one whose process is unknown.
        guard !callerMayBeSandboxed() else {
            close(descriptor)
            printError(
                "keyseal-secret-service: RetrieveSecret from a sandboxed or unknown process refused (only "
                    + "xdg-desktop-portal calls the portal backend)"
            )
            return Self.portalReply(.other)
        }
        guard Self.isApplicationID(application) else {
            close(descriptor)
            printError("keyseal-secret-service: the Secret portal asked for a malformed application id; refused")
            return Self.portalReply(.other)
        }
        guard isLocked() else { return portalAnswer(application, descriptor) }
        let reply = PendingReply(message)
        do {
            _ = try askToUnlock { [weak self] unlocked in
                guard let self, unlocked else {
                    close(descriptor)
                    reply.send(Self.portalReply(.cancelled))
                    return
                }
                self.lockChanged(false)
                reply.send(self.portalAnswer(application, descriptor))
            }
        } catch {
            close(descriptor)
            throw error
        }
        throw ReplyLater()
    }

    /// Writes the secret of `application` to `descriptor` (closed after) and answers the call.
    func portalAnswer(_ application: String, _ descriptor: Int32) -> ReplyBuilder {
        defer { close(descriptor) }
        do {
            let secret = try applicationSecret(application)
            try Self.writeAll(secret, to: descriptor)
            return Self.portalReply(.success)
        } catch {
            printError("keyseal-secret-service: no Secret portal secret for \(application): \(error)")
            return Self.portalReply((error as? BusError)?.name == BusError.isLocked ? .cancelled : .other)
        }
    }

    /// Whether the process that sent the call being dispatched is, or may be, an application in a sandbox rather
    /// than a program of the user's own session (``isSandboxed(pid:)``); true as well when it cannot be told.
    ///
    /// The pid is the one the bus daemon read from the caller's socket when it connected; a pidfd pins the process
    /// that has it now, and it is the caller only if the caller's connection is still on the bus with that pid
    /// (asked again after the pidfd is open: a pid is reused only once its process has exited) and that process has
    /// not exited by the end of the checks, so that what was read is the caller's.
    func callerMayBeSandboxed() -> Bool {
        guard let pid = bus.currentSenderPid() else { return true }
        let pidfd = keyseal_pidfd_open(pid)
        guard pidfd >= 0 else { return true }
        defer { close(pidfd) }
        let sender = bus.currentSender()
        guard !sender.isEmpty, bus.connectionPid(sender) == pid else { return true }
        let sandboxed = Self.isSandboxed(pid: pid)
        var exited = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return sandboxed || poll(&exited, 1, 0) != 0
    }

    /// Whether process `pid` runs in a sandbox, or may: its root holds `/.flatpak-info` (Flatpak's mark, which
    /// xdg-desktop-portal reads), or it sees another root directory than the bridge's (a chroot), or it runs in a
    /// user, mount or pid namespace other than the bridge's (bubblewrap's sandboxes, and any namespace a process
    /// made inside one: there it can make a root without `/.flatpak-info` and chroot into it), or any of these
    /// cannot be looked at (the process is gone, or another user's).
    static func isSandboxed(pid: Int32) -> Bool {
        let proc = "/proc/\(pid)"
        var device: UInt64 = 0
        var inode: UInt64 = 0
        if keyseal_file_id(proc + "/root/.flatpak-info", &device, &inode) == 0 || errno != ENOENT { return true }
        for namespace in ["user", "mnt", "pid"] {
            guard let own = readLink("/proc/self/ns/" + namespace), readLink(proc + "/ns/" + namespace) == own else {
                return true
            }
        }
        var ownDevice: UInt64 = 0
        var ownInode: UInt64 = 0
        guard keyseal_file_id("/proc/self/root", &ownDevice, &ownInode) == 0,
            keyseal_file_id(proc + "/root", &device, &inode) == 0
        else { return true }
        return device != ownDevice || inode != ownInode
    }

    static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func portalReply(_ response: PortalResponse) -> ReplyBuilder {
        { writer in
            try writer.uint32(response.rawValue)
            try writer.open("a", "{sv}")
            try writer.close()
        }
    }

    /// The secret of `application`: a Keyseal generic password in the application's access group (its id), with
    /// service ``portalService`` and the id as its account, made of 64 random bytes the first time it is asked for.
    /// Only a request naming that id reaches it; keyseald refuses it while locked (when-unlocked).
    func applicationSecret(_ application: String) throws(BusError) -> SecretBytes {
        var query = ItemQuery(
            itemClass: .genericPassword,
            attributes: [
                AttributeKey.service: .string(Self.portalService), AttributeKey.account: .string(application),
            ],
            limit: .one,
            returns: ReturnOptions(rawValue: 1)
        )
        query.accessGroup = application
        for _ in 0..<2 {
            do throws(KeychainError) {
                if case .records(let records) = try sendItem(.copyMatching(query)), let data = records.first?.data {
                    return SecretBytes(copying: data)
                }
                throw KeychainError(status: KeychainStatus.decode, message: "unexpected response from keyseald")
            } catch let error where error.status == -25300 {
            } catch {
                throw Self.busError(error)
            }
            let secret = SecretBytes.random(count: Self.portalSecretSize)
            let item = NewItem(
                itemClass: .genericPassword,
                attributes: [
                    AttributeKey.service: .string(Self.portalService), AttributeKey.account: .string(application),
                    AttributeKey.label: .string("Secret portal: \(application)"),
                ],
                accessGroup: application,
                accessibility: .whenUnlocked,
                data: secret.data
            )
            do throws(KeychainError) {
                _ = try sendItem(.add(item))
                return secret
            } catch let error where error.status == -25299 {
                // Another bridge made it first: read that one.
            } catch {
                throw Self.busError(error)
            }
        }
        throw BusError(BusError.failed, "the Secret portal secret of \(application) could not be made")
    }

    /// A Flatpak application id: at most 255 bytes, three or more dot-separated elements of [A-Za-z0-9_-], none
    /// empty or starting with a digit.
    static func isApplicationID(_ text: String) -> Bool {
        let elements = text.split(separator: ".", omittingEmptySubsequences: false)
        return text.utf8.count <= 255 && elements.count >= 3
            && elements.allSatisfy { element in
                guard let first = element.utf8.first, !(48...57).contains(first) else { return false }
                return element.utf8.allSatisfy { byte in
                    (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte) || byte == 95
                        || byte == 45
                }
            }
    }

    /// Writes all of `secret` to `descriptor`, waiting (at most 5 s) while a non-blocking one is full.
    static func writeAll(_ secret: SecretBytes, to descriptor: Int32) throws {
        try secret.withUnsafeBytes { bytes in
            var written = 0
            while written < bytes.count {
                let count = Posix.write(descriptor, bytes.baseAddress! + written, bytes.count - written)
                if count > 0 {
                    written += count
                    continue
                }
                var poller = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                guard count < 0, errno == EAGAIN, poll(&poller, 1, 5000) > 0 else {
                    throw BusError(BusError.failed, "cannot write the secret to the portal's descriptor")
                }
            }
        }
    }
}
