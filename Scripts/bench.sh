#!/usr/bin/env bash
# Benchmarks (release build), each figure next to its floor or target, measured in the same run: engine lookups
# and durable adds next to their SQLite floors; lookups through a keyseald process (1 and 8 clients) next to a
# two-process unix-socket ping-pong, and the daemon's resident memory; unlock and store open per backend (host key,
# swtpm, SoftHSM2). Figures are printed and written as JSON into bench-results/.
# Options: --quick (shorter), --only engine,daemon,unlock (some sections), --output DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
bash Scripts/bootstrap.sh
export PATH="/opt/swift/usr/bin:$PATH"
swift build -c release --product keyseald >/dev/null
swift build -c release --product keyseal-bench >/dev/null
"$(swift build -c release --show-bin-path)/keyseal-bench" --output bench-results "$@"
