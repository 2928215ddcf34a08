#!/usr/bin/env bash
# Where the eBPF recorder's overhead on overhead.sh's tar workload comes from, part by
# part: untars 4,000 files into a fresh directory of an ext4 file system of its own on a
# loop device (then `sync -f`), RUNS times per configuration of the `sched_record`
# example recording system-wide in the background, in ROUNDS rounds with the
# configurations in rotated order (a shared machine's slow spells then fall on all alike),
# and prints each one's median time against the plain runs' of the same rounds.
#
# The configurations (the example's SCHED_* variables, sched_record.rs):
#   plain       nothing recorded
#   all         what `slowlab record --backend bpf` records (stacks on blocking events)
#   nodet       all but the detectors' syscalls (openat, the stat family, mmap, …)
#   nopaths     all but their paths
#   nostacks    all without any stack
#   nosys       all without any syscall (the waiting ones either)
#   nosamples   all without the CPU samples
#   nofaults    all without page faults and disk requests
#   bare        switches, wake-ups and process lifetimes only, without stacks
#   bare-samples  bare with the CPU samples (1000 Hz), without stacks
#   samples-250   all with the CPU samples at 250 Hz
# MODES picks them (default: all of them).
#
# Usage (root):
#   cargo build --profile test-release -p slowlab-bpf --example sched_record
#   ROUNDS=6 RUNS=5 bench/record/decompose.sh [target/test-release/examples/sched_record]
#
# Writes WORK/times.txt (mode, microseconds) and WORK/decompose.md (WORK: $WORK or a
# temp dir); the loop file system is unmounted at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
EXAMPLE=$(realpath "${1:-target/test-release/examples/sched_record}")
ROUNDS=${ROUNDS:-4}
RUNS=${RUNS:-5}
FILES=${FILES:-4000}
WORK=${WORK:-$(mktemp -d /tmp/slowlab-record-decompose.XXXXXX)}
[ -x "$EXAMPLE" ] || { echo "no $EXAMPLE: cargo build --profile test-release -p slowlab-bpf --example sched_record" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run as root: the recording is system-wide" >&2; exit 1; }

declare -A CONFIG=(
  [plain]=""
  [all]="SCHED_STACKS=blocking"
  [nodet]="SCHED_STACKS=blocking SCHED_DETECTOR_SYSCALLS=0"
  [nopaths]="SCHED_STACKS=blocking SCHED_PATHS=0"
  [nostacks]="SCHED_STACKS=none"
  [nosys]="SCHED_STACKS=blocking SCHED_SYSCALLS=0 SCHED_DETECTOR_SYSCALLS=0"
  [nosamples]="SCHED_STACKS=blocking SCHED_FREQ=0"
  [nofaults]="SCHED_STACKS=blocking SCHED_FAULTS=0"
  [bare]="SCHED_STACKS=none SCHED_SYSCALLS=0 SCHED_DETECTOR_SYSCALLS=0 SCHED_FREQ=0 SCHED_FAULTS=0"
  [bare-samples]="SCHED_STACKS=none SCHED_SYSCALLS=0 SCHED_DETECTOR_SYSCALLS=0 SCHED_FAULTS=0"
  [samples-250]="SCHED_STACKS=blocking SCHED_FREQ=250"
)
read -ra modes <<<"${MODES:-plain all nodet nopaths nostacks nosys nosamples nofaults bare bare-samples samples-250}"
for m in "${modes[@]}"; do
  [ -n "${CONFIG[$m]+set}" ] || { echo "unknown mode $m: one of ${!CONFIG[*]}" >&2; exit 1; }
done

mkdir -p "$WORK/mnt"
bench/record/files_tar.sh "$WORK/files.tar" "$FILES"
truncate -s 1G "$WORK/fs.img"
mkfs.ext4 -q -F "$WORK/fs.img"
mount -o loop "$WORK/fs.img" "$WORK/mnt"
recorder=""
trap '[ -n "$recorder" ] && pkill -P "$recorder" -x sleep; umount "$WORK/mnt"; rm -f "$WORK/fs.img" "$WORK"/*.data' EXIT
: >"$WORK/times.txt"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of $RUNS runs" >&2
n=0
for ((round = 0; round < ROUNDS; round++)); do
  for ((k = 0; k < ${#modes[@]}; k++)); do
    mode=${modes[(k + round) % ${#modes[@]}]}
    if [ "$mode" != plain ]; then
      # shellcheck disable=SC2086 # the configuration is words of VAR=VALUE
      env ${CONFIG[$mode]} "$EXAMPLE" "$WORK/$mode.data" sleep infinity >"$WORK/$mode.log" 2>&1 &
      recorder=$!
      sleep 2.5 # loaded and attached (~2 s here)
    fi
    for ((i = 0; i < RUNS; i++)); do
      n=$((n + 1))
      mkdir -p "$WORK/mnt/d$n"
      sync -f "$WORK/mnt"
      start=$(date +%s%N)
      tar xf "$WORK/files.tar" -C "$WORK/mnt/d$n" && sync -f "$WORK/mnt/d$n"
      end=$(date +%s%N)
      echo "$mode $(((end - start) / 1000))" >>"$WORK/times.txt"
      rm -rf "$WORK/mnt/d$n"
    done
    if [ -n "$recorder" ]; then
      pkill -P "$recorder" -x sleep
      wait "$recorder" || true
      recorder=""
    fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$WORK/times.txt" "${modes[@]}" <<'EOF' | tee "$WORK/decompose.md"
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    mode, us = line.split()
    times.setdefault(mode, []).append(int(us) / 1000)
plain = statistics.median(times["plain"]) if "plain" in times else None
print("| mode | runs | median [ms] | median / plain |")
print("|---|---|---|---|")
for mode in sys.argv[2:]:
    t = statistics.median(times[mode])
    ratio = f"{t / plain:.3f}" if plain else "-"
    print(f"| {mode} | {len(times[mode])} | {t:.1f} | {ratio} |")
EOF
echo "results in $WORK" >&2
