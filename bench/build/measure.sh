#!/usr/bin/env bash
# Times builds of the `slowlab` binary from empty target directories, one
# profile after the other, from a copy of a commit (so that edits to the
# checkout during the minutes of a build cannot change what is built),
# with the load before and after and cargo's --timings report of each.
#
#   bench/build/measure.sh [COMMIT] [PROFILE…]    (default HEAD; release release-lto)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
commit="${1:-HEAD}"
shift || true
[ "$#" -gt 0 ] || set -- release release-lto
out="${BENCH_OUT:-/tmp/slowlab-bench/build}"
src="$(mktemp -d /tmp/slowlab-build-src.XXXXXX)"
trap 'rm -rf "$src"' EXIT
mkdir -p "$out"
git -C "$repo" archive "$commit" | tar -x -C "$src"
sha="$(git -C "$repo" rev-parse --short=12 "$commit")"
cd "$src"
for p in "$@"; do
  target="$(mktemp -d /tmp/slowlab-build-target.XXXXXX)"
  echo "== $p ($sha): load before $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -f "$p: %e s wall, %U s user, %S s sys" \
    env SLOWLAB_COMMIT="$sha" CARGO_TARGET_DIR="$target" \
    cargo build -q --profile "$p" --bin slowlab --timings 2>&1 | grep -v '^ *Timing report'
  echo "== $p: load after $(cut -d' ' -f1-3 /proc/loadavg); binary $(stat -c %s "$target/$p/slowlab") bytes"
  cp "$target/cargo-timings/cargo-timing.html" "$out/timing-$p.html"
  rm -rf "$target"
done
