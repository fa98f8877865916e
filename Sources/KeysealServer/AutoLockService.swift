import ServiceLifecycle
import Synchronization

/// Locks the store after the idle timeout (no request from any client for that long).
public struct AutoLockService: Service {
    let service: KeychainService

    public init(service: KeychainService) { self.service = service }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            _ = await service.autoLockIfIdle()
            // Wake often enough that a shorter timeout set at run time takes effect promptly.
            let timeout = service.autoLock.withLock { $0 }
            var wait = Duration.seconds(1)
            if let timeout {
                let left = Duration.seconds(timeout) - service.activity.idle
                if left > .zero && left < wait { wait = left }
            }
            do {
                let pause = wait
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
            } catch {
                return
            }
        }
    }
}
