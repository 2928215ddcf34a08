#!/usr/bin/env bash
# What `slowlab record` costs the work it records: hyperfine times a fixed
# file workload (untar 4,000 small files into an ext4 file system of its own
# on a loop device, then `sync -f` it, so its disk requests happen inside the
# timed run and nobody else's do) with no recording, and while a system-wide
# `slowlab record` runs in the background (started before and stopped after
# the timed runs, so its own start and stop are not counted):
#
#   plain           no recording
#   before          SLOWLAB_BEFORE (a build without block:block_rq_issue and
#                   block:block_rq_complete), if given
#   after           this build's perf backend (`--backend perf`: `record`'s
#                   default before it became `auto`), with the eBPF path capture
#   after-no-paths  the same without the path capture (--no-paths)
#   bpf             `slowlab record --backend bpf`: the eBPF recorder (switches,
#                   wake-ups, samples, lifetimes, the waiting syscalls, disk
#                   requests, every page fault, the detectors' syscalls and
#                   their paths: what `after` records; without a command, its
#                   samples on the scheduler's tick)
#   bpf-no-paths    the same without the paths (what `after-no-paths` records)
#   bpf-before      SLOWLAB_BEFORE's eBPF recorder (`--backend bpf`), if given:
#                   to compare two builds' eBPF recorders side by side
#   bpf-tick        `--backend bpf --samples-on tick`: the CPU samples on the
#                   scheduler's tick, with no interrupts of their own (`bpf`
#                   since the tick became the default without a command)
#   bpf-timer       `--backend bpf --samples-on timer`: the samples on a timer
#                   of their own at 1000 Hz, as perf's (`bpf` before that)
#   bpf-ring        the flight recorder: `--backend bpf --ring 60` (the last
#                   minute kept in memory, nothing written until a snapshot;
#                   the samples on the tick, --ring's default)
#   bpf-ring-before SLOWLAB_BEFORE's flight recorder (`--backend bpf --ring 60`)
#   bpf-ring-timer  the flight recorder with the samples on a timer at 1000 Hz
#                   (`--samples-on timer`)
#   after-ring      the same with perf's backend (`--backend perf --ring 60`:
#                   perf's ring buffers, written at a snapshot)
#
# MODES picks the modes (default: plain, before when given, after,
# after-no-paths), e.g. MODES="plain after after-no-paths bpf".
#
# WORKLOAD picks what is timed:
#   tar       (the default) the untar and `sync -f` above
#   launches  process churn, as a build or a shell script makes it: a shell
#             starting LAUNCHES (500) times `/bin/true` and `ls /`, each a new
#             process with new stacks (its libraries mapped at new addresses)
#
# Usage (root; perf installed):
#   bench/record/overhead.sh [SLOWLAB_BEFORE]
#   ROUNDS=4 RUNS=5 FILES=4000 SLOWLAB=target/release-lto/slowlab bench/record/overhead.sh /tmp/old/slowlab
#
# Writes WORK/MODE.ROUND.json (hyperfine) and WORK/overhead.md (WORK: $WORK
# or a temp dir) and prints the table; the loop file system is unmounted at
# the end.
set -euo pipefail
cd "$(dirname "$0")/../.."

SLOWLAB=$(realpath "${SLOWLAB:-target/release-lto/slowlab}")
BEFORE=${1:-}
ROUNDS=${ROUNDS:-4}
RUNS=${RUNS:-5}
FILES=${FILES:-4000}
WORKLOAD=${WORKLOAD:-tar}
LAUNCHES=${LAUNCHES:-500}
WORK=${WORK:-$(mktemp -d /tmp/slowlab-record-bench.XXXXXX)}
mkdir -p "$WORK"

