import ArgumentParser
import FoundationEssentials
import Glibc
import KeysealClient
import KeysealSecretService

/// The freedesktop Secret Service on the session bus, backed by keyseald (docs/OPERATIONS.md).
@main
struct SecretServiceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keyseal-secret-service",
        abstract: "Serve org.freedesktop.secrets on the session bus from keyseald.",
        discussion: """
            Connects to keyseald as the calling user (default socket: $KEYSEAL_SOCKET, else \
            $XDG_RUNTIME_DIR/keyseal/keyseal.sock) and owns org.freedesktop.secrets on $DBUS_SESSION_BUS_ADDRESS. \
            Exits with status 3 when another provider owns the name, unless --replace.

            D-Bus starts it on the first call through /usr/share/dbus-1/services/\
            org.freedesktop.secrets.keyseal.service and the user unit keyseal-secret-service.service, which pulls \
            in the user's keyseald. It also serves xdg-desktop-portal's Secret backend \
            (/usr/share/xdg-desktop-portal/portals/keyseal.portal). The full guide is \
            /usr/share/doc/keyseal/OPERATIONS.md.gz, "The Secret Service".
            """,
        version: KeysealVersion.description
    )

    @Option(name: .long, help: "keyseald's socket.")
    var socket: String?

    @Flag(name: .long, help: "Take org.freedesktop.secrets from the provider that owns it.")
    var replace = false

    @Option(
        name: .long,
        help:
            "The program an Unlock prompt runs; it prints the passcode on standard output (default: $KEYSEAL_ASKPASS; none: an Unlock prompt completes dismissed)."
    )
    var askpass: String?

    @Option(name: .long, help: "Seconds an askpass program may take.")
    var askpassTimeout = 120

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        let socketPath = socket ?? Wire.defaultSocketPath(environment: environment)
        let program = askpass ?? environment["KEYSEAL_ASKPASS"]
        let bridge = SecretServiceBridge(
            configuration: .init(
                socketPath: socketPath,
                askpass: program.flatMap { $0.isEmpty ? nil : $0.split(separator: " ").map(String.init) },
                askpassTimeoutSeconds: askpassTimeout
            )
        )
        // A parent may have left signals blocked (the mask is inherited): SIGTERM must stop the bridge.
        var none = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, nil)
        signal(SIGPIPE, SIG_IGN)
        do {
            try bridge.run(replace: replace) {
                writeLine(1, "keyseal-secret-service: serving org.freedesktop.secrets")
            }
        } catch {
            writeLine(2, "keyseal-secret-service: \(error)")
            throw ExitCode(3)
        }
    }
}

/// One line straight to a descriptor (unbuffered: a supervisor sees it at once).
func writeLine(_ descriptor: Int32, _ text: String) {
    var line = text + "\n"
    line.withUTF8 { _ = write(descriptor, $0.baseAddress, $0.count) }
}
