#!/usr/bin/env bash
# Runs every view of `slowlab analyze` (and `slowlab export`) on each input of a
# directory (a fuzz target's queue or corpus) and prints those that crashed:
# an exit by a signal or a panic, where a damaged trace must give a warning or
# a one-line error (exit 1 or 2). What the fuzz targets do not reach: the
# views' own code and the exports. A whole corpus takes minutes per thousand
# inputs; CI (scripts/test.sh) sweeps the regressions and an eighth of each
# corpus (EVERY=8).
#
#   fuzz/sweep_views.sh DIR [N]   N inputs of DIR picked at random (all by default)
#
# SLOWLAB: the binary (default target/test-release/slowlab); EXT: the inputs'
# extension as slowlab needs it (`.etl` for the etl corpus; default `.data`);
# EVERY=K: every K-th input in name order instead (the same ones each run).
set -uo pipefail
dir=${1:?usage: fuzz/sweep_views.sh DIR [N]}
root=$(cd "$(dirname "$0")/.." && pwd)
slowlab=${SLOWLAB:-$root/target/test-release/slowlab}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
input=$work/in${EXT:-.data}
views=("" --waits --faults --procs --syscalls --timeline --findings --critical-path
  --events "--by comm,func" "--flamegraph $work/f.svg" "--offcpu-flamegraph $work/o.svg"
  "--pprof $work/p.pb.gz" "--fxprof $work/x.json" "--html $work/r.html"
  "--collapsed $work/c.txt" "--json --critical-path" "--callers main")
crashed() { # rc, output file
  [[ $1 -gt 2 ]] || grep -q 'panicked at\|memory allocation of' "$2"
}
n=0 bad=0
while read -r f; do
  n=$((n + 1))
  cp "$f" "$input"
  for v in "${views[@]}"; do
    # shellcheck disable=SC2086 # a view is one option or an option and its value
    timeout 60 "$slowlab" analyze "$input" --no-symbols $v >"$work/out" 2>&1
    rc=$?
    if crashed $rc "$work/out"; then
      bad=$((bad + 1))
      echo "$f [analyze $v] exit $rc: $(grep -m1 'panicked at\|memory allocation of' "$work/out")"
    fi
  done
  rm -rf "$work/pq"
  timeout 60 "$slowlab" export "$input" --parquet "$work/pq" >"$work/out" 2>&1
  rc=$?
  if crashed $rc "$work/out"; then
    bad=$((bad + 1))
    echo "$f [export] exit $rc: $(grep -m1 'panicked at' "$work/out")"
  fi
done < <(if [[ -n ${EVERY:-} ]]; then
  find "$dir" -maxdepth 1 -type f | LC_ALL=C sort | awk -v k="$EVERY" '(NR - 1) % k == 0'
else
  find "$dir" -maxdepth 1 -type f | shuf -n "${2:-1000000}"
fi)
echo "$dir: $n inputs, $((${#views[@]} + 1)) commands each: $bad crashed"
[[ $n -gt 0 ]] || { echo "error: no inputs in $dir" >&2; exit 1; }
[[ $bad -eq 0 ]]
