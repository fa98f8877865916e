#compdef keyseal

__keyseal_complete() {
    local -ar non_empty_completions=("${@:#(|:*)}")
    local -ar empty_completions=("${(M)@:#(|:*)}")
    _describe -V '' non_empty_completions -- empty_completions -P $'\'\''
}

__keyseal_custom_complete() {
    local -a completions
    completions=("${(@f)"$("${command_name}" "${@}" "${command_line[@]}")"}")
    if [[ "${#completions[@]}" -gt 1 ]]; then
        __keyseal_complete "${completions[@]:0:-1}"
    fi
}

__keyseal_cursor_index_in_current_word() {
    if [[ -z "${QIPREFIX}${IPREFIX}${PREFIX}" ]]; then
        printf 0
    else
        printf %s "${#${(z)LBUFFER}[-1]}"
    fi
}

_keyseal() {
    emulate -RL zsh -G
    setopt extendedglob nullglob numericglobsort
    unsetopt aliases banghist

    local -xr SAP_SHELL=zsh
    local -x SAP_SHELL_VERSION
    SAP_SHELL_VERSION="$(builtin emulate zsh -c 'printf %s "${ZSH_VERSION}"')"
    local -r SAP_SHELL_VERSION

    local context state state_descr line
    local -A opt_args

    local -r command_name="${words[1]}"
    local -ar command_line=("${words[@]}")
    local -ir current_word_index="$((CURRENT - 1))"

    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'status:Show the lock state, passcode, backend, auto-lock, failed attempts and item counts.'
            'unlock:Unlock the store with the passcode (also checks it when already unlocked).'
            'lock:Lock the store now.'
            'passcode:Set, change or remove the passcode.'
            'settings:Show or change the auto-lock timeout.'
            'add-generic-password:Add a generic password (with -U, update it if it exists).'
            'find-generic-password:Find a generic password.'
            'delete-generic-password:Delete every generic password that matches the flags given.'
            'add-internet-password:Add an internet password (with -U, update it if it exists).'
            'find-internet-password:Find an internet password.'
            'delete-internet-password:Delete every internet password that matches the flags given.'
            'dump-keychain:List every visible item'\''s attributes (-d: and secrets); items of locked classes are listed as locked.'
            'export:Write a backup of the store to a file (administrators only).'
            'import:Restore a backup file into the store (administrators only).'
            'doctor:List, or delete, the items no keychain call can reach (administrators only).'
            'error:Print the name and meaning of each OSStatus.'
            'create-key:Generate a key pair in keyseald (--hardware: inside the store'\''s TPM or token); print its public key.'
            'find-key:Find keys by tag, label or application label: attributes and public key.'
            'delete-key:Delete keys by tag, label or application label (a hardware key'\''s object too).'
            'sign:Sign standard input (or --input FILE) with a key; the signature on stdout.'
            'create-csr:A PKCS#10 certificate request signed by a stored key, as PEM.'
            'add-certificates:Add certificates from files (PEM, several per file, or DER).'
            'find-certificate:Find certificates by common name or e-mail address; print attributes, PEM or hashes.'
            'delete-certificate:Delete one certificate, by common name or by SHA-1 (or SHA-256) hash.'
            'find-identity:List identities: certificates whose private key is in the keychain (-v: valid ones only).'
            'recovery-key:Manage the recovery key of a TPM store bound to PCRs.'
            'recover:Bring back a store whose PCRs changed, with its recovery key (re-seals to the current PCR values).'
            'tpm:TPM boot binding and anti-rollback (administrators).'
            'attestation:Enroll the TPM'\''s attestation key (AK) with a CA: device and CA steps.'
            'attest:Attest that a key was generated in this TPM and cannot leave it (TPM2_Certify by the AK).'
            'verify-attestation:Check a key attestation (webauthn-tpm or json) against a challenge and a CA (no keyseald).'
            'ssh-mark:Mark a private key for keyseal ssh-agent, or with --off unmark it.'
            'ssh-agent:Serve the ssh-agent protocol with the keys marked --ssh, in the foreground until SIGTERM.'
            'help:Show subcommand help information.'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        status|unlock|lock|passcode|settings|add-generic-password|find-generic-password|delete-generic-password|add-internet-password|find-internet-password|delete-internet-password|dump-keychain|export|import|doctor|error|create-key|find-key|delete-key|sign|create-csr|add-certificates|find-certificate|delete-certificate|find-identity|recovery-key|recover|tpm|attestation|attest|verify-attestation|ssh-mark|ssh-agent|help)
            "_keyseal_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_keyseal_status() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_unlock() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--passcode-stdin[Read the passcode from standard input (one line).]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_lock() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_passcode() {
    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'set:Set a passcode (errSecParam if one is set). Standard input: the new passcode.'
            'change:Change the passcode. Standard input: the current passcode, then the new one, one per line.'
            'remove:Remove the passcode. Standard input: the current passcode.'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        set|change|remove)
            "_keyseal_passcode_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_keyseal_passcode_set() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--passcode-stdin[Read the passcode from standard input (one line).]'
        '--allow-weak-passcode[Take a new passcode that fails the strength floor (short, repeated, a straight run, common).]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_passcode_change() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--passcode-stdin[Read the passcodes from standard input (current, then new; one per line).]'
        '--allow-weak-passcode[Take a new passcode that fails the strength floor (short, repeated, a straight run, common).]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_passcode_remove() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--passcode-stdin[Read the passcode from standard input (one line).]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_settings() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '-t[Lock after this many idle seconds.]:seconds:'
        '--no-auto-lock[Never lock on idle.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_add-generic-password() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '-a[Account name.]:account:'
        '-s[Service name.]:service:'
        '-l[Label.]:label:'
        '-j[Comment.]:comment:'
        '-D[Kind (description).]:kind:'
        '-G[Generic attribute value.]:value:'
        '-c[Creator (a 4-character code).]:creator:'
        '-C[Type (a 4-character code).]:type:'
        '--access-group[Access group (default\: your first group).]:group:'
        '-w[The password. Other local users can read command lines\: prefer --password-stdin, or put -w last to be prompted.]:password:'
        '--password-stdin[Read the password from standard input (all of it, less one trailing newline).]'
        '-X[The password in hexadecimal. Other local users can read command lines\: prefer --hex-stdin.]:hex:'
        '--hex-stdin[Read the password in hexadecimal from standard input (whitespace between digits is ignored).]'
        '--accessible[Accessibility class\: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple'\''s constant names and stored codes work too.]:class:'
        '-U[Update the item if it exists.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_find-generic-password() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '-a[Account name.]:account:'
        '-s[Service name.]:service:'
        '-l[Label.]:label:'
        '-j[Comment.]:comment:'
        '-D[Kind (description).]:kind:'
        '-G[Generic attribute value.]:value:'
        '-c[Creator (a 4-character code).]:creator:'
        '-C[Type (a 4-character code).]:type:'
        '--access-group[Access group (default\: your first group).]:group:'
        '--accessible[Accessibility class\: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple'\''s constant names and stored codes work too.]:class:'
        '-w[Print only the password.]'
        '-g[Print the password (on stderr) after the attributes.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_delete-generic-password() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '-a[Account name.]:account:'
        '-s[Service name.]:service:'
        '-l[Label.]:label:'
        '-j[Comment.]:comment:'
        '-D[Kind (description).]:kind:'
        '-G[Generic attribute value.]:value:'
        '-c[Creator (a 4-character code).]:creator:'
        '-C[Type (a 4-character code).]:type:'
        '--access-group[Access group (default\: your first group).]:group:'
        '--accessible[Accessibility class\: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple'\''s constant names and stored codes work too.]:class:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_add-internet-password() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '-a[Account name.]:account:'
        '-s[Server name.]:server:'
        '-r[Protocol\: a scheme name (https, http, ftp, ssh, imap, smtp, ldap, …) or a 4-character code (htps).]:protocol:'
        '-P[Port number.]:port:'
        '-p[Path.]:path:'
        '-d[Security domain.]:domain:'
        '-t[Authentication type\: default, form, http, http-digest, ntlm, msn, dpa, rpa, or a 4-character code (dflt).]:type:'
        '-l[Label.]:label:'
        '-j[Comment.]:comment:'
        '-D[Kind (description).]:kind:'
        '-c[Creator (a 4-character code).]:creator:'
        '-C[Type (a 4-character code).]:type:'
        '--access-group[Access group (default\: your first group).]:group:'
        '-w[The password. Other local users can read command lines\: prefer --password-stdin, or put -w last to be prompted.]:password:'
        '--password-stdin[Read the password from standard input (all of it, less one trailing newline).]'
        '-X[The password in hexadecimal. Other local users can read command lines\: prefer --hex-stdin.]:hex:'
        '--hex-stdin[Read the password in hexadecimal from standard input (whitespace between digits is ignored).]'
        '--accessible[Accessibility class\: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple'\''s constant names and stored codes work too.]:class:'
        '-U[Update the item if it exists.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_find-internet-password() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '-a[Account name.]:account:'
        '-s[Server name.]:server:'
        '-r[Protocol\: a scheme name (https, http, ftp, ssh, imap, smtp, ldap, …) or a 4-character code (htps).]:protocol:'
        '-P[Port number.]:port:'
        '-p[Path.]:path:'
        '-d[Security domain.]:domain:'
        '-t[Authentication type\: default, form, http, http-digest, ntlm, msn, dpa, rpa, or a 4-character code (dflt).]:type:'
        '-l[Label.]:label:'
        '-j[Comment.]:comment:'
        '-D[Kind (description).]:kind:'
        '-c[Creator (a 4-character code).]:creator:'
        '-C[Type (a 4-character code).]:type:'
        '--access-group[Access group (default\: your first group).]:group:'
        '--accessible[Accessibility class\: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple'\''s constant names and stored codes work too.]:class:'
        '-w[Print only the password.]'
        '-g[Print the password (on stderr) after the attributes.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_delete-internet-password() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '-a[Account name.]:account:'
        '-s[Server name.]:server:'
        '-r[Protocol\: a scheme name (https, http, ftp, ssh, imap, smtp, ldap, …) or a 4-character code (htps).]:protocol:'
        '-P[Port number.]:port:'
        '-p[Path.]:path:'
        '-d[Security domain.]:domain:'
        '-t[Authentication type\: default, form, http, http-digest, ntlm, msn, dpa, rpa, or a 4-character code (dflt).]:type:'
        '-l[Label.]:label:'
        '-j[Comment.]:comment:'
        '-D[Kind (description).]:kind:'
        '-c[Creator (a 4-character code).]:creator:'
        '-C[Type (a 4-character code).]:type:'
        '--access-group[Access group (default\: your first group).]:group:'
        '--accessible[Accessibility class\: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple'\''s constant names and stored codes work too.]:class:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_dump-keychain() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '-d[Include the secrets.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_export() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--output[The backup file to write.]:file:'
        '--passphrase-stdin[Read the backup passphrase from standard input (one line).]'
        '--available-only[Leave out the items of locked classes instead of failing.]'
        '--allow-weak-passphrase[Take a passphrase that fails the strength floor (short, repeated, a straight run, common).]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_import() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        ':file:'
        '--passphrase-stdin[Read the backup passphrase from standard input (one line).]'
        '--replace[Replace items that already exist instead of skipping them.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_doctor() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--delete-undecryptable[Delete the rows named by ID (or every such row with --all), without decrypting them.]'
        '--all[With --delete-undecryptable\: every row the listing shows.]'
        '*:id:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_error() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '*:code:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_create-key() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--tag[The key'\''s application tag.]:tag:'
        '-l[A label.]:label:'
        '--type[ec256, ec384, ec521, rsa2048, rsa3072 or rsa4096.]:type:'
        '--hardware[Generate the key inside the store'\''s TPM or PKCS#11 token (ec256 only).]'
        '--accessible[Accessibility class\: when-unlocked, after-first-unlock, always, when-unlocked-this-device-only, after-first-unlock-this-device-only, always-this-device-only, when-passcode-set-this-device-only; Apple'\''s constant names and stored codes work too.]:class:'
        '--access-group[The access group.]:group:'
        '--ssh[Mark the key for keyseal ssh-agent (change it later with keyseal ssh-mark).]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_find-key() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--tag[The key'\''s application tag (kSecAttrApplicationTag).]:tag:'
        '-l[The key'\''s label.]:label:'
        '--hash[The key'\''s application label\: SHA-1 of its public key, in hex.]:klbl-hex:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_delete-key() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--tag[The key'\''s application tag (kSecAttrApplicationTag).]:tag:'
        '-l[The key'\''s label.]:label:'
        '--hash[The key'\''s application label\: SHA-1 of its public key, in hex.]:klbl-hex:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_sign() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--tag[The key'\''s application tag (kSecAttrApplicationTag).]:tag:'
        '-l[The key'\''s label.]:label:'
        '--hash[The key'\''s application label\: SHA-1 of its public key, in hex.]:klbl-hex:'
        '--algorithm[ecdsa-sha256, ecdsa-sha384, rsa-pkcs1-sha256 or rsa-pss-sha256.]:algorithm:'
        '--input[Read the input from a file.]:file:'
        '--digest[The input is already a digest.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_create-csr() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--tag[The key'\''s application tag (kSecAttrApplicationTag).]:tag:'
        '-l[The key'\''s label.]:label:'
        '--hash[The key'\''s application label\: SHA-1 of its public key, in hex.]:klbl-hex:'
        '--subject[The subject, as "CN=…,O=…" (CN, O, OU, C, L, ST, STREET, DC, E).]:subject:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_add-certificates() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '*:file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_find-certificate() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '-a[Every match, not only the first.]'
        '-c[The common name contains this.]:name:'
        '-e[The e-mail address.]:email:'
        '-p[Print the certificates as PEM.]'
        '-Z[Print each certificate'\''s SHA-256 and SHA-1 hashes.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_delete-certificate() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '-c[The common name contains this.]:name:'
        '-Z[The certificate'\''s SHA-1 or SHA-256 hash, hex.]:hash:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_find-identity() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '-v[Only identities whose certificate is within its validity period.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_recovery-key() {
    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'create:Create a recovery key (administrators; replaces an earlier one) and show it once.'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        create)
            "_keyseal_recovery-key_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_keyseal_recovery-key_create() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--passcode-stdin[Read the passcode from standard input (one line), when one is set.]'
        '--file[Write the key to this new file (0600) instead of the terminal.]:file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_recover() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--recovery-key-stdin[Read the recovery key (then the passcode, when one is set) from standard input, one per line.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_tpm() {
    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'reseal:Seal the device and passcode objects again to the PCRs'\'' current values (or to --pcrs).'
            'accept-rollback:Keep a rolled-back store as it is (the failure count stays raised).'
            'sign-policy:Sign the PCR policy of a boot state (build system; no keyseald needed).'
            'advance-policy-epoch:Withdraw every boot state signed for a lower policy epoch (device; no keyseald needed).'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        reseal|accept-rollback|sign-policy|advance-policy-epoch)
            "_keyseal_tpm_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_keyseal_tpm_reseal() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--passcode-stdin[Read the passcode from standard input (one line), when one is set.]'
        '--pcrs[Bind to these PCRs instead (comma-separated, 0-23), or none.]:pcrs:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_tpm_accept-rollback() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_tpm_sign-policy() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--pcrs[The PCRs the policy covers (comma-separated, 0-23), as the device'\''s --tpm-pcrs.]:pcrs:'
        '--pcr-values[The PCR values to sign.]:file:'
        '--current[Sign the values the TPM'\''s PCRs have now.]'
        '--tcti[The TPM to read with --current.]:tcti:'
        '--private-key[The signing key (PEM, RSA 2048 or P-256).]:file:'
        '--output[Where to write the signed policy (JSON).]:file:'
        '--epoch[Sign for this policy epoch (0-65534)\: withdrawn once a device'\''s epoch is above it.]:n:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_tpm_advance-policy-epoch() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--epoch[The policy epoch to move to (0-65534).]:n:'
        '--tcti[The TPM (default\: $KEYSEAL_TCTI, else device\:/dev/tpmrm0).]:tcti:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_attestation() {
    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'enroll-request:Write the EK certificate and the AK'\''s public area (JSON) for the CA (administrators).'
            'ca-challenge:CA side: check the EK certificate and make a credential to the EK for the AK (no keyseald).'
            'activate:Device side: TPM2_ActivateCredential of the CA'\''s challenge; writes the proof (administrators).'
            'ca-issue:CA side: check the device'\''s proof and issue the AK certificate (no keyseald).'
            'install:Store the AK certificate (and its CA chain) beside the store (administrators).'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        enroll-request|ca-challenge|activate|ca-issue|install)
            "_keyseal_attestation_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_keyseal_attestation_enroll-request() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--output[Write to this file instead of standard output.]:file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_attestation_ca-challenge() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--request[The device'\''s enrollment request.]:file:'
        '--ca-key[The CA'\''s private key (PEM).]:file:'
        '--ca-cert[The CA'\''s certificate (PEM).]:file:'
        '--ek-ca[EK CA certificates (PEM).]:file:'
        '--output[The challenge file to write.]:file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_attestation_activate() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--challenge[The CA'\''s challenge.]:file:'
        '--output[Write the proof here instead of standard output.]:file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_attestation_ca-issue() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--state[The state ca-challenge wrote.]:file:'
        '--proof[The device'\''s proof.]:file:'
        '--ca-key[The CA'\''s private key (PEM).]:file:'
        '--ca-cert[The CA'\''s certificate (PEM).]:file:'
        '--output[The AK certificate to write (PEM).]:file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_attestation_install() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--certificate[The AK certificate (PEM).]:file:'
        '--chain[The CA chain (PEM), issuer first.]:file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_attest() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--tag[The key'\''s application tag.]:tag:'
        '--challenge[The verifier'\''s challenge, in hex.]:hex:'
        '--format[webauthn-tpm or json.]:format:'
        '--output[Write to this file instead of standard output.]:file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_verify-attestation() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--input[The attestation.]:file:'
        '--challenge[The challenge, in hex.]:hex:'
        '--ca[The CA certificate(s) that issued the AK certificate (PEM).]:file:'
        '--public-key[The expected key (PEM).]:file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_ssh-mark() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '--json[Print one JSON document on standard output.]'
        '--tag[The key'\''s application tag (kSecAttrApplicationTag).]:tag:'
        '-l[The key'\''s label.]:label:'
        '--hash[The key'\''s application label\: SHA-1 of its public key, in hex.]:klbl-hex:'
        '--off[Remove the mark\: the agent no longer offers the key.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_ssh-agent() {
    local -i ret=1
    local -ar arg_specs=(
        '--socket[keyseald'\''s socket.]:path:'
        '-a[The agent'\''s socket (SSH_AUTH_SOCK).]:socket:'
        '-D[First print SSH_AUTH_SOCK=SOCKET; export SSH_AUTH_SOCK; on standard output.]'
        '--confirm[Ask before every signature through the askpass program, naming the key and the caller.]'
        '--askpass[The askpass program for --confirm (default\: $SSH_ASKPASS, else systemd-ask-password); exit 0 = allow.]:program:'
        '--allow-add[Let ssh-add import ECDSA keys into Keyseal (software keys, not extractable, marked).]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_keyseal_help() {
    local -i ret=1
    local -ar arg_specs=(
        '*:subcommands:'
        '--version[Show the version.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

if [[ "${funcstack[1]}" = _keyseal ]]; then
    _keyseal "${@}"
else
    compdef _keyseal keyseal
fi
