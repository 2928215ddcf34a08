#!/usr/bin/env bash
# slowlab against samply on the same perf.data: `slowlab analyze --json
# TRACE` and `samply import --save-only --no-open -o OUT TRACE` (samply's
# import into a Firefox Profiler profile), with and without
# `--unstable-presymbolicate`, side by side (slowlab with its symbol
# cache, filled by the warm-up run, and without one) in one hyperfine run per trace,
# page cache warm (one warm-up run), RUNS runs each. samply names no
# function at import (its server does, later); slowlab's time includes
# symbolization. Traces come from make-trace.sh (see README.md).
#
#   bench/analyze/samply.sh [TRACE...]   (default: the ~10 MB and ~90 MB traces)
#   SAMPLY=/path/to/samply RUNS=5 bench/analyze/samply.sh ...
#
# Needs samply: `cargo install samply --locked` (not installed by setup.sh:
# benchmarks only), and hyperfine (apt-get install hyperfine).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
runs="${RUNS:-3}"
out="${BENCH_OUT:-/tmp/slowlab-bench}"
samply="${SAMPLY:-$(command -v samply || echo "$HOME/.cargo/bin/samply")}"
if [ ! -x "$samply" ]; then
    echo "samply not found: cargo install samply --locked (or set SAMPLY=/path/to/samply)" >&2
    exit 2
fi
command -v hyperfine > /dev/null || { echo "hyperfine not found: apt-get install hyperfine" >&2; exit 2; }
[ "$#" -gt 0 ] || set -- "$out/cargo-10m.data" "$out/cargo-90m.data"
if [ -z "${SLOWLAB:-}" ]; then
    (cd "$repo" && cargo build -q --profile release-lto -p slowlab)
    SLOWLAB="${CARGO_TARGET_DIR:-$repo/target}/release-lto/slowlab"
fi
profile="$(mktemp -d /tmp/slowlab-samply.XXXXXX)"
trap 'rm -rf "$profile"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $("$samply" --version)" >&2
for trace in "$@"; do
    if [ ! -f "$trace" ]; then
        echo "missing $trace (record it with make-trace.sh, see README.md); skipped" >&2
        continue
    fi
    echo "== $trace ($(du -h "$trace" | cut -f1))"
    # slowlab with its cache started as samply is, without env in front
    # (the cache's directory is in hyperfine's environment).
    SLOWLAB_CACHE_DIR="$out/symbol-cache" hyperfine -N -w 1 -r "$runs" \
        -n slowlab "$SLOWLAB analyze $trace --json" \
        -n "slowlab, no symbol cache" "env SLOWLAB_CACHE_DIR=off $SLOWLAB analyze $trace --json" \
        -n "samply import" "$samply import -s -n -o $profile/p.json.gz $trace" \
        -n "samply import --unstable-presymbolicate" \
        "$samply import -s -n --unstable-presymbolicate -o $profile/q.json.gz $trace"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
