#!/usr/bin/env bash
# Accuracy of `slowlab sweep` on a loaded 2-core machine: classifies a
# linear, an n log n and a quadratic workload RUNS times each (default 10)
# while another CPU-bound process runs beside it, and tallies the verdicts.
# Expected: linear, linear, superlinear every time.
#
# Usage: bench/sweep/accuracy.sh [RUNS]      (from the repository root)
set -euo pipefail
runs=${1:-10}
cd "$(dirname "$0")/../.."
cargo build --profile release-lto -q -p slowlab
bin=$PWD/target/release-lto/slowlab
out=$(mktemp -d)
hog_pid=""
cleanup() { [ -n "$hog_pid" ] && kill "$hog_pid" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT INT TERM

# The other CPU-bound process: endless arithmetic on one core.
"$bin" __child burn n 1000000000000 & hog_pid=$!

declare -A expect=([linear]=linear [nlogn]=linear [quadratic]=superlinear)
declare -A sizes=([linear]=2M..32M [nlogn]=500k..8M [quadratic]=8000..64000)
declare -A cmd=([linear]="n {n} --scale 50" [nlogn]="nlogn {n} --scale 10" [quadratic]="n2 {n}")

fail=0
for work in linear nlogn quadratic; do
  right=0
  for i in $(seq 1 "$runs"); do
    # shellcheck disable=SC2086
    "$bin" sweep --sizes "${sizes[$work]}" --seed "$i" --json "$out/$work.$i.json" -- \
      "$bin" __child burn ${cmd[$work]} > "$out/$work.$i.txt"
    verdict=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["verdict"], "%.2f" % (r["exponent"] or 0), r["exponent_ci"], round(r["elapsed_s"]), "s", r["sizes"][-1])' "$out/$work.$i.json")
    echo "$work run $i: $verdict"
    [ "${verdict%% *}" = "${expect[$work]}" ] && right=$((right + 1))
  done
  echo "== $work: $right/$runs classified ${expect[$work]}"
  [ "$right" -eq "$runs" ] || fail=1
done
exit $fail
