#!/usr/bin/env bash
# One analysis per trace: the time of `diagnose`'s analysis and of
# `analyze --html --fxprof --findings` on the same recorded build trace,
# for two builds side by side in one hyperfine run, and how many times the
# new build replays the scheduler per command.
#
#   OLD=/path/to/old/slowlab NEW=/path/to/new/slowlab TRACE=build.data RUNS=5 bench/analysis/run.sh
#
# `diagnose` records before it analyzes: here a stand-in perf
# (fake-perf/perf) links TRACE where the recording would go, and the
# command recorded is `true`, so the time measured is the recording's own
# work (starting and stopping the path capture and the cgroup notes: the
# same for both builds) and the analysis. The recording's part is measured
# in the same run with a tiny trace (`sleep 0.1`) and taken off: "analysis"
# below is diagnose's time on TRACE less its time on the tiny trace. Needs
# root (the path capture of `diagnose`). The replay count needs
# SLOWLAB_COUNT_REPLAYS, which builds before it ignore.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
old="${OLD:?the slowlab of the previous build}"
new="${NEW:?the slowlab of this build}"
trace="${TRACE:?a trace from make-trace.sh}"
runs="${RUNS:-5}"
out="${BENCH_OUT:-$(mktemp -d /tmp/slowlab-analysis-bench.XXXXXX)}"
mkdir -p "$out"
export SLOWLAB_BENCH_TRACE="$trace" SLOWLAB_REAL_PATH="$PATH"
fake="PATH=$here/fake-perf:$PATH"
echo "== scheduler replays per command (this build)"
for cmd in "analyze $trace --html $out/r.html --fxprof $out/r.json.gz --findings" \
           "diagnose -o $out/d -- true"; do
    n=$(env "$fake" SLOWLAB_COUNT_REPLAYS=1 "$new" $cmd 2>&1 >/dev/null | sed -n 's/^slowlab: scheduler replays: //p')
    echo "  ${cmd%% *}: ${n:-?}"
done
echo "== diagnose's analysis (stand-in perf; the tiny trace is the recording's part), then analyze --html --fxprof --findings"
"$new" record -o "$out/tiny.data" -- sleep 0.1 > /dev/null 2>&1
hyperfine -w 1 -r "$runs" --export-json "$out/diagnose.json" \
    -n old "env '$fake' $old diagnose -o $out/old -- true > /dev/null" \
    -n new "env '$fake' $new diagnose -o $out/new -- true > /dev/null" \
    -n old-tiny "env '$fake' SLOWLAB_BENCH_TRACE=$out/tiny.data $old diagnose -o $out/old -- true > /dev/null" \
    -n new-tiny "env '$fake' SLOWLAB_BENCH_TRACE=$out/tiny.data $new diagnose -o $out/new -- true > /dev/null"
hyperfine -w 1 -r "$runs" --export-json "$out/analyze.json" \
    -n old "$old analyze $trace --html $out/o.html --fxprof $out/o.json.gz --findings > /dev/null 2>&1" \
    -n new "$new analyze $trace --html $out/n.html --fxprof $out/n.json.gz --findings > /dev/null 2>&1"
for f in diagnose analyze; do
    python3 - "$out/$f.json" "$f" <<'PY'
import json, statistics, sys
r = {x["command"]: statistics.median(x["times"]) for x in json.load(open(sys.argv[1]))["results"]}
print(f"{sys.argv[2]}: old {r['old']:.3f} s, new {r['new']:.3f} s, new/old {r['new'] / r['old']:.2f}")
if "old-tiny" in r:
    a_old, a_new = r["old"] - r["old-tiny"], r["new"] - r["new-tiny"]
    print(f"{sys.argv[2]}'s analysis (less the tiny trace's run): old {a_old:.3f} s, new {a_new:.3f} s, new/old {a_new / a_old:.2f}")
PY
done
[ -n "${BENCH_OUT:-}" ] || rm -rf "$out"
