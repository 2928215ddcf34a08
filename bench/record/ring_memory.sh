#!/bin/bash
# The flight recorder's memory under process churn (issue 40: "runs for days with
# bounded memory"): `slowlab record --ring 2` with its window capped at 8 MiB, a shell
# starting `true` and `ls` without pause, a snapshot saved every 5 s (three kept); prints
# the recorder's anonymous memory (RssAnon, KiB) each second, then its mean and most
# (MB), the CPU it used (user and system clock ticks, /proc/PID/stat) and its last lines.
#
#   sudo bench/record/ring_memory.sh [SLOWLAB] [SECONDS (300)] [BACKEND (bpf)] [RING (2)]
#
# RING: the window's seconds (`--ring`); the flight recorder's default is 60. The window
# is capped at 8 MiB (SLOWLAB_BPF_RING_MAX_BYTES), or at MAX_BYTES if given ("" for the
# recorder's own cap).
#
# A recorder whose memory is bounded settles within a minute or two and stays there.
set -eu
SLOWLAB=${1:-target/test-release/slowlab}
SECONDS_RUN=${2:-300}
BACKEND=${3:-bpf}
RING=${4:-2}
dir=$(mktemp -d /tmp/ring-memory.XXXXXX)
churn=
rec=
cleanup() {
    [ -n "$churn" ] && kill "$churn" 2>/dev/null || true
    [ -n "$rec" ] && kill -INT "$rec" 2>/dev/null && wait "$rec" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
(while :; do /bin/true; ls / >/dev/null; sleep 0.005; done) &
churn=$!
SLOWLAB_BPF_RING_MAX_BYTES=${MAX_BYTES-8388608} "$SLOWLAB" record -o "$dir/ring.data" \
    --backend "$BACKEND" --ring "$RING" --keep-snapshots 3 2> "$dir/ring.err" &
rec=$!
rss_sum=0
rss_max=0
for s in $(seq "$SECONDS_RUN"); do
    sleep 1
    if (( s % 5 == 0 )); then
        "$SLOWLAB" record --save -o "$dir/ring.data" > /dev/null 2>&1 || true
    fi
    rss=$(awk '/RssAnon/ {print $2}' "/proc/$rec/status")
    echo "$s $rss"
    rss_sum=$((rss_sum + rss))
    rss_max=$((rss > rss_max ? rss : rss_max))
done
echo "rss mean $((rss_sum / SECONDS_RUN / 1024)) MB, max $((rss_max / 1024)) MB"
echo "cpu ticks $(awk '{print $14 + $15}' "/proc/$rec/stat")"
kill -INT "$rec"
wait "$rec" || true
rec=
tail -n 2 "$dir/ring.err"
