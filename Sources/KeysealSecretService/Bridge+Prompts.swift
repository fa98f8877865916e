import FoundationEssentials
import Glibc
import KeysealClient
import KeysealCore
import KeysealModel

extension SecretServiceBridge {
    // MARK: Prompts

    func runPrompt(_ path: String) throws {
        guard let prompt = prompts[path], !prompt.done, prompt.child == 0 else { throw noSuchObject(path) }
        forgetWaiting(path, owner: prompt.owner)
        let child = try askToUnlock { [weak self] unlocked in self?.completePrompt(path, dismissed: !unlocked) }
        prompt.child = child ?? -1
    }

    /// Runs the askpass program and unlocks keyseald with the passcode it prints, off the bus thread; `completion`
    /// runs on the bus thread with whether keyseald unlocked. Without an askpass program there is nothing to ask
    /// with: `completion(false)` runs once the current call's reply has gone. Returns the program's pid.
    func askToUnlock(_ completion: @escaping @Sendable (Bool) -> Void) throws -> pid_t? {
        guard let askpass = configuration.askpass else {
            bus.post { completion(false) }
            return nil
        }
        let child: PromptProgram
        do {
            child = try PromptProgram.spawn(askpass + ["Unlock the Keyseal keychain"])
        } catch {
            throw BusError(BusError.failed, "cannot run the askpass program: \(error)")
        }
        let socketPath = configuration.socketPath
        let timeout = configuration.askpassTimeoutSeconds
        startThread { [weak self] in
            // The first line it prints, if it exits 0 within the timeout; anything else dismisses the prompt.
            var passcode: SecretBytes?
            if case .exited(0, let output) = child.finish(timeoutSeconds: timeout) {
                let line = PromptProgram.firstLine(output)
                if !line.isEmpty { passcode = line }
            }
            let unlocked =
                passcode.map { passcode in
                    (try? KeysealConnection(socketPath: socketPath).send(.unlock(passcode: passcode))) != nil
                } ?? false
            self?.bus.post { completion(unlocked) }
        }
        return child.pid
    }

    func dismissPrompt(_ path: String) {
        guard let prompt = prompts[path] else { return }
        // The askpass program leads a process group of its own: its helpers go with it.
        if prompt.child > 0 { kill(-prompt.child, SIGTERM) }
        completePrompt(path, dismissed: true)
    }

    func completePrompt(_ path: String, dismissed: Bool) {
        guard let prompt = prompts[path], !prompt.done else { return }
        prompt.done = true
        if !dismissed {
            lockChanged(false)
            // The items unlocked: their proxies (libsecret's, read while locked) learn their attributes.
            for object in prompt.objects {
                guard case .item? = self.object(object) else { continue }
                bus.propertiesChanged(path: object, interface: Self.itemInterface, ["Locked", "Attributes", "Label"])
            }
        }
        bus.emit(path: path, interface: Self.promptInterface, member: "Completed") { writer in
            try writer.bool(dismissed)
            try writer.open("v", "ao")
            try writer.objectPaths(dismissed ? [] : prompt.objects)
            try writer.close()
        }
        prompts[path] = nil
        forgetWaiting(path, owner: prompt.owner)
    }

    /// `path` no longer counts among its owner's prompts not yet run.
    private func forgetWaiting(_ path: String, owner: String) {
        promptOrder[owner]?.removeAll { $0 == path }
        if promptOrder[owner]?.isEmpty == true { promptOrder[owner] = nil }
    }

    /// A client left the bus: the prompts it asked for and never ran complete dismissed (a prompt it did run goes
    /// on: its askpass program is the user's, and its result is keyseald's unlock).
    func promptsOfClientGone(_ name: String) {
        for path in promptOrder[name] ?? [] { dismissPrompt(path) }
        promptOrder[name] = nil
    }
}
