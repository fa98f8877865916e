#!/usr/bin/env python3
"""Checks that the repository's docs stand alone: every relative link and #anchor between them resolves, and no
document or source comment cites a file that is not in the repository."""
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent
docs = [root / "README.md", root / "CONTRIBUTING.md", root / "SECURITY.md"] + sorted((root / "docs").glob("*.md"))
outside = re.compile(r"\b(CLI|DESIGN|FACTS|SECURITY-COMPAT|HARDWARE-NOTES|STYLE)\.md\b|\.\./shared/")


def anchors(path):
    """GitHub's anchors for a Markdown file's headings."""
    found = set()
    counts = {}
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        text = line.lstrip("#").strip()
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


problems = []
for doc in docs:
    text = doc.read_text()
    for number, line in enumerate(text.splitlines(), 1):
        if outside.search(line):
            problems.append(f"{doc.relative_to(root)}:{number}: cites a file outside the repository")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path_part, _, anchor = target.partition("#")
        path = (doc.parent / path_part).resolve() if path_part else doc
        if not path.exists():
            problems.append(f"{doc.relative_to(root)}: link to missing {target}")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            problems.append(f"{doc.relative_to(root)}: link to missing heading {target}")

tracked = subprocess.run(
    ["git", "ls-files", "Sources", "Tests", "Scripts", "Benchmarks", ".ci"], cwd=root, capture_output=True, text=True
).stdout.split()
for name in tracked:
    if name == "Scripts/check-docs.py" or not name.endswith((".swift", ".sh", ".py", ".c", ".h")):
        continue
    for number, line in enumerate((root / name).read_text(errors="replace").splitlines(), 1):
        if outside.search(line):
            problems.append(f"{name}:{number}: cites a file outside the repository")

for problem in problems:
    print(problem)
if problems:
    sys.exit(f"check-docs: {len(problems)} problem(s)")
print(f"check-docs: {len(docs)} documents stand alone; every link resolves")
