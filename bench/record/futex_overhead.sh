#!/usr/bin/env bash
# What the 8 stackless wait events (syscalls:sys_{enter,exit}_{futex,wait4,
# waitid,flock}/call-graph=no/) add to the cost of `slowlab record`'s perf
# recording. hyperfine times two workloads
#
#   futex  bench/record/mutex_pingpong.c: 4 threads contending on one pthread
#          mutex (~1.4 million futex calls in ~0.75 s when both threads find
#          a CPU; far fewer when the other CPU is busy). FUTEX=yield instead
#          runs it on CPU 0 with sched_yield() inside the lock: exactly one
#          futex wait and one wake per iteration whatever the load
#          (ITERS=20000: 160,000 futex calls, ~0.6 s).
#   tar    untar FILES (4,000) files of 1-8 KiB into an ext4 file system of
#          its own on a loop device, then `sync -f` it (as overhead.sh)
#
# each in three modes, with a system-wide `perf record` (the command line
# slowlab record gives perf, without the slowlab binary or its eBPF path
# capture) running in the background, started before and stopped after the
# timed runs so perf's own start and stop are not counted:
#
#   plain   no recording
#   before  the event set without the 8 new events
#   after   the event set with them
#
# Usage (root; perf, hyperfine, cc installed):
#   bench/record/futex_overhead.sh
#   ROUNDS=3 RUNS=5 FILES=4000 ITERS=1500000 bench/record/futex_overhead.sh
#   FUTEX=yield ITERS=20000 bench/record/futex_overhead.sh
#
# Rounds of RUNS timed runs per (workload, mode), the modes in a rotated order
# each round. Writes WORK/WORKLOAD.MODE.ROUND.json (hyperfine),
# WORK/recordings.tsv (bytes each recording wrote, for how long) and
# WORK/futex_overhead.md (WORK: $WORK or a temp dir), and prints the table.
# Each recording's perf.data is removed once measured; the loop file system
# and its image are removed at the end (also on Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=${ROUNDS:-3}
RUNS=${RUNS:-5}
FILES=${FILES:-4000}
FUTEX=${FUTEX:-spin}
case $FUTEX in
  spin) ITERS=${ITERS:-1500000}; futex_cmd="WORKDIR/mutex_pingpong $ITERS 4" ;;
  yield) ITERS=${ITERS:-20000}; futex_cmd="taskset -c 0 WORKDIR/mutex_pingpong $ITERS 4 yield" ;;
  *) echo "FUTEX is spin or yield" >&2; exit 2 ;;
