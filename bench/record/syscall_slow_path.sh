#!/usr/bin/env bash
# What enabling one syscall tracepoint costs every other syscall: while any
# `syscalls:` (or `raw_syscalls:`) tracepoint has a user, the kernel sets
# TIF_SYSCALL_TRACEPOINT on every thread, and every syscall takes the slow
# entry and exit path. Times the tar workload of overhead.sh plain and while
# `perf record -a` traces only flock's entry and exit (tar calls no flock:
# nothing is recorded, the cost is the slow path alone), in ROUNDS rotated
# rounds of RUNS runs, and prints the medians and their ratio. The part of the
# eBPF recorder's overhead that is not its programs' time: the recorder hooks
# the detectors' and the waiting syscalls on their tracepoints.
#
# Usage (root; perf and hyperfine installed):
#   ROUNDS=4 RUNS=5 bench/record/syscall_slow_path.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-4}
RUNS=${RUNS:-5}
FILES=${FILES:-4000}
WORK=${WORK:-$(mktemp -d /tmp/slowlab-slow-path.XXXXXX)}
[ "$(id -u)" = 0 ] || { echo "run as root: the tracing is system-wide" >&2; exit 1; }
for p in perf hyperfine mkfs.ext4; do
  command -v "$p" >/dev/null || { echo "$p is missing: bash scripts/setup.sh --tests" >&2; exit 1; }
done
mkdir -p "$WORK/mnt"
tracer=""
cleanup() {
  [ -n "$tracer" ] && kill -INT "$tracer" 2>/dev/null && wait "$tracer" 2>/dev/null
  if mountpoint -q "$WORK/mnt" 2>/dev/null; then umount "$WORK/mnt" || true; fi
  rm -f "$WORK/fs.img" "$WORK/flock.data"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench/record/files_tar.sh "$WORK/files.tar" "$FILES"
truncate -s 512M "$WORK/fs.img"
mkfs.ext4 -q -F "$WORK/fs.img"
mount -o loop "$WORK/fs.img" "$WORK/mnt"

# time MODE ROUND: RUNS untars into a fresh directory, each followed by `sync -f`.
time_untar() {
  hyperfine --warmup 1 --runs "$RUNS" --style none --export-json "$WORK/$1.$2.json" \
    --prepare "rm -rf $WORK/mnt/x; mkdir $WORK/mnt/x; sync -f $WORK/mnt" \
    "tar xf $WORK/files.tar -C $WORK/mnt/x && sync -f $WORK/mnt" >/dev/null
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $FILES files, $ROUNDS rounds of $RUNS runs" >&2
for ((round = 1; round <= ROUNDS; round++)); do
  modes=(plain flock)
  ((round % 2 == 0)) && modes=(flock plain)
  for mode in "${modes[@]}"; do
    if [ "$mode" = flock ]; then
      perf record -q -a -e syscalls:sys_enter_flock -e syscalls:sys_exit_flock \
        -o "$WORK/flock.data" >/dev/null 2>&1 &
      tracer=$!
      sleep 1
    fi
    time_untar "$mode" "$round"
    if [ "$mode" = flock ]; then
      kill -INT "$tracer"
      wait "$tracer" || true
      tracer=""
    fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$WORK" <<'PY' | tee "$WORK/slow_path.md"
import glob, json, statistics, sys
work = sys.argv[1]
med = {}
for mode in ("plain", "flock"):
    times = [t for f in sorted(glob.glob(f"{work}/{mode}.*.json"))
             for t in json.load(open(f))["results"][0]["times"]]
    med[mode] = statistics.median(times) * 1000
    print(f"{mode}: {len(times)} runs, median {med[mode]:.1f} ms")
print(f"the slow path alone: {med['flock'] / med['plain']:.3f}x "
      f"({med['flock'] - med['plain']:.1f} ms a run)")
PY
