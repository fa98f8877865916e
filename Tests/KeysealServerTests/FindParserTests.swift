import ArgumentParser
import Foundation
import KeysealClient
import KeysealTestSupport
import Testing

@testable import keyseal

#if canImport(Glibc)
import Glibc
#endif

/// ArgumentParser's reading of a command line (after `ArgumentRewriter`, as `keyseal` runs it).
private enum ArgumentParserReading {
    case find(FindInvocation)
    case error(any Error)

    init(_ arguments: [String]) {
        do {
            var command = try KeysealCommand.parseAsRoot(ArgumentRewriter.rewrite(arguments))
            if let find = command as? any FindCommand {
                self = .find(try find.invocation())
            } else {
                // Help (`help COMMAND`, `--help`): running it throws the help request that `keyseal` prints.
                try command.run()
                throw CommandFailure(status: -50, message: "\(arguments) ran \(type(of: command))")
            }
        } catch {
            self = .error(error)
        }
    }
}

/// Help and usage errors are wrapped at this width, in this process and in the `keyseal` processes.
private let columns = "100"

/// Command lines of the find commands that FindParser takes: every option, each output mode, the global options
/// before and after the command, and values ArgumentParser allows that look odd (`-`, empty, spaces, `=`).
private let acceptedCorpus: [[String]] = {
    var corpus: [[String]] = []
    let generic = "find-generic-password"
    let internet = "find-internet-password"
    let outputs: [[String]] = [[], ["-w"], ["-g"]]
    for output in outputs {
        corpus.append([generic, "-a", "acct", "-s", "svc"] + output)
        corpus.append(["--json", generic, "-a", "acct"] + output)
        corpus.append(["--socket", "/tmp/k.sock", "--json", generic] + output + ["-s", "svc"])
        corpus.append([internet, "-a", "acct", "-s", "example.com"] + output)
        corpus.append([internet] + output + ["--json", "--socket", "-"])
    }
    for letter in ["a", "s", "l", "j", "D", "G", "c", "C"] {
        corpus.append([generic, "-\(letter)", "value of \(letter)", "-w"])
    }
    for (letter, value) in [
        ("a", "acct"), ("s", "example.com"), ("r", "https"), ("r", "htps"), ("r", "ftp"), ("r", "SSH"), ("r", "xyz"),
        ("P", "443"), ("P", "0"), ("P", "65535"), ("P", "+8080"), ("p", "/path"), ("d", "realm"), ("t", "default"),
        ("t", "dflt"), ("t", "http-digest"), ("t", "abcd"), ("l", "label"), ("j", "comment"), ("D", "kind"),
        ("c", "crtr"), ("C", "type"),
    ] {
        corpus.append([internet, "-\(letter)", value, "-g"])
    }
    corpus.append([
        generic, "-a", "a", "-s", "s", "-l", "l", "-j", "j", "-D", "D", "-G", "G", "-c", "c", "-C", "C",
        "--access-group", "group", "--accessible", "always", "-w", "--json", "--socket", "/run/k.sock",
    ])
    corpus.append([
        "--json", "--socket", "/run/k.sock", internet, "-a", "a", "-s", "s", "-r", "imap", "-P", "993", "-p", "/",
        "-d", "d", "-t", "ntlm", "-l", "l", "-j", "j", "-D", "D", "-c", "c", "-C", "C", "--access-group", "g",
        "--accessible", "ak",
    ])
    for entry in AccessibleName.all {
        for spelling in [entry.code, entry.name, entry.constant] {
            corpus.append([generic, "-a", "acct", "--accessible", spelling, "-w"])
        }
    }
    for value in ["-", "", " ", "a b", "a=b", "ünïcödé", "find-internet-password"] {
        corpus.append([generic, "-a", value, "-s", value, "-w"])
        corpus.append([generic, "--access-group", value, "-G", value])
        corpus.append(["--socket", value, internet, "-p", value])
    }
    return corpus
}()

/// Command lines FindParser leaves to ArgumentParser: some ArgumentParser refuses (help, errors), some it takes
/// in a form FindParser does not read (attached values, repeats).
private let declinedCorpus: [[String]] = {
    let generic = "find-generic-password"
    let internet = "find-internet-password"
    return [
        [generic, "--help"], [generic, "-h"], ["help", generic], [generic, "-a", "acct", "--help"], ["--help"],
        [generic, "--"], [generic, "-a", "acct", "--", "-w"], [generic, "-a"], [generic, "-a", "-s", "svc"],
        [generic, "-s", "svc", "-a", "-w"], [generic, "-x"], [generic, "-w", "-g"], [generic, "-g", "-w"],
        [generic, "-w", "-w"], [generic, "-a", "one", "-a", "two"], [generic, "-aacct"], [generic, "-a=acct"],
        [generic, "--access-group=g"], ["--socket=/tmp/k.sock", generic], [generic, "--socket=/tmp/k.sock"],
        [generic, "-wg"], [generic, "--accessible", "sometimes"], [generic, "--accessible"], [generic, "positional"],
        ["--json", "--json", generic], [generic, "--json", "--json"], ["--socket", "/a", generic, "--socket", "/b"],
        ["--socket"], ["--socket", "-w", generic], [generic, "--socket"], [generic, "--version"],
        [generic, "-r", "https"],
        [internet, "-G", "x"], [internet, "-r", "gopherx"], [internet, "-t", "bogus"], [internet, "-P", "70000"],
        [internet, "-P", "-1"], [internet, "-P", "x"], [internet, "-P", "0x10"], [internet, "-P"],
        ["find-generic-passwords", "-w"], [generic, "--access-group"], [generic, "-a", "-x"], [generic, "-s", "--x"],
        [generic, "-a", "acct", "-"], [generic, "—a", "acct"],
    ]
}()

