#!/usr/bin/env bash
# Times the README's main command from a fresh clone, as a newcomer runs
# it: `bash scripts/setup.sh && cargo run --release -- lab`, in a clone of
# COMMIT with an empty target directory, and says when the build finished
# (cargo's `Running` line), when the lab printed its first result (the
# first measurement of its first scenario), and when it ended. Crates come
# from cargo's local registry cache: download time is not counted; setup installs nothing on a machine that
# has the packages (run it on a fresh one to count that too).
#
#   bench/build/first-answer.sh [COMMIT]      (default HEAD)
#
# Prints each line of the run with the seconds since the start, then the
# three times. Needs root for the lab's five scenarios (without, three are
# skipped and the lab is quicker).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
commit="${1:-HEAD}"
work="$(mktemp -d /tmp/slowlab-first-answer.XXXXXX)"
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/slowlab"
git -C "$work/slowlab" checkout -q "$commit"
cd "$work/slowlab"
echo "== $(git rev-parse --short=12 HEAD): load before $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs" >&2
start=$(date +%s.%N)
log="$work/run.log"
# Each line stamped with the seconds since the start (stdout and stderr).
( env CARGO_TARGET_DIR="$work/target" bash -c 'bash scripts/setup.sh && cargo run --release -- lab' 2>&1 ) |
  while IFS= read -r line; do
    awk -v s="$start" -v n="$(date +%s.%N)" -v l="$line" 'BEGIN { printf "%8.1f  %s\n", n - s, l }'
  done | tee "$log"
echo "== load after $(cut -d' ' -f1-3 /proc/loadavg)" >&2
built=$(awk '/ Running `/ {print $1; exit}' "$log")
# The first measurement the lab prints (topdown-alloc's "Topdown allocs
# took … s for 500 allocs"), after cargo has started it.
first=$(awk '/ Running `/ {running = 1} running && / took / {print $1; exit}' "$log")
last=$(tail -n 1 "$log" | awk '{print $1}')
echo "built and started after ${built:-?} s; first result after ${first:-?} s; the lab ended after ${last:-?} s"
