#!/usr/bin/env python3
"""Keeps README.md and docs/ true: every relative link and #anchor resolves, every block shown as
a whole file equals that file, README stays a five-minute read (at most 200 lines, no issue
numbers) and each docs page stays one topic (at most 450 lines).
The tunables page's table must equal what `shmcoll-info --variables-markdown` prints.
Usage: check_docs.py SOURCE_DIR [SHMCOLL_INFO]"""
import subprocess
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
pages = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
failures = []


def slug(heading):
    # GitHub's anchors: lower case, punctuation dropped (but hyphens and underscores), spaces to
    # hyphens.
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page):
    found = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (m := re.match(r"^#+ (.*)", line)):
            found.add(slug(m.group(1)))
    return found


for page in pages:
    text = page.read_text()
    name = page.relative_to(root)
    lines = text.count("\n")
    limit = 200 if page.name == "README.md" else 450
    if lines > limit:
        failures.append(f"{name}: {lines} lines, more than {limit}")
    if page.name == "README.md" and re.search(r"\bissues? \d", text, re.IGNORECASE):
        failures.append(f"{name}: names an issue number")
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            failures.append(f"{name}: link to {target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            failures.append(f"{name}: link to {target}: no such heading")
    for shown, block in re.findall(r"<!-- the file (\S+) -->\n```\w*\n(.*?)```", text, re.DOTALL):
        file = root / shown
        if not file.exists() or file.read_text() != block:
            failures.append(f"{name}: the block shown as {shown} differs from the file")

if len(sys.argv) > 2:
    printed = subprocess.run([sys.argv[2], "--variables-markdown"], capture_output=True, text=True,
                             check=True).stdout
    page = (root / "docs" / "tunables.md").read_text()
    marker = "<!-- shmcoll-info --variables-markdown -->\n"
    if marker not in page or not page.split(marker, 1)[1].startswith(printed):
        failures.append("docs/tunables.md: the table differs from shmcoll-info --variables-markdown")

for failure in failures:
    print("FAIL:", failure)
print(f"{len(pages)} pages checked, {len(failures)} failures")
sys.exit(1 if failures else 0)
