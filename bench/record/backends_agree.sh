#!/usr/bin/env bash
# Whether the eBPF recorder and perf give the same critical path (issue 40:
# "the analyses agree between backends, on the tests' programs and on programs
# that are not theirs"). PART=tests: the programs of
# crates/slowlab/tests/fixtures/why, each recorded with `slowlab record
# --backend perf` and `--backend bpf`, the two summaries of `analyze
# --critical-path` printed one under the other. PART=others: everyday programs
# (xz, dd with O_DSYNC, find on a cold page cache, a Python program whose
# threads fight over the GIL, a sort that spills to disk, a shell's sleeps),
# each run under `slowlab diagnose --backend perf` and `--backend bpf`: the
# summary and the findings' ids. PART=all (the default): both. It does not
# judge them: read them side by side.
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
# Each backend's `diagnose` of one command: its summary and its findings.
diagnose() { # NAME CMD...
  local n=$1; shift
  for b in perf bpf; do
    # The page cache as the other backend found it (find reads the disk the first time only).
    sync && echo 3 >/proc/sys/vm/drop_caches
    rm -rf "${WORK:?}/$n.$b"
    "$SLOWLAB" diagnose --backend "$b" -o "$WORK/$n.$b" -- "$@" >/dev/null 2>&1 || true
    echo "$n $b: $(python3 - "$WORK/$n.$b" <<'PY'
import json, sys
path = json.load(open(sys.argv[1] + "/critical_path.json"))
findings = json.load(open(sys.argv[1] + "/findings.json"))
print(path.get("summary"), "| findings:", [f["id"] for f in findings])
PY
)"
  done
}

PART=${PART:-all}
if [ "$PART" = all ] || [ "$PART" = tests ]; then
  run mutex_sleep 3 4
  run retry_sleep /nonexistent/flag 25
  run lock_chain
  run pipe_pair
  run join_compute
  run condvar_compute
fi
if [ "$PART" = all ] || [ "$PART" = others ]; then
  [ -f "$WORK/random.bin" ] || head -c 8M /dev/urandom >"$WORK/random.bin"
  diagnose xz sh -c "head -c 3M $WORK/random.bin | xz -6 -T1 >/dev/null"
  diagnose dd-dsync dd if=/dev/zero of="$WORK/dd.out" bs=64k count=256 oflag=dsync status=none
  diagnose find-cold sh -c 'find /usr/share -name "*.gz" | wc -l'
  diagnose python-gil python3 -c '
import threading
def spin():
    n = 0
    for i in range(3_000_000):
        n += i
threads = [threading.Thread(target=spin) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()'
  diagnose sort-spill sh -c "od -An -tu4 -w4 -N 8000000 $WORK/random.bin | sort -n -S 1M -T $WORK | tail -1"
  diagnose sleeps sh -c 'sleep 0.3; sleep 0.2'
fi
echo "recordings in $WORK" >&2
