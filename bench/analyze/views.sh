#!/usr/bin/env bash
# Benchmark: the trace views of `slowlab analyze` (--waits, --faults,
# --procs, --syscalls, --timeline, --findings, --critical-path) against the sampled CPU view
# on the same trace, side by side in one hyperfine run (page cache warm:
# what is compared is the views' own cost on top of reading the trace).
# The trace is a `slowlab record` of a real cargo build, with every
# scheduler, fault, process and syscall event (made here if missing).
# Needs root, perf, hyperfine. The issue's target: each view at most 2× the
# time of the sampled view.
#
#   bench/analyze/views.sh [TRACE]     (default /tmp/slowlab-bench/views.data)
#   SLOWLAB=path/to/slowlab RUNS=3 bench/analyze/views.sh TRACE   (skip the build)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
trace="${1:-/tmp/slowlab-bench/views.data}"
runs="${RUNS:-5}"
mkdir -p "$(dirname "$trace")"
if [ -n "${SLOWLAB:-}" ]; then
    slowlab="$SLOWLAB"
else
    (cd "$repo" && cargo build -q --profile release-lto -p slowlab)
    slowlab="${CARGO_TARGET_DIR:-$repo/target}/release-lto/slowlab"
fi
if [ ! -f "$trace" ]; then
    target="$(mktemp -d /tmp/slowlab-bench-target.XXXXXX)"
    trap 'rm -rf "$target"' EXIT
    (cd "$repo" && cargo fetch -q)
    # 2999 Hz on two CPUs for 22 s of a build: about 130,000 samples.
    "$slowlab" record --freq 2999 -o "$trace" -- \
        timeout 22 cargo build -q --profile release-lto --offline -p slowlab-perf \
        --manifest-path "$repo/Cargo.toml" --target-dir "$target" || true
fi
ls -l "$trace"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
args=()
for view in "" --waits --faults --procs --syscalls --timeline --findings --critical-path; do
    args+=("$slowlab analyze --json $view $trace > /dev/null 2>&1")
done
hyperfine --warmup 1 --runs "$runs" --export-json "$(dirname "$trace")/views.json" "${args[@]}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$(dirname "$trace")/views.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
base = r[0]["median"]
for x in r:
    view = x["command"].split("--json ")[1].split(" ")[0]
    view = view if view.startswith("--") else "(sampled CPU)"
    print(f"{view:<16} median {x['median']:.3f} s  ×{x['median'] / base:.2f}")
PY
