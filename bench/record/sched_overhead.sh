#!/usr/bin/env bash
# What recording the scheduler costs a context-switch-heavy workload
# (pipe_pingpong.c: two processes bouncing a byte, ~230,000 switches/s on a
# 2-core VM), timed by hyperfine with no recording and while a system-wide
# recorder runs in the background (started before and stopped after the timed
# runs, so its start and stop are not counted):
#
#   plain  no recording
#   perf   perf record -a -g -e cpu-clock/freq=1000/ -e sched:sched_switch
#          -e sched:sched_waking -o FILE (what `slowlab record` costs on it)
#   bpf    slowlab record --backend bpf --freq 1000 (the eBPF scheduler recorder,
#          its samples on a timer at perf's rate, not on the tick: the same
#          information as perf's)
#   bpf-WHICH  the same with --bpf-stacks WHICH (none, kernel, blocking, all):
#          what its stack walks cost; pick modes with MODES="plain perf bpf-none ..."
#   bpf-WHICH-walk  the same with --bpf-no-reuse: every stack walked, none reused
#          from the thread's last event at the same site
#
# Usage (root; perf installed):
#   SLOWLAB=target/test-release/slowlab bench/record/sched_overhead.sh
#   ROUNDS=4 RUNS=5 BOUNCES=100000 ... bench/record/sched_overhead.sh
#
# Prints medians, ratios to plain and each recorder's bytes per second of
# recording (file size / time it ran), from WORK/MODE.ROUND.json.
set -euo pipefail
cd "$(dirname "$0")/../.."

SLOWLAB=$(realpath "${SLOWLAB:-target/release-lto/slowlab}")
ROUNDS=${ROUNDS:-4}
RUNS=${RUNS:-5}
BOUNCES=${BOUNCES:-100000}
WORK=${WORK:-$(mktemp -d /tmp/slowlab-sched-bench.XXXXXX)}
mkdir -p "$WORK"
[ -x "$SLOWLAB" ] || { echo "no $SLOWLAB: build slowlab first" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run as root: the recording is system-wide" >&2; exit 1; }
cc -O2 -fno-omit-frame-pointer -o "$WORK/pipe_pingpong" bench/record/pipe_pingpong.c

# recorder start|stop MODE
recorder() {
  local mode=$2 out="$WORK/$2.data"
  if [ "$1" = start ]; then
    rm -f "$out"
    case $mode in
      plain) return 0 ;;
      perf) setsid perf record -a -g -e cpu-clock/freq=1000/ -e sched:sched_switch \
              -e sched:sched_waking -o "$out" >"$WORK/$mode.log" 2>&1 </dev/null & ;;
      bpf) setsid "$SLOWLAB" record --backend bpf --freq 1000 -o "$out" >"$WORK/$mode.log" 2>&1 </dev/null & ;;
      bpf-*-walk) w=${mode#bpf-}; setsid "$SLOWLAB" record --backend bpf --freq 1000 --bpf-stacks "${w%-walk}" \
              --bpf-no-reuse -o "$out" >"$WORK/$mode.log" 2>&1 </dev/null & ;;
      bpf-*) setsid "$SLOWLAB" record --backend bpf --freq 1000 --bpf-stacks "${mode#bpf-}" -o "$out" \
              >"$WORK/$mode.log" 2>&1 </dev/null & ;;
      *) echo "unknown mode $mode" >&2; exit 1 ;;
    esac
    echo $! >"$WORK/$mode.pid"
    for _ in $(seq 200); do [ -s "$out" ] && break; sleep 0.1; done
    sleep 1
    date +%s.%N >"$WORK/$mode.t0"
  else
    [ "$mode" = plain ] && return 0
    date +%s.%N >"$WORK/$mode.t1"
    local pid; pid=$(cat "$WORK/$mode.pid")
    kill -INT "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    # bytes/s of the recording: file size over the time it ran (start to stop)
    echo "$(stat -c %s "$out") $(cat "$WORK/$mode.t0") $(cat "$WORK/$mode.t1")" >>"$WORK/$mode.sizes"
    tail -2 "$WORK/$mode.log" >>"$WORK/$mode.logs"
  fi
}

read -ra modes <<<"${MODES:-plain perf bpf}"
# CPU=N runs both processes on CPU N: on an idle VM the bounces between CPUs wait for
# an idle CPU to wake (the plain run took 4.7 s for 100,000 bounces there, ~0.5 s on a
# busy machine), which no recorder's cost can be read against.
PIN=${CPU:+taskset -c $CPU }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $BOUNCES bounces; $ROUNDS rounds of $RUNS runs" >&2
for ((round = 0; round < ROUNDS; round++)); do
  for ((k = 0; k < ${#modes[@]}; k++)); do
    mode=${modes[(k + round) % ${#modes[@]}]}
    recorder start "$mode"
    hyperfine --warmup 1 --runs "$RUNS" --style none \
      --export-json "$WORK/$mode.$round.json" -n "$mode" \
      "$PIN$WORK/pipe_pingpong $BOUNCES" >/dev/null
    recorder stop "$mode"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$WORK" "${modes[@]}" <<'PY' | tee "$WORK/sched_overhead.md"
import json, statistics, sys, glob, os
work, modes = sys.argv[1], sys.argv[2:]
times = {m: [t for f in sorted(glob.glob(f"{work}/{m}.[0-9]*.json"))
             for t in json.load(open(f))["results"][0]["times"]] for m in modes}
base = statistics.median(times["plain"])
# Bytes for the same work: each round's file holds the same RUNS + 1 runs.
print("| mode | runs | median [ms] | mean ± sd [ms] | median / plain | added [ms] | MB/s written | MB a round |")
print("|---|---|---|---|---|---|---|---|")
for m in modes:
    t = times[m]
    med = statistics.median(t)
    rate = per_round = ""
    sizes = f"{work}/{m}.sizes"
    if os.path.exists(sizes):
        rows = [l.split() for l in open(sizes)]
        rate = "%.1f" % (sum(float(r[0]) for r in rows) / sum(float(r[2]) - float(r[1]) for r in rows) / 1e6)
        per_round = "%.1f" % (statistics.median(float(r[0]) for r in rows) / 1e6)
    print(f"| {m} | {len(t)} | {med * 1e3:.0f} | {statistics.mean(t) * 1e3:.0f} ± {statistics.stdev(t) * 1e3:.0f} | {med / base:.3f} | {(med - base) * 1e3:.0f} | {rate} | {per_round} |")
PY
echo "results in $WORK" >&2
