#!/usr/bin/env bash
# Formats the Swift sources with swift-format and the checked-in .swift-format.
#   Scripts/format.sh          rewrite the files in place
#   Scripts/format.sh --check  change nothing; fail, naming each place, if a file is not formatted
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(Package.swift Sources Tests Fuzz Benchmarks/Package.swift Benchmarks/Benchmarks Benchmarks/Sources)
if [[ "${1:-}" == "--check" ]]; then
    swift format lint --strict --parallel --recursive "${paths[@]}"
    echo "format: every Swift file is formatted"
else
    swift format --in-place --parallel --recursive "${paths[@]}"
fi
