#!/usr/bin/env bash
# Issue 40's three figures, measured in one run and judged against its goals:
#
#   1. the tar workload of overhead.sh under `slowlab record --backend bpf`
#      (the CPU samples on the scheduler's tick, its default without a
#      command), and under the flight recorder (`--ring 60`, nothing written
#      until a snapshot, the samples on the tick too): at most 1.05x its plain
#      time (the median of rounds in rotated order, perf's backend measured
#      beside it as `after`, and the recorder with its samples on a 1000 Hz
#      timer, as a command's recording takes them, as `bpf-timer`);
#   2. the ping-pong of sched_overhead.sh (both processes on CPU 0): the eBPF
#      recorder's added time at most half of `perf record -a -g -e
#      cpu-clock/freq=1000/ -e sched:sched_switch -e sched:sched_waking`'s;
#   3. on the same ping-pong, its bytes for the same work (a round of runs) at
#      most a third of that perf's.
#
# Usage (root; perf and hyperfine installed):
#   SLOWLAB=target/test-release/slowlab bench/record/three_figures.sh
#   ROUNDS=6 RUNS=8 ... bench/record/three_figures.sh
#
# Writes WORK/tar/overhead.md, WORK/pingpong/sched_overhead.md and
# WORK/figures.md (WORK: $WORK or a temp dir), and prints the verdicts. Its
# exit code says nothing about them: it is a measurement, not a test.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLOWLAB=$(realpath "${SLOWLAB:-target/release-lto/slowlab}")
WORK=${WORK:-$(mktemp -d /tmp/slowlab-three-figures.XXXXXX)}
export SLOWLAB ROUNDS=${ROUNDS:-4} RUNS=${RUNS:-5}
mkdir -p "$WORK/tar" "$WORK/pingpong"

WORK=$WORK/tar MODES="plain after bpf bpf-timer bpf-ring" bench/record/overhead.sh
WORK=$WORK/pingpong MODES="plain perf bpf" CPU=0 bench/record/sched_overhead.sh

python3 - "$WORK" <<'PY' | tee "$WORK/figures.md"
import sys

def table(path):
    """The rows of a markdown table written by overhead.sh or sched_overhead.sh, by mode."""
    rows = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 4 and cells[0] not in ("mode", "") and not cells[0].startswith("-"):
            rows[cells[0]] = cells
    return rows

work = sys.argv[1]
tar = table(f"{work}/tar/overhead.md")
ping = table(f"{work}/pingpong/sched_overhead.md")
tar_ratio = float(tar["bpf"][4])
ring_ratio = float(tar["bpf-ring"][4])
timer_ratio = float(tar["bpf-timer"][4])
perf_tar = float(tar["after"][4])
added_bpf, added_perf = float(ping["bpf"][5]), float(ping["perf"][5])
bytes_bpf, bytes_perf = float(ping["bpf"][7]), float(ping["perf"][7])
verdict = lambda ok: "met" if ok else "NOT met"
print("| figure | goal | measured | |")
print("|---|---|---|---|")
print(f"| tar workload, bpf (samples on the tick) median / plain | ≤ 1.05 | {tar_ratio:.3f} (perf's backend {perf_tar:.3f}) | {verdict(tar_ratio <= 1.05)} |")
print(f"| tar workload, bpf --samples-on timer (1000 Hz) median / plain | ≤ 1.05 | {timer_ratio:.3f} | {verdict(timer_ratio <= 1.05)} |")
print(f"| tar workload, the flight recorder (bpf, --ring 60, samples on the tick) median / plain | ≤ 1.05 | {ring_ratio:.3f} | {verdict(ring_ratio <= 1.05)} |")
print(f"| ping-pong, bpf's added time / perf's | ≤ 0.50 | {added_bpf:.0f} / {added_perf:.0f} ms = {added_bpf / added_perf:.2f} | {verdict(added_bpf <= added_perf / 2)} |")
print(f"| ping-pong, bpf's bytes a round / perf's | ≤ 0.33 | {bytes_bpf:.1f} / {bytes_perf:.1f} MB = {bytes_bpf / bytes_perf:.2f} | {verdict(bytes_bpf <= bytes_perf / 3)} |")
PY
