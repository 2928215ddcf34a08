#!/usr/bin/env bash
# Records a benchmark trace: a real cargo build (slowlab and its
# dependencies, release, into a fresh target dir) recorded system-wide with
# call stacks, stopped after SECONDS: cpu-clock samples idle CPUs too, so a
# 2-CPU machine yields about 2 x FREQ x SECONDS samples (~115 bytes each).
# Never committed: it is regenerated here.
#
#   bench/analyze/make-trace.sh [OUT.data] [SECONDS] [FREQ]   (needs root and perf)
#
# The sizes of bench/analyze/README.md (2 CPUs):
#   make-trace.sh /tmp/slowlab-bench/cargo-10m.data 15            # ~10 MB
#   make-trace.sh /tmp/slowlab-bench/cargo.data                   # ~15 MB (22 s)
#   make-trace.sh /tmp/slowlab-bench/cargo-90m.data 120           # ~90 MB
#   make-trace.sh /tmp/slowlab-bench/cargo-1g.data 300 15000      # >= 1 GB
#   make-trace.sh /tmp/slowlab-bench/cargo-2g.data 500 15000      # ~2.3 GB (budget.sh)
# A build that ends before SECONDS is started again (in the same target dir,
# after `cargo clean`), so the trace is of compilation to the end.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${1:-/tmp/slowlab-bench/cargo.data}"
seconds="${2:-22}"
freq="${3:-2999}"
mkdir -p "$(dirname "$out")"
target="$(mktemp -d /tmp/slowlab-bench-target.XXXXXX)"
trap 'rm -rf "$target"' EXIT
cd "$repo"
cargo fetch -q
# perf refuses frequencies above kernel.perf_event_max_sample_rate.
max_rate=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
if [ "$freq" -gt "$max_rate" ]; then
    echo "raising kernel.perf_event_max_sample_rate from $max_rate to $freq" >&2
    echo "$freq" > /proc/sys/kernel/perf_event_max_sample_rate
fi
build_loop="while true; do cargo build -q --profile release-lto --offline -p slowlab --target-dir '$target'; cargo clean -q --target-dir '$target'; done"
perf record -a -g -F "$freq" -o "$out" -- timeout "$seconds" bash -c "$build_loop" || true
perf report -i "$out" --stats 2>/dev/null | grep -m1 "SAMPLE events" || true
ls -l "$out"
