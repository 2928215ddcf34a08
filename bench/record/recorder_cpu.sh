#!/bin/bash
# The CPU the flight recorder's own threads take while the machine works: each build's
# `slowlab record --backend bpf --ring 60` is started, left 3 s to settle, then RUNS untars
# of bench/record/overhead.sh's workload (4,000 files, each into a fresh directory on a
# file system of its own, synced) run while its threads' CPU time and wake-ups are read
# (`/proc/PID/task/TID/schedstat`). Builds alternate, ROUNDS rounds; prints each round,
# then the medians by build: the recorder's CPU per untar, its wake-ups a second, and the
# untars' wall time (which the host's noise moves more than the recorder does).
#
#   sudo ROUNDS=5 RUNS=10 bench/record/recorder_cpu.sh SLOWLAB [SLOWLAB ...]
set -eu
ROUNDS=${ROUNDS:-5}
RUNS=${RUNS:-10}
FILES=${FILES:-4000}
[ "$#" -ge 1 ] || { echo "usage: $0 SLOWLAB [SLOWLAB ...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root: the recording is system-wide" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/recorder-cpu.XXXXXX)
rec=
cleanup() {
    [ -n "$rec" ] && kill -INT "$rec" 2>/dev/null && wait "$rec" 2>/dev/null || true
    umount "$dir/mnt" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$here/files_tar.sh" "$dir/files.tar" "$FILES"
mkdir -p "$dir/mnt"
truncate -s 512M "$dir/fs.img"
mkfs.ext4 -q -F "$dir/fs.img"
mount -o loop "$dir/fs.img" "$dir/mnt"
# ns on a CPU and slices (wake-ups), summed over the threads of $1.
cpu() {
    cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ ns += $1; n += $3 } END { print ns, n }'
}
echo "round build recorder_ms_per_untar wakeups_per_s untar_ms" > "$dir/all.txt"
for ((round = 0; round < ROUNDS; round++)); do
    for build in "$@"; do
        "$build" record --backend bpf --ring 60 -o "$dir/ring.data" 2> "$dir/ring.err" &
        rec=$!
        sleep 3
        read -r ns0 n0 < <(cpu "$rec")
        t0=$(date +%s%N)
        for ((i = 0; i < RUNS; i++)); do
            rm -rf "$dir/mnt/x"; mkdir "$dir/mnt/x"
            tar xf "$dir/files.tar" -C "$dir/mnt/x"; sync -f "$dir/mnt/x"
        done
        t1=$(date +%s%N)
        read -r ns1 n1 < <(cpu "$rec")
        kill -INT "$rec"; wait "$rec" || true; rec=
        rm -f "$dir"/ring.data*
        awk -v r="$round" -v b="$build" -v runs="$RUNS" -v ns=$((ns1 - ns0)) -v n=$((n1 - n0)) \
            -v t=$((t1 - t0)) 'BEGIN { printf "%d %s %.2f %.1f %.1f\n", r, b, ns / 1e6 / runs, n / (t / 1e9), t / 1e6 / runs }' \
            >> "$dir/all.txt"
    done
done
column -t "$dir/all.txt"
echo
echo "medians over $ROUNDS rounds of $RUNS untars:"
python3 - "$dir/all.txt" <<'PY'
import statistics, sys
from collections import defaultdict
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
by = defaultdict(list)
for r, b, cpu, wk, ms in rows:
    by[b].append((float(cpu), float(wk), float(ms)))
for b, v in by.items():
    med = [statistics.median(x[i] for x in v) for i in range(3)]
    print(f"{b}: the recorder {med[0]:.2f} ms of CPU an untar, {med[1]:.1f} wake-ups a second; an untar {med[2]:.0f} ms")
PY
