#!/usr/bin/env bash
# How long `slowlab sweep` takes to reach a confident verdict on a quadratic
# command, against a fixed full sweep of the same sizes (--all-sizes
# --no-adapt), side by side in one hyperfine run.
#
# Usage: bench/sweep/early-stop.sh [RUNS]      (from the repository root)
set -euo pipefail
runs=${1:-3}
cd "$(dirname "$0")/../.."
cargo build --profile release-lto -q -p slowlab
bin=$PWD/target/release-lto/slowlab
out=${OUT:-bench/sweep/early-stop.json}
work="$bin __child burn n2 {n}"
hyperfine --runs "$runs" --export-json "$out" \
  -n adaptive "$bin sweep --sizes 4000..64000 -- $work" \
  -n fixed-full "$bin sweep --sizes 4000..64000 --all-sizes --no-adapt -- $work"
python3 - "$out" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
a, f = r["adaptive"]["median"], r["fixed-full"]["median"]
print(f"median: adaptive {a:.1f} s, fixed full sweep {f:.1f} s: {f/a:.1f}x faster to a verdict")
PY
