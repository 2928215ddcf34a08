#!/usr/bin/env bash
# The memory budget on big traces: `slowlab analyze --json TRACE` as it
# runs by default (a trace over SLOWLAB_MEMORY, 1 GiB, is read in one pass
# if the memory that pass projects fits, else in two passes by function),
# the same build forced to one pass (SLOWLAB_MEMORY=100G) and to two
# (SLOWLAB_MEMORY=1), and an older build given as BASELINE, side by side
# in one hyperfine run per trace (page cache warm, one warm-up, median of
# RUNS), then the peak RSS of each (/usr/bin/time -v, one run). Prints a
# Markdown table. Traces come from make-trace.sh (see README.md).
#
#   BASELINE=/path/to/old/slowlab RUNS=3 bench/analyze/budget.sh \
#       /tmp/slowlab-bench/cargo-{1g,2g}.data
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
runs="${RUNS:-3}"
out="${BENCH_OUT:-/tmp/slowlab-bench}"
mkdir -p "$out"
[ "$#" -gt 0 ] || { echo "usage: [BASELINE=old-slowlab] budget.sh TRACE..." >&2; exit 2; }
# shellcheck source=common.sh
. "$here/common.sh"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| trace | default (1 GiB budget) | one pass (SLOWLAB_MEMORY=100G) | two passes (SLOWLAB_MEMORY=1) | baseline |"
echo "|---|---|---|---|---|"
for trace in "$@"; do
    if [ ! -f "$trace" ]; then
        echo "missing $trace (record it with make-trace.sh, see README.md); skipped" >&2
        continue
    fi
    mb=$(( $(stat -c %s "$trace") / 1000000 ))
    cmds=("$CACHED $SLOWLAB analyze --json $trace"
        "$CACHED SLOWLAB_MEMORY=100G $SLOWLAB analyze --json $trace"
        "$CACHED SLOWLAB_MEMORY=1 $SLOWLAB analyze --json $trace")
    # The baseline keeps the same symbol cache (a build from before the
    # cache ignores SLOWLAB_CACHE_DIR).
    [ -z "${BASELINE:-}" ] || cmds+=("$CACHED $BASELINE analyze --json $trace")
    hf=()
    for c in "${cmds[@]}"; do hf+=("$c > /dev/null 2>&1"); done
    hyperfine -w 1 -r "$runs" --export-json "$out/budget.json" "${hf[@]}" >&2
    read -r -a medians < <(python3 -c 'import json,sys; print(" ".join("%.2f" % r["median"] for r in json.load(open(sys.argv[1]))["results"]))' "$out/budget.json")
    row="| $mb MB"
    for i in "${!cmds[@]}"; do
        # shellcheck disable=SC2086
        row+=" | ${medians[$i]} s, $(peak_rss_mb ${cmds[$i]}) MB"
    done
    [ -n "${BASELINE:-}" ] || row+=" | not run"
    echo "$row |"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
