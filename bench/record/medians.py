"""The table of overhead.sh and parts.sh: for each mode, its runs (hyperfine's
WORK/MODE.ROUND.json, every round), median, mean ± sd, median over plain's,
and a 90% interval of that ratio.

The interval resamples whole rounds (with replacement, 2,000 times, a fixed
seed), each mode's runs and plain's of the same rounds together: a round's
modes ran within minutes of each other, so a slow spell of the machine moves
them alike, and resampling rounds keeps that pairing. It says how far the
ratio could move if the same rounds were run again, not what another machine
or another day would read.

Usage: python3 bench/record/medians.py WORK MODE... (plain among them)
"""
import glob
import json
import random
import re
import statistics
import sys

work, modes = sys.argv[1], sys.argv[2:]


def rounds_of(mode):
    """{round: [seconds of each run]} of one mode."""
    out = {}
    for f in glob.glob(f"{work}/{mode}.[0-9]*.json"):
        k = int(re.search(r"\.(\d+)\.json$", f).group(1))
        out[k] = json.load(open(f))["results"][0]["times"]
    return out


by_round = {m: rounds_of(m) for m in modes}
times = {m: [t for k in sorted(r) for t in r[k]] for m, r in by_round.items()}
base = statistics.median(times["plain"])


def interval(mode, draws=2000, seed=40):
    """The 5th and 95th percentiles of median(mode) / median(plain) over rounds resampled."""
    common = sorted(set(by_round[mode]) & set(by_round["plain"]))
    if len(common) < 3:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(draws):
        pick = [rng.choice(common) for _ in common]
        m = statistics.median([t for k in pick for t in by_round[mode][k]])
        p = statistics.median([t for k in pick for t in by_round["plain"][k]])
        ratios.append(m / p)
    ratios.sort()
    return ratios[int(0.05 * draws)], ratios[int(0.95 * draws) - 1]


print("| mode | runs | median [ms] | mean ± sd [ms] | median / plain | 90% interval (rounds resampled) |")
print("|---|---|---|---|---|---|")
for m in modes:
    t = times[m]
    med = statistics.median(t)
    sd = statistics.stdev(t) if len(t) > 1 else 0.0
    iv = interval(m) if m != "plain" else None
    iv_text = f"{iv[0]:.3f}–{iv[1]:.3f}" if iv else ""
    print(f"| {m} | {len(t)} | {med * 1e3:.0f} | {statistics.mean(t) * 1e3:.0f} ± {sd * 1e3:.0f} | {med / base:.3f} | {iv_text} |")
