#!/usr/bin/env bash
# The project's test command (what CI runs, via .ci/run): installs what is
# missing on the machine, checks formatting and lints, runs every Rust test
# in release mode (the lab's timing-sensitive scenarios need optimized code),
# then builds the Windows probes and runs them under Wine, sweeps every view
# of `slowlab analyze` over damaged traces (the fuzz regressions and an eighth
# of each corpus: no panic, no abort), and last runs the analyze benchmarks'
# scripts once each on traces of two seconds (bench/analyze/smoke.sh: they
# keep working; the figures are not kept).
# Every test binary runs even when one fails (`--no-fail-fast`), so that one
# run shows every failure. The tests build with the `test-release` profile: `release` optimized,
# without its LTO (see Cargo.toml).
#
# A test that cannot run here (no root, perf, cgroup controller, tool) says
# `SKIP: test: reason` and appends it to $SLOWLAB_SKIP_LOG; this script then
# fails, because CI runs as root with everything setup.sh installs. On a
# machine that truly lacks a capability, SLOWLAB_ALLOW_SKIPS=1 accepts them.
set -euo pipefail
cd "$(dirname "$0")/.."

SLOWLAB_SKIP_LOG=$(mktemp -t slowlab-skips.XXXXXX)
export SLOWLAB_SKIP_LOG
trap 'rm -f "$SLOWLAB_SKIP_LOG"' EXIT

# Each step says how long the run has taken so far (minutes:seconds): where a
# slow CI run spent its time, read from its log.
step() { printf '\n==> [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }

step "setup (missing system packages, with the tests' own)"
bash scripts/setup.sh --tests

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings (every feature; and the default build, without the fleet's Parquet and DuckDB)"
cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings
cargo clippy -p slowlab -p slowlab-exports --quiet -- -D warnings

step "cargo test (optimized: profile test-release; every feature, the fleet's too)"
cargo test --workspace --all-features --profile test-release --no-fail-fast

if [ -x probes/windows/test.sh ] || [ -f probes/windows/test.sh ]; then
  step "Windows probes under Wine (and slowlab import of their results)"
  SLOWLAB_BIN="$PWD/target/test-release/slowlab" bash probes/windows/test.sh
fi
step "every view of analyze, and export, on damaged traces (fuzz/sweep_views.sh: the regressions, an eighth of each corpus)"
for target in sched_trace perf_data etl; do
  ext=.data
  [[ $target == etl ]] && ext=.etl
  for dir in "fuzz/regressions/$target" "fuzz/corpus/$target"; do
    EVERY=$([[ $dir == fuzz/corpus/* ]] && echo 8 || echo 1) EXT=$ext \
      SLOWLAB="$PWD/target/test-release/slowlab" bash fuzz/sweep_views.sh "$dir"
  done
done
step "the analyze benchmarks' small cases (bench/analyze/smoke.sh)"
SLOWLAB="$PWD/target/test-release/slowlab" bash bench/analyze/smoke.sh
if [[ -s $SLOWLAB_SKIP_LOG ]]; then
  step "$(wc -l <"$SLOWLAB_SKIP_LOG") test(s) skipped"
  cat "$SLOWLAB_SKIP_LOG" >&2
  if [[ ${SLOWLAB_ALLOW_SKIPS:-} != 1 ]]; then
    echo "error: tests were skipped; CI must run them all (fix the machine, or set SLOWLAB_ALLOW_SKIPS=1 where a capability is truly missing)" >&2
    exit 1
  fi
fi
step "all tests passed"
