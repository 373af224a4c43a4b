#!/usr/bin/python3
"""Markdown tables from tools/measure-clusters' medians and tools/measure-osu's averages (shape,
round, coll, contender, bytes, us).

  tools/cluster_tables.py render RUN.tsv       print the tables
  tools/cluster_tables.py update FILE.md...    rewrite every generated block from its run
  tools/cluster_tables.py check FILE.md...     exit 1 when a block is not what its run gives

A generated block names its run (a path relative to the repository root):
  <!-- cluster-tables docs/results/clusters/RUN.tsv -->
  ...
  <!-- end cluster-tables -->

Per shape and MPI, one table: a row per collective, a column per size; each cell is the median
over rounds of the MPI alone divided by the MPI with the layer (above 1: the layer is faster),
and for Open MPI coll/han's in brackets. A bold cell is under 1.
"""

import io
import os
import re
import statistics
import sys
from collections import defaultdict
from contextlib import redirect_stdout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(<!-- cluster-tables (?P<run>[^ ]+) -->\n)(?P<body>.*?)(<!-- end cluster-tables -->)",
                   re.S)


def size_label(size):
    size = int(size)
    if size == 0:
        return "no data"
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def cell(ratio):
    text = f"{ratio:.2f}"
    return f"**{text}**" if text < "1.00" and len(text) == 4 else text


def render(path):
    times = defaultdict(list)  # (shape, coll, contender, size) -> medians over rounds
    for line in open(path):
        shape, _round, coll, contender, size, median = line.split("\t")
        times[(shape, coll, contender, int(size))].append(float(median))
    median = {key: statistics.median(values) for key, values in times.items()}
    shapes = sorted({key[0] for key in median}, key=lambda s: (s.split("x")[0], s))
    for shape in shapes:
        mpis = sorted({key[2].split("+")[0] for key in median if key[0] == shape})
        for mpi in mpis:
            colls = sorted({key[1] for key in median if key[0] == shape and key[2] == mpi})
            sizes = sorted({key[3] for key in median if key[0] == shape and key[2] == mpi})
            han = any(key[0] == shape and key[2] == "openmpi+han" for key in median)
            print(f"\n{shape}, {mpi}: x = {mpi} alone / with the layer"
                  + (" (coll/han forced / with the layer)" if han else "") + "\n")
            apps = all(coll.startswith("app:") for coll in colls)  # tools/measure-apps-clusters
            print("| | " + " | ".join("whole run" if apps and s == 0 else size_label(s)
                                      for s in sizes) + " |")
            print("|---|" + "---:|" * len(sizes))
            for coll in colls:
                cells = []
                for size in sizes:
                    layer = median.get((shape, coll, f"{mpi}+layer", size))
                    alone = median.get((shape, coll, mpi, size))
                    if not layer or alone is None:
                        cells.append("")
                        continue
                    text = cell(alone / layer)
                    other = median.get((shape, coll, "openmpi+han", size)) if han else None
                    if other is not None:
                        text += f" ({cell(other / layer)})"
                    cells.append(text)
                print(f"| {coll} | " + " | ".join(cells) + " |")


def rendered(path):
    text = io.StringIO()
    with redirect_stdout(text):
        render(os.path.join(ROOT, path))
    return text.getvalue().lstrip("\n")


def main(command, paths):
    if command == "render":
        for path in paths:
            render(path)
        return 0
    stale = []
    for page in paths:
        text = open(page).read()
        new = BLOCK.sub(lambda m: m.group(1) + rendered(m.group("run")) + m.group(4), text)
        if new != text:
            stale.append(page)
            if command == "update":
                open(page, "w").write(new)
    if command == "check" and stale:
        print("cluster tables differ from their runs in: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
