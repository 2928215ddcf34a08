#!/usr/bin/env bash
# Benchmark: the interactive report of the ~130,000-sample cargo-build trace
# of bench/analyze (a `slowlab record` with every scheduler, fault, process
# and syscall event, made here if missing, as bench/analyze/views.sh makes
# it): the time `slowlab analyze --html` takes to write it, its size, and
# in headless Chromium (Playwright, measure.py) the time from navigation to
# the page drawn and the redraw after a range selection. The issue's
# budgets: at most 10 MB, drawn in under 2 s, a selection redrawn in under
# 200 ms. Needs root and perf (only to record the trace), Playwright and
# Debian's chromium (scripts/setup.sh installs both).
#
#   bench/report/run.sh [TRACE]     (default /tmp/slowlab-bench/views.data)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
trace="${1:-/tmp/slowlab-bench/views.data}"
runs="${RUNS:-5}"
mkdir -p "$(dirname "$trace")"
(cd "$repo" && cargo build -q --profile release-lto -p slowlab)
slowlab="${CARGO_TARGET_DIR:-$repo/target}/release-lto/slowlab"
if [ ! -f "$trace" ]; then
    target="$(mktemp -d /tmp/slowlab-bench-target.XXXXXX)"
    trap 'rm -rf "$target"' EXIT
    (cd "$repo" && cargo fetch -q)
    # 2999 Hz on two CPUs for 22 s of a build: about 130,000 samples.
    "$slowlab" record --freq 2999 -o "$trace" -- \
        timeout 22 cargo build -q --profile release-lto --offline -p slowlab-perf \
        --manifest-path "$repo/Cargo.toml" --target-dir "$target" || true
fi
report="$(dirname "$trace")/report.html"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
TIMEFORMAT='analyze --html: %R s'
time "$slowlab" analyze "$trace" --html "$report" > /dev/null 2>&1
python3 "$here/measure.py" "$report" --runs "$runs"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
