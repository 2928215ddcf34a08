#!/usr/bin/env python3
"""How long `slowlab diagnose -- CMD` takes to answer, and to exit, for each of several
builds: the builds take turns, ROUNDS (5) rounds, and the medians are printed. The answer's
time is when its first line ("why `CMD` ... took") reaches stdout; the exit's, when the
process has exited (it waits for the eBPF recorder's programs to be detached).
BACKEND=perf|bpf passes `--backend` (the default backend otherwise). Each run writes
`slowlab-diagnose/` in the current directory, as `diagnose` does: run it from a scratch one.

Usage (root): python3 bench/record/answer_time.py SLOWLAB... -- CMD [ARGS]
  e.g. python3 bench/record/answer_time.py /tmp/old/slowlab target/test-release/slowlab \\
         -- ./lock_chain
"""
import os
import subprocess
import sys
import time


def main():
    if "--" not in sys.argv[1:]:
        sys.exit(__doc__)
    split = sys.argv.index("--")
    builds, cmd = sys.argv[1:split], sys.argv[split + 1:]
    if not builds or not cmd:
        sys.exit(__doc__)
    rounds = int(os.environ.get("ROUNDS", "5"))
    backend = ["--backend", os.environ["BACKEND"]] if os.environ.get("BACKEND") else []
    times = {b: [] for b in builds}
    for _ in range(rounds):
        for b in builds:
            start = time.monotonic()
            p = subprocess.Popen([b, "diagnose", *backend, "--", *cmd], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
            answer = None
            for line in p.stdout:
                if answer is None and line.startswith(b"why"):
                    answer = time.monotonic() - start
            p.wait()
            if answer is None:
                sys.exit(f"{b}: no answer (exit code {p.returncode})")
            times[b].append((answer, time.monotonic() - start))
    print("| build | answer: median (min-max) | exit: median |")
    print("|---|---|---|")
    for b in builds:
        answers = sorted(a for a, _ in times[b])
        exits = sorted(e for _, e in times[b])
        print(f"| {b} | {answers[len(answers) // 2]:.2f} s ({answers[0]:.2f}-{answers[-1]:.2f}) "
              f"| {exits[len(exits) // 2]:.2f} s |")


if __name__ == "__main__":
    main()
