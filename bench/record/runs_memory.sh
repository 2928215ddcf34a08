#!/usr/bin/env bash
# How much memory `slowlab diagnose --repeat 2` holds while it records a long, busy
# command (a `cargo build` of this workspace's slowlab-diagnose crate into a fresh target
# directory, ~85 s on 2 cores), for each build given: slowlab's resident memory every
# second, its largest while the first run's command ran (the recording, before any
# analysis), its largest over the whole command (the analyses too), and the size and
# stack count of the first run's trace. The runs of one build go one after the other;
# the builds in the order given. Needs root.
#
#   bench/record/runs_memory.sh OLD/slowlab NEW/slowlab
#
# WORK is where the runs go (kept: the traces are big, remove WORK after); BACKEND is
# given to --backend (default: bpf, whose spill this measures).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: runs_memory.sh SLOWLAB..." >&2; exit 2; }
work=${WORK:-$(mktemp -d /tmp/slowlab-runs-memory.XXXXXX)}
backend=${BACKEND:-bpf}
mkdir -p "$work"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); work in $work" >&2

n=0
for slowlab in "$@"; do
    n=$((n + 1))
    out="$work/build-$n"
    rm -rf "$out" "$work/target"
    mkdir -p "$out"
    start=$(date +%s.%N)
    "$slowlab" diagnose --backend "$backend" --repeat 2 -o "$out/runs" -- sh -c \
        "rm -rf '$work/target' && cd '$root' && cargo build --offline -q -p slowlab-diagnose --target-dir '$work/target'" \
        >"$out/stdout" 2>"$out/stderr" &
    pid=$!
    # Seconds since the start, and VmRSS in kB.
    while kill -0 "$pid" 2>/dev/null; do
        rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
        [ -n "$rss" ] && echo "$(echo "$(date +%s.%N) - $start" | bc) $rss" >>"$out/rss"
        sleep 1
    done
    wait "$pid" || { echo "build $n ($slowlab): diagnose failed, see $out/stderr" >&2; exit 1; }
    rm -rf "$work/target"
    python3 - "$slowlab" "$out" <<'EOF'
import re, struct, sys
slowlab, out = sys.argv[1], sys.argv[2]
samples = [tuple(map(float, l.split())) for l in open(f"{out}/rss")]
text = open(f"{out}/stdout").read()
# "  run   1    84.083 s  DIR/run-1": the first run's command ran from ~0 s for that long.
first = float(re.search(r"run\s+1\s+([\d.]+) s", text).group(1))
recording = max(kb for t, kb in samples if t <= first)
whole = max(kb for _, kb in samples)
trace = open(f"{out}/runs/run-1/trace.data", "rb").read()
pos, stacks = 8 + 24, 0
while pos + 8 <= len(trace):
    tag, length = struct.unpack_from("<II", trace, pos)
    stacks += tag == 4
    pos += 8 + length
print(f"{slowlab}: run 1 {first:.1f} s; slowlab's resident memory while it ran "
      f"{recording / 1024:.0f} MB at most, over both runs and analyses {whole / 1024:.0f} MB; "
      f"run 1's trace {len(trace) / 1e6:.0f} MB, {stacks} stacks")
EOF
done
