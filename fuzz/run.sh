#!/usr/bin/env bash
# Builds a fuzz target with `cargo afl` and fuzzes it, starting from its
# committed corpus (fuzz/corpus/TARGET), into fuzz/out/TARGET (not in git;
# a second run resumes there).
#
#   fuzz/run.sh TARGET [EXECS]   fuzz TARGET for EXECS executions (10 M by default)
#   fuzz/run.sh cmin TARGET      merge what a run found into the committed corpus
#                                (afl-cmin -e: the smallest set with the same edges;
#                                seeds with names of their own are kept as they are)
#   fuzz/run.sh stats TARGET     the figures of the run so far (fuzzer_stats)
#
# TARGET: perf_data, sched_trace, paths_capture, cgroup_notes, lab_import, etl.
# Needs `cargo install cargo-afl` once (afl builds on stable Rust).
set -euo pipefail
cd "$(dirname "$0")"

export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_AUTORESUME=1

# Where cargo-afl keeps AFL++'s tools (for afl-cmin.bash: `cargo afl cmin`
# runs the Python afl-cmin, which keeps no file with this build).
afl_bin() {
  ls -d "$HOME"/.local/share/afl.rs/rustc-*/afl.rs-*/afl/bin | tail -1
}

build() {
  cargo afl build --release --bin "$1" >&2
}

case ${1:-} in
  cmin)
    target=${2:?usage: fuzz/run.sh cmin TARGET}
    build "$target"
    bin=$(afl_bin)
    tmp=$(mktemp -d -p "$PWD" .cmin.XXXXXX) # afl-cmin refuses /tmp
    trap 'rm -rf "$tmp"' EXIT
    mkdir "$tmp/all"
    cp corpus/"$target"/* "$tmp/all/"
    if [[ -d out/$target/default/queue ]]; then
      find -L out/"$target"/default/queue -maxdepth 1 -type f -exec cp {} "$tmp/all/" \;
    fi
    AFL_PATH=$bin PATH=$bin:$PATH "$bin/afl-cmin.bash" -e -i "$tmp/all" -o "$tmp/min" \
      -- "target/release/$target" >/dev/null
    # The minimized set replaces what an earlier cmin wrote (NNNN-hash); seeds with
    # names of their own stay (tests read them by name).
    rm -f corpus/"$target"/[0-9][0-9][0-9][0-9]-*
    i=0
    for f in "$tmp"/min/*; do
      i=$((i + 1))
      cp "$f" "corpus/$target/$(printf '%04d' "$i")-$(sha1sum "$f" | cut -c1-12)"
    done
    echo "corpus/$target: $i files, $(du -sh "corpus/$target" | cut -f1)"
    ;;
  stats)
    target=${2:?usage: fuzz/run.sh stats TARGET}
    grep -E '^(run_time|execs_done|execs_per_sec|corpus_count|edges_found|total_edges|saved_crashes|saved_hangs|bitmap_cvg)' \
      out/"$target"/default/fuzzer_stats
    ;;
  perf_data | sched_trace | paths_capture | cgroup_notes | lab_import | etl)
    target=$1
    execs=${2:-10000000}
    build "$target"
    mkdir -p out
    # -m: a 4 GB address space, so that an allocation of gigabytes a
    # header claims fails and aborts (a crash) instead of passing unseen.
    # -t: an input that takes 2 s is a hang.
    cargo afl fuzz -E "$execs" -m 4096 -t 2000 -i "corpus/$target" -o "out/$target" \
      -- "target/release/$target"
    ;;
  *)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
