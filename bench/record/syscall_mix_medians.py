#!/usr/bin/env python3
"""Medians of syscall_mix.c's runs, for raw_syscalls.sh and command_syscall_cost.sh.

Reads lines `MODE getpid G ns  stat S ns` (MODE, then syscall_mix.c's line) and
`life MODE T ms` (a recorder's whole life in MODE), and prints a markdown table of each
mode's median with its runs, in the order the modes came. Does not time anything.

Usage: syscall_mix_medians.py RUNS_FILE
"""
import statistics
import sys


def main(path):
    runs = {}
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "life":
            runs.setdefault((f"life {f[1]}", "ms"), []).append(float(f[2]))
        elif len(f) >= 6 and f[1] == "getpid" and f[4] == "stat":
            runs.setdefault((f"{f[0]} getpid", "ns"), []).append(float(f[2]))
            runs.setdefault((f"{f[0]} stat", "ns"), []).append(float(f[5]))
        else:
            sys.exit(f"{path}: not a run of syscall_mix: {line.strip()!r}")
    print("| mode | median | runs |\n|---|---|---|")
    for (mode, unit), v in runs.items():
        runs_text = ", ".join(f"{x:.0f}" for x in v)
        print(f"| {mode} | {statistics.median(v):.0f} {unit} | {runs_text} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    main(sys.argv[1])
