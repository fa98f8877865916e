function __keyseal_should_offer_completions_for_flags_or_options -a expected_commands
    set -l non_repeating_flags_or_options $argv[2..]
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __keyseal_parse_tokens
    test "$commands" = "$expected_commands"; and return $non_repeating_flags_or_options_absent
end

function __keyseal_should_offer_completions_for_positional -a expected_commands positional_index_comparison expected_positional_index
    set -l non_repeating_flags_or_options
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __keyseal_parse_tokens
    test "$commands" = "$expected_commands" -a \( "$positional_index" "$positional_index_comparison" "$expected_positional_index" \)
end

function __keyseal_parse_tokens -S
    set -l unparsed_tokens (__keyseal_tokens -pc)
    switch $unparsed_tokens[1]
    case 'keyseal'
        __keyseal_parse_subcommand 0 'version' 'h/help'
        switch $unparsed_tokens[1]
        case 'status'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'version' 'h/help'
        case 'unlock'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'passcode-stdin' 'version' 'h/help'
        case 'lock'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'version' 'h/help'
        case 'passcode'
            __keyseal_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'set'
                __keyseal_parse_subcommand 0 'socket=' 'json' 'passcode-stdin' 'allow-weak-passcode' 'version' 'h/help'
            case 'change'
                __keyseal_parse_subcommand 0 'socket=' 'json' 'passcode-stdin' 'allow-weak-passcode' 'version' 'h/help'
            case 'remove'
                __keyseal_parse_subcommand 0 'socket=' 'json' 'passcode-stdin' 'version' 'h/help'
            end
        case 'settings'
            __keyseal_parse_subcommand 0 'socket=' 'json' 't=' 'no-auto-lock' 'version' 'h/help'
        case 'add-generic-password'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'a=' 's=' 'l=' 'j=' 'D=' 'G=' 'c=' 'C=' 'access-group=' 'w=' 'password-stdin' 'X=' 'hex-stdin' 'accessible=' 'U' 'version' 'h/help'
        case 'find-generic-password'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'a=' 's=' 'l=' 'j=' 'D=' 'G=' 'c=' 'C=' 'access-group=' 'accessible=' 'w' 'g' 'version' 'h/help'
        case 'delete-generic-password'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'a=' 's=' 'l=' 'j=' 'D=' 'G=' 'c=' 'C=' 'access-group=' 'accessible=' 'version' 'h/help'
        case 'add-internet-password'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'a=' 's=' 'r=' 'P=' 'p=' 'd=' 't=' 'l=' 'j=' 'D=' 'c=' 'C=' 'access-group=' 'w=' 'password-stdin' 'X=' 'hex-stdin' 'accessible=' 'U' 'version' 'h/help'
        case 'find-internet-password'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'a=' 's=' 'r=' 'P=' 'p=' 'd=' 't=' 'l=' 'j=' 'D=' 'c=' 'C=' 'access-group=' 'accessible=' 'w' 'g' 'version' 'h/help'
        case 'delete-internet-password'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'a=' 's=' 'r=' 'P=' 'p=' 'd=' 't=' 'l=' 'j=' 'D=' 'c=' 'C=' 'access-group=' 'accessible=' 'version' 'h/help'
        case 'dump-keychain'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'd' 'version' 'h/help'
        case 'export'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'output=' 'passphrase-stdin' 'available-only' 'allow-weak-passphrase' 'version' 'h/help'
        case 'import'
            __keyseal_parse_subcommand 1 'socket=' 'json' 'passphrase-stdin' 'replace' 'version' 'h/help'
        case 'doctor'
            __keyseal_parse_subcommand -r 1 'socket=' 'json' 'delete-undecryptable' 'all' 'version' 'h/help'
        case 'error'
            __keyseal_parse_subcommand -r 1 'socket=' 'json' 'version' 'h/help'
        case 'recovery-key'
            __keyseal_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'create'
                __keyseal_parse_subcommand 0 'socket=' 'json' 'passcode-stdin' 'file=' 'version' 'h/help'
            end
        case 'recover'
            __keyseal_parse_subcommand 0 'socket=' 'json' 'recovery-key-stdin' 'version' 'h/help'
        case 'tpm'
            __keyseal_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'reseal'
                __keyseal_parse_subcommand 0 'socket=' 'json' 'passcode-stdin' 'pcrs=' 'version' 'h/help'
            case 'accept-rollback'
                __keyseal_parse_subcommand 0 'socket=' 'json' 'version' 'h/help'
            end
        case 'help'
            __keyseal_parse_subcommand -r 1 'version'
        end
    end
