#!/usr/bin/env bash
# How long `slowlab diagnose --repeat N -- sleep 0.2` and a small `slowlab sweep
# --critical-path` take with each backend, for two builds side by side: rounds in turn
# (the order of the builds reversed every round), each build's median and the ratio of
# the medians. The command sleeps, so what is measured is slowlab's own time around
# it: starting and stopping the recording, cutting and analyzing each run's trace.
# Needs root (and perf for its backend).
#
#   ROUNDS=3 REPEAT=5 bench/record/repeat.sh BEFORE/slowlab AFTER/slowlab
#
# BACKENDS="bpf perf" by default; WORK is where the runs go (removed after each).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$(dirname "$0")/../.."
before=$(realpath "${1:?usage: repeat.sh BEFORE AFTER}")
after=$(realpath "${2:?usage: repeat.sh BEFORE AFTER}")
rounds=${ROUNDS:-3}
repeat=${REPEAT:-5}
backends=${BACKENDS:-bpf perf}
work=${WORK:-$(mktemp -d /tmp/slowlab-repeat.XXXXXX)}
mkdir -p "$work"
times="$work/times.tsv"
: >"$times"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds, --repeat $repeat" >&2

run() { # run BUILD-LABEL BINARY BACKEND WHAT
    local dir="$work/runs" start end
    rm -rf "$dir"
    start=$(date +%s.%N)
    case $4 in
    repeat) set -- "$1" "$2" "$3" "$4" diagnose --repeat "$repeat" --backend "$3" -o "$dir" -- sleep 0.2 ;;
    sweep) set -- "$1" "$2" "$3" "$4" sweep --critical-path --backend "$3" --sizes 1,2 --reps 2 \
        --all-sizes --no-adapt --keep-runs "$dir" -- sleep 0.{n} ;;
    esac
    if ! "$2" "${@:5}" >"$work/out" 2>&1; then
        echo "$1 $3 $4 failed:" >&2
        tail -5 "$work/out" >&2
        exit 1
    fi
    end=$(date +%s.%N)
    rm -rf "$dir"
    printf '%s\t%s\t%s\n' "$1" "$3 $4" "$(echo "$end - $start" | bc)" | tee -a "$times" >&2
}

for round in $(seq "$rounds"); do
    order="before after"
    [ $((round % 2)) -eq 0 ] && order="after before"
    for backend in $backends; do
        for what in repeat sweep; do
            for build in $order; do
                if [ "$build" = before ]; then bin=$before; else bin=$after; fi
                run "$build" "$bin" "$backend" "$what"
            done
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 "$here/builds_table.py" "$times" "backend and command"
