# Shared by scale.sh and budget.sh (sourced, not run): the slowlab binary
# to measure, its symbol cache, and peak RSS. Expects $repo and $out to be
# set.

# SLOWLAB: the binary given, else a release build of this checkout.
if [ -z "${SLOWLAB:-}" ]; then
    (cd "$repo" && cargo build -q --profile release-lto -p slowlab)
    SLOWLAB="${CARGO_TARGET_DIR:-$repo/target}/release-lto/slowlab"
fi

peak_rss_mb() {  # command... -> peak RSS in MB (one run, /usr/bin/time -v)
    /usr/bin/time -v -o "$out/time-v.txt" "$@" > /dev/null 2>&1 || true
    awk -F: '/Maximum resident/ {gsub(/ /,"",$2); printf "%.0f", $2/1024}' "$out/time-v.txt"
}

# The symbol cache the benchmarks use (filled by their warm-up runs), not
# the user's: `$CACHED $SLOWLAB ...` keeps and reads it, `$UNCACHED
# $SLOWLAB ...` keeps nothing (every run does all the symbol work).
CACHED="env SLOWLAB_CACHE_DIR=$out/symbol-cache"
UNCACHED="env SLOWLAB_CACHE_DIR=off"