end

function __keyseal_tokens
    if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
        commandline --tokens-raw $argv
    else
        commandline -o $argv
    end
end

function __keyseal_parse_subcommand -S -a positional_count
    argparse -s r -- $argv
    set -l option_specs $argv[2..]
    set -l is_repeating_positional $_flag_r
    set -el _flag_r
    set -a commands $unparsed_tokens[1]
    set positional_index 0
    while true
        set -e unparsed_tokens[1]
        argparse -sn "$commands" $option_specs -- $unparsed_tokens 2> /dev/null
        set unparsed_tokens $argv
        set positional_index (math $positional_index + 1)
        for non_repeating_flag_or_option in $non_repeating_flags_or_options
            if set -ql "_flag_$(string replace -a - _ -- $non_repeating_flag_or_option)"
                set non_repeating_flags_or_options_absent 1
                break
            end
        end
        test (count $unparsed_tokens) -eq 0 -o \( -z "$is_repeating_positional" -a "$positional_index" -gt "$positional_count" \) && break
    end
end

function __keyseal_complete_directories
    set -l token (commandline -t)
    string match -- '*/' $token
    set -l subdirs $token*/
    printf %s\n $subdirs
end

function __keyseal_custom_completion
    set -x SAP_SHELL fish
    set -x SAP_SHELL_VERSION $FISH_VERSION
    set -l tokens (__keyseal_tokens -p)
    if test -z "$(__keyseal_tokens -t)"
        set -l index (count (__keyseal_tokens -pc))
        set tokens $tokens[..$index] \'\' $tokens[(math $index + 1)..]
    end
    command $tokens[1] $argv $tokens
end

