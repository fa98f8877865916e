#!/usr/bin/env bash
# Builds and runs the libFuzzer targets of Fuzz/ (CONTRIBUTING.md, "Fuzzing").
#   Scripts/fuzz.sh [TARGET…] [--seconds N] [--max-len BYTES]
# Targets: wire-request wire-response ssh-agent attestation-cbor (default: all, in that order). Each runs for N
# seconds (default 60) on its corpus in .build-fuzz/corpus/TARGET, seeded with valid encodings the target writes
# itself. Fails, naming the reproducer in .build-fuzz/artifacts/TARGET/, if libFuzzer finds a crash.
#
# No `swift build`: swiftc compiles the few modules a target needs (KeysealModel, KeysealClient, or single source
# files) with -sanitize=fuzzer,address into .build-fuzz/. swiftc is taken from SWIFTC, else /opt/swift/usr/bin, else
# PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(wire-request wire-response ssh-agent attestation-cbor)
seconds=60
max_len=4096
targets=()
while (($#)); do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --max-len) max_len="$2"; shift 2 ;;
        -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
        -*) echo "fuzz: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
((${#targets[@]})) || targets=("${all_targets[@]}")

if [[ -z "${SWIFTC:-}" ]]; then
    if [[ -x /opt/swift/usr/bin/swiftc ]]; then SWIFTC=/opt/swift/usr/bin/swiftc; else SWIFTC=swiftc; fi
fi
build=.build-fuzz
mkdir -p "$build/modules"
flags=(-sanitize=fuzzer,address -parse-as-library -swift-version 6 -enable-upcoming-feature MemberImportVisibility
    -package-name Keyseal -I "$build/modules" -I Sources/CKeysealSys)

# A library module from Sources/NAME/*.swift, rebuilt only when a source, or a module it imports (the further
# arguments), is newer than its archive.
module() {
    local name="$1" archive="$build/modules/lib$1.a"
    shift
    if [[ -f "$archive" ]] && [[ -z "$(find "Sources/$name" -name '*.swift' -newer "$archive")" ]]; then
        local dependency stale=""
        for dependency in "$@"; do
            [[ "$build/modules/lib$dependency.a" -nt "$archive" ]] && stale=1
        done
        [[ -z "$stale" ]] && return
    fi
    echo "fuzz: compiling $name"
    "$SWIFTC" "${flags[@]}" -module-name "$name" -emit-module -emit-module-path "$build/modules/$name.swiftmodule" \
        -emit-library -static -o "$archive" "Sources/$name"/*.swift
}

# The fuzz executable for one target: its file in Fuzz/ and what it reads.
executable() {
    local target="$1" output="$build/$1"
    case "$target" in
        wire-request | wire-response)
            module KeysealModel
            module KeysealClient KeysealModel
            local file=Fuzz/WireRequestFuzz.swift
            [[ "$target" == wire-response ]] && file=Fuzz/WireResponseFuzz.swift
            set -- "$file" "$build/modules/libKeysealClient.a" "$build/modules/libKeysealModel.a"
            ;;
        ssh-agent) set -- Fuzz/SSHAgentFuzz.swift Sources/keyseal/SSHAgentWire.swift ;;
        attestation-cbor) set -- Fuzz/AttestationCBORFuzz.swift Sources/KeysealAttestation/CBOR.swift ;;
        *) echo "fuzz: unknown target $target (targets: ${all_targets[*]})" >&2; exit 2 ;;
    esac
    echo "fuzz: compiling $target"
    "$SWIFTC" "${flags[@]}" -use-ld=lld -module-name "fuzz_${target//-/_}" "$@" -o "$output"
}

failed=()
for target in "${targets[@]}"; do
    executable "$target"
    corpus="$build/corpus/$target"
    artifacts="$build/artifacts/$target/"
    log="$build/logs/$target.log"
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
    echo "fuzz: running $target for ${seconds}s (log: $log)"
    status=0
    # No Swift backtracer: its reading of the crashed process trips AddressSanitizer and hides the trap's message.
    SWIFT_BACKTRACE=enable=no KEYSEAL_FUZZ_SEEDS="$corpus" "$build/$target" -max_total_time="$seconds" -max_len="$max_len" \
        -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" \
        >"$log" 2>&1 || status=$?
    grep -E '^#[0-9]+[[:space:]]+INITED' "$log" | tail -1 | sed "s/^/fuzz: $target: start /" || true
    grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 | sed "s/^/fuzz: $target: end   /" || true
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' "$log" |
        sed "s/^/fuzz: $target: /" || true
    if ((status != 0)); then
        echo "fuzz: $target FAILED (exit $status); reproducer:" >&2
        grep -E 'Test unit written to|^SUMMARY' "$log" >&2 || tail -20 "$log" >&2
        failed+=("$target")
    fi
done

if ((${#failed[@]})); then
    echo "fuzz: crashes in ${failed[*]}; rerun one with .build-fuzz/TARGET ARTIFACT" >&2
    exit 1
fi
echo "fuzz: no crash in ${targets[*]}"
