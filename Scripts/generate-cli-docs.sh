#!/usr/bin/env bash
# Regenerates the shipped man page (docs/man/keyseal.1) and shell completions (Scripts/completions/) from the
# keyseal command's own definition, with swift-argument-parser's tooling. Run after changing a command or flag;
# a test fails while the shipped completions differ from the built command's.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

# Debug builds of keyseal and of swift-argument-parser's generate-manual tool (the tool the generate-manual plugin
# runs; called directly, it does not build every executable of the package in release first).
swift build --product keyseal >/dev/null
swift build --product generate-manual >/dev/null
bin=$(swift build --show-bin-path)
for shell in bash zsh fish; do
  "$bin/keyseal" --generate-completion-script "$shell" >"Scripts/completions/keyseal.$shell"
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bin/generate-manual" "$bin/keyseal" --date "$(date -u +%Y-%m-%d)" --authors "The Keyseal authors" \
  --output-directory "$out" >/dev/null
[ -f "$out/keyseal.1" ] || { echo "generate-cli-docs: generate-manual wrote no keyseal.1" >&2; exit 1; }
mkdir -p docs/man
cp "$out/keyseal.1" docs/man/keyseal.1

# keyseald(8) and keyseal-secret-service(1), from their own definitions too.
swift build --product keyseald >/dev/null
swift build --product keyseal-secret-service >/dev/null
"$bin/generate-manual" "$bin/keyseald" --section 8 --date "$(date -u +%Y-%m-%d)" --authors "The Keyseal authors" \
  --output-directory "$out" >/dev/null
"$bin/generate-manual" "$bin/keyseal-secret-service" --date "$(date -u +%Y-%m-%d)" \
  --authors "The Keyseal authors" --output-directory "$out" >/dev/null
for page in keyseald.8 keyseal-secret-service.1; do
  [ -f "$out/$page" ] || { echo "generate-cli-docs: generate-manual wrote no $page" >&2; exit 1; }
  cp "$out/$page" "docs/man/$page"
done
# generate-manual leaves the discussion's blank lines in the mdoc source; groff (and lintian) want `.Pp` there.
sed -i 's/^$/.Pp/' docs/man/keyseal.1 docs/man/keyseald.8 docs/man/keyseal-secret-service.1
echo "generate-cli-docs: docs/man/{keyseal.1,keyseald.8,keyseal-secret-service.1} and" \
  "Scripts/completions/keyseal.{bash,zsh,fish} written"
