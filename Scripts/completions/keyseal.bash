#!/bin/bash

__keyseal_cursor_index_in_current_word() {
    local remaining="${COMP_LINE}"

    local word
    for word in "${COMP_WORDS[@]::COMP_CWORD}"; do
        remaining="${remaining##*([[:space:]])"${word}"*([[:space:]])}"
    done

    local -ir index="$((COMP_POINT - ${#COMP_LINE} + ${#remaining}))"
    if [[ "${index}" -le 0 ]]; then
        printf 0
    else
        printf %s "${index}"
    fi
}

# positional arguments:
#
# - 1: the current (sub)command's count of positional arguments
#
# required variables:
#
# - repeating_flags: the repeating flags that the current (sub)command can accept
# - non_repeating_flags: the non-repeating flags that the current (sub)command can accept
# - repeating_options: the repeating options that the current (sub)command can accept
# - non_repeating_options: the non-repeating options that the current (sub)command can accept
# - positional_number: value ignored
# - unparsed_words: unparsed words from the current command line
#
# modified variables:
#
# - non_repeating_flags: remove flags for this (sub)command that are already on the command line
# - non_repeating_options: remove options for this (sub)command that are already on the command line
# - positional_number: set to the current positional number
# - unparsed_words: remove all flags, options, and option values for this (sub)command
__keyseal_offer_flags_options() {
    local -ir positional_count="${1}"
    positional_number=0

    local was_flag_option_terminator_seen=false
    local is_parsing_option_value=false

    local -ar unparsed_word_indices=("${!unparsed_words[@]}")
    local -i word_index
    for word_index in "${unparsed_word_indices[@]}"; do
        if "${is_parsing_option_value}"; then
            # This word is an option value:
            # Reset marker for next word iff not currently the last word
            [[ "${word_index}" -ne "${unparsed_word_indices[${#unparsed_word_indices[@]} - 1]}" ]] && is_parsing_option_value=false
            unset "unparsed_words[${word_index}]"
            # Do not process this word as a flag or an option
            continue
        fi

        local word="${unparsed_words["${word_index}"]}"
        if ! "${was_flag_option_terminator_seen}"; then
            case "${word}" in
            --)
                unset "unparsed_words[${word_index}]"
                # by itself -- is a flag/option terminator, but if it is the last word, it is the start of a completion
                if [[ "${word_index}" -ne "${unparsed_word_indices[${#unparsed_word_indices[@]} - 1]}" ]]; then
                    was_flag_option_terminator_seen=true
                fi
                continue
                ;;
            -*)
                # ${word} is a flag or an option
                # If ${word} is an option, mark that the next word to be parsed is an option value
                local option
                for option in "${repeating_options[@]}" "${non_repeating_options[@]}"; do
                    [[ "${word}" = "${option}" ]] && is_parsing_option_value=true && break
                done

                # Remove ${word} from ${non_repeating_flags} or ${non_repeating_options} so it isn't offered again
                local not_found=true
                local -i index
                for index in "${!non_repeating_flags[@]}"; do
                    if [[ "${non_repeating_flags[${index}]}" = "${word}" ]]; then
                        unset "non_repeating_flags[${index}]"
                        non_repeating_flags=("${non_repeating_flags[@]}")
                        not_found=false
                        break
                    fi
                done
                if "${not_found}"; then
                    for index in "${!non_repeating_flags[@]}"; do
                        if [[ "${non_repeating_flags[${index}]}" = "${word}" ]]; then
                            unset "non_repeating_flags[${index}]"
                            non_repeating_flags=("${non_repeating_flags[@]}")
                            break
                        fi
                    done
                fi
                unset "unparsed_words[${word_index}]"
                continue
                ;;
            esac
        fi

        # ${word} is neither a flag, nor an option, nor an option value
        if [[ "${positional_number}" -lt "${positional_count}" || "${positional_count}" -lt 0 ]]; then
            # ${word} is a positional
            ((positional_number++))
            unset "unparsed_words[${word_index}]"
        else
            if [[ -z "${word}" ]]; then
                # Could be completing a flag, option, or subcommand
                positional_number=-1
            else
                # ${word} is a subcommand or invalid, so stop processing this (sub)command
                positional_number=-2
            fi
            break
        fi
    done

    unparsed_words=("${unparsed_words[@]}")

    if\
        ! "${was_flag_option_terminator_seen}"\
        && ! "${is_parsing_option_value}"\
        && [[ ("${cur}" = -* && "${positional_number}" -ge 0) || "${positional_number}" -eq -1 ]]
    then
        COMPREPLY+=($(compgen -W "${repeating_flags[*]} ${non_repeating_flags[*]} ${repeating_options[*]} ${non_repeating_options[*]}" -- "${cur}"))
    fi
}

