#!/usr/bin/env bash
# What each part of the eBPF recorder costs overhead.sh's tar workload (untar
# 4,000 files into an ext4 file system of its own on a loop device, then
# `sync -f`), in wall time, the parts switched off one by one: the
# `sched_record` example records in the background (system-wide, as `slowlab
# record --backend bpf` does) with
#
#   full          everything (what `slowlab record --backend bpf` records)
#   no-syscalls   without the detectors' syscalls and their paths
#                 (SCHED_DETECTOR_SYSCALLS=0)
#   no-stacks     without those and without any stack (SCHED_STACKS=none too):
#                 the records of samples, switches, wake-ups, faults, disk
#                 requests and lifetimes alone
#   no-paths      everything but the detectors' syscalls' paths
#   stackless     everything without any stack
#   no-sys        everything without any syscall (the waiting ones either)
#   no-samples    everything without the CPU samples
#   no-faults     everything without page faults and disk requests
#   bare          switches, wake-ups and lifetimes only, without stacks
#   bare-samples  the same and the CPU samples (1000 Hz), without stacks
#   samples-250   everything, the CPU samples at 250 Hz
#   tick          everything, the CPU samples on the scheduler's tick
#                 (SCHED_TICK=1: CONFIG_HZ, no interrupts of their own)
#   bare-tick     bare and the CPU samples on the tick, without stacks
#
# and plain (nothing recorded) as the base; rounds of RUNS runs in a rotated
# order, as overhead.sh does. The difference between two modes is what the
# part costs; no-stacks is the floor of a recorder that keeps one record per
# event.
#
# Usage (root):
#   cargo build --profile test-release -p slowlab-bpf --example sched_record
#   ROUNDS=6 RUNS=5 bench/record/parts.sh [target/test-release/examples/sched_record]
set -euo pipefail
cd "$(dirname "$0")/../.."
EXAMPLE=$(realpath "${1:-target/test-release/examples/sched_record}")
ROUNDS=${ROUNDS:-4}
RUNS=${RUNS:-5}
FILES=${FILES:-4000}
WORK=${WORK:-$(mktemp -d /tmp/slowlab-record-parts.XXXXXX)}
[ -x "$EXAMPLE" ] || { echo "no $EXAMPLE: cargo build --profile test-release -p slowlab-bpf --example sched_record" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "hyperfine is missing: sudo apt-get install hyperfine" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run as root: the recording is system-wide" >&2; exit 1; }
mkdir -p "$WORK/mnt"

# overhead.sh's workload (the same files for the same FILES).
bench/record/files_tar.sh "$WORK/files.tar" "$FILES"
truncate -s 512M "$WORK/fs.img"
mkfs.ext4 -q -F "$WORK/fs.img"
mount -o loop "$WORK/fs.img" "$WORK/mnt"
recorder=""
# Undoes what the script did, whatever failed first (`set +e`: see budget.sh).
cleanup() {
  set +e
  [ -n "$recorder" ] && kill "$recorder" 2>/dev/null && wait "$recorder" 2>/dev/null
  umount "$WORK/mnt"
  rm -f "$WORK/fs.img" "$WORK"/*.data
}
trap cleanup EXIT

settings() { # MODE: the example's environment
  local nothing="SCHED_STACKS=none SCHED_SYSCALLS=0 SCHED_DETECTOR_SYSCALLS=0 SCHED_FAULTS=0"
  case $1 in
    full) echo "SCHED_STACKS=blocking" ;;
    no-syscalls) echo "SCHED_DETECTOR_SYSCALLS=0" ;;
    no-stacks) echo "SCHED_DETECTOR_SYSCALLS=0 SCHED_STACKS=none" ;;
    no-paths) echo "SCHED_PATHS=0" ;;
    stackless) echo "SCHED_STACKS=none" ;;
    no-sys) echo "SCHED_SYSCALLS=0 SCHED_DETECTOR_SYSCALLS=0" ;;
    no-samples) echo "SCHED_FREQ=0" ;;
    no-faults) echo "SCHED_FAULTS=0" ;;
    bare) echo "$nothing SCHED_FREQ=0" ;;
    bare-samples) echo "$nothing" ;;
    samples-250) echo "SCHED_FREQ=250" ;;
    tick) echo "SCHED_TICK=1" ;;
    bare-tick) echo "$nothing SCHED_TICK=1" ;;
    *) echo "unknown mode $1" >&2; exit 1 ;;
  esac
}

# MODES picks the modes (default: plain full no-syscalls no-stacks).
read -ra modes <<<"${MODES:-plain full no-syscalls no-stacks}"
for m in "${modes[@]}"; do [ "$m" = plain ] || settings "$m" >/dev/null; done
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of $RUNS runs" >&2
for ((round = 0; round < ROUNDS; round++)); do
  for ((k = 0; k < ${#modes[@]}; k++)); do
    mode=${modes[(k + round) % ${#modes[@]}]}
    recorder=""
    if [ "$mode" != plain ]; then
      # shellcheck disable=SC2046 # the settings are words
      env $(settings "$mode") "$EXAMPLE" "$WORK/$mode.data" sleep infinity >"$WORK/$mode.log" 2>&1 &
      recorder=$!
      sleep 2.5 # loaded and attached: ~2.3 s here
    fi
    hyperfine --warmup 1 --runs "$RUNS" --style none \
      --prepare "rm -rf $WORK/mnt/x && mkdir $WORK/mnt/x && sync -f $WORK/mnt" \
      --export-json "$WORK/$mode.$round.json" -n "$mode" \
      "tar xf $WORK/files.tar -C $WORK/mnt/x && sync -f $WORK/mnt/x" >/dev/null
    if [ -n "$recorder" ]; then
      pkill -P "$recorder" -x sleep
      wait "$recorder" || true
    fi
  done
done
recorder=""
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 bench/record/medians.py "$WORK" "${modes[@]}" | tee "$WORK/parts.md"
echo "results in $WORK" >&2
