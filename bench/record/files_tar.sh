#!/usr/bin/env bash
# The file workload of overhead.sh, parts.sh and futex_overhead.sh: FILES
# (default 4000) files of 1-8 KiB in 40 directories, as one tar, made once
# into TAR (kept if it is there already).
#
# Usage: bench/record/files_tar.sh TAR [FILES]
set -euo pipefail
tar_file=$1
files=${2:-4000}
[ -f "$tar_file" ] && exit 0
src=$(mktemp -d "${tar_file}.src.XXXXXX")
trap 'rm -rf "$src"' EXIT
for ((i = 0; i < files; i++)); do
  d="$src/d$((i % 40))"
  mkdir -p "$d"
  head -c $((1024 + (i * 7919) % 7168)) /dev/urandom >"$d/f$i"
done
tar cf "$tar_file.partial" -C "$src" .
mv "$tar_file.partial" "$tar_file"
