#!/usr/bin/env bash
# Whether the eBPF recorder and perf give the same critical path on the
# programs of crates/slowlab/tests/fixtures/why (issue 40: "the analyses agree
# between backends"): records each with `slowlab record --backend perf` and
# `--backend bpf` and prints the two summaries of `analyze --critical-path`
# one under the other, to read side by side. It does not judge them.
#
# Usage (root; perf installed):
#   SLOWLAB=target/test-release/slowlab bench/record/backends_agree.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
SLOWLAB=$(realpath "${SLOWLAB:-target/release-lto/slowlab}")
WORK=${WORK:-$(mktemp -d /tmp/slowlab-backends.XXXXXX)}
mkdir -p "$WORK"
SRC=crates/slowlab/tests/fixtures/why

run() { # NAME ARGS...
  local n=$1; shift
  [ -x "$WORK/$n" ] || cc -O1 -g -fno-omit-frame-pointer -pthread -o "$WORK/$n" "$SRC/$n.c"
  for b in perf bpf; do
    "$SLOWLAB" record --backend "$b" -o "$WORK/$n.$b.data" -- "$WORK/$n" "$@" >/dev/null 2>&1
    echo "$n $b: $("$SLOWLAB" analyze "$WORK/$n.$b.data" --critical-path --json 2>/dev/null |
      python3 -c 'import json, sys; print(json.load(sys.stdin).get("summary"))')"
  done
}
run mutex_sleep 3 4
run retry_sleep /nonexistent/flag 25
run lock_chain
run pipe_pair
run join_compute
run condvar_compute
echo "recordings in $WORK" >&2
