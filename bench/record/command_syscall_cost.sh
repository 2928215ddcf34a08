#!/usr/bin/env bash
# What a syscall costs a command while `slowlab record --backend BACKEND -- CMD` records
# it, for several builds side by side: syscall_mix.c times N getpid() (never recorded)
# and N stat() of a missing path (recorded, with its path) in the thread's CPU time, under
# each build's recording in turn, ROUNDS rounds; prints each run and the medians.
#
# Usage (root): ROUNDS=6 N=200000 BACKEND=perf bench/record/command_syscall_cost.sh SLOWLAB...
#   e.g. bench/record/command_syscall_cost.sh /tmp/old/slowlab target/test-release/slowlab
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-6}
N=${N:-200000}
BACKEND=${BACKEND:-perf}
[[ $# -ge 1 ]] || { sed -n '2,9p' "$0"; exit 2; }
WORK=$(mktemp -d /tmp/slowlab-command-syscalls.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -o "$WORK/mix" bench/record/syscall_mix.c
for round in $(seq "$ROUNDS"); do
  for build in "$@"; do
    line=$("$build" record --backend "$BACKEND" -o "$WORK/t.data" -- "$WORK/mix" "$N" 2>/dev/null | grep getpid)
    echo "$build $line"
  done
done | tee "$WORK/runs.txt"
python3 bench/record/syscall_mix_medians.py "$WORK/runs.txt"
