"""The table of overhead.sh and parts.sh: for each mode, its runs (hyperfine's
WORK/MODE.ROUND.json, every round), median, mean ± sd and median over plain's.

Usage: python3 bench/record/medians.py WORK MODE... (plain among them)
"""
import glob
import json
import statistics
import sys

work, modes = sys.argv[1], sys.argv[2:]
times = {m: [t for f in sorted(glob.glob(f"{work}/{m}.[0-9]*.json"))
             for t in json.load(open(f))["results"][0]["times"]] for m in modes}
base = statistics.median(times["plain"])
print("| mode | runs | median [ms] | mean ± sd [ms] | median / plain |")
print("|---|---|---|---|---|")
for m in modes:
    t = times[m]
    med = statistics.median(t)
    sd = statistics.stdev(t) if len(t) > 1 else 0.0
    print(f"| {m} | {len(t)} | {med * 1e3:.0f} | {statistics.mean(t) * 1e3:.0f} ± {sd * 1e3:.0f} | {med / base:.3f} |")
