#!/usr/bin/env bash
# Benchmarks (release build): engine lookups and durable adds next to their SQLite floors, measured in the
# same run. Figures are printed and written as JSON into bench-results/. Pass --quick for a shorter run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash Scripts/bootstrap.sh
export PATH="/opt/swift/usr/bin:$PATH"
swift build -c release --product keyseal-bench >/dev/null
"$(swift build -c release --show-bin-path)/keyseal-bench" --output bench-results "$@"
