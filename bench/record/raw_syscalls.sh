#!/usr/bin/env bash
# What each way of taking the syscalls costs a syscall, recorded and not (issue 40): the
# eBPF recorder's programs on each syscall's own tracepoints (the default) against its two
# programs on the raw sys_enter/sys_exit tracepoints (SchedOptions::raw_syscalls), and no
# recording. syscall_mix.c times, in the thread's CPU time, N getpid() (never recorded)
# and then N stat() of a missing path (recorded, with its path and user stack). Modes
# alternate, ROUNDS rounds; prints each run and the medians. Also times the recorder's
# whole life around `true` (start, stop, detach) in each mode.
#
# Usage (root): ROUNDS=5 N=200000 bench/record/raw_syscalls.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-5}
N=${N:-200000}
WORK=$(mktemp -d /tmp/slowlab-raw-syscalls.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -o "$WORK/mix" bench/record/syscall_mix.c
cargo build --quiet --profile test-release -p slowlab-bpf --example sched_record
rec=target/test-release/examples/sched_record
for round in $(seq "$ROUNDS"); do
  echo "plain $("$WORK/mix" "$N")"
  for raw in 0 1; do
    echo "raw=$raw $(SCHED_RAW_SYSCALLS=$raw "$rec" "$WORK/r.slr" "$WORK/mix" "$N" 2>/dev/null | grep getpid)"
    start=$(date +%s%N)
    SCHED_RAW_SYSCALLS=$raw "$rec" "$WORK/t.slr" true >/dev/null 2>&1
    echo "life raw=$raw $(( ($(date +%s%N) - start) / 1000000 )) ms"
  done
done | tee "$WORK/runs.txt"
python3 bench/record/syscall_mix_medians.py "$WORK/runs.txt"