complete -c 'keyseal' -f
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'status' -d 'Show the lock state, passcode, backend, auto-lock, failed attempts and item counts.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'unlock' -d 'Unlock the store with the passcode (also checks it when already unlocked).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'lock' -d 'Lock the store now.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'passcode' -d 'Set, change or remove the passcode.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'settings' -d 'Show or change the auto-lock timeout.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'add-generic-password' -d 'Add a generic password (with -U, update it if it exists).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'find-generic-password' -d 'Find a generic password.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'delete-generic-password' -d 'Delete every generic password that matches the flags given.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'add-internet-password' -d 'Add an internet password (with -U, update it if it exists).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'find-internet-password' -d 'Find an internet password.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'delete-internet-password' -d 'Delete every internet password that matches the flags given.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'dump-keychain' -d 'List every visible item\'s attributes (-d: and secrets); items of locked classes are listed as locked.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'export' -d 'Write a backup of the store to a file (administrators only).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'import' -d 'Restore a backup file into the store (administrators only).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'doctor' -d 'List, or delete, the items no keychain call can reach (administrators only).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'error' -d 'Print the name and meaning of each OSStatus.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'recovery-key' -d 'Manage the recovery key of a TPM store bound to PCRs.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'recover' -d 'Bring back a store whose PCRs changed, with its recovery key (re-seals to the current PCR values).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'tpm' -d 'TPM boot binding and anti-rollback (administrators).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal" -eq 1' -fa 'help' -d 'Show subcommand help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal status" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal status" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal status" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal status" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal unlock" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal unlock" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal unlock" passcode-stdin' -l 'passcode-stdin' -d 'Read the passcode from standard input (one line).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal unlock" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal unlock" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal lock" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal lock" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal lock" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal lock" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal passcode" -eq 1' -fa 'set' -d 'Set a passcode (errSecParam if one is set). Standard input: the new passcode.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal passcode" -eq 1' -fa 'change' -d 'Change the passcode. Standard input: the current passcode, then the new one, one per line.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal passcode" -eq 1' -fa 'remove' -d 'Remove the passcode. Standard input: the current passcode.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode set" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode set" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode set" passcode-stdin' -l 'passcode-stdin' -d 'Read the passcode from standard input (one line).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode set" allow-weak-passcode' -l 'allow-weak-passcode' -d 'Take a new passcode that fails the strength floor (short, repeated, a straight run, common).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode set" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode set" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode change" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode change" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode change" passcode-stdin' -l 'passcode-stdin' -d 'Read the passcodes from standard input (current, then new; one per line).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode change" allow-weak-passcode' -l 'allow-weak-passcode' -d 'Take a new passcode that fails the strength floor (short, repeated, a straight run, common).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode change" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode change" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode remove" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode remove" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode remove" passcode-stdin' -l 'passcode-stdin' -d 'Read the passcode from standard input (one line).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode remove" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal passcode remove" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal settings" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal settings" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal settings" t' -s 't' -d 'Lock after this many idle seconds.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal settings" no-auto-lock' -l 'no-auto-lock' -d 'Never lock on idle.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal settings" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal settings" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" a' -s 'a' -d 'Account name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" s' -s 's' -d 'Service name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" l' -s 'l' -d 'Label.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" j' -s 'j' -d 'Comment.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" D' -s 'D' -d 'Kind (description).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" G' -s 'G' -d 'Generic attribute value.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" c' -s 'c' -d 'Creator (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" C' -s 'C' -d 'Type (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" access-group' -l 'access-group' -d 'Access group (default: your first group).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" w' -s 'w' -d 'The password. Other local users can read command lines: prefer --password-stdin, or put -w last to be prompted.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" password-stdin' -l 'password-stdin' -d 'Read the password from standard input (all of it, less one trailing newline).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" X' -s 'X' -d 'The password in hexadecimal. Other local users can read command lines: prefer --hex-stdin.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" hex-stdin' -l 'hex-stdin' -d 'Read the password in hexadecimal from standard input (whitespace between digits is ignored).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" accessible' -l 'accessible' -d 'Accessibility class: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple\'s constant names and stored codes work too.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" U' -s 'U' -d 'Update the item if it exists.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-generic-password" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" a' -s 'a' -d 'Account name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" s' -s 's' -d 'Service name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" l' -s 'l' -d 'Label.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" j' -s 'j' -d 'Comment.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" D' -s 'D' -d 'Kind (description).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" G' -s 'G' -d 'Generic attribute value.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" c' -s 'c' -d 'Creator (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" C' -s 'C' -d 'Type (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" access-group' -l 'access-group' -d 'Access group (default: your first group).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" accessible' -l 'accessible' -d 'Accessibility class: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple\'s constant names and stored codes work too.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" w' -s 'w' -d 'Print only the password.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" g' -s 'g' -d 'Print the password (on stderr) after the attributes.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-generic-password" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" a' -s 'a' -d 'Account name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" s' -s 's' -d 'Service name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" l' -s 'l' -d 'Label.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" j' -s 'j' -d 'Comment.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" D' -s 'D' -d 'Kind (description).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" G' -s 'G' -d 'Generic attribute value.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" c' -s 'c' -d 'Creator (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" C' -s 'C' -d 'Type (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" access-group' -l 'access-group' -d 'Access group (default: your first group).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" accessible' -l 'accessible' -d 'Accessibility class: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple\'s constant names and stored codes work too.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-generic-password" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" a' -s 'a' -d 'Account name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" s' -s 's' -d 'Server name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" r' -s 'r' -d 'Protocol: a scheme name (https, http, ftp, ssh, imap, smtp, ldap, …) or a 4-character code (htps).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" P' -s 'P' -d 'Port number.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" p' -s 'p' -d 'Path.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" d' -s 'd' -d 'Security domain.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" t' -s 't' -d 'Authentication type: default, form, http, http-digest, ntlm, msn, dpa, rpa, or a 4-character code (dflt).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" l' -s 'l' -d 'Label.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" j' -s 'j' -d 'Comment.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" D' -s 'D' -d 'Kind (description).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" c' -s 'c' -d 'Creator (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" C' -s 'C' -d 'Type (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" access-group' -l 'access-group' -d 'Access group (default: your first group).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" w' -s 'w' -d 'The password. Other local users can read command lines: prefer --password-stdin, or put -w last to be prompted.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" password-stdin' -l 'password-stdin' -d 'Read the password from standard input (all of it, less one trailing newline).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" X' -s 'X' -d 'The password in hexadecimal. Other local users can read command lines: prefer --hex-stdin.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" hex-stdin' -l 'hex-stdin' -d 'Read the password in hexadecimal from standard input (whitespace between digits is ignored).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" accessible' -l 'accessible' -d 'Accessibility class: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple\'s constant names and stored codes work too.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" U' -s 'U' -d 'Update the item if it exists.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal add-internet-password" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" a' -s 'a' -d 'Account name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" s' -s 's' -d 'Server name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" r' -s 'r' -d 'Protocol: a scheme name (https, http, ftp, ssh, imap, smtp, ldap, …) or a 4-character code (htps).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" P' -s 'P' -d 'Port number.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" p' -s 'p' -d 'Path.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" d' -s 'd' -d 'Security domain.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" t' -s 't' -d 'Authentication type: default, form, http, http-digest, ntlm, msn, dpa, rpa, or a 4-character code (dflt).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" l' -s 'l' -d 'Label.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" j' -s 'j' -d 'Comment.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" D' -s 'D' -d 'Kind (description).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" c' -s 'c' -d 'Creator (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" C' -s 'C' -d 'Type (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" access-group' -l 'access-group' -d 'Access group (default: your first group).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" accessible' -l 'accessible' -d 'Accessibility class: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple\'s constant names and stored codes work too.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" w' -s 'w' -d 'Print only the password.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" g' -s 'g' -d 'Print the password (on stderr) after the attributes.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal find-internet-password" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" a' -s 'a' -d 'Account name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" s' -s 's' -d 'Server name.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" r' -s 'r' -d 'Protocol: a scheme name (https, http, ftp, ssh, imap, smtp, ldap, …) or a 4-character code (htps).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" P' -s 'P' -d 'Port number.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" p' -s 'p' -d 'Path.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" d' -s 'd' -d 'Security domain.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" t' -s 't' -d 'Authentication type: default, form, http, http-digest, ntlm, msn, dpa, rpa, or a 4-character code (dflt).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" l' -s 'l' -d 'Label.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" j' -s 'j' -d 'Comment.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" D' -s 'D' -d 'Kind (description).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" c' -s 'c' -d 'Creator (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" C' -s 'C' -d 'Type (a 4-character code).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" access-group' -l 'access-group' -d 'Access group (default: your first group).' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" accessible' -l 'accessible' -d 'Accessibility class: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple\'s constant names and stored codes work too.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal delete-internet-password" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal dump-keychain" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal dump-keychain" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal dump-keychain" d' -s 'd' -d 'Include the secrets.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal dump-keychain" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal dump-keychain" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal export" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal export" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal export" output' -l 'output' -d 'The backup file to write.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal export" passphrase-stdin' -l 'passphrase-stdin' -d 'Read the backup passphrase from standard input (one line).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal export" available-only' -l 'available-only' -d 'Leave out the items of locked classes instead of failing.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal export" allow-weak-passphrase' -l 'allow-weak-passphrase' -d 'Take a passphrase that fails the strength floor (short, repeated, a straight run, common).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal export" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal export" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal import" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal import" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal import" passphrase-stdin' -l 'passphrase-stdin' -d 'Read the backup passphrase from standard input (one line).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal import" replace' -l 'replace' -d 'Replace items that already exist instead of skipping them.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal import" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal import" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal doctor" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal doctor" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal doctor" delete-undecryptable' -l 'delete-undecryptable' -d 'Delete the rows named by ID (or every such row with --all), without decrypting them.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal doctor" all' -l 'all' -d 'With --delete-undecryptable: every row the listing shows.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal doctor" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal doctor" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal error" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal error" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal error" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal error" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recovery-key" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recovery-key" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal recovery-key" -eq 1' -fa 'create' -d 'Create a recovery key (administrators; replaces an earlier one) and show it once.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recovery-key create" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recovery-key create" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recovery-key create" passcode-stdin' -l 'passcode-stdin' -d 'Read the passcode from standard input (one line), when one is set.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recovery-key create" file' -l 'file' -d 'Write the key to this new file (0600) instead of the terminal.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recovery-key create" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recovery-key create" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recover" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recover" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recover" recovery-key-stdin' -l 'recovery-key-stdin' -d 'Read the recovery key (then the passcode, when one is set) from standard input, one per line.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recover" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal recover" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal tpm" -eq 1' -fa 'reseal' -d 'Seal the device and passcode objects again to the PCRs\' current values (or to --pcrs).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_positional "keyseal tpm" -eq 1' -fa 'accept-rollback' -d 'Keep a rolled-back store as it is (the failure count stays raised).'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm reseal" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm reseal" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm reseal" passcode-stdin' -l 'passcode-stdin' -d 'Read the passcode from standard input (one line), when one is set.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm reseal" pcrs' -l 'pcrs' -d 'Bind to these PCRs instead (comma-separated, 0-23), or none.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm reseal" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm reseal" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm accept-rollback" socket' -l 'socket' -d 'keyseald\'s socket.' -rfka ''
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm accept-rollback" json' -l 'json' -d 'Print one JSON document on standard output.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm accept-rollback" version' -l 'version' -d 'Show the version.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal tpm accept-rollback" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keyseal' -n '__keyseal_should_offer_completions_for_flags_or_options "keyseal help" version' -l 'version' -d 'Show the version.'
