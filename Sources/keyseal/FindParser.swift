import Glibc
import KeysealClient

/// The command lines of `find-generic-password` and `find-internet-password` that ArgumentParser would accept,
/// parsed without it: ArgumentParser's first parse in a process (reflection over the commands, protocol conformance
/// scans, generic metadata) costs more than the lookup itself (docs/DECISIONS.md, "The find commands' plain command
/// lines are parsed by hand").
///
/// It accepts only the forms below and yields the `FindInvocation` ArgumentParser's command would; anything else
/// (help, `--`, an unknown or repeated option, an attached value such as `-aVALUE` or `--socket=PATH`, a missing or
/// bad value, both `-w` and `-g`) is declined, and ArgumentParser parses the command line as for every other
/// command, with its errors and help. FindParserTests keeps the two in step.
///
///     [--json] [--socket PATH] find-…-password [-a VALUE …] [--access-group GROUP] [--accessible CLASS]
///         [-w | -g] [--json] [--socket PATH]
enum FindParser {
    /// The invocation, or nil when ArgumentParser is to parse `arguments` (the command line without the program).
    static func parse(_ arguments: [String]) -> FindInvocation? {
        var socket: String?
        var json = false
        var index = 0
        // The global options go before the command or among its options; each once.
        func global(_ argument: String) -> Bool? {
            switch argument {
            case "--json":
                if json { return nil }
                json = true
                return true
            case "--socket":
                guard socket == nil, let value = value(after: index) else { return nil }
                socket = value
                index += 1
                return true
            default:
                return false
            }
        }
        func value(after position: Int) -> String? {
            guard position + 1 < arguments.count else { return nil }
            let value = arguments[position + 1]
            // ArgumentParser takes as a value only what cannot be an option: `-` alone, or no leading dash.
            return value == "-" || !value.hasPrefix("-") ? value : nil
        }

        while index < arguments.count {
            guard let isGlobal = global(arguments[index]) else { return nil }
            if !isGlobal { break }
            index += 1
        }
        guard index < arguments.count else { return nil }
        let itemClass: ItemClass
        let attributeOptions: Set<Character>
        switch arguments[index] {
        case "find-generic-password":
            itemClass = GenericPasswordFlags.itemClass
            attributeOptions = GenericPasswordFlags.attributeOptions
        case "find-internet-password":
            itemClass = InternetPasswordFlags.itemClass
            attributeOptions = InternetPasswordFlags.attributeOptions
        default:
            return nil
        }
        index += 1

        var given: [Character: String] = [:]
        var accessGroup: String?
        var accessible: String?
        var output: FindInvocation.Output = .attributes
        while index < arguments.count {
            let argument = arguments[index]
            guard let isGlobal = global(argument) else { return nil }
            if isGlobal {
                index += 1
                continue
            }
            switch argument {
            case "-w", "-g":
                guard output == .attributes else { return nil }
                output = argument == "-w" ? .secretOnly : .attributesAndSecret
            case "--access-group":
                guard accessGroup == nil, let value = value(after: index) else { return nil }
                accessGroup = value
                index += 1
            case "--accessible":
                guard accessible == nil, let value = value(after: index) else { return nil }
                accessible = value
                index += 1
            default:
                let utf8 = argument.utf8
                guard utf8.count == 2, utf8.first == UInt8(ascii: "-"), let name = argument.last,
                    attributeOptions.contains(name), given[name] == nil, let value = value(after: index)
                else { return nil }
                given[name] = value
                index += 1
            }
            index += 1
        }

        var accessibility: Accessibility?
        if let accessible {
            guard let code = AccessibleName.code(accessible) else { return nil }
            accessibility = Accessibility(rawValue: code)
        }
        let attributes: [String: AttributeValue]
        do {
            attributes =
                itemClass == InternetPasswordFlags.itemClass
                ? try InternetPasswordFlags.attributes(given) : try GenericPasswordFlags.attributes(given)
        } catch {
            return nil
        }
        return FindInvocation(
            itemClass: itemClass,
            attributes: attributes,
            accessGroup: accessGroup,
            accessibility: accessibility,
            output: output,
            socket: socket,
            json: json
        )
    }

    /// Ends the process with `status`.
    static func exit(_ status: Int32) -> Never {
        #if canImport(Glibc)
        Glibc.exit(status)
        #elseif canImport(Musl)
        Musl.exit(status)
        #else
        Darwin.exit(status)
        #endif
    }
}
