#!/usr/bin/env bash
# What the eBPF recorder's programs cost, in the kernel, during one run of
# overhead.sh's workload (`tar xf` of 4,000 files into a loop-mounted ext4, then
# `sync -f`): each build's `sched_record` example records that run with
# `sysctl kernel.bpf_stats_enabled=1`, and the run times of its programs are
# summed (the CPU samples apart: they run at a fixed rate on every CPU, busy or
# idle, for as long as the example records, ~2 s with its start). The builds
# alternate, ROUNDS rounds. A count of work, not a timing: it does not move with
# the machine's load as the wall time does.
#
# Usage (root):
#   cargo build --profile test-release -p slowlab-bpf --example sched_record
#   WORK=/tmp/ovh bench/record/program_time.sh OLD/examples/sched_record target/test-release/examples/sched_record
#
# WORK/files.tar is overhead.sh's (made by it; run it once with that WORK).
set -euo pipefail
WORK=${WORK:?set WORK to the work directory of overhead.sh (it holds files.tar)}
ROUNDS=${ROUNDS:-4}
[ -f "$WORK/files.tar" ] || { echo "no $WORK/files.tar: run bench/record/overhead.sh with WORK=$WORK first" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run as root: the recording is system-wide" >&2; exit 1; }
[ $# -ge 1 ] || { echo "usage: $0 SCHED_RECORD [SCHED_RECORD...]" >&2; exit 1; }

mnt=$(mktemp -d /tmp/slowlab-progtime.XXXXXX)
truncate -s 512M "$mnt.img"
mkfs.ext4 -q -F "$mnt.img"
mount -o loop "$mnt.img" "$mnt"
stats_before=$(cat /proc/sys/kernel/bpf_stats_enabled)
cleanup() { # whatever failed first (set +e: see budget.sh)
  set +e
  echo "$stats_before" >/proc/sys/kernel/bpf_stats_enabled
  umount "$mnt"
  rm -rf "$mnt" "$mnt.img" "$mnt.data"
}
trap cleanup EXIT
echo 1 >/proc/sys/kernel/bpf_stats_enabled

for ((round = 0; round < ROUNDS; round++)); do
  for example in "$@"; do
    rm -rf "$mnt/x" && mkdir "$mnt/x" && sync -f "$mnt"
    "$example" "$mnt.data" sh -c "tar xf $WORK/files.tar -C $mnt/x && sync -f $mnt/x" 2>&1 |
      awk -v build="$example" '
        / ns\/run / { ms += $6; if ($1 == "on_sample") samples += $6; else rest += $6 }
        END { printf "%s: %.1f ms of programs: %.1f ms the samples, %.1f ms the rest\n", build, ms, samples, rest }'
  done
done