esac
# perf report --stats on the last round's futex recordings (slow: ~1 s per
# million events).
STATS=${STATS:-1}
WORK=${WORK:-$(mktemp -d /tmp/slowlab-futex-bench.XXXXXX)}
mkdir -p "$WORK"
futex_cmd=${futex_cmd//WORKDIR/$WORK}

for p in perf hyperfine cc python3 mkfs.ext4; do
  command -v "$p" >/dev/null || { echo "$p is missing" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run as root: the recording is system-wide" >&2; exit 1; }

perf_pid=
perf_out=
cleanup() {
  if [ -n "$perf_pid" ] && kill -0 "$perf_pid" 2>/dev/null; then
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
  fi
  [ -n "$perf_out" ] && rm -f "$perf_out" "$perf_out.old"
  if mountpoint -q "$WORK/mnt" 2>/dev/null; then umount "$WORK/mnt" || true; fi
  rm -f "$WORK/fs.img"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- The perf command line. ---------------------------------------------------
# Mirrors crates/record/src/args.rs `perf_args_to` at commit
# cb3aebf (HEAD when this was written; default Config: freq 1000, --call-graph
# fp, stream mode with STREAM_PAGES = 4096), less `-o FILE`: TRACEPOINTS, then
# major-faults/period=1/, then sys_enter/sys_exit of each syscall of
# crates/model/src/syscalls.rs marked RECORDED, in its order, each tracepoint
# only if this kernel has it (args.rs's `tracepoint_exists`).
tracefs_has() {
  local sys=${1%%:*} tp=${1#*:}
  [ -e "/sys/kernel/tracing/events/$sys/$tp/id" ] ||
    [ -e "/sys/kernel/debug/tracing/events/$sys/$tp/id" ]
}
[ -e /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true

TRACEPOINTS=(
  sched:sched_switch sched:sched_waking sched:sched_process_fork
  sched:sched_process_exec sched:sched_process_exit
  exceptions:page_fault_user exceptions:page_fault_kernel
  block:block_rq_issue block:block_rq_complete
)
# RECORDED syscalls with stacks (before and after).
SYSCALLS=(
  openat open newstat newlstat newfstatat statx access faccessat faccessat2
  mmap munmap unlink unlinkat unshare clone clone3 kill tgkill tkill
)
# RECORDED | NO_STACK: the 8 new events (after only).
STACKLESS=(futex wait4 waitid flock)

common=(--all-cpus --sample-cpu -k monotonic --call-graph fp -e cpu-clock/freq=1000/)
for tp in "${TRACEPOINTS[@]}"; do
  if tracefs_has "$tp"; then common+=(-e "$tp"); else echo "kernel lacks $tp: left out" >&2; fi
done
common+=(-e major-faults/period=1/)
for sc in "${SYSCALLS[@]}"; do
  for dir in enter exit; do
    tp=syscalls:sys_${dir}_$sc
    if tracefs_has "$tp"; then common+=(-e "$tp"); else echo "kernel lacks $tp: left out" >&2; fi
  done
done
new=()
for sc in "${STACKLESS[@]}"; do
  for dir in enter exit; do
    tp=syscalls:sys_${dir}_$sc
    if tracefs_has "$tp"; then new+=(-e "$tp/call-graph=no/"); else echo "kernel lacks $tp: left out" >&2; fi
  done
done
BEFORE_ARGS=("${common[@]}" -m 4096)
AFTER_ARGS=("${common[@]}" "${new[@]}" -m 4096)
printf '%s\n' "before: perf record -o FILE ${BEFORE_ARGS[*]}" "after:  perf record -o FILE ${AFTER_ARGS[*]}" >"$WORK/perf-args.txt"
echo "after adds $(( ${#new[@]} / 2 )) events: ${new[*]}" >&2

# --- The workloads. -------------------------------------------------------------
cc -O2 -Wall -pthread -o "$WORK/mutex_pingpong" bench/record/mutex_pingpong.c

bench/record/files_tar.sh "$WORK/files.tar" "$FILES"
# A file system of the workload's own: `sync -f` flushes only its writes.
mkdir -p "$WORK/mnt"
if ! mountpoint -q "$WORK/mnt"; then
  truncate -s 512M "$WORK/fs.img"
  mkfs.ext4 -q -F "$WORK/fs.img"
  mount -o loop "$WORK/fs.img" "$WORK/mnt"
fi

# --- Recording in the background. ----------------------------------------------
# start_recording MODE: perf record -a in the background (its own session, so a
# Ctrl-C reaches it only through `cleanup`), returning once perf has begun
# writing, plus a second.
start_recording() {
  local mode=$1
  perf_out="$WORK/$mode.data"
  rm -f "$perf_out" "$perf_out.old"
  local args
  if [ "$mode" = before ]; then args=("${BEFORE_ARGS[@]}"); else args=("${AFTER_ARGS[@]}"); fi
  setsid perf record -o "$perf_out" "${args[@]}" >"$WORK/$mode.log" 2>&1 </dev/null &
  perf_pid=$!
  for _ in $(seq 200); do
    [ -s "$perf_out" ] && break
    kill -0 "$perf_pid" 2>/dev/null || break
    sleep 0.1
  done
  sleep 1
  kill -0 "$perf_pid" 2>/dev/null || { echo "perf record ($mode) failed:" >&2; cat "$WORK/$mode.log" >&2; exit 1; }
  rec_start=$(date +%s.%N)
}
# stop_recording MODE WORKLOAD ROUND: stops perf, appends its bytes and seconds
# to recordings.tsv, and removes its perf.data.
stop_recording() {
  local mode=$1 workload=$2 round=$3
  local stop size
  stop=$(date +%s.%N)
  kill -INT "$perf_pid"
  wait "$perf_pid" || true
  perf_pid=
  size=$(stat -c %s "$perf_out")
  printf '%s\t%s\t%s\t%s\t%s\n' "$workload" "$mode" "$round" "$size" \
    "$(echo "$stop - $rec_start" | bc -l)" >>"$WORK/recordings.tsv"
  if [ "$STATS" = 1 ] && [ "$workload" = futex ] && [ "$round" = $((ROUNDS - 1)) ]; then
    perf report -i "$perf_out" --stats >"$WORK/$workload.$mode.stats" 2>&1 || true
  fi
  grep -iE 'lost|captured' "$WORK/$mode.log" | sed "s/^/$workload.$mode.$round: /" >>"$WORK/perf-messages.txt" || true
  rm -f "$perf_out" "$perf_out.old"
}

modes=(plain before after)
: >"$WORK/recordings.tsv"
: >"$WORK/perf-messages.txt"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load before: $load_start; $ROUNDS rounds of $RUNS runs; futex: $futex_cmd; tar: $FILES files" >&2
for ((round = 0; round < ROUNDS; round++)); do
  for workload in futex tar; do
    for ((k = 0; k < ${#modes[@]}; k++)); do
      mode=${modes[(k + round) % ${#modes[@]}]}
      [ "$mode" = plain ] || start_recording "$mode"
      if [ "$workload" = futex ]; then
        hyperfine --warmup 1 --runs "$RUNS" --style none \
          --export-json "$WORK/$workload.$mode.$round.json" -n "$workload.$mode" \
          "$futex_cmd" >/dev/null
      else
        hyperfine --warmup 1 --runs "$RUNS" --style none \
          --prepare "rm -rf $WORK/mnt/x && mkdir $WORK/mnt/x && sync -f $WORK/mnt" \
          --export-json "$WORK/$workload.$mode.$round.json" -n "$workload.$mode" \
          "tar xf $WORK/files.tar -C $WORK/mnt/x && sync -f $WORK/mnt/x" >/dev/null
      fi
      [ "$mode" = plain ] || stop_recording "$mode" "$workload" "$round"
    done
  done
  echo "round $round done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load after: $load_end" >&2

python3 - "$WORK" "$load_start" "$load_end" "FUTEX=$FUTEX ROUNDS=$ROUNDS RUNS=$RUNS FILES=$FILES ITERS=$ITERS" <<'PY' | tee "$WORK/futex_overhead.md"
import collections, glob, json, statistics, sys
work, load_start, load_end, params = sys.argv[1:5]
modes = ["plain", "before", "after"]
times, rounds = {}, {}
for w in ["futex", "tar"]:
    for m in modes:
        per_round = [json.load(open(f))["results"][0]["times"]
                     for f in sorted(glob.glob(f"{work}/{w}.{m}.[0-9]*.json"))]
        times[w, m] = [t for r in per_round for t in r]
        rounds[w, m] = [statistics.median(r) for r in per_round]
rec = collections.defaultdict(lambda: [0, 0.0])
for line in open(f"{work}/recordings.tsv"):
    w, m, _, size, secs = line.split("\t")
    rec[w, m][0] += int(size)
    rec[w, m][1] += float(secs)
print(f"{params}; load average (1/5/15 min) {load_start} before, {load_end} after\n")
print("| workload | mode | runs | median [ms] | median of round medians [ms] | mean ± sd [ms] | / plain | after / before | written [MB/s] |")
print("|---|---|---|---|---|---|---|---|---|")
for w in ["futex", "tar"]:
    med = {m: statistics.median(times[w, m]) for m in modes}
    for m in modes:
        t = times[w, m]
        ab = f"{med['after'] / med['before']:.3f}" if m == "after" else ""
        size, secs = rec[w, m]
        mbs = f"{size / secs / 1e6:.1f}" if secs else ""
        print(f"| {w} | {m} | {len(t)} | {med[m] * 1e3:.0f} | {statistics.median(rounds[w, m]) * 1e3:.0f} "
              f"| {statistics.mean(t) * 1e3:.0f} ± {statistics.stdev(t) * 1e3:.0f} "
              f"| {med[m] / med['plain']:.3f} | {ab} | {mbs} |")
print()
print("Per-round medians [ms]:")
for w in ["futex", "tar"]:
    for m in modes:
        print(f"- {w} {m}: " + ", ".join(f"{r * 1e3:.0f}" for r in rounds[w, m]))
PY
for m in before after; do
  f="$WORK/futex.$m.stats"
  [ -s "$f" ] || continue
  echo "== futex workload, $m, last round: perf report --stats"
  awk '/TOTAL events:/ { print "total events", $3 }
       / stats:$/ { name = $1 }
       /SAMPLE events:/ && name ~ /(futex|wait4|waitid|flock)$/ { print name, $3 }
       /LOST/ { print }' "$f"
done
echo "== perf messages"
cat "$WORK/perf-messages.txt"
echo "results in $WORK"
