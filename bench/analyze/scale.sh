#!/usr/bin/env bash
# Time and peak RSS against trace size: `slowlab analyze --json TRACE`
# (with its symbol cache filled by the warm-up run, and without one)
# against `perf report -i TRACE --stdio --no-children --sort comm,dso,sym`,
# side by side in one run, printed as a Markdown table. Time: hyperfine
# without a shell (-N), page cache warm (one warm-up run), median of RUNS; peak RSS: one run under
# /usr/bin/time -v. Traces come from make-trace.sh (see README.md); a
# missing one is skipped with a note.
#
#   bench/analyze/scale.sh [TRACE...]        (default: the ~10 MB trace; quick)
#   RUNS=5 bench/analyze/scale.sh /tmp/slowlab-bench/cargo-{10m,90m,1g}.data
#   BASELINE=/path/to/old/slowlab ...        (also time an older build)
#   PERF_MAX_MB=200 ...                      (skip perf report above this size:
#                                             it needs ~19x the trace in RAM)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
runs="${RUNS:-3}"
perf_max_mb="${PERF_MAX_MB:-200}"
out="${BENCH_OUT:-/tmp/slowlab-bench}"
mkdir -p "$out"
[ "$#" -gt 0 ] || set -- "$out/cargo-10m.data"
# shellcheck source=common.sh
. "$here/common.sh"
export SLOWLAB_CACHE_DIR="$out/symbol-cache"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
rows=()
for trace in "$@"; do
    if [ ! -f "$trace" ]; then
        echo "missing $trace (record it with make-trace.sh, see README.md); skipped" >&2
        continue
    fi
    bytes=$(stat -c %s "$trace")
    mb=$((bytes / 1000000))
    samples=$(perf report -i "$trace" --stats 2>/dev/null | awk '/SAMPLE events/ {print $3; exit}')
    names=(slowlab nocache)
    # slowlab with its cache is started as perf report is, without env in
    # front (the cache's directory is in hyperfine's environment).
    cmds=("$SLOWLAB analyze --json $trace" "$UNCACHED $SLOWLAB analyze --json $trace")
    if [ -n "${BASELINE:-}" ]; then
        names+=(baseline)
        # With the same symbol cache (a build from before the cache
        # ignores SLOWLAB_CACHE_DIR).
        cmds+=("$BASELINE analyze --json $trace")
    fi
    if [ "$mb" -le "$perf_max_mb" ]; then
        names+=(perf)
        cmds+=("perf report -i $trace --stdio --no-children --sort comm,dso,sym")
    fi
    # No shell between hyperfine and the commands (-N): its start-up is
    # neither tool's; hyperfine sends their output to /dev/null.
    hyperfine -N -w 1 -r "$runs" --export-json "$out/scale.json" "${cmds[@]}" >&2
    read -r -a medians < <(python3 -c 'import json,sys; print(" ".join("%.3f" % r["median"] for r in json.load(open(sys.argv[1]))["results"]))' "$out/scale.json")
    declare -A med=() rss=()
    for i in "${!names[@]}"; do
        med[${names[$i]}]=${medians[$i]}
        # shellcheck disable=SC2086
        rss[${names[$i]}]=$(peak_rss_mb ${cmds[$i]})
    done
    row=$(python3 - "$mb" "$samples" "${med[slowlab]}" "${rss[slowlab]}" \
        "${med[nocache]}" "${rss[nocache]}" \
        "${med[baseline]:-}" "${rss[baseline]:-}" "${med[perf]:-}" "${rss[perf]:-}" <<'PY'
import sys
mb, samples, s, srss, n, nrss, b, brss, p, prss = sys.argv[1:]
mb, s, n = float(mb), float(s), float(n)
cell = lambda t, r: f"{float(t):.3f} s, {mb/float(t):.0f} MB/s, {r} MB" if t else "not run"
cols = [f"{mb:.0f} MB, {int(samples):,} samples", cell(s, srss), cell(n, nrss), cell(b, brss), cell(p, prss)]
cols.append(f"{float(p)/s:.1f}x / {float(p)/n:.1f}x" if p else "-")
cols.append(f"{int(srss)/int(prss):.2f}" if p else "-")
print("| " + " | ".join(cols) + " |")
PY
)
    rows+=("$row")
    unset med rss
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| trace | slowlab (median, MB/s, peak RSS) | slowlab, no symbol cache | baseline (same symbol cache) | perf report | time ratio (cache / none) | RSS slowlab/perf |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