__keyseal_add_completions() {
    local completion
    while IFS='' read -r completion; do
        COMPREPLY+=("${completion}")
    done < <(IFS=$'\n' compgen "${@}" -- "${cur}")
}

__keyseal_custom_complete() {
    if [[ -n "${cur}" || -z ${COMP_WORDS[${COMP_CWORD}]} || "${COMP_LINE:${COMP_POINT}:1}" != ' ' ]]; then
        local -ar words=("${COMP_WORDS[@]}")
    else
        local -ar words=("${COMP_WORDS[@]::${COMP_CWORD}}" '' "${COMP_WORDS[@]:${COMP_CWORD}}")
    fi

    "${COMP_WORDS[0]}" "${@}" "${words[@]}"
}

_keyseal() {
    local state
    state="$(shopt -p;shopt -po)"
    trap "${state//$'\n'/;}" RETURN
    shopt -s extglob
    set +o history +o posix

    local -xr SAP_SHELL=bash
    local -x SAP_SHELL_VERSION
    SAP_SHELL_VERSION="$(IFS='.';printf %s "${BASH_VERSINFO[*]}")"
    local -r SAP_SHELL_VERSION

    local -r cur="${2}"
    local -r prev="${3}"

    local -i positional_number
    local -a unparsed_words=("${COMP_WORDS[@]:1:${COMP_CWORD}}")

    local -a repeating_flags=()
    local -a non_repeating_flags=(--version -h --help)
    local -a repeating_options=()
    local -a non_repeating_options=()
    __keyseal_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    status|unlock|lock|passcode|settings|add-generic-password|find-generic-password|delete-generic-password|add-internet-password|find-internet-password|delete-internet-password|dump-keychain|export|import|doctor|error|create-key|find-key|delete-key|sign|create-csr|add-certificates|find-certificate|delete-certificate|find-identity|recovery-key|recover|tpm|attestation|attest|verify-attestation|ssh-mark|ssh-agent|help)
        # Offer subcommand argument completions
        "_keyseal_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'status unlock lock passcode settings add-generic-password find-generic-password delete-generic-password add-internet-password find-internet-password delete-internet-password dump-keychain export import doctor error create-key find-key delete-key sign create-csr add-certificates find-certificate delete-certificate find-identity recovery-key recover tpm attestation attest verify-attestation ssh-mark ssh-agent help' -- "${cur}"))
        ;;
    esac
}

_keyseal_status() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_unlock() {
    repeating_flags=()
    non_repeating_flags=(--json --passcode-stdin --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_lock() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_passcode() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=()
    __keyseal_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    set|change|remove)
        # Offer subcommand argument completions
        "_keyseal_passcode_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'set change remove' -- "${cur}"))
        ;;
    esac
}

_keyseal_passcode_set() {
    repeating_flags=()
    non_repeating_flags=(--json --passcode-stdin --allow-weak-passcode --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_passcode_change() {
    repeating_flags=()
    non_repeating_flags=(--json --passcode-stdin --allow-weak-passcode --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_passcode_remove() {
    repeating_flags=()
    non_repeating_flags=(--json --passcode-stdin --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_settings() {
    repeating_flags=()
    non_repeating_flags=(--json --no-auto-lock --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket -t)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '-t')
        return
        ;;
    esac
}

_keyseal_add-generic-password() {
    repeating_flags=()
    non_repeating_flags=(--json --password-stdin --hex-stdin -U --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket -a -s -l -j -D -G -c -C --access-group -w -X --accessible)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '-a')
        return
        ;;
    '-s')
        return
        ;;
    '-l')
        return
        ;;
    '-j')
        return
        ;;
    '-D')
        return
        ;;
    '-G')
        return
        ;;
    '-c')
        return
        ;;
    '-C')
        return
        ;;
    '--access-group')
        return
        ;;
    '-w')
        return
        ;;
    '-X')
        return
        ;;
    '--accessible')
        return
        ;;
    esac
}

_keyseal_find-generic-password() {
    repeating_flags=()
    non_repeating_flags=(--json -w -g --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket -a -s -l -j -D -G -c -C --access-group --accessible)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '-a')
        return
        ;;
    '-s')
        return
        ;;
    '-l')
        return
        ;;
    '-j')
        return
        ;;
    '-D')
        return
        ;;
    '-G')
        return
        ;;
    '-c')
        return
        ;;
    '-C')
        return
        ;;
    '--access-group')
        return
        ;;
    '--accessible')
        return
        ;;
    esac
}

