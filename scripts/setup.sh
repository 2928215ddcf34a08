#!/usr/bin/env bash
# Installs what slowlab needs on a Debian machine: the Debian packages listed in
# scripts/debian-packages.txt (only the missing ones) and the Rust toolchain's
# rustfmt and clippy. Safe to run again: it does nothing when all is present.
# It does not build slowlab (cargo does that).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

want=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/debian-packages.txt" | awk '{print $1}')
missing=()
for pkg in $want; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "setup: not root and no sudo: install these packages by hand: ${missing[*]}" >&2
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >&2
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if command -v rustup >/dev/null 2>&1; then
  for comp in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$comp" || rustup component add "$comp" >&2
  done
elif ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found: install Rust from https://rustup.rs and run this again" >&2
  exit 1
fi
