#!/usr/bin/env bash
# The analyze benchmarks' small cases, run by CI (scripts/test.sh): each
# script once, on traces of a second or two, in a directory of its own
# (BENCH_OUT) that is removed at the end, checking that each prints the
# figures it exists for (a ratio, a table row). It measures nothing worth
# quoting: it keeps the scripts working. The real runs are in README.md.
#
# Not run here: samply.sh (samply is not installed by setup.sh: a
# benchmark-only tool that takes minutes to build) and traces of more
# than a few MB.
#
#   SLOWLAB=target/test-release/slowlab bench/analyze/smoke.sh
#
# Needs root (perf record -a, dropping the page cache), perf, hyperfine,
# python3. Where one is missing it prints `SKIP: bench smoke: reason`
# (appended to $SLOWLAB_SKIP_LOG, which scripts/test.sh reads).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

skip() {
    echo "SKIP: bench smoke: $*"
    [ -z "${SLOWLAB_SKIP_LOG:-}" ] || echo "SKIP: bench smoke: $*" >> "$SLOWLAB_SKIP_LOG"
    exit 0
}
[ "$(id -u)" -eq 0 ] || skip "needs root (perf record -a, dropping the page cache)"
for tool in perf hyperfine python3; do
    command -v "$tool" > /dev/null || skip "$tool not found (bash scripts/setup.sh installs it)"
done
: "${SLOWLAB:?set SLOWLAB to the slowlab binary to run}"
[ -x "$SLOWLAB" ] || { echo "bench smoke: $SLOWLAB is not an executable" >&2; exit 1; }

BENCH_OUT="$(mktemp -d /tmp/slowlab-bench-smoke.XXXXXX)"
trap 'rm -rf "$BENCH_OUT"' EXIT
# The symbol cache too (views.sh would use the user's).
export BENCH_OUT SLOWLAB RUNS=1 SLOWLAB_CACHE_DIR="$BENCH_OUT/symbol-cache"
trace="$BENCH_OUT/cargo.data"

# Fails with the end of `name`'s log unless a line of it matches `pattern`
# (an extended regex); says which line did.
expect() {  # name pattern
    local name=$1 pattern=$2 log="$BENCH_OUT/$1.log"
    if ! grep -Eq "$pattern" "$log"; then
        echo "bench smoke: $name printed no line matching '$pattern'; the end of its output:" >&2
        tail -20 "$log" >&2
        exit 1
    fi
    echo "bench smoke: $name: $(grep -Em1 "$pattern" "$log" | cut -c1-110)"
}

# Runs a script with its output in a log; fails with the log's end if the
# script fails or its output lacks `pattern`.
check() {  # name pattern command...
    local name=$1 pattern=$2 log="$BENCH_OUT/$1.log"
    shift 2
    if ! "$@" > "$log" 2>&1; then
        echo "bench smoke: $name failed; the end of its output:" >&2
        tail -20 "$log" >&2
        exit 1
    fi
    expect "$name" "$pattern"
}

check make-trace.sh 'SAMPLE events: *[1-9]' "$here/make-trace.sh" "$trace" 2 999
check scale.sh '^\| [0-9]+ MB, [0-9,]+ samples \| [0-9.]+ s, [0-9]+ MB/s, [0-9]+ MB \|.*[0-9.]+x / [0-9.]+x' \
    "$here/scale.sh" "$trace"
check budget.sh '^\| [0-9]+ MB \| [0-9.]+ s, [0-9]+ MB \| [0-9.]+ s, [0-9]+ MB \| [0-9.]+ s, [0-9]+ MB \|' \
    "$here/budget.sh" "$trace"
check run.sh '^ratio of medians: [0-9.]+x' "$here/run.sh" "$trace"
expect run.sh '^slowlab: median .*[0-9.]+x perf report \(95% CI [0-9.]+-[0-9.]+x\)'
check alternate.py '^b: median .* of a'"'"'s \(95% CI [0-9.]+-[0-9.]+\)' \
    "$here/alternate.py" 1 "$trace" "a=SLOWLAB_CACHE_DIR=off:$SLOWLAB" "b=SLOWLAB_CACHE_DIR=off:$SLOWLAB"
check record '' "$SLOWLAB" record -o "$BENCH_OUT/views.data" -- sleep 1
check views.sh 'Benchmark 8: .*--critical-path' "$here/views.sh" "$BENCH_OUT/views.data"
echo "bench smoke: all analyze benchmark scripts ran"