@Suite("keyseal find commands parsed without ArgumentParser")
struct FindParserTests {
    @Test("FindParser takes every find option, output mode and global option, and yields ArgumentParser's invocation")
    func acceptedLinesMatchArgumentParser() {
        for arguments in acceptedCorpus {
            let fast = FindParser.parse(arguments)
            #expect(fast != nil, "declined: \(arguments)")
            switch ArgumentParserReading(arguments) {
            case .find(let invocation):
                #expect(fast == invocation, "\(arguments)")
            case .error(let error):
                Issue.record("ArgumentParser refuses \(arguments): \(KeysealCommand.message(for: error))")
            }
        }
    }

    @Test("FindParser declines help, --, unknown, repeated, attached and missing values; ArgumentParser then answers")
    func declinedLinesGoToArgumentParser() throws {
        setenv("COLUMNS", columns, 1)
        let keyseal = try builtProductsDirectory().appendingPathComponent("keyseal").path
        let socket = "/nonexistent/keyseal.sock"
        for arguments in declinedCorpus {
            #expect(FindParser.parse(arguments) == nil, "taken: \(arguments)")
            let result = try runProcess(
                keyseal,
                arguments,
                environment: ["KEYSEAL_SOCKET": socket, "COLUMNS": columns]
            )
            switch ArgumentParserReading(arguments) {
            case .find(let invocation):
                // A form ArgumentParser takes: the lookup ran through it.
                #expect(result.status == 50, "\(arguments): \(result.stderrText)")
                #expect(
                    result.stderrText.contains("cannot reach keyseald at \(invocation.socket ?? socket):"),
                    "\(arguments)"
                )
            case .error(let error):
                let expected = KeysealCommand.fullMessage(for: error)
                let status = KeysealCommand.exitCode(for: error).rawValue
                #expect(result.status == status, "\(arguments): \(result.stderrText)")
                let printed = status == 0 ? result.stdoutText : result.stderrText
                #expect(printed == expected + "\n", "\(arguments)")
            }
        }
    }

    @Test("find-generic-password through FindParser prints and exits as through ArgumentParser")
    func sameOutputAsArgumentParser() throws {
        let daemon = try DaemonFixture()
        defer { daemon.remove() }
        let cli = CLI(socket: daemon.socketPath)
        #expect(try cli("add-generic-password", "-a", "acct", "-s", "svc", "-w", "s3cret", "-l", "label").status == 0)
        // `-a=acct` is ArgumentParser's alone (FindParser declines attached values).
        for (fast, parsed) in [
            (["-a", "acct", "-s", "svc", "-w"], ["-a=acct", "-s=svc", "-w"]),
            (["-a", "acct", "-s", "svc", "-g"], ["-a=acct", "-s=svc", "-g"]),
            (["-a", "acct", "-s", "svc"], ["-a=acct", "-s=svc"]),
            (["-a", "acct", "-s", "svc", "-w", "--json"], ["-a=acct", "-s=svc", "-w", "--json"]),
            (["-a", "nobody", "-w"], ["-a=nobody", "-w"]),
            (["-a", "nobody", "-w", "--json"], ["-a=nobody", "-w", "--json"]),
        ] {
            #expect(FindParser.parse(["find-generic-password"] + fast) != nil)
            #expect(FindParser.parse(["find-generic-password"] + parsed) == nil)
            let one = try cli.run(["find-generic-password"] + fast)
            let other = try cli.run(["find-generic-password"] + parsed)
            #expect(one.status == other.status, "\(fast)")
            #expect(one.stdoutText == other.stdoutText, "\(fast)")
            #expect(one.stderrText == other.stderrText, "\(fast)")
        }
        let found = try cli("find-generic-password", "-a", "acct", "-s", "svc", "-w")
        #expect(found.status == 0)
        #expect(found.stdoutText == "s3cret\n")
        let missing = try cli("find-generic-password", "-a", "nobody", "-w")
        #expect(missing.status == 44)
        #expect(missing.stdoutText.isEmpty)
        #expect(
            missing.stderrText
                == "keyseal: find-generic-password: The specified item could not be found in the keychain. (-25300)\n"
        )
    }
}