[ -x "$SLOWLAB" ] || { echo "no $SLOWLAB: cargo build --profile release-lto -p slowlab first" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "hyperfine is missing: sudo apt-get install hyperfine" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run as root: the recording is system-wide" >&2; exit 1; }

# The workload: FILES files of 1-8 KiB in 40 directories, as one tar.
bench/record/files_tar.sh "$WORK/files.tar" "$FILES"

# A file system of the workload's own: `sync -f` flushes only its writes.
mkdir -p "$WORK/mnt"
if ! mountpoint -q "$WORK/mnt"; then
  truncate -s 512M "$WORK/fs.img"
  mkfs.ext4 -q -F "$WORK/fs.img"
  mount -o loop "$WORK/fs.img" "$WORK/mnt"
fi
# Undoes what the script did, whatever failed first: a recording still running (a
# failed hyperfine leaves its mode's recorder up), the loop mount, the image.
cleanup() {
  set +e
  for f in "$WORK"/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -INT "$pid" 2>/dev/null && while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    rm -f "$f"
  done
  umount "$WORK/mnt" 2>/dev/null
  rm -f "$WORK/fs.img"
}
trap cleanup EXIT

# recorder start|stop MODE: a recording in the background, or none.
cat >"$WORK/recorder" <<EOF
#!/usr/bin/env bash
set -u
mode=\$2
case \$mode in
  plain) exit 0 ;;
  before) bin="$BEFORE"; extra="" ;;
  after) bin="$SLOWLAB"; extra="--backend perf" ;;
  after-no-paths) bin="$SLOWLAB"; extra="--backend perf --no-paths" ;;
  bpf) bin="$SLOWLAB"; extra="--backend bpf" ;;
  bpf-no-paths) bin="$SLOWLAB"; extra="--backend bpf --no-paths" ;;
  bpf-before) bin="$BEFORE"; extra="--backend bpf" ;;
  bpf-tick) bin="$SLOWLAB"; extra="--backend bpf --samples-on tick" ;;
  bpf-timer) bin="$SLOWLAB"; extra="--backend bpf --samples-on timer" ;;
  bpf-ring) bin="$SLOWLAB"; extra="--backend bpf --ring 60" ;;
  bpf-ring-before) bin="$BEFORE"; extra="--backend bpf --ring 60" ;;
  bpf-ring-timer) bin="$SLOWLAB"; extra="--backend bpf --ring 60 --samples-on timer" ;;
  after-ring) bin="$SLOWLAB"; extra="--backend perf --ring 60" ;;
esac
out="$WORK/\$mode.data"
if [ "\$1" = start ]; then
  rm -f "\$out"*
  setsid "\$bin" record \$extra -o "\$out" >"$WORK/\$mode.log" 2>&1 </dev/null &
  echo \$! >"$WORK/\$mode.pid"
  # Recording once perf has begun writing (or, in ring mode, which writes
  # nothing until a snapshot, once it says it records), plus a second.
  for _ in \$(seq 200); do
    ls "\$out"* >/dev/null 2>&1 && break
    grep -qE "keeping the last|hold about" "$WORK/\$mode.log" 2>/dev/null && break
    sleep 0.1
  done
  sleep 1
else
  pid=\$(cat "$WORK/\$mode.pid")
  if [ "\$mode" = before ]; then
    # That build left SIGINT to the terminal: stop its perf directly.
    pkill -INT -P "\$pid" -x perf || true
  else
    kill -INT "\$pid"
  fi
  while kill -0 "\$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$WORK/\$mode.pid"
  ls -l "\$out"* >>"$WORK/\$mode.log" 2>&1 || true
fi
EOF
chmod +x "$WORK/recorder"

modes=(plain)
[ -n "$BEFORE" ] && modes+=(before)
modes+=(after after-no-paths)
if [ -n "${MODES:-}" ]; then
  read -ra modes <<<"$MODES"
fi

# Rounds of RUNS timed runs per mode, the modes in a rotated order each
# round: a shared machine's slow spells then fall on every mode alike.
case $WORKLOAD in
  tar)
    prepare="rm -rf $WORK/mnt/x && mkdir $WORK/mnt/x && sync -f $WORK/mnt"
    timed="tar xf $WORK/files.tar -C $WORK/mnt/x && sync -f $WORK/mnt/x"
    what="$FILES files, $(du -h "$WORK/files.tar" | cut -f1) tar" ;;
  launches)
    prepare=true
    timed="for i in \$(seq $LAUNCHES); do /bin/true; ls / >/dev/null; done"
    what="$LAUNCHES launches of /bin/true and ls" ;;
  *) echo "WORKLOAD is tar or launches, not $WORKLOAD" >&2; exit 2 ;;
esac
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); workload: $what; $ROUNDS rounds of $RUNS runs" >&2
for ((round = 0; round < ROUNDS; round++)); do
  for ((k = 0; k < ${#modes[@]}; k++)); do
    mode=${modes[(k + round) % ${#modes[@]}]}
    "$WORK/recorder" start "$mode"
    hyperfine --warmup 1 --runs "$RUNS" --style none \
      --prepare "$prepare" \
      --export-json "$WORK/$mode.$round.json" \
      -n "$mode" \
      "$timed" >/dev/null
    "$WORK/recorder" stop "$mode"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 bench/record/medians.py "$WORK" "${modes[@]}" | tee "$WORK/overhead.md"
for m in "${modes[@]}"; do
  [ "$m" = plain ] && continue
  echo "== $m (the last round's recording)"
  tail -2 "$WORK/$m.log"
  # How much of the trace the disk-request events are (a perf trace's: perf
  # cannot read the eBPF recorder's).
  perf report -i "$WORK/$m.data" --stats 2>/dev/null | awk '
    /TOTAL events:/ { total = $3 }
    / stats:$/ { name = $1 }
    /SAMPLE events:/ && name ~ /^block:/ { block += $3 }
    END { if (total) printf "events: %d, block:* %d (%.2f%%)\n", total, block, 100 * block / total }' || true
  ls -l "$WORK/$m.data" | awk '{ printf "bytes: %d\n", $5 }'
done
echo "results in $WORK"
