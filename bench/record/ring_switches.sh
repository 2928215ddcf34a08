#!/usr/bin/env bash
# What the flight recorder's own CPU is under a context-switch-heavy workload
# (pipe_pingpong.c: two processes bouncing a byte, ~200,000 switches a second), for
# several builds of slowlab side by side: in each round, each build in turn runs
# `slowlab record --backend bpf --ring 60` while the ping-pong runs BOUNCES bounces;
# prints the recorder's CPU (user + system clock ticks of 1/100 s, /proc/PID/stat, read
# before its stop) and the ping-pong's time, a line per build and round, then each
# build's medians. The builds take turns, in rotated order, so the host's slow spells
# fall on all of them.
#
#   sudo ROUNDS=4 BOUNCES=400000 bench/record/ring_switches.sh OLD/slowlab NEW/slowlab
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-4}
BOUNCES=${BOUNCES:-400000}
WORK=${WORK:-$(mktemp -d /tmp/slowlab-ring-switches.XXXXXX)}
[ $# -ge 1 ] || { echo "usage: $0 SLOWLAB [SLOWLAB…]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root: the recording is system-wide" >&2; exit 1; }
mkdir -p "$WORK"
cc -O2 -fno-omit-frame-pointer -o "$WORK/pipe_pingpong" bench/record/pipe_pingpong.c
builds=("$@")
rec=
cleanup() {
  [ -n "$rec" ] && kill -INT "$rec" 2>/dev/null && wait "$rec" 2>/dev/null || true
  rm -f "$WORK"/ring.data*
}
trap cleanup EXIT
trap 'exit 130' INT TERM

: > "$WORK/results"
n=${#builds[@]}
for ((round = 0; round < ROUNDS; round++)); do
  for ((k = 0; k < n; k++)); do
    i=$(((round + k) % n))
    slowlab=${builds[$i]}
    "$slowlab" record --backend bpf --ring 60 -o "$WORK/ring.data" 2>"$WORK/ring.$i.err" &
    rec=$!
    # Started once its control socket answers (`--save` would write a snapshot: wait
    # for the line that says it records instead).
    for _ in $(seq 100); do
      grep -q "recording all CPUs" "$WORK/ring.$i.err" && break
      sleep 0.1
    done
    before=$(awk '{print $14 + $15}' "/proc/$rec/stat")
    start=$(date +%s%N)
    "$WORK/pipe_pingpong" "$BOUNCES" >/dev/null
    end=$(date +%s%N)
    after=$(awk '{print $14 + $15}' "/proc/$rec/stat")
    kill -INT "$rec"
    wait "$rec" || true
    rec=
    ms=$(((end - start) / 1000000))
    echo "round $round build $i ($slowlab): recorder $((after - before)) ticks, ping-pong $ms ms" \
      | tee -a "$WORK/results"
  done
done
# median FIELD-FROM-END LINES: the median of that field (mawk has no asort).
median() {
  awk -v f="$1" '{ print $(NF - f) }' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
for ((i = 0; i < n; i++)); do
  ticks=$(grep " build $i " "$WORK/results" | median 4)
  ms=$(grep " build $i " "$WORK/results" | median 1)
  echo "${builds[$i]}: recorder median $ticks ticks, ping-pong median $ms ms ($ROUNDS rounds)"
done