_keyseal_delete-generic-password() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket -a -s -l -j -D -G -c -C --access-group --accessible)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '-a')
        return
        ;;
    '-s')
        return
        ;;
    '-l')
        return
        ;;
    '-j')
        return
        ;;
    '-D')
        return
        ;;
    '-G')
        return
        ;;
    '-c')
        return
        ;;
    '-C')
        return
        ;;
    '--access-group')
        return
        ;;
    '--accessible')
        return
        ;;
    esac
}

_keyseal_add-internet-password() {
    repeating_flags=()
    non_repeating_flags=(--json --password-stdin --hex-stdin -U --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket -a -s -r -P -p -d -t -l -j -D -c -C --access-group -w -X --accessible)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '-a')
        return
        ;;
    '-s')
        return
        ;;
    '-r')
        return
        ;;
    '-P')
        return
        ;;
    '-p')
        return
        ;;
    '-d')
        return
        ;;
    '-t')
        return
        ;;
    '-l')
        return
        ;;
    '-j')
        return
        ;;
    '-D')
        return
        ;;
    '-c')
        return
        ;;
    '-C')
        return
        ;;
    '--access-group')
        return
        ;;
    '-w')
        return
        ;;
    '-X')
        return
        ;;
    '--accessible')
        return
        ;;
    esac
}

_keyseal_find-internet-password() {
    repeating_flags=()
    non_repeating_flags=(--json -w -g --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket -a -s -r -P -p -d -t -l -j -D -c -C --access-group --accessible)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '-a')
        return
        ;;
    '-s')
        return
        ;;
    '-r')
        return
        ;;
    '-P')
        return
        ;;
    '-p')
        return
        ;;
    '-d')
        return
        ;;
    '-t')
        return
        ;;
    '-l')
        return
        ;;
    '-j')
        return
        ;;
    '-D')
        return
        ;;
    '-c')
        return
        ;;
    '-C')
        return
        ;;
    '--access-group')
        return
        ;;
    '--accessible')
        return
        ;;
    esac
}

_keyseal_delete-internet-password() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket -a -s -r -P -p -d -t -l -j -D -c -C --access-group --accessible)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '-a')
        return
        ;;
    '-s')
        return
        ;;
    '-r')
        return
        ;;
    '-P')
        return
        ;;
    '-p')
        return
        ;;
    '-d')
        return
        ;;
    '-t')
        return
        ;;
    '-l')
        return
        ;;
    '-j')
        return
        ;;
    '-D')
        return
        ;;
    '-c')
        return
        ;;
    '-C')
        return
        ;;
    '--access-group')
        return
        ;;
    '--accessible')
        return
        ;;
    esac
}

_keyseal_dump-keychain() {
    repeating_flags=()
    non_repeating_flags=(--json -d --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_export() {
    repeating_flags=()
    non_repeating_flags=(--json --passphrase-stdin --available-only --allow-weak-passphrase --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --output)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--output')
        return
        ;;
    esac
}

_keyseal_import() {
    repeating_flags=()
    non_repeating_flags=(--json --passphrase-stdin --replace --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_doctor() {
    repeating_flags=()
    non_repeating_flags=(--json --delete-undecryptable --all --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options -1

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_error() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options -1

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_create-key() {
    repeating_flags=()
    non_repeating_flags=(--json --hardware --ssh --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --tag -l --type --accessible --access-group)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--tag')
        return
        ;;
    '-l')
        return
        ;;
    '--type')
        return
        ;;
    '--accessible')
        return
        ;;
    '--access-group')
        return
        ;;
    esac
}

_keyseal_find-key() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --tag -l --hash)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--tag')
        return
        ;;
    '-l')
        return
        ;;
    '--hash')
        return
        ;;
    esac
}

_keyseal_delete-key() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --tag -l --hash)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--tag')
        return
        ;;
    '-l')
        return
        ;;
    '--hash')
        return
        ;;
    esac
}

_keyseal_sign() {
    repeating_flags=()
    non_repeating_flags=(--json --digest --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --tag -l --hash --algorithm --input)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--tag')
        return
        ;;
    '-l')
        return
        ;;
    '--hash')
        return
        ;;
    '--algorithm')
        return
        ;;
    '--input')
        return
        ;;
    esac
}

_keyseal_create-csr() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --tag -l --hash --subject)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--tag')
        return
        ;;
    '-l')
        return
        ;;
    '--hash')
        return
        ;;
    '--subject')
        return
        ;;
    esac
}

