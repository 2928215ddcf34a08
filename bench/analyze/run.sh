#!/usr/bin/env bash
# Benchmark: `slowlab analyze --json` vs `perf report` on the same trace of a
# real cargo build (~130,000 samples; made by make-trace.sh if missing).
# Page cache dropped before every run (no cache left from an earlier run).
# Peak RSS from /usr/bin/time -v. Needs root (drop_caches), perf, hyperfine.
#
#   bench/analyze/run.sh [TRACE]     (default /tmp/slowlab-bench/cargo.data)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
trace="${1:-/tmp/slowlab-bench/cargo.data}"
[ -f "$trace" ] || "$here/make-trace.sh" "$trace"
(cd "$repo" && cargo build -q --release -p slowlab)
slowlab="${CARGO_TARGET_DIR:-$repo/target}/release/slowlab"
samples=$(perf report -i "$trace" --stats 2>/dev/null | awk '/SAMPLE events/ {print $3; exit}')
mb=$(du -m "$trace" | cut -f1)
echo "trace: $trace, $samples samples, $mb MB"
hyperfine --runs 5 --prepare 'sync; echo 3 > /proc/sys/vm/drop_caches' \
    --export-json /tmp/slowlab-bench/hyperfine.json \
    "$slowlab analyze --json $trace > /dev/null 2>&1" \
    "perf report -i $trace --stdio --no-children --sort comm,dso,sym > /dev/null 2>&1"
for cmd in "$slowlab analyze --json $trace" "perf report -i $trace --stdio --no-children --sort comm,dso,sym"; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    /usr/bin/time -v -o /tmp/slowlab-bench/time-v.txt $cmd > /dev/null 2>&1
    rss=$(awk -F: '/Maximum resident/ {gsub(/ /,"",$2); print $2}' /tmp/slowlab-bench/time-v.txt)
    echo "peak RSS ${rss} KB: $cmd"
done
