import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore

extension SecretServiceBridge {
    // MARK: Lock state

    func isLocked() -> Bool {
        guard case .lockState(let state)? = try? keyseal.send(.lockState) else { return true }
        return state != .unlocked
    }

    /// Watches keyseald's lock state on a connection of its own and announces each change on the bus (Locked of
    /// every collection, CollectionChanged).
    func watchLockState() {
        let socketPath = configuration.socketPath
        startThread { [weak self] in
            try? KeysealConnection.watchLockState(socketPath: socketPath) { state in
                guard let self else { return false }
                let locked = state != .unlocked
                self.bus.post { [weak self] in self?.lockChanged(locked) }
                return true
            }
        }
    }

    func lockChanged(_ locked: Bool) {
        guard locked != lastLocked else { return }
        lastLocked = locked
        if locked { dropMetadata() } else { rebuildIndex() }
        for collection in collections {
            let path = Self.collectionPath(collection)
            bus.propertiesChanged(path: path, interface: Self.collectionInterface, ["Locked", "Items"])
            bus.emit(path: Self.root, interface: Self.serviceInterface, member: "CollectionChanged") {
                writer in try writer.objectPath(path)
            }
        }
    }

    /// Locks keyseald. Without a passcode keyseald stays unlocked (it says why), and so do the collections: the
    /// lock state shown is always the one keyseald reports, never one the bridge assumed.
    func lock(_ objects: [String]) throws -> ReplyBuilder {
        do {
            _ = try keyseal.send(.lock)
        } catch {
            throw Self.busError(error)
        }
        let locked = isLocked()
        lockChanged(locked)
        return { writer in
            try writer.objectPaths(locked ? objects : [])
            try writer.objectPath("/")
        }
    }

    /// Unlocked: the objects, no prompt. Locked: a Prompt, which runs the askpass program, or (without one)
    /// completes dismissed, as a headless gnome-keyring's does; clients then report the keychain locked.
    func unlock(_ objects: [String], sender: String) throws -> ReplyBuilder {
        if !isLocked() {
            return { writer in
                try writer.objectPaths(objects)
                try writer.objectPath("/")
            }
        }
        counter += 1
        let path = Self.promptPrefix + "/p\(counter)"
        prompts[path] = Prompt(objects: objects, owner: sender)
        var waiting = promptOrder[sender, default: []]
        waiting.append(path)
        while waiting.count > Self.promptsPerClient { dismissPrompt(waiting.removeFirst()) }
        promptOrder[sender] = waiting
        return { writer in
            try writer.objectPaths([])
            try writer.objectPath(path)
        }
    }
}
