#!/usr/bin/env bash
# `slowlab hang` on a process with N threads (1,000 by default), every one
# of them blocked: `threads` (all on one condition variable: no owner,
# each names its fellow waiters) and `crowd` (all on one mutex whose holder
# sleeps: a two-hop chain each). Goal: under 100 ms. Not a timed test.
#
#   bench/hang/run.sh [N] [RUNS]
#
# Needs root (kernel stacks, /proc/PID/mem), gcc and hyperfine; uses
# $CARGO_TARGET_DIR/release-lto/slowlab (or SLOWLAB=path). Each target runs in
# its own process group, killed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-1000}
RUNS=${2:-30}
SLOWLAB=${SLOWLAB:-${CARGO_TARGET_DIR:-target}/release-lto/slowlab}
[ -x "$SLOWLAB" ] || { echo "build it first: cargo build --profile release-lto -p slowlab (or set SLOWLAB)" >&2; exit 2; }
work=$(mktemp -d)
pgids=()
cleanup() {
    for g in "${pgids[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
gcc -O1 -g -pthread -fno-omit-frame-pointer -o "$work/hangs" crates/hang/tests/programs/hangs.c

for mode in threads crowd; do
    setsid "$work/hangs" "$mode" "$N" > "$work/$mode.out" &
    pgids+=("$!")
    for _ in $(seq 100); do grep -q ready "$work/$mode.out" && break; sleep 0.1; done
    pid=$(awk '{print $2}' "$work/$mode.out")
    sleep 0.5
    threads=$(ls "/proc/$pid/task" | wc -l)
    echo "== $mode: pid $pid, $threads threads"
    "$SLOWLAB" hang "$pid" > "$work/$mode.txt" || true
    head -3 "$work/$mode.txt"
    hyperfine -N --warmup 3 --runs "$RUNS" -i \
        --export-json "$work/$mode.json" \
        "$SLOWLAB hang $pid --json" "$SLOWLAB hang $pid" | grep -v '^ *$'
    python3 -c "
import json,sys
for r in json.load(open('$work/$mode.json'))['results']:
    print('median %.1f ms  (min %.1f, max %.1f)  %s' % (r['median']*1e3, r['min']*1e3, r['max']*1e3, r['command']))
"
done
