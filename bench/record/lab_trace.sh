#!/usr/bin/env bash
# How long `slowlab lab --tiny --trace DIR` takes with each backend, for two builds side
# by side: rounds in turn (the order of the builds reversed every round), each build's
# median and the ratio of the medians. Needs root (and perf for its backend).
#
#   ROUNDS=3 bench/record/lab_trace.sh BEFORE/slowlab AFTER/slowlab
#
# BACKENDS="bpf perf" by default; WORK is where the traces go (removed after each run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
before=${1:?usage: lab_trace.sh BEFORE AFTER}
after=${2:?usage: lab_trace.sh BEFORE AFTER}
rounds=${ROUNDS:-3}
backends=${BACKENDS:-bpf perf}
work=${WORK:-$(mktemp -d /tmp/slowlab-lab-trace.XXXXXX)}
mkdir -p "$work"
times="$work/times.tsv"
: >"$times"

run() { # run BUILD-LABEL BINARY BACKEND
    local dir="$work/trace"
    rm -rf "$dir"
    local start end
    start=$(date +%s.%N)
    if ! "$2" lab --tiny --backend "$3" --trace "$dir" >"$work/out" 2>&1; then
        echo "$1 $3 failed:" >&2
        tail -5 "$work/out" >&2
        exit 1
    fi
    end=$(date +%s.%N)
    rm -rf "$dir"
    printf '%s\t%s\t%s\n' "$1" "$3" "$(echo "$end - $start" | bc)" | tee -a "$times"
}

for round in $(seq "$rounds"); do
    order="before after"
    [ $((round % 2)) -eq 0 ] && order="after before"
    for backend in $backends; do
        for build in $order; do
            if [ "$build" = before ]; then run before "$before" "$backend"; else run after "$after" "$backend"; fi
        done
    done
done

python3 "$here/builds_table.py" "$times" "backend"
