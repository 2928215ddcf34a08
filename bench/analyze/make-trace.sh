#!/usr/bin/env bash
# Records the benchmark trace: a real cargo build (slowlab's own perf crate
# and its dependencies, release, into a fresh target dir) recorded system-wide
# with call stacks at 2999 Hz, stopped after 22 s: cpu-clock samples idle
# CPUs too, so a 2-CPU machine yields 2 x 2999 x 22 = about 132,000
# samples. Never committed: it is regenerated here.
#
#   bench/analyze/make-trace.sh [OUT.data]      (needs root and perf)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${1:-/tmp/slowlab-bench/cargo.data}"
mkdir -p "$(dirname "$out")"
target="$(mktemp -d /tmp/slowlab-bench-target.XXXXXX)"
trap 'rm -rf "$target"' EXIT
cd "$repo"
cargo fetch -q
perf record -a -g -F 2999 -o "$out" -- \
    timeout 22 cargo build -q --release --offline -p slowlab-perf --target-dir "$target" || true
perf report -i "$out" --stats 2>/dev/null | grep -m1 "SAMPLE events" || true
ls -l "$out"
