#!/usr/bin/env bash
# Benchmark: `slowlab analyze --json` vs `perf report` on the same trace of a
# real cargo build (~130,000 samples; made by make-trace.sh if missing), side
# by side in one hyperfine run, the page cache dropped before every run (no
# cache left from an earlier run). Then peak RSS of each from
# /usr/bin/time -v (caches dropped too), and the figures the README quotes:
# medians, ratio, samples/s and MB/s of perf.data. Last, the same two
# commands (and slowlab without its symbol cache) in alternation
# (alternate.py, COLD=1): hyperfine times all of one command's runs, then
# the other's, and this machine's disk can get 20% slower between the two
# blocks; in turn, each ratio compares runs made minutes, not seconds,
# apart. Needs root (drop_caches), perf, hyperfine, python3. The machine's
# load is printed before and after: on a shared 2-core machine, re-run
# when it is above 2.5.
#
#   bench/analyze/run.sh [TRACE]     (default /tmp/slowlab-bench/cargo.data)
#   RUNS=10 SLOWLAB=path/to/slowlab bench/analyze/run.sh   (skip the build)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
trace="${1:-/tmp/slowlab-bench/cargo.data}"
runs="${RUNS:-8}"
out="${BENCH_OUT:-/tmp/slowlab-bench}"
mkdir -p "$out"
[ -f "$trace" ] || "$here/make-trace.sh" "$trace"
if [ -z "${SLOWLAB:-}" ]; then
    (cd "$repo" && cargo build -q --profile release-lto -p slowlab)
    SLOWLAB="${CARGO_TARGET_DIR:-$repo/target}/release-lto/slowlab"
fi
samples=$(perf report -i "$trace" --stats 2>/dev/null | awk '/SAMPLE events/ {print $3; exit}')
bytes=$(stat -c %s "$trace")
echo "trace: $trace, $samples samples, $bytes bytes"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# The symbol cache is filled once, then read from the disk like the rest.
# No shell and no `env` in front of the two compared commands (-N, the
# cache's directory in hyperfine's own environment): after the page cache
# is dropped, starting sh and env costs 2-8 ms of disk, which hyperfine's
# correction for the shell (measured warm) does not take off, and which is
# a tenth of slowlab's time but under 0.5% of perf report's. Only the run
# without the cache goes through env (it is compared with neither).
export SLOWLAB_CACHE_DIR="$out/symbol-cache"
slowlab_cmd="$SLOWLAB analyze --json $trace"
uncached_cmd="env SLOWLAB_CACHE_DIR=off $SLOWLAB analyze --json $trace"
perf_cmd="perf report -i $trace --stdio --no-children --sort comm,dso,sym"
$slowlab_cmd > /dev/null 2>&1
hyperfine -N --runs "$runs" --prepare "sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'" \
    --export-json "$out/hyperfine.json" \
    "$slowlab_cmd" "$perf_cmd" "$uncached_cmd"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
for cmd in "$slowlab_cmd" "$uncached_cmd" "$perf_cmd"; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    /usr/bin/time -v -o "$out/time-v.txt" $cmd > /dev/null 2>&1
    rss=$(awk -F: '/Maximum resident/ {gsub(/ /,"",$2); print $2}' "$out/time-v.txt")
    echo "peak RSS ${rss} KB: ${cmd%% *} ${cmd#* }" | cut -c1-120
done
python3 - "$out/hyperfine.json" "$samples" "$bytes" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
samples, mb = int(sys.argv[2]), int(sys.argv[3]) / 1e6
s, p, n = r[0], r[1], r[2]
print(f"medians: slowlab {s['median']*1e3:.0f} ms (mean {s['mean']*1e3:.0f} ± {(s['stddev'] or 0)*1e3:.0f}), "
      f"perf report {p['median']*1e3:.0f} ms (mean {p['mean']*1e3:.0f} ± {(p['stddev'] or 0)*1e3:.0f})")
print(f"ratio of medians: {p['median']/s['median']:.1f}x; of means: {p['mean']/s['mean']:.1f}x")
print(f"without the symbol cache: slowlab {n['median']*1e3:.0f} ms, {p['median']/n['median']:.1f}x")
print(f"slowlab: {samples/s['median']:,.0f} samples/s, {mb/s['median']:.0f} MB/s of perf.data "
      f"(perf report: {samples/p['median']:,.0f} samples/s, {mb/p['median']:.1f} MB/s)")
EOF
echo "in alternation (alternate.py, $runs rounds, the page cache dropped before every run):"
COLD=1 "$here/alternate.py" "$runs" "$trace" \
    slowlab="SLOWLAB_CACHE_DIR=$out/symbol-cache:$SLOWLAB" \
    uncached="SLOWLAB_CACHE_DIR=off:$SLOWLAB" \
    perf=:perf
