import ServiceLifecycle
import Synchronization

/// Locks the store after the idle timeout (no administrator's item request or unlock for that long) and after the
/// maximum unlocked time.
public struct AutoLockService: Service {
    let service: KeychainService

    public init(service: KeychainService) { self.service = service }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            _ = await service.autoLockIfIdle()
            // Wake often enough that a shorter timeout set at run time takes effect promptly.
            var wait = Duration.seconds(1)
            if let left = service.untilAutoLock, left > .zero && left < wait { wait = left }
            do {
                let pause = wait
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
            } catch {
                return
            }
        }
    }
}