_keyseal_add-certificates() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options -1

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_find-certificate() {
    repeating_flags=()
    non_repeating_flags=(--json -a -p -Z --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket -c -e)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '-c')
        return
        ;;
    '-e')
        return
        ;;
    esac
}

_keyseal_delete-certificate() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket -c -Z)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '-c')
        return
        ;;
    '-Z')
        return
        ;;
    esac
}

_keyseal_find-identity() {
    repeating_flags=()
    non_repeating_flags=(--json -v --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_recovery-key() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=()
    __keyseal_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    create)
        # Offer subcommand argument completions
        "_keyseal_recovery-key_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'create' -- "${cur}"))
        ;;
    esac
}

_keyseal_recovery-key_create() {
    repeating_flags=()
    non_repeating_flags=(--json --passcode-stdin --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --file)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--file')
        return
        ;;
    esac
}

_keyseal_recover() {
    repeating_flags=()
    non_repeating_flags=(--json --recovery-key-stdin --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_tpm() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=()
    __keyseal_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    reseal|accept-rollback|sign-policy|advance-policy-epoch)
        # Offer subcommand argument completions
        "_keyseal_tpm_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'reseal accept-rollback sign-policy advance-policy-epoch' -- "${cur}"))
        ;;
    esac
}

_keyseal_tpm_reseal() {
    repeating_flags=()
    non_repeating_flags=(--json --passcode-stdin --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --pcrs)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--pcrs')
        return
        ;;
    esac
}

_keyseal_tpm_accept-rollback() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    esac
}

_keyseal_tpm_sign-policy() {
    repeating_flags=()
    non_repeating_flags=(--json --current --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --pcrs --pcr-values --tcti --private-key --output --epoch)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--pcrs')
        return
        ;;
    '--pcr-values')
        return
        ;;
    '--tcti')
        return
        ;;
    '--private-key')
        return
        ;;
    '--output')
        return
        ;;
    '--epoch')
        return
        ;;
    esac
}

_keyseal_tpm_advance-policy-epoch() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --epoch --tcti)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--epoch')
        return
        ;;
    '--tcti')
        return
        ;;
    esac
}

_keyseal_attestation() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=()
    __keyseal_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    enroll-request|ca-challenge|activate|ca-issue|install)
        # Offer subcommand argument completions
        "_keyseal_attestation_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'enroll-request ca-challenge activate ca-issue install' -- "${cur}"))
        ;;
    esac
}

_keyseal_attestation_enroll-request() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --output)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--output')
        return
        ;;
    esac
}

_keyseal_attestation_ca-challenge() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --request --ca-key --ca-cert --ek-ca --output)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--request')
        return
        ;;
    '--ca-key')
        return
        ;;
    '--ca-cert')
        return
        ;;
    '--ek-ca')
        return
        ;;
    '--output')
        return
        ;;
    esac
}

_keyseal_attestation_activate() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --challenge --output)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--challenge')
        return
        ;;
    '--output')
        return
        ;;
    esac
}

_keyseal_attestation_ca-issue() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --state --proof --ca-key --ca-cert --output)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--state')
        return
        ;;
    '--proof')
        return
        ;;
    '--ca-key')
        return
        ;;
    '--ca-cert')
        return
        ;;
    '--output')
        return
        ;;
    esac
}

_keyseal_attestation_install() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --certificate --chain)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--certificate')
        return
        ;;
    '--chain')
        return
        ;;
    esac
}

_keyseal_attest() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --tag --challenge --format --output)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--tag')
        return
        ;;
    '--challenge')
        return
        ;;
    '--format')
        return
        ;;
    '--output')
        return
        ;;
    esac
}

_keyseal_verify-attestation() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --input --challenge --ca --public-key)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--input')
        return
        ;;
    '--challenge')
        return
        ;;
    '--ca')
        return
        ;;
    '--public-key')
        return
        ;;
    esac
}

_keyseal_ssh-mark() {
    repeating_flags=()
    non_repeating_flags=(--json --off --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket --tag -l --hash)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '--tag')
        return
        ;;
    '-l')
        return
        ;;
    '--hash')
        return
        ;;
    esac
}

_keyseal_ssh-agent() {
    repeating_flags=()
    non_repeating_flags=(-D --confirm --allow-add --version -h --help)
    repeating_options=()
    non_repeating_options=(--socket -a --askpass)
    __keyseal_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--socket')
        return
        ;;
    '-a')
        return
        ;;
    '--askpass')
        return
        ;;
    esac
}

_keyseal_help() {
    repeating_flags=()
    non_repeating_flags=(--version)
    repeating_options=()
    non_repeating_options=()
    __keyseal_offer_flags_options -1
}

complete -o filenames -F _keyseal keyseal
