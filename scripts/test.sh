#!/usr/bin/env bash
# The project's test command (what CI runs, via .ci/run): installs what is
# missing on the machine, checks formatting and lints, runs every Rust test
# in release mode (the lab's timing-sensitive scenarios need optimized code),
# then builds the Windows probes and runs them under Wine.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

step "setup (missing system packages)"
bash scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "cargo test (release)"
cargo test --workspace --release
cargo build --release -p slowlab

if [ -x probes/windows/test.sh ] || [ -f probes/windows/test.sh ]; then
  step "Windows probes under Wine (and slowlab import of their results)"
  SLOWLAB_BIN="$PWD/target/release/slowlab" bash probes/windows/test.sh
fi
step "all tests passed"
