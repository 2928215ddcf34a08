#!/usr/bin/env bash
# Records the benchmark trace of one analysis per trace: `slowlab record`
# (scheduler switches and wake-ups, syscalls, faults, paths: everything the
# critical path and the detectors read) of a cargo build of slowlab, stopped
# after SECONDS (default 60). Never committed: it is made again here.
#
#   SLOWLAB=target/release-lto/slowlab bench/analysis/make-trace.sh [OUT.data] [SECONDS]
#
# Needs root and perf. A build that ends before SECONDS is started again
# after `cargo clean`, so the trace is of compilation to the end.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
slowlab="${SLOWLAB:-$repo/target/release-lto/slowlab}"
out="${1:-/tmp/slowlab-bench/build-60s.data}"
seconds="${2:-60}"
mkdir -p "$(dirname "$out")"
target="$(mktemp -d /tmp/slowlab-bench-target.XXXXXX)"
trap 'rm -rf "$target"' EXIT
cd "$repo"
cargo fetch -q
build_loop="while true; do cargo build -q --profile release-lto --offline -p slowlab-analyze --target-dir '$target'; cargo clean -q --target-dir '$target'; done"
"$slowlab" record -o "$out" -- timeout "$seconds" bash -c "$build_loop" || true
ls -l "$out"
