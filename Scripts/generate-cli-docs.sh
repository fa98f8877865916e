#!/usr/bin/env bash
# Regenerates the shipped man page (docs/man/keyseal.1) and shell completions (Scripts/completions/) from the
# keyseal command's own definition, with swift-argument-parser's tooling. Run after changing a command or flag;
# a test fails while the shipped completions differ from the built command's.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

swift build -c release --product keyseal >/dev/null
bin=$(swift build -c release --show-bin-path)
for shell in bash zsh fish; do
  "$bin/keyseal" --generate-completion-script "$shell" >"Scripts/completions/keyseal.$shell"
done

# The manual: swift-argument-parser's generate-manual plugin (it writes every executable's page; keep keyseal's).
swift package --allow-writing-to-package-directory generate-manual --date "$(date -u +%Y-%m-%d)" \
  --authors "The Keyseal authors" >/dev/null
page=$(find .build/plugins -path '*GenerateManual*' -name keyseal.1 | head -n 1)
[ -n "$page" ] || { echo "generate-cli-docs: the plugin wrote no keyseal.1" >&2; exit 1; }
mkdir -p docs/man
cp "$page" docs/man/keyseal.1
echo "generate-cli-docs: docs/man/keyseal.1 and Scripts/completions/keyseal.{bash,zsh,fish} written"
