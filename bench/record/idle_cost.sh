#!/bin/bash
# What the flight recorder costs a machine with nothing to record (issue 40: "record all
# day at a cost nobody notices"): each build's `slowlab record --backend bpf --ring 60` is
# started, left 3 s to settle once it is recording (perf's backend first measures the
# event rate for 2 s, waking every 20 ms), then each of its threads' CPU time
# (`/proc/PID/task/TID/schedstat`: ns on a CPU, and times it was put on one — each a
# wake-up) is read over SECONDS_IDLE of a quiet machine. Builds alternate, ROUNDS rounds;
# a table of each round's figures, then the medians by build and thread.
#
#   sudo ROUNDS=3 SECONDS_IDLE=20 bench/record/idle_cost.sh SLOWLAB [SLOWLAB ...]
#
# BACKEND=perf measures `--backend perf --ring 60` instead (slowlab's threads only, not
# perf's).
#
# A wake-up costs this VM 70-140 us of CPU (`nanosleep` alone, recorded or not), so a
# thread that wakes 20 times a second costs ~0.2% of a CPU before it does anything.
set -eu
ROUNDS=${ROUNDS:-3}
SECONDS_IDLE=${SECONDS_IDLE:-20}
BACKEND=${BACKEND:-bpf}
[ "$#" -ge 1 ] || { echo "usage: $0 SLOWLAB [SLOWLAB ...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root: the recording is system-wide" >&2; exit 1; }
dir=$(mktemp -d /tmp/idle-cost.XXXXXX)
rec=
cleanup() {
    [ -n "$rec" ] && kill -INT "$rec" 2>/dev/null && wait "$rec" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# thread name, ns on a CPU, slices: one line per thread name of $1 (threads of the same
# name summed: perf's backend has several readers named after the binary).
threads() {
    for t in /proc/"$1"/task/*; do
        printf '%s %s\n' "$(tr ' ' _ < "$t/comm")" "$(cut -d' ' -f1,3 "$t/schedstat")"
    done 2>/dev/null | awk '{ ns[$1] += $2; n[$1] += $3 } END { for (k in ns) print k, ns[k], n[k] }'
}
echo "round build thread cpu_ms_per_s wakeups_per_s" > "$dir/all.txt"
for ((round = 0; round < ROUNDS; round++)); do
    for build in "$@"; do
        "$build" record --backend "$BACKEND" --ring 60 -o "$dir/ring.data" 2> "$dir/ring.err" &
        rec=$!
        for ((i = 0; i < 300; i++)); do
            grep -qE -- "--save|keeping the last" "$dir/ring.err" && break
            sleep 0.1
        done
        sleep 3
        threads "$rec" | sort > "$dir/before"
        sleep "$SECONDS_IDLE"
        threads "$rec" | sort > "$dir/after"
        kill -INT "$rec"; wait "$rec" || true; rec=
        rm -f "$dir"/ring.data*
        join "$dir/before" "$dir/after" | awk -v r="$round" -v b="$build" -v s="$SECONDS_IDLE" \
            '{ printf "%d %s %s %.3f %.1f\n", r, b, $1, ($4 - $2) / 1e6 / s, ($5 - $3) / s }' \
            >> "$dir/all.txt"
    done
done
column -t "$dir/all.txt"
echo
echo "medians over $ROUNDS rounds of ${SECONDS_IDLE} s:"
python3 - "$dir/all.txt" <<'PY'
import statistics, sys
from collections import defaultdict
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
by = defaultdict(lambda: defaultdict(list))
tot = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
for r, b, t, cpu, wk in rows:
    by[b][t].append((float(cpu), float(wk)))
    tot[b][r][0] += float(cpu); tot[b][r][1] += float(wk)
for b in by:
    print(b)
    for t, v in sorted(by[b].items()):
        print(f"  {t:16} {statistics.median(c for c, _ in v):7.3f} ms/s  {statistics.median(w for _, w in v):6.1f} wake-ups/s")
    totals = list(tot[b].values())
    print(f"  {'all threads':16} {statistics.median(c for c, _ in totals):7.3f} ms/s  {statistics.median(w for _, w in totals):6.1f} wake-ups/s")
PY
