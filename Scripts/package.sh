#!/usr/bin/env bash
# Builds the Debian package keyseal_VERSION_amd64.deb from a release build (the Swift runtime linked statically) with
# debhelper (debian/), and prints its path last. Usage: Scripts/package.sh [--output DIR] (default .build/package).
# The version is Sources/KeysealModel/Version.swift's, which must be CHANGELOG.md's newest release; the package's
# changelog is made from that section, and the commit is written into the binaries (`keyseal --version`).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

output=.build/package
while [ $# -gt 0 ]; do
  case "$1" in
    --output) output=${2:?--output needs a directory}; shift 2 ;;
    --output=*) output=${1#--output=}; shift ;;
    -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package: unknown argument $1 (usage: Scripts/package.sh [--output DIR])" >&2; exit 64 ;;
  esac
done

for tool in dh dpkg-deb objcopy python3; do
  command -v "$tool" >/dev/null || { bash Scripts/bootstrap.sh >&2; break; }
done
command -v swift >/dev/null || { echo "package: Swift 6.3 is expected at /opt/swift" >&2; exit 1; }

version=$(sed -n 's/^ *package static let number = "\([^"]*\)"$/\1/p' Sources/KeysealModel/Version.swift)
[ -n "$version" ] || { echo "package: no version in Sources/KeysealModel/Version.swift" >&2; exit 1; }
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then
  commit="$commit-modified"
fi

# debian/changelog from CHANGELOG.md's newest release, which must be this version.
python3 - "$version" <<'PY'
import re, sys, email.utils, datetime
version = sys.argv[1]
text = open("CHANGELOG.md", encoding="utf-8").read()
releases = list(re.finditer(r"^## \[(\d[^\]]*)\] - (\d{4}-\d{2}-\d{2})$", text, re.M))
if not releases:
    sys.exit("package: CHANGELOG.md has no release section")
newest = releases[0]
if newest.group(1) != version:
    sys.exit(f"package: CHANGELOG.md's newest release is {newest.group(1)}, Version.swift says {version}")
end = releases[1].start() if len(releases) > 1 else len(text)
body = text[newest.end():end]
entries, current = [], None
for line in body.splitlines():
    if line.startswith("- "):
        current = [line[2:].strip()]
        entries.append(current)
    elif line.startswith("  ") and current is not None:
        current.append(line.strip())
    elif line.startswith("### "):
        current = None
        entries.append([line[4:].strip() + ":"])
lines = [f"keyseal ({version}) unstable; urgency=medium", ""]
for entry in entries:
    words, row = " ".join(entry).split(), "  *"
    for word in words:
        if len(row) + 1 + len(word) > 78:
            lines.append(row)
            row = "   "
        row += " " + word
    lines.append(row)
day = datetime.datetime.strptime(newest.group(2), "%Y-%m-%d").replace(tzinfo=datetime.timezone.utc)
lines += ["", f" -- The Keyseal Authors <keyseal@lists.keyseal.dev>  {email.utils.format_datetime(day)}", ""]
open("debian/changelog", "w", encoding="utf-8").write("\n".join(lines))
PY

mkdir -p "$output"
output=$(cd "$output" && pwd)
rm -f "$output/keyseal_${version}_amd64.deb"
# debian/rules directly (what dpkg-buildpackage -b runs, without a source package); dh_builddeb writes into $output.
export KEYSEAL_COMMIT=$commit KEYSEAL_PACKAGE_OUTPUT=$output
debian/rules clean >/dev/null
debian/rules binary
deb="$output/keyseal_${version}_amd64.deb"
[ -f "$deb" ] || { echo "package: dh_builddeb wrote no $deb" >&2; exit 1; }
echo "$deb"
