#!/usr/bin/env bash
# Installs what slowlab needs on a Debian machine: the Debian packages listed in
# scripts/debian-packages.txt (only the missing ones). With --fleet, also
# DuckDB's library (for a build with `--features duckdb`: `slowlab fleet`
# queries). With --tests (scripts/test.sh), also what only the tests and
# benchmarks need: the packages marked `tests` there (mingw, Wine,
# Chromium, …), Playwright, PySpark and its Java, lld, DuckDB's library,
# and the Rust toolchain's rustfmt and clippy; without them a first run
# installs only what `slowlab` needs to build and run. Safe to run again: it does nothing when all is present.
# It does not build slowlab (cargo does that).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

tests=0
fleet=0
case "${1:-}" in
  --tests) tests=1; fleet=1 ;;
  --fleet) fleet=1 ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--tests | --fleet]" >&2; exit 2 ;;
esac

want=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/debian-packages.txt" |
  awk -v tests="$tests" '$2 != "tests" || tests == 1 {print $1}')
missing=()
for pkg in $want; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done

# apt's own output (hundreds of lines on a fresh machine) goes to a log;
# the terminal gets one line per step: what is installed, and why.
log="${SLOWLAB_SETUP_LOG:-${TMPDIR:-/tmp}/slowlab-setup.log}"
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "setup: not root and no sudo: install these packages by hand: ${missing[*]}" >&2
      exit 1
    fi
  fi
  : > "$log"
  for pkg in "${missing[@]}"; do
    why=$(grep -E "^$pkg[[:space:]]" "$here/debian-packages.txt" | sed -n 's/.*# *//p')
    echo "setup: installing $pkg (${why:-needed})" >&2
  done
  export DEBIAN_FRONTEND=noninteractive
  echo "setup: apt-get update (log: $log)" >&2
  if ! $sudo apt-get update -qq >>"$log" 2>&1; then
    echo "setup: apt-get update failed; the last lines of $log:" >&2
    tail -n 5 "$log" >&2
    exit 1
  fi
  echo "setup: apt-get install ${#missing[@]} package(s) (log: $log)" >&2
  if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
    echo "setup: apt-get install failed; the last lines of $log:" >&2
    tail -n 5 "$log" >&2
    exit 1
  fi
fi

# What only the tests and benchmarks need, from here to the DuckDB library:
# with --tests.
if [ "$tests" = 1 ]; then
# Playwright (Python) drives Debian's chromium (installed above from the
# package list) in the interactive report's test and benchmark
# (crates/slowlab/tests/report_html.rs, bench/report/). Only the Python
# package: its own browser download (`playwright install`) is not needed.
if ! python3 -c 'import playwright.sync_api' >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
  if ! python3 -m pip --version >/dev/null 2>&1; then
    echo "setup: installing python3-pip (for Playwright) (log: $log)" >&2
    if ! $sudo apt-get install -y -qq --no-install-recommends python3-pip >>"$log" 2>&1; then
      echo "setup: apt-get install python3-pip failed; the last lines of $log:" >&2
      tail -n 5 "$log" >&2
      exit 1
    fi
  fi
  echo "setup: pip install playwright (the report's browser tests) (log: $log)" >&2
  # Debian's own python3 refuses pip installs outside a venv (PEP 668)
  # unless told that this machine is for testing.
  if ! python3 -m pip install -q playwright >>"$log" 2>&1 &&
    ! python3 -m pip install -q --break-system-packages playwright >>"$log" 2>&1; then
    echo "setup: pip install playwright failed; the last lines of $log:" >&2
    tail -n 5 "$log" >&2
    exit 1
  fi
fi

# PySpark reads `slowlab export`'s Parquet in local mode in the fleet test
# (crates/slowlab/tests/fleet.rs), on the machine's Java (installed here
# when missing). Only the Python package.
if ! python3 -c 'import pyspark' >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
  if ! command -v java >/dev/null 2>&1; then
    echo "setup: installing openjdk-17-jre-headless (PySpark's JVM) (log: $log)" >&2
    if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >>"$log" 2>&1; then
      echo "setup: apt-get install openjdk-17-jre-headless failed; the last lines of $log:" >&2
      tail -n 5 "$log" >&2
      exit 1
    fi
  fi
  echo "setup: pip install pyspark (the fleet export's Spark check) (log: $log)" >&2
  if ! python3 -m pip install -q pyspark >>"$log" 2>&1 &&
    ! python3 -m pip install -q --break-system-packages pyspark >>"$log" 2>&1; then
    echo "setup: pip install pyspark failed; the last lines of $log:" >&2
    tail -n 5 "$log" >&2
    exit 1
  fi
fi

fi # --tests

# DuckDB's prebuilt shared library for `slowlab fleet` (the duckdb crate
# links it: no C++ compile): libduckdb.so 1.5.6 from the npm package of
# DuckDB's Node bindings, installed where the linker and ld.so look. Only
# with --fleet or --tests: the default build has no DuckDB.
duckdb_lib=/usr/lib/x86_64-linux-gnu/libduckdb.so
if [ "$fleet" = 0 ]; then
  :
elif [ "$(uname -m)" = x86_64 ] && [ ! -e "$duckdb_lib" ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "setup: installing npm (fetches libduckdb.so) (log: $log)" >&2
    if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm >>"$log" 2>&1; then
      echo "setup: apt-get install npm failed; the last lines of $log:" >&2
      tail -n 5 "$log" >&2
      exit 1
    fi
  fi
  echo "setup: installing libduckdb.so 1.5.6 (slowlab fleet's query engine, 24 MB download) (log: $log)" >&2
  duck_tmp=$(mktemp -d)
  if ! (cd "$duck_tmp" && npm pack -q @duckdb/node-bindings-linux-x64@1.5.6-r.1 >>"$log" 2>&1 &&
    tar -xzf duckdb-node-bindings-linux-x64-1.5.6-r.1.tgz package/libduckdb.so) ||
    ! $sudo install -m 0644 "$duck_tmp/package/libduckdb.so" "$duckdb_lib" ||
    ! $sudo ldconfig; then
    rm -rf "$duck_tmp"
    echo "setup: installing libduckdb.so failed (build without `--features duckdb`: no slowlab fleet queries); the last lines of $log:" >&2
    tail -n 5 "$log" >&2
    exit 1
  fi
  rm -rf "$duck_tmp"
elif [ "$(uname -m)" != x86_64 ]; then
  echo "setup: no prebuilt libduckdb.so for $(uname -m) here: build slowlab with `--features fleet`, not `duckdb` (export works; fleet queries need DuckDB)" >&2
fi

# lld-link (with clang, from the package list) rebuilds the PDB test
# fixture, crates/etl/tests/fixtures/pdb/build.sh; the tests use the
# committed files, so a failure here is only a notice.
if [ "$tests" = 1 ] && ! command -v lld-link >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
  echo "setup: installing lld (rebuilds the PDB test fixture) (log: $log)" >&2
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends lld >>"$log" 2>&1; then
    echo "setup: apt-get install lld failed (only crates/etl/tests/fixtures/pdb/build.sh needs it); see $log" >&2
  fi
fi

if [ "$tests" = 1 ] && command -v rustup >/dev/null 2>&1; then
  for comp in rustfmt clippy; do
    if ! rustup component list --installed 2>/dev/null | grep -q "^$comp"; then
      echo "setup: rustup component add $comp (log: $log)" >&2
      rustup component add "$comp" >>"$log" 2>&1
    fi
  done
elif ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found: install Rust from https://rustup.rs and run this again" >&2
  exit 1
fi
