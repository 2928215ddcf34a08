#!/usr/bin/env bash
# Remakes the model snapshots of the golden tests
# (crates/slowlab/tests/snapshots/SCENARIO-VARIANT/): records each lab
# scenario's pathological and control variant with `slowlab lab --trace`,
# converts each trace into bundle.json.gz with the snapshot example (cutting
# long ones to the window that matters), writes the COMMAND file that says
# how, and blesses the golden files. Needs root and perf, like `lab --trace`.
#
# Usage: sudo bash scripts/snapshots.sh [SCENARIO...]   (default: all five)
#
# The lab runs at nice $SLOWLAB_SNAPSHOT_NICE (default -10), so that other
# work on the machine does not starve it into cpu-starvation findings; set
# it to 0 to record as `slowlab lab --trace` does by default. The traces are
# kept in $SLOWLAB_SNAPSHOT_WORK (default: a new directory under /tmp); with
# SLOWLAB_SNAPSHOT_REUSE=1, the traces already there are converted again
# instead of recorded anew.
set -euo pipefail
cd "$(dirname "$0")/.."

snapshots=crates/slowlab/tests/snapshots
work=${SLOWLAB_SNAPSHOT_WORK:-$(mktemp -d -t slowlab-snapshots.XXXXXX)}
nice_level=${SLOWLAB_SNAPSHOT_NICE:--10}
if [[ $# -gt 0 ]]; then
  scenarios=("$@")
else
  scenarios=(topdown-alloc notify-buffer log-probe teardown-lock working-set-cap)
fi

# The window of each run's trace, as snapshot options: the shortest stretch
# from the start (or before the end) in which the run's detector still fires
# (pathological) or that still shows the variant's work (control), so that
# each snapshot stays under about a megabyte. log-probe's detector needs
# every launch of its run. teardown-lock runs for tens of seconds (hundreds
# of MB); its last round's teardown, with the rtnl stall the detector names,
# is at the end.
window() {
  case $1 in
    topdown-alloc-pathological) echo "--to 0.15" ;;
    notify-buffer-pathological) echo "--to 0.7" ;;
    notify-buffer-control) echo "--to 0.2" ;;
    log-probe-control) echo "--to 0.4" ;;
    teardown-lock-*) echo "--last 0.8" ;;
    working-set-cap-pathological) echo "--to 1.0" ;;
    working-set-cap-control) echo "--to 0.5" ;;
    *) echo "" ;;
  esac
}

cargo build --release -p slowlab --bin slowlab --example snapshot
bin=target/release/slowlab
tool=target/release/examples/snapshot
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z $(git status --porcelain 2>/dev/null) ]] || commit="$commit (with uncommitted changes)"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)

for scenario in "${scenarios[@]}"; do
  lab=(nice -n "$nice_level" "$bin" lab --trace "$work" "$scenario")
  if [[ ${SLOWLAB_SNAPSHOT_REUSE:-} == 1 && -f $work/$scenario-control/trace.data ]]; then
    # Remaking the snapshots of earlier recordings (e.g. with new windows).
    load="unknown (traces reused)"
  else
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "==> ${lab[*]}" >&2
    # Exit code 1 is a failed detector check: the snapshot is still made
    # (its golden findings then show what the detector said).
    "${lab[@]}" || echo "warning: lab --trace $scenario exited with $?" >&2
  fi
  for variant in pathological control; do
    run="$scenario-$variant"
    dir="$snapshots/$run"
    mkdir -p "$dir"
    read -r -a cut <<<"$(window "$run")"
    convert=("$tool" "$work/$run/trace.data" "$dir" "${cut[@]}")
    said=$("${convert[@]}" 2>&1)
    echo "$said" >&2
    {
      echo "# How $run/bundle.json.gz was made (scripts/snapshots.sh $scenario)"
      echo "${lab[*]}"
      echo "${convert[*]}"
      echo "SLOWLAB_BLESS=1 cargo test --release -p slowlab --test golden"
      echo
      echo "recorded: $(date -u -r "$work/$run/trace.data" '+%Y-%m-%d %H:%M UTC')"
      echo "slowlab:  $commit"
      echo "kernel:   $(uname -srvm)"
      echo "machine:  $cpu, $(nproc) CPUs, $mem; load average before recording: $load"
      echo "trace:    $(du -h "$work/$run/trace.data" | cut -f1) of perf.data"
      echo "$said" | sed 's/^/snapshot: /'
    } >"$dir/COMMAND"
  done
done

SLOWLAB_BLESS=1 cargo test --release -p slowlab --test golden
echo "traces kept in $work; review the golden files with: git diff $snapshots" >&2
