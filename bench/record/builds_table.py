#!/usr/bin/env python3
"""The table of two builds' times side by side, from the rows `lab_trace.sh` and
`repeat.sh` write (build, what was run, seconds; tab-separated): each build's median
with its runs, and the ratio of the medians.

    builds_table.py TIMES.tsv [COLUMN-NAME]
"""
import statistics
import sys

rows = [line.split("\t") for line in open(sys.argv[1]).read().splitlines() if line]
column = sys.argv[2] if len(sys.argv) > 2 else "what"
by = {}
for build, what, secs in rows:
    by.setdefault((what, build), []).append(float(secs))
print(f"| {column} | before: median (runs) | after: median (runs) | after / before |")
print("|---|---|---|---|")
for what in dict.fromkeys(w for w, _ in by):
    b, a = by[(what, "before")], by[(what, "after")]
    mb, ma = statistics.median(b), statistics.median(a)
    runs = lambda xs: ", ".join(f"{x:.1f}" for x in xs)
    print(f"| {what} | {mb:.1f} s ({runs(b)}) | {ma:.1f} s ({runs(a)}) | {ma / mb:.2f} |")
