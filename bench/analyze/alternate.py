#!/usr/bin/env python3
"""Alternating runs of `slowlab analyze --json TRACE` in several settings,
for differences smaller than this machine's noise (single hyperfine
medians move by +-20 ms here): the settings run in turn, the order
reversed every round, and each setting's median and minimum are printed,
with the median CPU time (user + system, all threads) of its runs: less
moved by the other load on the machine than the wall time, it shows
whether a change does less work even where the wall time cannot tell.

    bench/analyze/alternate.py N TRACE LABEL=[VAR=VALUE,...]:BINARY ...

    bench/analyze/alternate.py 30 /tmp/slowlab-bench/cargo-10m.data \\
        cache=SLOWLAB_CACHE_DIR=/tmp/slowlab-bench/symbol-cache:target/release-lto/slowlab \\
        none=SLOWLAB_CACHE_DIR=off:target/release-lto/slowlab

A setting whose binary is `perf` runs `perf report -i TRACE --stdio
--no-children --sort comm,dso,sym` (the command run.sh and scale.sh
compare with) in its turn, and each other setting's median is then also
given as a ratio to perf report's: measured in alternation, the ratio is
not moved by the disk or the machine getting slower between the two
commands' runs, as a hyperfine run's (one command's runs after the
other's) is:

    COLD=1 bench/analyze/alternate.py 10 /tmp/slowlab-bench/cargo-10m.data \
        slowlab=SLOWLAB_CACHE_DIR=/tmp/slowlab-bench/symbol-cache:target/release-lto/slowlab \
        perf=:perf

Each ratio comes with a 95% confidence interval: the rounds are drawn
again at random, with replacement, 2000 times (a bootstrap), and the
interval holds the middle 95% of the ratios of those draws' medians. A
ratio's interval that stays above a goal says that the goal is met beyond
this machine's noise; one that spans it says that more rounds are needed.
Without a `perf` setting, each setting is given as a ratio to the first
setting's median, with its interval (below 1: faster than the first).

Two warm-up rounds are not counted (they also fill a symbol cache).
`VIEW="--findings --no-symbols"` runs that view instead of the CPU summary
(the scheduler replay and every detector, frames unnamed):

    VIEW="--findings --no-symbols" bench/analyze/alternate.py 9 TRACE \
        before=:/tmp/slowlab-before after=:target/test-release/slowlab

With COLD=1 the page cache is dropped before every run (root only), for
cold-start figures:

    COLD=1 bench/analyze/alternate.py 8 /tmp/slowlab-bench/cargo-10m.data \
        before=SLOWLAB_CACHE_DIR=/tmp/slowlab-bench/symbol-cache:/tmp/slowlab-before \
        after=SLOWLAB_CACHE_DIR=/tmp/slowlab-bench/symbol-cache:target/release-lto/slowlab
"""
import os
import random
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    rounds, trace = int(sys.argv[1]), sys.argv[2]
    settings = []
    for arg in sys.argv[3:]:
        label, rest = arg.split("=", 1)
        assigns, binary = rest.rsplit(":", 1)
        env = dict(os.environ)
        for kv in filter(None, assigns.split(",")):
            key, value = kv.split("=", 1)
            env[key] = value
        settings.append((label, env, binary))
    cold = os.environ.get("COLD") == "1"
    times = {label: [] for label, _, _ in settings}
    cpu = {label: [] for label, _, _ in settings}
    for r in range(rounds + 2):
        for label, env, binary in settings if r % 2 == 0 else settings[::-1]:
            if cold:
                drop_page_cache()
            start = time.perf_counter()
            child = subprocess.Popen(command(binary, trace), env=env,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
            # Reaped here for its resource usage (CPU time of all its
            # threads); its exit code is given to the Popen object so that
            # it does not try to reap the child again.
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.perf_counter() - start
            child.returncode = os.waitstatus_to_exitcode(status)
            if child.returncode != 0:
                sys.exit(f"{label}: exit code {child.returncode}")
            if r >= 2:
                times[label].append(wall)
                cpu[label].append(usage.ru_utime + usage.ru_stime)
    perf = [label for label, _, b in settings if b == "perf"]
    first = settings[0][0]
    for label, t in times.items():
        if perf and label != perf[0]:
            low, high = ratio_interval(times[perf[0]], t)
            ratio = (f", {statistics.median(times[perf[0]]) / statistics.median(t):.1f}x "
                     f"perf report (95% CI {low:.1f}-{high:.1f}x)")
        elif not perf and label != first:
            low, high = ratio_interval(t, times[first])
            ratio = (f", {statistics.median(t) / statistics.median(times[first]):.3f} "
                     f"of {first}'s (95% CI {low:.3f}-{high:.3f})")
        else:
            ratio = ""
        print(f"{label}: median {statistics.median(t) * 1e3:.1f} ms, "
              f"min {min(t) * 1e3:.1f} ms, CPU median "
              f"{statistics.median(cpu[label]) * 1e3:.1f} ms ({len(t)} runs){ratio}")


def ratio_interval(numerator, denominator, draws=2000):
    """The 95% bootstrap interval of median(numerator) / median(denominator):
    the rounds (a run of each setting) are drawn again with replacement,
    the same rounds for both, so that what moved both runs of a round
    (the machine's load, the disk) stays paired."""
    rng = random.Random(1)
    n = len(numerator)
    ratios = []
    for _ in range(draws):
        pick = [rng.randrange(n) for _ in range(n)]
        ratios.append(statistics.median(numerator[i] for i in pick)
                      / statistics.median(denominator[i] for i in pick))
    ratios.sort()
    return ratios[int(draws * 0.025)], ratios[int(draws * 0.975) - 1]


def command(binary, trace):
    """What a setting runs: `perf report` for the binary `perf`, else
    `BINARY analyze --json [VIEW…] TRACE`, VIEW being the environment's
    (`VIEW="--findings --no-symbols"`: the replay and every detector)."""
    if binary == "perf":
        return ["perf", "report", "-i", trace, "--stdio", "--no-children",
                "--sort", "comm,dso,sym"]
    return [binary, "analyze", "--json", *os.environ.get("VIEW", "").split(), trace]


def drop_page_cache():
    """Writes dirty pages back, then drops the clean ones (needs root)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        sys.exit(f"COLD=1 needs root to drop the page cache: {e}")


if __name__ == "__main__":
    main()
